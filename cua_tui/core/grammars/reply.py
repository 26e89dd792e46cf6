"""What one reply of an open-weight model says, whatever its grammar: its words, its actions (units.py) in
order, and at most one control (the task done, given up, or a call for the person). A reply that cannot be
read is a ReplyError: one refusal on record, and the model hears why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..actions import ActionError
from ..text import encodable
from .pycall import PyCall

# a reply's text is bounded before anything reads it (the server's bytes are bounded before that)
MAX_REPLY_CHARS = 64 * 1024
MAX_UNITS = 20
MAX_MEMO = 2000
# the words of a reply kept with it (what the analyst reads and the chain records)
MAX_THOUGHT = 8000
# typed text shorter than this is left where the model's words repeat it (a 2-letter match is noise)
REDACT_FROM = 3
TYPED = "‹typed text›"


class ReplyError(ActionError):
    """A reply that cannot be read (``code`` stable, ``reason`` one line for the analyst and the model)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply as read: ``units`` run in order; then ``end`` (the run's claim; ``gave_up``: the model said it
    could not) or ``asks`` (the model calls for the person: what it said) may follow, never both; ``memos`` are facts
    the model asked to keep (recorded, nothing runs); ``memory`` is the text a grammar hands back to the
    model on its next turn (GLM's Memory: list)."""

    thought: str = ""
    units: tuple[dict[str, Any], ...] = ()
    end: str | None = None
    gave_up: bool = False
    asks: str | None = None
    memos: tuple[str, ...] = ()
    memory: str = ""
    # the action as the model wrote it, for a grammar whose history replays it (GLM's); held in memory only,
    # never recorded: it may hold typed text
    written: str = ""
    # where the reply's last pointer action leaves the pointer, in the model's space (None: unknown)
    cursor: tuple[float, float] | None = None


def bounded(text: Any) -> str:
    """The reply's text, refused past 64 KiB, made encodable (a lone surrogate is shown, not a crash)."""
    if not isinstance(text, str):
        raise ReplyError("bad_reply", "the reply has no text")
    if len(text) > MAX_REPLY_CHARS:
        raise ReplyError("too_long", f"the reply has {len(text)} characters; at most {MAX_REPLY_CHARS} are read")
    return encodable(text)


def words(text: str, units: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    """The model's words as kept: trimmed, bounded, and without any text one of its actions types (the
    chain stores typed text as length and SHA-256 only, so the words must not carry it either)."""
    kept = text.strip()
    for typed in sorted({u["text"] for u in units if u.get("do") == "type"}, key=len, reverse=True):
        if len(typed) >= REDACT_FROM:
            kept = kept.replace(typed, TYPED)
    if len(kept) > MAX_THOUGHT:
        kept = kept[:MAX_THOUGHT] + " …"
    return kept


def check_units(units: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    if len(units) > MAX_UNITS:
        raise ReplyError("too_many", f"the reply holds {len(units)} actions; at most {MAX_UNITS} are read")
    return tuple(units)


def memo(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ReplyError("bad_field", f"{name} names no fact")
    if len(value) > MAX_MEMO:
        raise ReplyError("too_long", f"{name}: a fact of {len(value)} characters; at most {MAX_MEMO}")
    return value.strip()


def no_arguments(call: PyCall) -> None:
    """A call that takes no arguments (``wait()``, ``call_user()``, ``DONE()``) was given none."""
    if call.args or call.kwargs:
        raise ReplyError("bad_argument", f"{call.name}() takes no arguments")


def text_argument(args: dict[str, Any], name: str, *keys: str) -> str:
    """The first of ``keys`` a call names, which must be text in quotes."""
    for key in keys:
        if key in args:
            value = args[key]
            if not isinstance(value, str):
                raise ReplyError("bad_argument", f"{name}()'s {key} is text in quotes")
            return value
    raise ReplyError("missing_field", f"{name}() needs {keys[0]}=")
