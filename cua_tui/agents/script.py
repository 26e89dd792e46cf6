"""``--agent script:FILE``: replays recorded turns, for demos, labs and re-runs. No model, no key.

File format (DESIGN.md): ``{"turns": [turn, ...], "final_text": "..."}``, each turn
``{"actions": [OpenAI computer actions], "pending_safety_checks": [...]?, "text": "..."?}``; a turn may
also name its ``call_id`` (to replay a transcript exactly). The outer shape is checked when the file is
loaded; the actions are handed over exactly as written, so a script can carry malformed or hostile
actions and exercise the parser and the policy like a real model's reply would.

The file itself is read as hostile input too: a regular file of bounded size (never a FIFO or a device),
strict JSON (no NaN or Infinity, finite numbers, nesting capped at ``strictjson.MAX_DEPTH``); an optional
key set to null counts as absent. Text (``text``, ``final_text``) may hold anything JSON can, lone
surrogates included, as a model's reply may: it reaches the supervisor as it is. Identifiers (call and
safety-check ids, codes) must be encodable text, since they are echoed and recorded verbatim.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import strictjson
from ..core.ports import Call, CallResult, Frame, SafetyCheck, Turn
from ..core.text import lone_surrogate

MAX_SCRIPT_BYTES = 20 * 1024 * 1024


class ScriptError(ValueError):
    """A script file that cannot be used (not JSON, wrong outer shape)."""


@dataclass(frozen=True)
class ScriptTurn:
    actions: tuple[Any, ...]
    safety_checks: tuple[SafetyCheck, ...] = ()
    text: str = ""
    call_id: str | None = None


@dataclass(frozen=True)
class Script:
    turns: tuple[ScriptTurn, ...]
    final_text: str = ""
    source: str = "<script>"

    @classmethod
    def load(cls, path: str | Path) -> Script:
        path = Path(path)
        limit = f"larger than {MAX_SCRIPT_BYTES // (1024 * 1024)} MiB"
        try:
            # Non-blocking, so that a FIFO cannot hang the open; then only a regular file is read, and never
            # more than the cap (a link to /dev/zero reports size 0 and never ends).
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                info = os.fstat(fh.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise ScriptError(f"script {path}: not a regular file")
                if info.st_size > MAX_SCRIPT_BYTES:
                    raise ScriptError(f"script {path}: {limit}")
                data = fh.read(MAX_SCRIPT_BYTES + 1)
        except OSError as exc:
            raise ScriptError(f"script {path}: cannot read it ({exc.strerror or exc})") from None
        if len(data) > MAX_SCRIPT_BYTES:
            raise ScriptError(f"script {path}: {limit}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ScriptError(f"script {path}: not UTF-8 text") from None
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, source: str = "<script>") -> Script:
        try:
            data = strictjson.loads(text)
        except strictjson.JSONError as exc:
            raise ScriptError(f"script {source}: {f'not valid JSON ({exc})' if exc.syntax else exc}") from None
        return cls.from_data(data, source)

    @classmethod
    def from_data(cls, data: Any, source: str = "<script>") -> Script:
        """Check a script's shape strictly (its actions are left to the supervisor's parser, as a model's
        would be); every problem is a ScriptError naming the turn and the key."""
        read = _Reader(source)
        if not isinstance(data, dict):
            raise read.fail('the top level must be an object {"turns": [...], "final_text": "..."}')
        if strictjson.depth_exceeds(data, strictjson.MAX_DEPTH):  # data built in Python, not read by parse()
            raise read.fail(f"nesting deeper than {strictjson.MAX_DEPTH}")
        unknown = set(data) - {"turns", "final_text", "task", "description"}
        if unknown:
            raise read.fail(f"unknown top-level key(s): {', '.join(sorted(unknown))}")
        turns_raw = data.get("turns")
        if not isinstance(turns_raw, list):
            raise read.fail('"turns" must be a list')
        final_text = _optional(data, "final_text", "")
        if not isinstance(final_text, str):
            raise read.fail('"final_text" must be a string')
        return cls(tuple(read.turn(i, turn) for i, turn in enumerate(turns_raw)), final_text, source)


def _optional(holder: dict[str, Any], key: str, default: Any) -> Any:
    """A null optional field means absent, as everywhere else."""
    value = holder.get(key)
    return default if value is None else value


class _Reader:
    """The checks of one script's parts, each error naming the script."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str) -> ScriptError:
        return ScriptError(f"script {self.source}: {message}")

    def identifier(self, value: Any, what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(f"{what} must be a string")
        if lone_surrogate(value) >= 0:
            raise self.fail(f"{what} holds a lone surrogate (not encodable text)")
        return value

    def turn(self, i: int, turn: Any) -> ScriptTurn:
        where = f"turn {i + 1}"
        if not isinstance(turn, dict):
            raise self.fail(f'{where} must be an object with an "actions" list')
        unknown = set(turn) - {"actions", "pending_safety_checks", "text", "call_id"}
        if unknown:
            raise self.fail(f"{where}: unknown key(s): {', '.join(sorted(unknown))}")
        actions = turn.get("actions")
        if not isinstance(actions, list) or not actions:
            raise self.fail(f'{where}: "actions" must be a non-empty list')
        text = _optional(turn, "text", "")
        if not isinstance(text, str):
            raise self.fail(f'{where}: "text" must be a string')
        call_id = turn.get("call_id")
        if call_id is not None:
            call_id = self.identifier(call_id, f'{where}: "call_id"')
        raw_checks = _optional(turn, "pending_safety_checks", [])
        if not isinstance(raw_checks, list):
            raise self.fail(f'{where}: "pending_safety_checks" must be a list')
        checks = tuple(self.check(f"{where}: safety check {j + 1}", check) for j, check in enumerate(raw_checks))
        return ScriptTurn(tuple(actions), checks, text, call_id)

    def check(self, where: str, check: Any) -> SafetyCheck:
        if not isinstance(check, dict) or not all(isinstance(check.get(k), str) for k in ("id", "code")):
            raise self.fail(f'{where} needs string "id" and "code"')
        unknown = set(check) - {"id", "code", "message"}
        if unknown:
            raise self.fail(f"{where}: unknown key(s): {', '.join(sorted(unknown))}")
        message = _optional(check, "message", "")
        if not isinstance(message, str):
            raise self.fail(f'{where}: "message" must be a string')
        ids = (self.identifier(check[k], f'{where}: "{k}"') for k in ("id", "code"))
        return SafetyCheck(*ids, message)


class ScriptAgent:
    """Hands out the script's turns one by one, then finishes with ``final_text``."""

    name = "script"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.model = None
        self._next = 0
        self.received: list[tuple[CallResult, ...]] = []  # what the agent heard back, for tests

    def start(self, task: str, frame: Frame) -> Turn:
        return self._turn()

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame) -> Turn:
        self.received.append(results)
        return self._turn()

    def cancel(self) -> None:
        pass

    def _turn(self) -> Turn:
        if self._next >= len(self.script.turns):
            return Turn(text=self.script.final_text)
        index = self._next
        self._next += 1
        turn = self.script.turns[index]
        call = Call(turn.call_id or f"script_call_{index + 1}", "openai", turn.actions, turn.safety_checks)
        return Turn((call,), text=turn.text, response_id=f"script_turn_{index + 1}")
