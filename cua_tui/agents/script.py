"""``--agent script:FILE``: replays recorded turns, for demos, labs and re-runs. No model, no key.

The file is read as hostile input (bounded, strict JSON); its actions are handed over exactly as written, so
a script exercises the parser and the policy as a model's reply would. Format: docs/files/script.md.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import strictjson
from ..core.actions import text_sha256
from ..core.ports import Call, CallResult, Frame, SafetyCheck, Turn
from ..core.text import lone_surrogate, visible

if TYPE_CHECKING:
    from .vendors import AgentRequest

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
    def load(cls, path: str | Path, texts: dict[str, str] | None = None) -> Script:
        """A script file; ``texts`` fills its typed-text placeholders (see ``load_texts``)."""
        return cls.parse(_read_text(Path(path), "script"), source=str(path), texts=texts)

    @classmethod
    def parse(cls, text: str, source: str = "<script>", texts: dict[str, str] | None = None) -> Script:
        return cls.from_data(_json(text, f"script {source}"), source, texts)

    @classmethod
    def from_data(cls, data: Any, source: str = "<script>", texts: dict[str, str] | None = None) -> Script:
        """Check a script's shape strictly (its actions are left to the supervisor's parser, as a model's
        would be); every problem is a ScriptError naming the turn and the key. A typed-text placeholder
        (``{"type": "type", "text_sha256", "text_len"}``, as ``export --script`` writes) is filled from
        ``texts``; one that ``texts`` lacks is a ScriptError, so nothing runs without it."""
        read = _Reader(source, texts)
        if not isinstance(data, dict):
            raise read.fail('the top level must be an object {"turns": [...], "final_text": "..."}')
        if strictjson.depth_exceeds(data, strictjson.MAX_DEPTH):
            # data built in Python, not read by parse()
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


def read_script_data(path: Path) -> Any:
    """A script file's JSON, read as ``Script.load`` reads it and checked the same way: for a caller that
    sends the script elsewhere (a team's task) rather than playing it here."""
    data = _json(_read_text(path, "script"), f"script {path}")
    Script.from_data(data, source=str(path))
    return data


def _read_text(path: Path, what: str) -> str:
    """A small UTF-8 file named by the user, read as hostile input: non-blocking open (a FIFO cannot hang
    it), a regular file only, never more than the cap (a link to /dev/zero reports size 0 and never ends)."""
    limit = f"larger than {MAX_SCRIPT_BYTES // (1024 * 1024)} MiB"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ScriptError(f"{what} {path}: not a regular file")
            if info.st_size > MAX_SCRIPT_BYTES:
                raise ScriptError(f"{what} {path}: {limit}")
            data = fh.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise ScriptError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise ScriptError(f"{what} {path}: {limit}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScriptError(f"{what} {path}: not UTF-8 text") from None


def _json(text: str, what: str) -> Any:
    try:
        return strictjson.loads(text)
    except strictjson.JSONError as exc:
        raise ScriptError(f"{what}: {f'not valid JSON ({exc})' if exc.syntax else exc}") from None


def load_texts(path: str | Path) -> dict[str, str]:
    """``run --texts FILE``: a JSON object mapping the SHA-256 of each typed text (as the audit log and an
    exported script name it) to the text. Read like a script file; every text must have its hash."""
    where = f"texts {path}"
    data = _json(_read_text(Path(path), "texts"), where)
    if not isinstance(data, dict):
        raise ScriptError(f'{where}: must be a JSON object {{"<sha256>": "text", ...}}')
    for sha, text in data.items():
        if not isinstance(text, str):
            raise ScriptError(f"{where}: the value for {visible(sha, limit=20)!r} is not a string")
        if text_sha256(text) != sha:
            raise ScriptError(f"{where}: the text given for {visible(sha, limit=20)!r} does not have that SHA-256")
    return data


class _Reader:
    """The checks of one script's parts, each error naming the script."""

    def __init__(self, source: str, texts: dict[str, str] | None = None) -> None:
        self.source = source
        self.texts = texts

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
        filled = tuple(self.typed(f"{where}, action {j + 1}", action) for j, action in enumerate(actions))
        return ScriptTurn(filled, checks, text, call_id)

    def typed(self, where: str, action: Any) -> Any:
        """A typed-text placeholder with its text from ``texts``; any other action as it stands."""
        if not (isinstance(action, dict) and action.get("type") == "type" and "text_sha256" in action):
            return action
        sha, length = action.get("text_sha256"), action.get("text_len")
        if set(action) != {"type", "text_sha256", "text_len"} or not isinstance(sha, str) or type(length) is not int:
            raise self.fail(f'{where}: a typed-text placeholder has only "text_sha256" and "text_len"')
        what = f"{where} types a text that is not stored ({length} characters, sha256 {visible(sha[:16])}…)"
        if self.texts is None:
            raise self.fail(f"{what}: give the texts with --texts FILE")
        text = self.texts.get(sha)
        if text is None:
            raise self.fail(f"{what}: not in the --texts file")
        if len(text) != length:
            raise self.fail(f"{where}: the --texts file's text has {len(text)} characters, the script says {length}")
        return {"type": "type", "text": text}

    def check(self, where: str, check: Any) -> SafetyCheck:
        if not isinstance(check, dict) or not all(isinstance(check.get(k), str) for k in ("id", "code")):
            raise self.fail(f'{where} needs string "id" and "code"')
        unknown = set(check) - {"id", "code", "message"}
        if unknown:
            raise self.fail(f"{where}: unknown key(s): {', '.join(sorted(unknown))}")
        message = _optional(check, "message", "")
        if not isinstance(message, str):
            raise self.fail(f'{where}: "message" must be a string')
        ident, code = (self.identifier(check[k], f'{where}: "{k}"') for k in ("id", "code"))
        return SafetyCheck(ident, code, message)


class ScriptAgent:
    """Hands out the script's turns one by one, then finishes with ``final_text``."""

    name = "script"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.model = None
        self._next = 0
        self.received: list[tuple[CallResult, ...]] = []  # what the agent heard back, for tests
        self.notes: list[str] = []  # and what it was told besides (a takeover's account)

    @classmethod
    def from_request(cls, request: AgentRequest) -> ScriptAgent:
        """``--agent script:PATH``: the script at PATH, its placeholders filled from ``--texts``."""
        return cls(Script.load(Path(request.argument).expanduser(), request.texts))

    def start(self, task: str, frame: Frame) -> Turn:
        return self._turn()

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        self.received.append(results)
        self.notes.append(note)
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
