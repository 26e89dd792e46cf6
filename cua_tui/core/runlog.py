"""A run directory's audit log read back as the events a live run emitted, in the same envelope.

Replay and ``--follow`` are one more source of the event stream: each line of ``audit.jsonl`` becomes
``Stamped(seq, head, event)``, ``head`` being the SHA-256 of the line's exact bytes (what the next line's
``prev`` names), so the same reducer (the TUI's RunView) and the same widgets serve a live run and a run
read back. Reads go through ``safeio`` (regular files only, no link followed, each line capped and fully
decoded), incrementally from where the last read stopped. This module does not judge the run (``verify``
does): a line that cannot be read becomes a ``note`` event saying so, and the reader goes on. It checks
the links as it reads (``broken``), and lines read again can be held to a hash kept (``read_chained``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import events as ev
from .audit.chain import GENESIS
from .safeio import LINE_CAP, SCREEN_CAP, FdOwner, RunFileError, RunFolder, decode_json

AUDIT = "audit.jsonl"
_BLOCK = 1 << 20
_ENVELOPE = frozenset(ev.ENVELOPE)


class LogChanged(Exception):
    """Lines read again do not chain to the hash kept when they were first read: the log was changed
    since (``first``: the first line of the span read again, 0-based; ``anchor``: the line whose hash was
    kept)."""

    def __init__(self, first: int, anchor: int) -> None:
        super().__init__(f"lines {first + 1} to {anchor + 1} changed after they were read")
        self.first, self.anchor = first, anchor


# The JSON types each annotation of an event field admits (a record is untrusted: a field of another
# type would reach code that trusts it, e.g. a list where a turn number belongs). Exact types: a decoded
# record holds nothing else, and a bool is then never taken for an int.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "dict": (dict,),
    "list": (list,),
}


def _admits(annotation: str) -> frozenset[type]:
    allowed: list[type] = []
    for part in annotation.split("|"):
        name = part.strip().split("[", 1)[0]
        if name == "None":
            allowed.append(type(None))
        else:
            allowed.extend(_JSON_TYPES.get(name, (str,)))  # the enums are strings on record
    return frozenset(allowed)


_FIELDS: dict[type, dict[str, frozenset[type]]] = {}


def _fields_of(cls: type[ev.Event]) -> dict[str, frozenset[type]]:
    spec = _FIELDS.get(cls)
    if spec is None:
        spec = _FIELDS[cls] = {
            f.name: _admits(str(f.type))
            for f in dataclasses.fields(cls)
            if not f.metadata.get("memory_only") and f.name not in _ENVELOPE
        }
    return spec


def event_of(record: dict[str, Any]) -> ev.Event:
    """The event a record was written from; a kind this version does not know, or a record whose fields
    are missing or of the wrong JSON type, becomes a ``note`` naming it, never an error."""
    kind = record.get("kind")
    cls = ev.EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return ev.Note(f"{kind if isinstance(kind, str) else '?'} record")
    spec = _fields_of(cls)
    values = {k: v for k, v in record.items() if k in spec}
    for name, value in values.items():
        if type(value) not in spec[name]:
            return ev.Note(f"{kind} record whose {name} is not what it should be")
    try:
        return cls.from_record(values)
    except (TypeError, ValueError):
        return ev.Note(f"{kind} record with fields this version cannot read")


def _ts(value: Any) -> float:
    """A record's time, if it is a plausible one (an edited record may hold anything)."""
    return float(value) if type(value) in (int, float) and 0 <= value < 1e11 else 0.0


class RunLog(FdOwner):
    """``audit.jsonl`` of one run directory, read line by line from where the last ``poll`` stopped.

    ``poll()`` returns the events of the complete lines written since; a last line without its newline is
    kept back until it is complete (a writer in the middle of a line). Each line's offset is kept
    (``offsets``, 8 bytes a line), so any line can be read again alone (``read``) without holding it."""

    def __init__(self, folder: RunFolder, *, max_line: int = LINE_CAP, cap: int = 1 << 62) -> None:
        self.folder = folder
        self.max_line = max_line
        # Streamed: each line is capped, and the file at ``cap``.
        self.fd, _size = folder.open_file(AUDIT, cap)
        self._offset = 0
        self._carry = b""
        self._skipping = False
        self.lines = 0  # lines read so far (the next line's number, from 0)
        # where each line read so far begins: 4 bytes a line while the log is under 4 GiB (8 past it)
        self.offsets = array("I")
        self.end = 0  # just past the last complete line (where the next one begins)
        self.head = GENESIS  # the hash of the last line read ("" when it could not be read)
        self.broken: int | None = None  # the first line whose ``prev`` does not name the line before

    def __iter__(self) -> Iterator[ev.Stamped]:
        """Every event written so far."""
        yield from self.poll()

    @property
    def offset(self) -> int:
        """How many bytes of the log have been read (complete lines, and the start of one being written)."""
        return self._offset

    def size(self) -> int:
        """The log's size now (to say how far a reading has got)."""
        try:
            return os.fstat(self.fd).st_size
        except OSError:
            return 0

    def poll(self, limit: int = 1 << 62) -> list[ev.Stamped]:
        """The events of the lines completed since the last call (none when nothing new was written); at
        most about ``limit`` bytes are read in one call (a long log read a block at a time)."""
        out: list[ev.Stamped] = []
        taken = 0
        while taken < limit:
            try:
                chunk = os.pread(self.fd, min(_BLOCK, limit), self._offset)
            except OSError as exc:
                raise RunFileError(AUDIT, "unreadable", f"cannot read it ({exc.strerror or exc})") from None
            if not chunk:
                break
            self._offset += len(chunk)
            taken += len(chunk)
            self._take(chunk, out)
        return out

    def _take(self, chunk: bytes, out: list[ev.Stamped]) -> None:
        if self._skipping:
            # inside an over-long line: drop it up to its newline
            cut = chunk.find(b"\n")
            if cut < 0:
                self.end += len(chunk)
                return
            chunk, self._skipping = chunk[cut + 1 :], False
            self.end += cut + 1
        data = self._carry + chunk if self._carry else chunk
        end = data.rfind(b"\n") + 1
        body, self._carry = data[:end], data[end:]
        if self.end + len(data) > _SMALL and self.offsets.typecode == "I":
            self.offsets = array("q", self.offsets)
        start, offsets = self.end, self.offsets
        for line in body.split(b"\n")[:-1] if body else ():
            offsets.append(start)
            start += len(line) + 1
            out.append(self._line(line))
        self.end = start
        if len(self._carry) > self.max_line:
            offsets.append(start)
            out.append(self._unreadable("longer than the line cap"))
            self.end += len(self._carry)
            self._carry, self._skipping = b"", True

    def read(self, start: int, stop: int) -> list[ev.Stamped]:
        """The events of lines ``start`` to ``stop`` (read so far), read again from their offsets; an
        over-long line is not read again (it is unreadable, as the first time)."""
        start, stop = max(0, start), min(stop, self.lines)
        return [stamped for stamped, _prev in self._records(start, stop)]

    def read_chained(self, start: int, stop: int, anchor: int, kept: str) -> list[ev.Stamped]:
        """As ``read``, held to the chain as first read: lines ``start`` to ``anchor`` (``anchor`` at or
        past ``stop - 1``, a line whose hash ``kept`` was kept when it was first read) must link by
        ``prev`` and the last must hash to ``kept``, so each line read again is, by its hash, the line
        read the first time. LogChanged otherwise."""
        start, stop = max(0, start), min(stop, self.lines)
        if start >= stop:
            return []
        if not start <= stop - 1 <= anchor < self.lines:
            raise ValueError(f"no kept hash at line {anchor + 1} covers lines {start + 1} to {stop}")
        out: list[ev.Stamped] = []
        head: str | None = None
        for first in range(start, anchor + 1, _SPAN):  # never the whole span in memory
            for stamped, prev in self._records(first, min(first + _SPAN, anchor + 1)):
                if not stamped.head or (head is not None and prev != head):
                    raise LogChanged(start, anchor)
                head = stamped.head
                if stamped.seq < stop:
                    out.append(stamped)
        if head != kept:
            raise LogChanged(start, anchor)
        return out

    def _records(self, start: int, stop: int) -> Iterator[tuple[ev.Stamped, object]]:
        """Lines ``start`` to ``stop`` read again: each as its event and its record's ``prev``."""
        seq = start
        while seq < stop:
            # as many whole lines as a block holds, in one read
            first, last, span = self.offsets[seq], seq, max(_BLOCK, self.max_line)
            while last < stop and self._line_end(last) - first <= span:
                last += 1
            if last == seq:  # a line over the cap
                yield _unreadable(seq, "longer than the line cap"), None
                seq += 1
                continue
            try:
                data = os.pread(self.fd, self._line_end(last - 1) - first, first)
            except OSError as exc:
                raise RunFileError(AUDIT, "unreadable", f"cannot read it ({exc.strerror or exc})") from None
            for n in range(seq, last):
                line = data[self.offsets[n] - first : self._line_end(n) - first]
                if len(line) > self.max_line:
                    yield _unreadable(n, "longer than the line cap"), None
                else:
                    yield _record(n, line)
            seq = last

    def _line_end(self, seq: int) -> int:
        """Where line ``seq`` ends (its newline)."""
        return (self.offsets[seq + 1] if seq + 1 < len(self.offsets) else self.end) - 1

    def _line(self, line: bytes) -> ev.Stamped:
        seq = self.lines
        self.lines += 1
        if len(line) > self.max_line:
            return self._link(_unreadable(seq, "longer than the line cap"), None)
        return self._link(*_record(seq, line))

    def _unreadable(self, why: str) -> ev.Stamped:
        seq = self.lines
        self.lines += 1
        return self._link(_unreadable(seq, why), None)

    def _link(self, stamped: ev.Stamped, prev: object) -> ev.Stamped:
        """Line ``stamped`` read for the first time: does it name the line before?"""
        if self.broken is None and (not stamped.head or not self.head or prev != self.head):
            self.broken = stamped.seq
        self.head = stamped.head
        return stamped


# lines read again at once while a span is held to its kept hash
_SPAN = 512
# the largest offset a line's 4-byte entry holds
_SMALL = (1 << 32) - 1


def _record(seq: int, line: bytes) -> tuple[ev.Stamped, object]:
    """Line ``seq`` as the event it records, and the record's ``prev`` (None when it has none)."""
    head = hashlib.sha256(line).hexdigest()
    try:
        record = decode_json(AUDIT, line)
    except RunFileError as exc:
        return _unreadable(seq, exc.detail), None
    if not isinstance(record, dict):
        return ev.Stamped(seq, head, ev.Note(f"line {seq + 1}: not an object")), None
    return ev.Stamped(seq, head, event_of(record), _ts(record.get("ts"))), record.get("prev")


def line_event(seq: int, line: bytes) -> ev.Stamped:
    """Line ``seq`` of a run's log (without its newline) as the event it records: a line that cannot be
    read is a note saying so (a mirrored copy read back, as a log's own lines are)."""
    return _record(seq, line)[0]


def _unreadable(seq: int, why: str) -> ev.Stamped:
    return ev.Stamped(seq, "", ev.Note(f"line {seq + 1}: unreadable ({why})"))


SCREENS = "screens"
# a 10,000-step run's log is about 3 MB: a larger one is not a run to open
AUDIT_CAP = 256 << 20
# decoded-on-demand screenshots kept in memory (a few MB): replay of any length stays small
SCREEN_CACHE = 12


class RunReader:
    """A run directory opened for reading back: its events (``poll`` for more while it is written), its
    run.json, and its screenshots fetched on demand through a small cache. Every read is bounded
    (safeio); a screenshot that cannot be read safely is None, with why in ``screen_problem``."""

    def __init__(self, path: str | Path) -> None:
        self.folder = RunFolder.open(path)
        try:
            self.info = self._json("run.json")
            self.log = RunLog(self.folder, cap=AUDIT_CAP)
        except BaseException:
            self.folder.close()
            raise
        self.events: list[ev.Stamped] = []
        self._screens: dict[str, bytes | None] = {}
        self.screen_problem: dict[str, str] = {}

    def _json(self, name: str) -> dict[str, Any]:
        try:
            data = self.folder.read_json(name)
        except RunFileError as exc:
            if exc.reason == "missing":
                return {}
            raise
        return data if isinstance(data, dict) else {}

    def result(self) -> dict[str, Any]:
        """result.json as it stands ({} while the run goes on); unreadable is {} too (verify says why)."""
        try:
            return self._json("result.json")
        except RunFileError:
            return {}

    def poll(self) -> list[ev.Stamped]:
        """The events written since the last call (all of them the first time)."""
        new = self.log.poll()
        self.events.extend(new)
        return new

    def screen(self, sha256: str) -> bytes | None:
        """The PNG bytes of a screenshot by its hash, or None (missing, a link, too large, a bad name)."""
        if sha256 in self._screens:
            data = self._screens.pop(sha256)
            self._screens[sha256] = data  # most recently used last
            return data
        data = self._read_screen(sha256)
        self._screens[sha256] = data
        while len(self._screens) > SCREEN_CACHE:
            self._screens.pop(next(iter(self._screens)))
        return data

    def _read_screen(self, sha256: str) -> bytes | None:
        if not (len(sha256) == 64 and all(c in "0123456789abcdef" for c in sha256)):
            self.screen_problem[sha256] = "not a screenshot name (refused: references stay inside the run)"
            return None
        try:
            with self.folder.subdir(SCREENS) as screens:
                data = screens.read_bytes(f"{sha256}.png", SCREEN_CAP)
        except RunFileError as exc:
            self.screen_problem[sha256] = str(exc)
            return None
        if hashlib.sha256(data).hexdigest() != sha256:
            self.screen_problem[sha256] = "its bytes do not match its name (altered)"
            return None
        return data

    def close(self) -> None:
        self.log.close()
        self.folder.close()

    def __enter__(self) -> RunReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
