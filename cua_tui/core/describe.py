"""The one wording of events, actions and decision requests, for headless output, the TUI and exports.

Everything here returns plain text: a front end adds its own styles, and always treats the text
literally (never as markup). Untrusted parts (model text, reasons, typed text, hosts) are made visible
with ``visible`` here, except in ``audit_line``, whose caller makes the whole line visible with its own
length limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from . import events as ev
from .actions import Kind
from .ending import checked_in
from .grouping import group_record
from .hand import Decided, Hand, hand, typed
from .injection import Injection
from .ports import DecisionRequest, Gated
from .takeover import TAKEOVER_NOTE
from .text import one_line, truncate, visible, visible_parts
from .timeline import Step, screens

PHASE_LABELS = {
    ev.RunPhase.STARTING: "starting",
    ev.RunPhase.WAITING_MODEL: "waiting for the model",
    ev.RunPhase.AWAITING_DECISION: "AWAITING YOUR DECISION",
    ev.RunPhase.EXECUTING: "executing",
    ev.RunPhase.TAKEN_OVER: "TAKEN OVER: the desktop is yours",
    ev.RunPhase.VERIFYING: "verifying",
    ev.RunPhase.STOPPING: "stopping",
}


# ------------------------------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------------------------------
def event_line(
    event: ev.Event, name: Callable[[int], str] | None = None, *, shown: Callable[..., str] = visible
) -> str | None:
    """The line a person reads for ``event`` in a log of the run (headless output), or None for events
    only the audit log needs (screens, phases, allowed verdicts, policy decisions, ...). ``name`` gives an
    action of the current turn as people read it (``#2 click at (550, 182)``; core.attention keeps them).
    ``shown`` makes the untrusted parts visible (``audit_line`` leaves them raw, for its caller)."""
    said = name or (lambda index: f"#{index + 1}")
    match event:
        case ev.RunStarted():
            return (
                f"run started · backend {event.backend} · agent {shown(event.agent)} · policy "
                f"{shown(event.policy)} · screen {event.screen}"
            )
        case ev.SandboxCreated():
            return f"sandbox created · {shown(event.backend)} · id {shown(event.sandbox_id)}"
        case ev.DesktopReady():
            return f"desktop ready · {event.backend} · isolation: {isolation_label(event.isolation)}"
        case ev.ModelTurn():
            return _model_turn_line(event, shown)
        case ev.SafetyChecksRaised():
            codes = ", ".join(shown(c.get("code", "")) for c in event.checks)
            return f"  safety checks raised: {codes}"
        case ev.TurnRefused():
            return f"  turn {event.turn} REFUSED whole: {shown(event.reason)}"
        case ev.ActionProposed() if event.error:
            return f"  #{event.index + 1} malformed {shown(event.raw_kind) or 'action'}: {shown(event.error)}"
        case ev.PolicyVerdict() if event.verdict != "allow":
            return f"  {said(event.index)}: {event.verdict.upper()}: {shown(event.reason)}"
        case ev.DecisionMade() if event.by != "policy":
            return f"  {said(event.index)}: decision: {event.decision} (by {shown(event.by)})"
        case ev.Outcome():
            message = shown(event.message, limit=200)
            return f"  {said(event.index)}: {event.status}" + (f" · {message}" if message and message != "OK" else "")
        case ev.Killed():
            return f"KILL SWITCH pressed by {shown(event.by)} while {event.during}"
        case ev.ErrorRaised():
            return f"error in {event.where}: {shown(event.message)}"
        case ev.Note():
            return shown(event.message)
        case ev.Egress() if not event.allowed:
            return f"  egress refused: {shown(event.method)} {shown(event.host)}:{event.port}"
        case ev.VerificationDone():
            # the verifier's word is the run's status (docs/commands/run.md, "Status, record, checked in")
            return (
                f"checked by {shown(event.verifier)} {checked_in(event.where, event.user)}: "
                f"{'passed' if event.passed else 'failed'} · {shown(event.detail)}"
            )
        case ev.Cleanup() if not event.ok:
            return f"cleanup problem: {shown(event.detail)}"
        case ev.RunEnded():
            return (
                f"run ended: {event.status} · {shown(event.reason)} · {event.turns} turn(s), "
                f"{event.steps} step(s), {event.executed} executed"
            )
    return None


def scripted_note(agent: str) -> tuple[str, str] | None:
    """The two lines a scripted run keeps on screen (the demo's agent replays recorded turns), or None
    for an agent that reads the run (a model). ``agent`` is the run's agent label ("script:PATH ...")."""
    if not agent.startswith("script"):
        return None
    source = agent.removeprefix("script").lstrip(":").split(" (")[0]
    name = source.rsplit("/", 1)[-1] or "its script"
    return (
        f"The agent replays recorded turns ({name}): no model, no API key.",
        "It ignores your answers: a rejected step is skipped; the rest plays.",
    )


def isolation_label(isolation: dict[str, Any]) -> str:
    """A few words on what the desktop's sandbox obtained (the status bar, headless output)."""
    if isolation.get("container") == "docker":
        return f"Docker container (no capabilities, read-only root, network none, uid {isolation.get('browser_uid')})"
    if isolation.get("bubblewrap") is False:
        return "NO bubblewrap (the remote sandbox is the only boundary)"
    namespaces = isolation.get("namespaces")
    if isinstance(namespaces, list) and namespaces:
        uid = "uid per run" if isolation.get("uid_per_run") else "shared uid"
        return f"bubblewrap ({len(namespaces)} namespaces, {uid})"
    return visible(str(isolation.get("note", "as recorded")), limit=60)


def _model_turn_line(event: ev.ModelTurn, shown: Callable[..., str] = visible) -> str:
    text = f" · says: {shown(event.text, limit=200)}" if event.text else ""
    tokens = f" · {event.input_tokens}+{event.output_tokens} tokens" if event.input_tokens else ""
    if event.total_cost_usd is not None:
        tokens += f" · ${event.total_cost_usd:.4f} so far (estimate)"
    return f"turn {event.turn}: {event.actions} action(s){tokens}{text}"


# The audit line of an event about one action of a turn: ``{n}`` is the action's number (from 1),
# ``{e}`` the event.
_ACTION_LINES: dict[type[ev.Event], str] = {
    ev.PolicyVerdict: "verdict #{n} {e.verdict}: {e.reason}",
    ev.DecisionRequested: "decision requested #{n} ({e.subject})",
    ev.DecisionMade: "decision #{n} {e.decision} by {e.by}",
    ev.Executing: "executing #{n}",
    ev.Outcome: "outcome #{n} {e.status}: {e.message}",
}


def audit_line(event: ev.Event, *, live: bool = False) -> str:
    """A compact one-line form of every audit event. Not yet made visible: the caller does that once, for
    the whole line, with its own limit. ``live``: a live run's pane, where a drill shown reads as a request
    does until it is answered (its answer's line says what it was)."""
    match event:
        case ev.ScreenCaptured():
            return f"screen {event.sha256[:12]} {event.width}x{event.height} ({event.purpose})"
        case ev.Phase():
            return f"phase {event.phase}" + (f": {event.detail}" if event.detail else "")
        case ev.ActionProposed():
            what = event.summary or f"malformed {event.raw_kind or 'action'}: {event.error}"
            return f"proposal #{event.index + 1} {what}"
        case ev.PolicyVerdict() | ev.DecisionRequested() | ev.DecisionMade() | ev.Executing() | ev.Outcome():
            return _ACTION_LINES[type(event)].format(e=event, n=event.index + 1)
        case ev.Typed():
            return f"typed #{event.index + 1} {event.text_len} characters so far"
        case ev.Cleanup():
            return f"cleanup {'ok' if event.ok else 'PROBLEM'}: {event.detail}"
        case ev.Egress():
            return f"egress {'allowed' if event.allowed else 'REFUSED'} {event.method} {event.host}:{event.port}"
        case ev.DrillShown() if live:
            # as a request's line reads while it is up: nothing tells a drill from a real request
            return f"decision requested #{event.index + 1} ({event.subject})"
        case ev.DrillShown():
            return f"drill {event.drill} shown before #{event.index + 1} ({event.subject}): not the run's own"
        case ev.DrillAnswered():
            result = "caught" if event.caught else "missed" if event.caught is False else ""
            result = result or ("false alarm" if event.false_alarm else "right")
            return f"drill {event.drill} before #{event.index + 1}: {event.answer} (right: {event.right}) · {result}"
    return (event_line(event, shown=_raw) or event.kind).strip()


def _raw(text: object, limit: int | None = None) -> str:
    """Untrusted text left as it is (cut to ``limit``): ``audit_line``'s caller makes the line visible."""
    return truncate(str(text), limit) if limit is not None else str(text)


# ------------------------------------------------------------------------------------------------
# Decision requests
# --------------------------------------------------------------------------------------------------
GATED_HEAD = "The actions these checks gate (approving runs them in order; a blocked one is still refused):"


def gated_line(gated: Gated) -> str:
    """One action a safety check gates, for people: what it is and what the answer does to it (typed text
    in full: the reviewer approves it here)."""
    what = visible(gated.action.describe()) if gated.action is not None else "a malformed action"
    if gated.action is not None and gated.action.kind is Kind.TYPE:
        what += f": {visible(gated.action.text, limit=300)}"
    if gated.verdict == "confirm":
        fate = f"needs a decision ({visible(gated.rule)}): approved by this answer, no second decision"
    elif gated.verdict == "block":
        fate = f"blocked ({visible(gated.rule)}): will be refused"
    else:
        fate = "allowed"
    return f"{gated.index + 1}. {what} · {fate}"


def request_lines(request: DecisionRequest) -> list[str]:
    """Lines that show a reviewer on a plain terminal exactly what is being decided (typed text in full)."""
    lines = [f"== Decision needed: turn {request.turn}, action {request.index + 1} =="]
    if request.kind == "safety_check":
        lines.append("The model raised safety checks; approving acknowledges them:")
        lines += [f"  - {visible(c.code)}: {visible(c.message)}" for c in request.safety_checks]
        if request.gated:
            lines.append(GATED_HEAD)
            lines += [f"  {gated_line(g)}" for g in request.gated]
    if request.action is not None:
        lines.append(f"  action: {visible(request.action.describe())}")
        if request.action.kind is Kind.TYPE:
            lines.append(f"  text ({len(request.action.text)} chars): {visible(request.action.text)}")
    lines.append(f"  why: {visible(request.reason)}")
    return lines


# Roles of the parts of a decision panel; a front end gives each its style. A stand-in for a hidden
# character (core.text.visible_parts) has its text's role with ESCAPE after it ("typed+escape"), so that a
# front end draws it apart (the TUI: reverse video) and the six characters "\u200b" never pass for one.
TITLE, LABEL, TYPED, KEY = "title", "label", "typed", "key"
ESCAPE = "+escape"


def joined(parts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``parts`` with neighbours of one role made one part, as they were before stand-ins had parts of their
    own (a stand-in, a title and a key stay parts of their own: a front end finds them by their part)."""
    out: list[tuple[str, str]] = []
    for text, role in parts:
        if out and out[-1][1] == role and role not in (TITLE, KEY) and not role.endswith(ESCAPE):
            out[-1] = (out[-1][0] + text, role)
        elif text:
            out.append((text, role))
    return out


def shown_parts(text: str, role: str = "", *, limit: int | None = None, end: str = "") -> list[tuple[str, str]]:
    """Untrusted ``text`` made visible as (text, role) parts, its stand-ins in the role ``role + ESCAPE``;
    ``end`` (trusted wording, a newline) after it in ``role``."""
    parts = [(part, role + ESCAPE if escaped else role) for part, escaped in visible_parts(text, limit=limit)]
    return [*parts, (end, role)] if end else parts


def text_destination(point: tuple[int, int] | None, words: str | None, problem: str = "") -> str:
    """Where typed text will go, for the panel: the field the last click focused, named by the words the
    OCR of the current screen found around that point. ``words`` None: not read yet; ``problem``: why the
    screen could not be read. The words are page text (untrusted): made visible here."""
    if point is None:
        return "the focused field; which one is unknown (no click since the start, or the focus may have moved since)"
    where = f"last click at ({point[0]}, {point[1]})"
    if problem:
        return f"the field at the {where}; its words unknown: {visible(problem, limit=160)}"
    if words is None:
        return f"the field at the {where} (reading the screen…)"
    if not words:
        return f"the field at the {where}; no words near it on the screen"
    return f"into the field near: “{visible(words, limit=160)}” ({where})"


def field_destination(point: tuple[int, int] | None, shows: str, label: str, *, boxed: bool) -> str:
    """Where typed text will go, named by what was read from the field itself (``shows``: its content or
    placeholder) and the label beside it. Page text: made visible here."""
    where = f" at ({point[0]}, {point[1]})" if point is not None else ""
    name = f"the field “{visible(shows, limit=160)}”" if shows else "the field"
    if not boxed:
        name = f"the field near “{visible(shows, limit=160)}”"
    labelled = f", labelled “{visible(label, limit=160)}”" if label else ""
    return f"{name}{labelled}{where} (read from the screen)"


@dataclass(frozen=True, slots=True)
class Cut:
    """How long an approved text is shown whole in a panel (``chars``) and, past that, where the rest is
    read: ``text`` for typed text, ``words`` for the words read at a target."""

    chars: int
    text: str
    words: str


def request_panel(
    request: DecisionRequest,
    batch_size: int = 0,
    task: str = "",
    destination: str | None = None,
    *,
    field: bool = False,
    model_text: str = "",
    compact: bool = False,
    edit: bool = False,
    left: float | None = None,
    injection: Injection | None = None,
    cut: Cut | None = None,
) -> list[tuple[str, str]]:
    """The decision panel as (text, role) parts, role "" for plain text: what is decided (typed text in
    full, shown and never stored), the words read at the target (``destination``: for typing the "goes to"
    line of ``text_destination`` / ``field_destination``, else the target's name), why, the model's own words
    for its batch (``model_text``, untrusted), and the keys that answer (z only where there is a target or,
    for typing, a known ``field``; e where the action can be ``edit``ed), and with a deadline the seconds
    ``left`` before the run rejects it; a possible ``injection``, the on-screen passage the model's words echo,
    beside them. ``compact`` (a small terminal):
    the same facts in fewer lines, the keys first so that they are never cut, no task line (the goal bar
    above holds it). ``cut`` (the fleet's panel): the typed text and the target's words, what a y approves,
    in full up to its length and past it that many characters and how many more, with where to read
    them all; the "goes to" line whole even when compact."""
    action = request.action
    parts = _title_parts(request, batch_size, injection)
    if compact:
        parts += [*_keys(request, field, compact=True, edit=edit), ("\n", "")]
    else:
        if task:  # the goal, repeated where the decision is made
            parts += [("task    ", LABEL), *shown_parts(one_line(task, 110), end="\n")]
    if request.kind == "safety_check":
        parts += _safety_parts(request)
    if action is not None:
        said = visible(action.describe())
        if action.kind is not Kind.TYPE and destination and " at (" in said and cut is not None:
            # the words read at the target, in full up to the cut
            head, tail = said.split(" at (", 1)
            parts += [("action  ", LABEL), (f"{head} “", ""), *shown_parts(destination[: cut.chars])]
            parts += [(f"” at ({tail}\n", "")]
            if len(destination) > cut.chars:
                parts.append((f"        {len(destination) - cut.chars} more: {cut.words}\n", LABEL))
        else:
            if action.kind is not Kind.TYPE and destination and " at (" in said:
                # the words read at the target
                said = said.replace(" at (", f" “{visible(destination, limit=60)}” at (", 1)
            parts += [("action  ", LABEL), (said + "\n", "")]
        if action.kind is Kind.TYPE:
            if not compact:
                # the text itself is never written anywhere; the screen it lands on may show it
                parts.append(
                    (f"text    ({len(action.text)} chars, never stored; the screenshot after may show it)\n", LABEL)
                )
            shown = action.text if cut is None else action.text[: cut.chars]
            parts += [("  ", TYPED), *shown_parts(shown, TYPED, end="\n")]
            if cut is not None and len(action.text) > cut.chars:
                # on a line of its own and not in the text's reverse video: no typed text can fake it
                parts.append((f"  {len(action.text) - cut.chars} more: {cut.text}\n", LABEL))
            if destination is not None:
                whole = not compact or cut is not None
                parts += [("goes to ", LABEL), ((destination if whole else one_line(destination, 80)) + "\n", "")]
    parts += [("why     ", LABEL), *shown_parts(request.reason, limit=400, end="\n")]
    if left is not None:
        # fails closed: what happens at the deadline is said, not only the time
        parts += [("deadline", LABEL), (f" {deadline_words(left)}\n", TYPED if left < URGENT_S else "")]
    if model_text.strip():
        # the model's reason for its batch: untrusted, and cut short
        parts += [("model   ", LABEL), *shown_parts(one_line(model_text, 80 if compact else 300), end="\n")]
    if injection is not None:
        parts += _injection_parts(injection, compact)
    if not compact:
        parts += _keys(request, field, compact=False, edit=edit)
    elif parts[-1][0].endswith("\n"):
        parts[-1] = (parts[-1][0][:-1], parts[-1][1])
    return joined(parts)


def _title_parts(request: DecisionRequest, batch_size: int, injection: Injection | None) -> list[tuple[str, str]]:
    """What is asked, of which turn and action; a possible injection, loud, at the top (the passage itself
    is shown beside the model's words below)."""
    of = f" of {batch_size}" if batch_size else ""
    if request.kind == "ask":
        return [(f" THE MODEL ASKS FOR YOU · turn {request.turn} \n", TITLE)]
    what = "SOFT BUDGET" if request.kind == "budget" else "DECISION NEEDED"
    where = "before action" if request.kind == "budget" else "action"
    parts = [(f" {what} · turn {request.turn} · {where} {request.index + 1}{of} \n", TITLE)]
    if injection is not None:
        parts += [(" POSSIBLE INJECTION ", TITLE), (" the model's words repeat an instruction on the screen\n", LABEL)]
    return parts


def _injection_parts(injection: Injection, compact: bool) -> list[tuple[str, str]]:
    """The page's words the model repeated, beside its own: untrusted page text, shown literally."""
    passage = shown_parts(one_line(injection.passage, 80 if compact else 300), TYPED, end="”\n")
    parts = [("screen  ", LABEL), ("“", TYPED), *passage]
    if not compact:
        parts += [("        ", ""), (f"possible injection: {visible(injection.summary, limit=200)}. ", TYPED)]
        parts += [("A hint from the screen's text: it permits nothing.\n", LABEL)]
    return parts


def _safety_parts(request: DecisionRequest) -> list[tuple[str, str]]:
    """The model's safety checks, and the actions of the call they gate."""
    parts = [("The model raised safety checks; approving acknowledges them to the model:\n", LABEL)]
    for check in request.safety_checks:
        parts += [(f"  • {visible(check.code)}: ", ""), *shown_parts(check.message, limit=300, end="\n")]
    if request.gated:
        parts.append((GATED_HEAD + "\n", LABEL))
        parts += [(f"  {gated_line(g)}\n", TYPED if g.covered else "") for g in request.gated]
    return parts


# the last seconds of a deadline are shown loud
URGENT_S = 10.0


def deadline_words(left: float) -> str:
    """A decision's countdown: ``rejected in 12 s unless answered``."""
    return f"rejected in {max(0, math.ceil(left))} s unless answered (the deadline fails closed)"


def _keys(request: DecisionRequest, field: bool, *, compact: bool, edit: bool = False) -> list[tuple[str, str]]:
    """The keys that answer a decision; a scope is named before ``a`` can be pressed."""
    action = request.action
    gap = "  " if compact else "   "
    if request.kind == "ask":
        # the model called for the person: take the desktop, or let it go on; nothing to approve
        return [("T", KEY), (f" take over{gap}", ""), ("n", KEY), (f" let it go on{gap}", ""), ("k", KEY),
                (" kill switch", "")]  # fmt: skip
    parts = [("y", KEY), (f" approve{gap}", "")]
    if edit:
        parts += [("e", KEY), (f" edit{gap}", "")]
    parts += [("n", KEY), (f" reject{gap}", ""), ("k", KEY), (" kill switch", "")]
    if request.scope is not None:
        # shown before it can be pressed: what exactly a grant would cover
        typing = request.scope.kind == "typing"
        if compact:
            what = "typing into this field, till the focus leaves" if typing else f"{request.scope.label}"
            return [*parts, ("\n", ""), ("a", KEY), (f" all {what}", "")]
        lasts = "until the focus leaves that field" if typing else "for the rest of the run"
        parts += [("\n", ""), ("a", KEY), (f" approve this and all {request.scope.label} {lasts}", "")]
    if compact:
        return parts
    if action is not None and action.target is not None:
        parts += [("   ", ""), ("z", KEY), (" whole screen / zoom on target", "")]
    elif action is not None and action.kind is Kind.TYPE and field:
        parts += [("   ", ""), ("z", KEY), (" whole screen / zoom on the field", "")]
    parts += [("   ", ""), ("t", KEY), (" screen as text", "")]
    return parts


# ------------------------------------------------------------------------------------------------
# A step of a recorded run (replay, export)
# --------------------------------------------------------------------------------------------------
ASK_NOT_APPROVED = "the model asks for you: T takes the desktop, n lets it go on by itself, k stops the run"


# a role for what a reviewer must not miss (untrusted steps, refusals)
WARN = "warn"


def action_words(summary: str, record: object, shown: Callable[..., str] = visible) -> str:
    """An action's words with a typed text's SHA-256 beside them (the text is never stored). ``shown``
    makes the summary visible (the HTML report passes its own)."""
    text = shown(summary, limit=300)
    typing = typed(record)
    if typing is not None and typing[1]:
        text += f" (sha256 {shown(typing[1], limit=64)[:16]}…, never stored)"
    return text


_ANSWERED = {"approve": "approved", "reject": "rejected", "kill": "killed the run"}
_BUDGET = {"approve": "go on", "reject": "stop the run"}


def decided_words(said: Decided, shown: Callable[..., str] = visible) -> str:
    """One decision in a few words, for a timeline's row: what was answered, by whom, and what made it
    more than one person's key (one key for a fleet group, a deadline, a soft budget, a takeover)."""
    made = said.decision
    answer = str(made.decision)
    who = shown(said.who, limit=80)
    answered = _ANSWERED.get(answer, shown(answer, limit=20))
    if said.how == "budget":
        words = f"soft budget crossed: {_BUDGET.get(answer, answered)}, answered by {who}"
    elif said.how == "group" and said.group is not None:
        size, gid = said.group["size"], shown(said.group["id"], limit=64)
        words = f"{answered} by {who} with one key for {size} runs (group {gid})"
    elif said.how == "deadline":
        words = f"{answered} by its {shown(made.by, limit=80)}: nobody answered in time"
    elif said.how == "takeover":
        stopped = made.note == TAKEOVER_NOTE
        words = f"not run: {who} took the desktop instead" if stopped else f"done by {who} at the desktop"
    else:
        words = f"{answered} by {who}"
    return words + (" (the safety checks)" if made.subject == "safety_check" else "")


def step_panel(
    step: Step, total: int, *, showing: str = "after", untrusted: bool = False, live: bool = False
) -> list[tuple[str, str]]:
    """A recorded step as (text, role) parts: the action, the policy's verdict and rule, every decision
    and who made it, the outcome with the exact text the model heard and how long it took, and which
    screen is shown. ``live``: the run is still being written (``replay --follow``), so a step without an
    outcome is one still under way, not one the run ended on."""
    said = hand(step)
    taken = f"· takeover #{said.takeover}, the reviewer's own " if said.takeover else ""
    parts = [(f" STEP {step.number + 1} of {total} · turn {step.turn} · action {step.index + 1} {taken}\n", TITLE)]
    if untrusted:
        parts.append((" UNTRUSTED: recorded after the chain's first bad line \n", WARN))
    parts += [("action   ", LABEL), (action_words(said.summary, said.action), "")]
    if said.edited:
        # what ran is the reviewer's: said on the action's own line, the model's proposal right under it
        editor = visible(said.editor, limit=80) or "the reviewer"
        parts += [(f" · EDITED by {editor} before it ran\n", WARN), ("proposed ", LABEL)]
        parts += [(action_words(said.proposed, said.proposed_action) + " (the model's, not run)", WARN)]
    parts.append(("\n", ""))
    if step.by_reviewer:
        parts += [("by       ", LABEL), (takeover_line(step) + "\n", WARN)]
    verdict = step.verdict
    if verdict is not None:
        role = WARN if verdict.verdict == "block" else ""
        parts += [("verdict  ", LABEL), (f"{str(verdict.verdict).upper()} · rule ", role)]
        parts += [*shown_parts(verdict.rule, role), (" · ", role)]
        parts += shown_parts(verdict.reason, role, limit=300, end="\n")
    for way in said.decisions:
        decision = way.decision
        parts.append(("decision ", LABEL))
        if way.how not in ("person", "policy"):
            # how it was decided when more than one person's key: a group, a deadline, a budget, ...
            parts.append((f"[{way.how}] ", WARN))
        parts += [(f"{decision.decision} by ", ""), *shown_parts(decision.by, limit=80)]
        if decision.subject != "action":
            parts += [(" (", ""), *shown_parts(decision.subject, end=")")]
        if decision.note:
            parts += [(" · ", ""), *shown_parts(decision.note, limit=200)]
        line = "".join(f" · {extra}" for extra in (shown_for(decision), group_for(decision)) if extra)
        parts.append((line + "\n", ""))
    if said.refused is not None:
        parts += [("edited   ", LABEL), (refused_edit_line(said) + "\n", WARN)]
    outcome = step.outcome
    if outcome is None:
        parts += [("outcome  ", LABEL), (_no_outcome(step, live) + "\n", WARN)]
    else:
        status = str(outcome.status).upper().replace("_", " ")
        role = "" if outcome.status == "executed" else WARN
        line = f"{status} · {outcome.duration_ms:.1f} ms · the model heard: "
        parts += [("outcome  ", LABEL), (line, role), *shown_parts(outcome.message, role, limit=300, end="\n")]
    for egress in step.refused_egress[:5]:
        line = f"refused {visible(egress.method)} {visible(egress.host, limit=80)}:{egress.port}"
        parts += [("egress   ", LABEL), (line + (f" · {visible(egress.reason)}" if egress.reason else "") + "\n", WARN)]
    if len(step.refused_egress) > 5:
        parts.append((f"         … and {len(step.refused_egress) - 5} more refused requests\n", WARN))
    for error in step.errors:
        parts += [("error    ", LABEL), (f"{visible(error.where)}: ", WARN)]
        parts += shown_parts(error.message, WARN, limit=300, end="\n")
    if step.told:
        parts += [("told     ", LABEL), ("at hand-back the model heard: ", "")]
        parts += shown_parts(step.told, limit=600, end="\n")
    parts += [("screen   ", LABEL), (f"{step_screen(step, showing, live=live)} (b flips)\n", "")]
    return joined(parts)


def takeover_line(step: Step) -> str:
    """Who did a reviewer's action: the takeover it belongs to and the person who had the desktop."""
    who = next((d.operator for d in step.decisions if d.operator), "")
    if not who and step.takeover is not None:
        who = step.takeover.operator
    number = f" #{step.takeover_number}" if step.takeover_number else ""
    return f"{visible(step.proposal.by, limit=40)}{number} · {visible(who, limit=80) or 'operator not recorded'}"


def refused_edit_line(said: Hand) -> str:
    """A reviewer's edit the run refused, in one line (typed text by the start of its SHA-256)."""
    if said.refused is None:
        return ""
    words = action_words(said.refused.summary, said.refused.action)
    why = visible(said.refused.why, limit=160)
    return f"the reviewer's edit to {words} was refused ({why}); the action did not run"


def _no_outcome(step: Step, live: bool) -> str:
    if step.waiting:
        return "waiting for a decision" if live else "none: the run was waiting for a decision when it ended"
    if live:
        return "running, no outcome yet" if step.executing else "not reached yet"
    return "unknown (the run ended before it was recorded)"


MAX_SHOWN_MS = 7 * 24 * 3600 * 1000  # a week: longer than any run's deadline


def shown_for(decision: ev.DecisionMade) -> str:
    """How long the reviewer had the decision on screen ("shown 2.4 s before the answer"), or ""."""
    if type(decision.shown_ms) is not int or not 0 <= decision.shown_ms <= MAX_SHOWN_MS:
        # a recorded figure no run could have (a hostile run directory) says nothing
        return ""
    return f"shown {decision.shown_ms / 1000:.1f} s before the answer"


def group_for(decision: ev.DecisionMade) -> str:
    """The fleet queue's group a decision was answered in ("one of 12 runs answered with one key (group
    g1a2b3c-17)"), or "" (none, or a record no fleet could have written)."""
    group = group_record(decision.group)
    if group is None:
        return ""
    return f"one of {group['size']} runs answered with one key (group {visible(group['id'])})"


def screen_before(step: Step) -> str:
    """What the "before" screen of ``step`` is, when more than the desktop right before it ran ("" then)."""
    shots = screens(step)
    if shots.shown is not None:
        return "the screen its reviewer was shown at the decision"
    if shots.not_run:
        return "the desktop when the batch stopped" if shots.not_run == "not_executed" else "the desktop when decided"
    return ""


def step_screen(step: Step, showing: str = "before", *, live: bool = False) -> str:
    """Which screen a review shows for ``step`` (``timeline.screens`` picks it), as people read it: after
    it ran, or before it (the one its reviewer was shown, when the decision recorded it); a step that
    never ran says so and has no screen after it."""
    shots = screens(step)
    if showing == "after" and shots.after:
        return "after it ran"
    before = screen_before(step)
    if shots.not_run:
        return f"not run: {shots.not_run} · no screen after it; shown: {before}"
    before = f"before it ran: {before}" if before else "before it ran"
    if showing == "after":
        status = str(step.outcome.status) if step.outcome is not None else ""
        why = "it failed" if status == "failed" else "no outcome yet" if live and not status else "none recorded"
        return f"no screen after it ({why}); shown: {before}"
    return before


def replay_phase(phase: str, *, live: bool, newest: bool) -> str:
    """The status bar's phase in a replay when the run awaited a decision, or "" (other phases read as
    they do live): a replay never claims to await its viewer's decision. ``newest``: the selected step is
    the one the run was at (its newest events')."""
    if phase != ev.RunPhase.AWAITING_DECISION:
        return ""
    if not newest:
        return "a decision was asked at this step"
    return "waiting for a decision in the live run" if live else "the run was waiting for a decision when it ended"


def agent_name(agent: str | None) -> str | None:
    """A script agent by its file's name (``script:form.json``): its path (run.json's) says where one
    machine keeps it, which neither a table nor a trajectory sent elsewhere needs."""
    if agent is None or not agent.startswith("script:"):
        return agent
    # the demo's label adds " (scripted demo)"
    path = agent.removeprefix("script:").split(" (", 1)[0]
    return f"script:{PurePosixPath(path).name or path}"
