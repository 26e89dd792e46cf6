"""A run turned back into a script file (``run --agent script:FILE``) that replays it on a fresh desktop.
Typed text becomes a placeholder (its SHA-256 and length); what the OpenAI format cannot say becomes
``not_replayable`` (``lossy`` lists them). docs/commands/export.md, "Re-runnable script".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core import events as ev
from ..core.actions import ActionError, chord_tokens
from ..core.takeover import typed_so_far
from .source import Run, key

PLACEHOLDER = "not_replayable"
TAKEOVER_TEXT = "The reviewer's own actions in a takeover of the original run, replayed as recorded."
_BUTTONS = {"left": "left", "right": "right", "middle": "wheel", "back": "back", "forward": "forward"}
# the parser's: OpenAI scrolls in pixels, the desktop in wheel notches
_PIXELS_PER_NOTCH = 100
# one more than a turn may hold: the re-run refuses such a turn whole again
_MAX_REFUSED_TURN = 101


@dataclass
class ScriptExport:
    """The script (``data``, ready for JSON) and what could not be written faithfully."""

    data: dict[str, Any]
    lossy: list[str] = field(default_factory=list)
    typed: int = 0  # type actions, each needing its text from --texts


def _int(value: Any) -> bool:
    return type(value) is int


def to_openai(record: Any) -> dict[str, Any] | str:
    """The OpenAI computer action for a normalized action record, or why it has none (a string)."""
    if not isinstance(record, dict):
        return "no action record"
    kind = record.get("kind")
    hold = record.get("hold")
    keys = {"keys": list(hold)} if isinstance(hold, list) and hold else {}
    point = {"x": record.get("x"), "y": record.get("y")}
    match kind:
        case "click":
            button = _BUTTONS.get(record.get("button", "left"))
            return {"type": "click", "button": button, **point, **keys} if button else "a click of an unknown button"
        case "double_click" | "move":
            return {"type": kind, **point, **keys}
        case "drag":
            path = record.get("path")
            if not isinstance(path, list) or not all(isinstance(p, list) and len(p) == 2 for p in path):
                return "a drag without a path"
            return {"type": "drag", "path": [{"x": x, "y": y} for x, y in path], **keys}
        case "scroll":
            sx, sy = record.get("scroll_x", 0), record.get("scroll_y", 0)
            if not (_int(sx) and _int(sy)):
                return "a scroll without its amounts"
            return {
                "type": "scroll",
                **point,
                "scroll_x": sx * _PIXELS_PER_NOTCH,
                "scroll_y": sy * _PIXELS_PER_NOTCH,
                **keys,
            }
        case "keypress":
            chord = record.get("keys")
            if record.get("repeat", 1) != 1:
                return "a key pressed several times in one action (not in the OpenAI format)"
            if not isinstance(chord, str):
                return "a key press without readable keys"
            try:
                return {"type": "keypress", "keys": chord_tokens(chord)}
            except ActionError:
                return "a key press without readable keys"
        case "type":
            sha, length = record.get("text_sha256"), record.get("text_len")
            if not isinstance(sha, str) or not _int(length):
                return "typing without the text's hash and length"
            return {"type": "type", "text_sha256": sha, "text_len": length}
        case "wait" | "screenshot":
            return {"type": kind}
    return f"a {kind if isinstance(kind, str) else '?'} action (not in the OpenAI computer format)"


def build(run: Run) -> ScriptExport:
    """The script of ``run``: one turn per model turn that proposed actions (or was refused whole)."""
    turns: dict[Any, dict[str, Any]] = {}
    export = ScriptExport({})
    # a reviewer's typing stretch: its text's length and hash are on its last typed record, not its proposal
    stretches = {
        (item.event.turn, item.event.index): item.event
        for item in run.stamped
        if isinstance(item.event, ev.Typed) and item.event.text_sha256
    }
    for item in run.stamped:
        event = item.event
        if isinstance(event, ev.ActionProposed) and (typed := stretches.get((event.turn, event.index))):
            event = typed_so_far(event, typed) or event
        match event:
            case ev.ModelTurn():
                turn = turns.setdefault(key(event.turn), {"actions": []})
                if isinstance(event.text, str) and event.text:
                    turn["text"] = event.text
            case ev.SafetyChecksRaised() if isinstance(event.checks, list):
                turn = turns.setdefault(key(event.turn), {"actions": []})
                checks = [c for c in event.checks if isinstance(c, dict)]
                turn.setdefault("pending_safety_checks", []).extend(
                    {k: c[k] for k in ("id", "code", "message") if isinstance(c.get(k), str)}
                    for c in checks
                    if isinstance(c.get("id"), str) and isinstance(c.get("code"), str)
                )
            case ev.ActionProposed() if event.by:
                # the reviewer's actions in a takeover: a turn of their own after the model's, replayed as
                # recorded (the re-run's reviewer decides them again)
                call = f"{event.call_id}_replayed" if isinstance(event.call_id, str) else "takeover_replayed"
                turn = turns.setdefault(
                    (key(event.turn), "takeover"), {"actions": [], "text": TAKEOVER_TEXT, "call_id": call[:200]}
                )
                _proposal(turn, event, export)
            case ev.ActionProposed():
                _proposal(turns.setdefault(key(event.turn), {"actions": []}), event, export)
            case ev.TurnRefused():
                turn = turns.setdefault(key(event.turn), {"actions": []})
                count = min(event.actions if _int(event.actions) else 0, _MAX_REFUSED_TURN)
                turn["actions"] = [{"type": PLACEHOLDER, "reason": "turn refused whole"}] * max(count, 1)
                export.lossy.append(f"turn {event.turn}: refused whole, its actions were not recorded")
    ended = run.timeline.ended
    export.data = {
        "task": run.task,
        "description": _description(run),
        "turns": [t for t in turns.values() if t["actions"]],
        "final_text": ended.final_text if ended is not None and isinstance(ended.final_text, str) else "",
    }
    return export


def _proposal(turn: dict[str, Any], event: ev.ActionProposed, export: ScriptExport) -> None:
    if isinstance(event.call_id, str) and event.call_id and "call_id" not in turn:
        turn["call_id"] = event.call_id
    where = f"turn {event.turn}, action {event.index + 1 if _int(event.index) else event.index}"
    if event.error:
        action: dict[str, Any] | str = "malformed in the original run"
    else:
        action = to_openai(event.action)
    if isinstance(action, str):
        export.lossy.append(f"{where}: {action}; written as {PLACEHOLDER!r}, which the re-run refuses")
        turn["actions"].append({"type": PLACEHOLDER, "reason": action, "was": _was(event)})
        return
    if action["type"] == "type":
        export.typed += 1
    turn["actions"].append(action)


def _was(event: ev.ActionProposed) -> str:
    if event.error:
        return f"{event.raw_kind or 'action'}: {event.error}"[:300]
    return str(event.summary)[:300]


def _description(run: Run) -> str:
    info = run.info
    policy = info.get("policy")
    if not isinstance(policy, dict):
        policy = {}
    parts = [
        f"exported from run {run.run_id}",
        f"backend {info.get('backend', '?')}",
        f"screen {info.get('screen', '?')}",
        f"policy {policy.get('name', '?')} (sha256 {policy.get('sha256', '?')})",
    ]
    if info.get("lab"):
        parts.append(f"lab {info['lab']}")
    parts.append("typed texts are placeholders: run it with --texts FILE")
    return "; ".join(str(p) for p in parts)


def encode(data: dict[str, Any]) -> bytes:
    """The script as a JSON file; ASCII escapes keep any text (lone surrogates too) loadable."""
    return (json.dumps(data, indent=2, ensure_ascii=True) + "\n").encode("ascii")
