"""A run as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format, ``ATIF-v1.7``) with the
screenshots it refers to written beside it, each distinct screen once, named by its SHA-256. Typed text is
its length and SHA-256 only; what ATIF has no field for is under ``extra["cua_tui"]``. docs/atif.md has the
mapping and the shape of every ``extra``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..core import events as ev
from ..core.actions import Kind
from ..core.audit import VerifyExit
from ..core.describe import agent_name
from ..core.hand import Decided, hand
from ..core.stamps import iso_time
from ..core.takeover import TAKEOVER_NOTE
from ..core.timeline import Step, screens
from .html import MAX_EMBEDDED, MAX_STEPS
from .source import Run

SCHEMA_VERSION = "ATIF-v1.7"
TOOL = "computer"
# the caps of the HTML export: actions written in full, bytes of screenshots written
MAX_ACTIONS = MAX_STEPS
MAX_IMAGES = MAX_EMBEDDED
MAX_EGRESS, MAX_ERRORS, MAX_FINDINGS = 500, 200, 20
_IMAGE_NAME = re.compile(r"^[0-9a-f]{64}\.png$")
_FREE_ACTIONS = "the kinds of the normalized action record"
COMPUTER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL,
        "description": "One action on the supervised desktop, as cua-tui normalizes it; a typed text is "
        "only its length (text_len) and SHA-256 (text_sha256).",
        "parameters": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": [k.value for k in Kind], "description": _FREE_ACTIONS},
                "x": {"type": "integer"},
                "y": {"type": "integer"},
                "button": {"type": "string"},
                "path": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                "scroll_x": {"type": "integer"},
                "scroll_y": {"type": "integer"},
                "keys": {"type": "string"},
                "repeat": {"type": "integer"},
                "hold": {"type": "array", "items": {"type": "string"}},
                "text_len": {"type": "integer"},
                "text_sha256": {"type": "string"},
                "moves_focus": {"type": "boolean"},
                "duration_ms": {"type": "integer"},
                "region": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["kind"],
        },
    },
}


class AtifError(Exception):
    """The trajectory cannot be written where asked; ``str()`` is one line."""


@dataclass
class AtifExport:
    """The trajectory (``data``, ready for JSON) and the screenshots it refers to (file name -> PNG)."""

    data: dict[str, Any]
    images: dict[str, bytes] = field(default_factory=dict)
    # what the caps left out, in words (also in the trajectory's notes)
    cut: list[str] = field(default_factory=list)


def images_folder(out: Path) -> Path:
    """Where the screenshots of the trajectory ``out`` go: ``NAME.images/`` beside ``NAME.json``."""
    return out.with_name(f"{out.stem}.images")


@dataclass
class _Block:
    """A model turn (with its actions) or a takeover (the reviewer's actions), in chain order."""

    seq: int
    ts: float
    turn: ev.ModelTurn | None = None
    takeover: ev.TakeoverStarted | None = None
    ended: ev.TakeoverEnded | None = None
    steps: list[Step] = field(default_factory=list)
    refused: tuple[int, ev.TurnRefused] | None = None
    checks: list[ev.SafetyChecksRaised] = field(default_factory=list)


class _Writer:
    """The trajectory being built: its steps, the screenshots written so far and what the caps cut."""

    def __init__(self, run: Run, folder: str) -> None:
        self.run, self.folder = run, folder
        self.heads = {s.seq: s.head for s in run.stamped}
        self.stamps = {id(s.event): s for s in run.stamped}
        self.scripted = str(run.info.get("agent") or _started(run, "agent") or "").startswith("script")
        self.steps: list[dict[str, Any]] = []
        self.images: dict[str, bytes] = {}
        self.image_bytes = 0
        self.unwritten_images = 0
        self.actions = 0
        self.cut_actions = 0
        self.call_ids: set[str] = set()

    def add(self, step: dict[str, Any]) -> None:
        self.steps.append({"step_id": len(self.steps) + 1, **step})

    def room(self) -> bool:
        """Whether another action may be written (the HTML export's cap); counts the ones cut."""
        if self.actions >= MAX_ACTIONS:
            self.cut_actions += 1
            return False
        self.actions += 1
        return True

    def image(self, sha: Any) -> tuple[str | None, str]:
        """(the path an image part names, why there is none) for the screen ``sha``, writing it once."""
        screen = self.run.screen(sha)
        name = f"{screen.sha256}.png"
        if screen.png is None:
            return None, screen.refused or "missing"
        if name not in self.images:
            if self.image_bytes + len(screen.png) > MAX_IMAGES:
                self.unwritten_images += 1
                return None, f"not written: the export's {MAX_IMAGES >> 20} MiB of screenshots are used up"
            self.images[name] = screen.png
            self.image_bytes += len(screen.png)
        return f"{self.folder}/{name}", ""

    def content(self, text: str, sha: Any) -> tuple[str | list[dict[str, Any]], dict[str, Any]]:
        """A message or result: ``text`` with the screen ``sha`` as an image part when it may be written, and
        the screen's facts (its hash, why it has no image part) for ``extra``."""
        if not isinstance(sha, str) or not sha:
            return text, {}
        path, refused = self.image(sha)
        # seen only in a takeover's private stretch (core.private): marked, and left out unless asked for
        screen: dict[str, Any] = {"sha256": sha, "private": True} if self.run.screen(sha).private else {"sha256": sha}
        if path is None:
            left_out = screen.get("private") is True and not self.run.include_private
            return text, {"screen": screen | ({"left_out": True} if left_out else {"refused": refused})}
        image = {"type": "image", "source": {"media_type": "image/png", "path": path}}
        return [{"type": "text", "text": text}, image], {"screen": screen}

    def chain(self, first: int, last: int) -> dict[str, Any]:
        """The stretch of the audit chain a step covers; ``head`` (its last line's hash) commits to it all."""
        return {"first_seq": first, "last_seq": last, "head": self.heads.get(last, "")}

    def call_id(self, step: Step) -> str:
        """A tool call id unique in the trajectory: the recorded call id (one per batch) and the action's
        number in it."""
        base = step.proposal.call_id if isinstance(step.proposal.call_id, str) else ""
        number = step.index + 1 if type(step.index) is int else step.number + 1
        candidate = f"{base[:200]}#{number}" if base else f"action-{step.number + 1}"
        while candidate in self.call_ids:
            candidate += "'"
        self.call_ids.add(candidate)
        return candidate


def build(run: Run, folder: str) -> AtifExport:
    """The trajectory of ``run``; image parts name files in ``folder`` (relative to the JSON's own folder)."""
    writer = _Writer(run, folder)
    _task_step(writer)
    for block in _blocks(run):
        if block.takeover is not None:
            _takeover_step(writer, block)
        else:
            _agent_step(writer, block)
    cut = []
    if writer.cut_actions:
        cut.append(f"{writer.cut_actions} action(s) after the first {MAX_ACTIONS} not written (the cap)")
    if writer.unwritten_images:
        cut.append(f"{writer.unwritten_images} screenshot(s) not written: {MAX_IMAGES >> 20} MiB cap")
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": run.run_id,
        "agent": _agent(run),
        "steps": writer.steps,
        "notes": _notes(run, cut),
        "final_metrics": _final_metrics(run, writer),
        "extra": {"cua_tui": _run_facts(run, writer, cut)},
    }
    return AtifExport(data, writer.images, cut)


def _blocks(run: Run) -> list[_Block]:
    """The run's model turns and takeovers in chain order, each with its steps of the timeline."""
    by_seq = {step.first_seq: step for step in run.timeline.steps}
    blocks: list[_Block] = []
    turn: _Block | None = None
    takeover: _Block | None = None
    for item in run.stamped:
        event = item.event
        if isinstance(event, ev.ModelTurn):
            turn = _Block(item.seq, item.ts, turn=event)
            blocks.append(turn)
        elif isinstance(event, ev.TakeoverStarted):
            takeover = _Block(item.seq, item.ts, takeover=event)
            blocks.append(takeover)
        elif isinstance(event, ev.TakeoverEnded) and takeover is not None:
            takeover.ended, takeover = event, None
        elif isinstance(event, ev.ActionProposed | ev.TurnRefused | ev.SafetyChecksRaised):
            if turn is None:  # an action before any model turn (an edited log): a turn of its own
                turn = _Block(item.seq, item.ts)
                blocks.append(turn)
            if isinstance(event, ev.TurnRefused):
                turn.refused = (item.seq, event)
            elif isinstance(event, ev.SafetyChecksRaised):
                turn.checks.append(event)
            elif item.seq in by_seq:
                (takeover if event.by and takeover is not None else turn).steps.append(by_seq[item.seq])
    return blocks


def _iso(ts: float) -> str | None:
    return iso_time(ts) if ts > 0 else None


def _timed(ts: float, step: dict[str, Any]) -> dict[str, Any]:
    stamp = _iso(ts)
    return {"timestamp": stamp, **step} if stamp else step


def _started(run: Run, name: str) -> Any:
    started = run.timeline.started
    return getattr(started, name, None) if started is not None else None


def _task_step(writer: _Writer) -> None:
    """Step 1: the task as the user gave it, with the first screen the model was shown."""
    run = writer.run
    first = run.timeline.first_screen
    message, facts = writer.content(run.task, first)
    stamp = next((s for s in run.stamped if isinstance(s.event, ev.RunStarted)), None)
    step = {"source": "user", "message": message, "extra": {"cua_tui": {"kind": "task", **facts}}}
    writer.add(_timed(stamp.ts if stamp is not None else 0.0, step))


def _agent_step(writer: _Writer, block: _Block) -> None:
    """One model turn: its text, its batch of actions as tool calls, what each did with the screen after it,
    then the reviewer's reasons for any rejection as user steps."""
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    written: list[tuple[Step, str]] = []
    for step in block.steps:
        if not writer.room():
            continue
        call_id = writer.call_id(step)
        # the call as the model made it (a trajectory is what the agent did: a reviewer's edit, what ran, is
        # under extra.cua_tui.edited, never passed off as the model's)
        arguments = _arguments(step.proposal.action)
        calls.append({"tool_call_id": call_id, "function_name": TOOL, "arguments": arguments})
        calls[-1]["extra"] = {"cua_tui": _action_facts(writer, step)}
        results.append({"source_call_id": call_id, **_result(writer, step)})
        written.append((step, call_id))
    facts: dict[str, Any] = {"kind": "model_turn"}
    turn = block.turn
    last = max([block.seq, *(s.last_seq for s in block.steps)])
    if block.refused is not None:
        seq, refused = block.refused
        last = max(last, seq)
        facts["refused_whole"] = {"actions": refused.actions, "reason": refused.reason}
        results.append({"content": f"Turn refused whole: {refused.reason}"})
    if turn is not None:
        facts |= {"turn": turn.turn, "calls": turn.calls, "actions": turn.actions, "response_id": turn.response_id}
        if isinstance(turn.shown, dict):
            # what the model saw (an open-weight model: the size sent, its coordinates' space); the calls'
            # arguments are in display pixels
            facts["shown"] = {k: str(v)[:40] for k, v in list(turn.shown.items())[:3]}
    if block.checks:
        facts["safety_checks"] = [c for raised in block.checks for c in raised.checks[:20] if isinstance(c, dict)]
    facts["chain"] = writer.chain(block.seq, last)
    out: dict[str, Any] = {"source": "agent", "message": turn.text if turn is not None else ""}
    if calls:
        out["tool_calls"] = calls
    if results:
        out["observation"] = {"results": results}
    if writer.scripted or turn is None:
        # recorded turns replayed (or a turn the log does not have): no model was asked
        out["llm_call_count"] = 0
    else:
        out["llm_call_count"] = 1
        out["metrics"] = _metrics(turn)
    out["extra"] = {"cua_tui": facts}
    writer.add(_timed(block.ts, out))
    for action, call_id in written:
        _reject_reasons(writer, action, call_id)


def _arguments(action: Any) -> dict[str, Any]:
    """The normalized action record as the call's arguments; a text, should an edited record hold one, is
    dropped (typed text is only ever its length and SHA-256)."""
    if not isinstance(action, dict):
        return {}
    return {k: v for k, v in action.items() if k != "text"}


def _metrics(turn: ev.ModelTurn) -> dict[str, Any]:
    metrics: dict[str, Any] = {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens}
    if turn.cost_usd is not None:
        metrics["cost_usd"] = turn.cost_usd
    return metrics


def _action_facts(writer: _Writer, step: Step) -> dict[str, Any]:
    """What cua-tui recorded about one action: the policy's verdict and rule, who decided and how, the
    outcome, refused egress, errors, the screens and the stretch of the chain."""
    proposal = step.proposal
    shots = screens(step)
    said = hand(step)
    facts: dict[str, Any] = {
        "step": step.number + 1,
        "turn": step.turn,
        "index": step.index,
        "call_id": proposal.call_id,
        "summary": proposal.summary,
    }
    if said.edited:
        # the reviewer changed it before it ran: what ran, beside the model's call (the arguments)
        facts["edited"] = {"by": said.editor, "ran": _arguments(said.action), "ran_summary": said.summary}
    elif said.refused is not None:
        gone = said.refused
        facts["edit_refused"] = {"summary": gone.summary, "arguments": _arguments(gone.action), "why": gone.why}
    facts |= {
        "verdict": None,
        "decisions": [_decision(writer, d) for d in said.decisions],
        "outcome": None,
        "screens": {"before": shots.before, "after": shots.after},
        "chain": writer.chain(step.first_seq, step.last_seq),
    }
    if step.verdict is not None:
        facts["verdict"] = {"verdict": step.verdict.verdict, "rule": step.verdict.rule, "reason": step.verdict.reason}
    if step.requests:
        facts["requests"] = [
            {"subject": r.subject, "reason": r.reason, "deadline_s": r.deadline_s} for r in step.requests
        ]
    if step.outcome is not None:
        outcome = step.outcome
        facts["outcome"] = {"status": outcome.status, "message": outcome.message, "duration_ms": outcome.duration_ms}
    if step.refused_egress:
        facts["egress_refused"] = [_egress(g) for g in step.refused_egress]
    if step.errors:
        facts["errors"] = [{"where": e.where, "message": e.message} for e in step.errors]
    if proposal.error:
        facts["malformed"] = {"error": proposal.error, "code": proposal.error_code, "kind": proposal.raw_kind}
    if proposal.by:
        facts["by"] = proposal.by
    if step.told:
        facts["told"] = step.told
    return facts


def _decision(writer: _Writer, way: Decided) -> dict[str, Any]:
    """Who decided (``by``; ``operator`` when a person did), how (``how``: a person, one key for a fleet
    group, a deadline, a soft budget, ...) and why (``note``: the rule or the reason)."""
    decision = way.decision
    out: dict[str, Any] = {"decision": decision.decision, "by": decision.by, "how": way.how}
    out["subject"] = decision.subject
    for name in ("operator", "note", "screen", "shown_ms", "guard_ms", "edited", "group"):
        value = getattr(decision, name)
        if value not in ("", None):
            out[name] = value
    stamp = writer.stamps.get(id(decision))
    if stamp is not None:
        out["seq"] = stamp.seq
    return out


def _egress(egress: ev.Egress) -> dict[str, Any]:
    return {"method": egress.method, "host": egress.host, "port": egress.port, "reason": egress.reason}


def _result(writer: _Writer, step: Step) -> dict[str, Any]:
    """What the action did: the exact text the model heard, and the screen after it as an image part."""
    outcome = step.outcome
    text = outcome.message if outcome is not None else "no outcome recorded"
    shots = screens(step)
    content, facts = writer.content(text, shots.after)
    if shots.not_run:
        facts["not_run"] = shots.not_run
    result: dict[str, Any] = {"content": content}
    if facts:
        result["extra"] = {"cua_tui": facts}
    return result


def _reject_reasons(writer: _Writer, step: Step, call_id: str) -> None:
    """A person's reason for rejecting an action, as the user's step that follows the turn."""
    for decision in step.decisions:
        person = bool(decision.operator) or decision.by.startswith("human")
        if decision.decision != "reject" or not person or not decision.note or decision.note == TAKEOVER_NOTE:
            continue
        stamp = writer.stamps.get(id(decision))
        facts = {
            "kind": "reject_reason",
            "tool_call_id": call_id,
            "step": step.number + 1,
            "by": decision.by,
            "operator": decision.operator,
            "chain": writer.chain(stamp.seq, stamp.seq) if stamp is not None else None,
        }
        message = {"source": "user", "message": decision.note, "extra": {"cua_tui": facts}}
        writer.add(_timed(stamp.ts if stamp is not None else 0.0, message))


def _takeover_step(writer: _Writer, block: _Block) -> None:
    """A takeover: the reviewer's own actions at the desktop, a user step (ATIF gives tool calls to agents
    only), with their facts and results."""
    start = block.takeover
    assert start is not None
    actions: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for step in block.steps:
        if writer.room():
            actions.append({"arguments": _arguments(hand(step).action), **_action_facts(writer, step)})
            results.append(_result(writer, step))
    who = start.operator or start.by
    message = f"The reviewer ({who}) took over the desktop ({start.where}) and did {len(block.steps)} action(s)."
    number = next((step.takeover_number for step in block.steps if step.takeover_number), 0)
    facts: dict[str, Any] = {"kind": "takeover", "takeover": number, "by": start.by, "operator": start.operator}
    facts["where"] = start.where
    facts["actions"] = actions
    if block.ended is not None:
        facts |= {"told": block.ended.told, "how": block.ended.how, "screen": block.ended.screen}
        message += f" The model was told: {block.ended.told}"
    last = max([block.seq, *(s.last_seq for s in block.steps)])
    facts["chain"] = writer.chain(block.seq, last)
    out: dict[str, Any] = {"source": "user", "message": message}
    if results:
        out["observation"] = {"results": results}
    out["extra"] = {"cua_tui": facts}
    writer.add(_timed(block.ts, out))


def _agent(run: Run) -> dict[str, Any]:
    info = run.info
    versions = info.get("versions") if isinstance(info.get("versions"), dict) else {}
    agent = info.get("agent") if isinstance(info.get("agent"), str) else _started(run, "agent")
    model = info.get("model") if isinstance(info.get("model"), str) else _started(run, "model")
    recorded = versions.get("cua-tui") if isinstance(versions, dict) else None
    out: dict[str, Any] = {
        # a script by its file's name: its path is where one machine keeps it (the label is in extra)
        "name": agent_name(agent) if isinstance(agent, str) and agent else "unknown",
        "version": recorded if isinstance(recorded, str) else "unknown",
    }
    if isinstance(model, str) and model:
        out["model_name"] = model
    out["tool_definitions"] = [COMPUTER_TOOL]
    facts = {"supervisor": "cua-tui", "versions": versions}
    if isinstance(agent, str) and agent_name(agent) != agent:
        facts["agent_label"] = agent
    for name in ("backend", "screen", "lab", "url", "model_base_url", "grammar"):
        value = info.get(name, _started(run, name))
        if value not in (None, "", []):
            facts[name] = value
    policy = info.get("policy")
    if isinstance(policy, dict):
        facts["policy"] = {k: policy.get(k) for k in ("name", "source", "sha256")}
    else:
        facts["policy"] = {"name": _started(run, "policy"), "sha256": _started(run, "policy_sha256")}
    out["extra"] = {"cua_tui": facts}
    return out


def _final_metrics(run: Run, writer: _Writer) -> dict[str, Any]:
    """The run's totals over every model turn (a cut trajectory still has the whole run's)."""
    turns = run.events(ev.ModelTurn)
    costs = [t.cost_usd for t in turns if t.cost_usd is not None]
    metrics: dict[str, Any] = {
        "total_prompt_tokens": sum(t.input_tokens for t in turns),
        "total_completion_tokens": sum(t.output_tokens for t in turns),
    }
    if costs:
        metrics["total_cost_usd"] = sum(costs)
    metrics["total_steps"] = len(writer.steps)
    ended = run.timeline.ended
    counts = {"turns": len(turns), "actions": len(run.timeline.steps)}
    if ended is not None:
        counts["executed"] = ended.executed
    metrics["extra"] = {"cua_tui": counts}
    return metrics


def _verify(run: Run) -> dict[str, Any]:
    """The verify verdict of the run, as ``cua-tui verify`` gives it."""
    report = run.report
    verdict = "tampered" if run.tampered else "intact" if report.sealed else "unsealed"
    return {
        "verdict": verdict,
        "exit": int(report.code),
        "summary": report.summary,
        "head": report.head,
        "events": report.events,
        "sealed": report.sealed,
        "signed": report.signed,
        "signature_checked": report.signature_checked,
        "findings": [
            {"kind": f.kind.value, "line": f.line, "detail": f.detail} for f in report.findings[:MAX_FINDINGS]
        ],
        "notes": report.notes[:MAX_FINDINGS],
    }


def _drill(drill: ev.DrillAnswered) -> dict[str, Any]:
    """A drill's answer as the chain recorded it (strings cut: the record is untrusted)."""

    def cut(value: Any, limit: int = 200) -> Any:
        return (
            value[:limit]
            if isinstance(value, str)
            else value
            if isinstance(value, int | bool) or value is None
            else None
        )

    names = ("drill", "turn", "index", "subject", "answer", "right", "caught", "false_alarm", "by", "operator",
             "screen", "shown_ms", "why")  # fmt: skip
    return {name: cut(getattr(drill, name)) for name in names}


def _run_facts(run: Run, writer: _Writer, cut: list[str]) -> dict[str, Any]:
    """The root's ``extra``: the verdict, how the run ended and who verified it, what belongs to no step."""
    ended, done = run.timeline.ended, run.timeline.verification
    refused = [g for g in run.events(ev.Egress) if g.allowed is not True]
    errors = run.events(ev.ErrorRaised)
    facts: dict[str, Any] = {
        "exporter": {"name": "cua-tui", "version": __version__},
        "task": run.task,
        "verify": _verify(run),
        "run": None,
        "verification": None,
        "kills": [{"by": k.by, "during": k.during} for k in run.events(ev.Killed)],
        "egress_refused": [_egress(g) for g in refused[:MAX_EGRESS]],
        "egress_refused_total": len(refused),
        "errors": [{"where": x.where, "message": x.message} for x in errors[:MAX_ERRORS]],
        "errors_total": len(errors),
        "screens_refused": [{"sha256": s.sha256, "refused": s.refused} for s in run.refused()],
        "images": {"folder": writer.folder, "written": len(writer.images), "bytes": writer.image_bytes},
        "private_screens": {"count": len(run.private), "included": run.include_private, "note": run.private_line()},
        "cut": cut,
        "notes": run.notes[:MAX_FINDINGS],
        # planted decisions shown before real requests, none of which acted: apart from the steps
        "drills": [_drill(d) for d in run.events(ev.DrillAnswered)[:MAX_EGRESS]],
    }
    if ended is not None:
        ends = ("status", "reason", "turns", "steps", "executed", "verified", "final_text")
        facts["run"] = {name: getattr(ended, name) for name in ends}
    if done is not None:
        verified = ("verifier", "passed", "detail", "where", "user")
        facts["verification"] = {name: getattr(done, name) for name in verified}
    return facts


def _notes(run: Run, cut: list[str]) -> str:
    parts = [
        f"Exported by cua-tui {__version__} from run {run.run_id} as {SCHEMA_VERSION}; typed text appears only as "
        "its length and SHA-256; cua-tui's own facts are under extra.cua_tui (docs/atif.md).",
        f"Record {run.report.summary}.",  # the audit log as verify finds it (core/ending.py's word)
    ]
    if run.report.code == VerifyExit.TAMPERED:
        parts.append("What follows is what the altered log says, not a trustworthy record of the run.")
    if cut:
        parts.append("Cut: " + "; ".join(cut) + ".")
    if run.private:
        parts.append(f"Private screens: {run.private_line()}.")
    return " ".join(parts)


def encode(data: dict[str, Any]) -> bytes:
    """The trajectory as a JSON file; ASCII escapes keep any text (lone surrogates too) loadable."""
    return (json.dumps(data, indent=2, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


def check_folder(out: Path) -> Path:
    """The images folder of ``out``, when it may be written: absent, or an earlier export's (only files
    named by a SHA-256), never anything else, which it would replace."""
    folder = images_folder(out)
    if folder == out:
        raise AtifError(f"{out}: its screenshots would go to a folder of the same name; choose a .json name")
    if os.path.lexists(folder):
        if folder.is_symlink() or not folder.is_dir():
            raise AtifError(f"{folder}: exists and is not a folder of screenshots (an earlier export's)")
        strangers = [p.name for p in folder.iterdir() if not (_IMAGE_NAME.match(p.name) and p.is_file())]
        if strangers:
            raise AtifError(f"{folder}: exists and holds files of its own ({strangers[0]}); not replaced")
    return folder


def write(out: Path, export: AtifExport) -> None:
    """The screenshots first (a whole folder, renamed into place), then the JSON (``write_atomic``): when the
    trajectory is there, every file it names is too."""
    from . import write_atomic

    folder = check_folder(out)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    old = folder.with_name(f".{folder.name}.{os.getpid()}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        for name, png in export.images.items():
            (tmp / name).write_bytes(png)
        if os.path.lexists(folder):
            os.replace(folder, old)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.lexists(old) and not os.path.lexists(folder):
            os.replace(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)
    write_atomic(out, encode(export.data))
