"""A run directory as the exports read it: its events, timeline, verify verdict and screenshots, all bounded.

Every read goes through ``core.safeio`` (regular files only, no link followed, caps), the audit log through
``core.runlog`` and every screenshot through ``core.imaging``'s header check against the run's own screen
size, so a hostile run directory (a link to ``/dev/zero``, a FIFO, a PNG whose header claims 40,000 x 40,000
pixels, or 10,000 x 4,000 in a run of 1024 x 720) gets a one-line answer:
``RunUnusable`` when nothing can be exported, otherwise a note in the export and a refused screen in place
of the picture. Nothing here writes.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import events as ev
from ..core import timeline
from ..core.audit import GENESIS, AuditKey, Finding, FindingKind, VerifyExit, VerifyReport, verify_run
from ..core.imaging import ImageRefused, ScreenLimit, screen_size
from ..core.private import LEFT_OUT, private_line, private_screens
from ..core.runlog import AUDIT, RunLog
from ..core.safeio import SCREEN_CAP, MiB, RunFileError, RunFolder
from ..core.text import visible

# A run of the default policy (200 steps) writes well under 1 MiB of audit log; the 100,000-event
# benchmark run about 40 MiB. Past this, an export would hold too many events in memory: refused,
# not attempted.
AUDIT_CAP = 64 * MiB
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class RunUnusable(Exception):
    """Nothing can be exported from this directory; ``str()`` is one line saying why (exit 2)."""


@dataclass(frozen=True)
class Screen:
    """One screenshot as an export may use it: the PNG bytes, or why they were refused."""

    sha256: str
    width: int
    height: int
    png: bytes | None = None
    # why there is no picture (missing, a link, not a PNG, a bomb, another hash, ...)
    refused: str = ""
    # seen only inside a takeover's private stretch (core.private): left out unless the run's export asked
    private: bool = False


@dataclass
class Run:
    """What an export shows of a run directory."""

    path: Path
    run_id: str
    # run.json ({} when it is missing or unreadable: see ``notes``)
    info: dict[str, Any]
    stamped: list[ev.Stamped]
    timeline: timeline.Timeline
    report: VerifyReport
    # sha256 -> (width, height) as the screen events record it
    sizes: dict[str, tuple[int, int]]
    # the run's screen as run.json and run_started record it: no screen may be larger
    limit: ScreenLimit
    notes: list[str] = field(default_factory=list)
    # the screens seen only in a takeover's private stretch, and whether the export puts them in
    private: frozenset[str] = frozenset()
    include_private: bool = False
    _folder: RunFolder | None = None
    _screens: dict[str, Screen] = field(default_factory=dict)

    @property
    def tampered(self) -> bool:
        return self.report.code == VerifyExit.TAMPERED

    @property
    def task(self) -> str:
        started = self.timeline.started
        task = self.info.get("task") if isinstance(self.info.get("task"), str) else None
        return task if task is not None else (started.task if started is not None else "")

    def events(self, kind: type[ev.Event]) -> list[Any]:
        """The events of one kind, in chain order."""
        return [s.event for s in self.stamped if isinstance(s.event, kind)]

    def screen(self, sha256: Any) -> Screen:
        """The screenshot ``sha256`` (read once, then cached), checked: a regular file of at most the screen
        cap, a PNG whose header gives the size the screen event recorded, at most the run's screen, with that
        very hash."""
        if not isinstance(sha256, str):  # an edited record: anything JSON can hold
            return Screen(visible(str(sha256), limit=64), 0, 0, refused="not a SHA-256 name")
        if sha256 in self.private and not self.include_private:
            width, height = self.sizes.get(sha256, (0, 0))
            return Screen(sha256, width, height, refused=LEFT_OUT, private=True)
        cached = self._screens.get(sha256)
        if cached is None:
            cached = self._screens[sha256] = self._read_screen(sha256)
        return cached

    def _read_screen(self, sha256: str) -> Screen:
        width, height = self.sizes.get(sha256, (0, 0))
        if not _SHA_RE.match(sha256):
            return Screen(sha256, width, height, refused="not a SHA-256 name")
        try:
            if self._folder is None:
                raise RunFileError("screens", "missing", "closed")
            with self._folder.subdir("screens") as store:
                data = store.read_bytes(f"{sha256}.png", SCREEN_CAP)
        except RunFileError as exc:
            return Screen(sha256, width, height, refused=f"screens/{sha256[:12]}…: {exc.detail}")
        if hashlib.sha256(data).hexdigest() != sha256:
            return Screen(sha256, width, height, refused="the file's content does not have its hash (altered)")
        try:
            size = screen_size(data, self.limit)
        except ImageRefused as exc:
            return Screen(sha256, width, height, refused=str(exc))
        if (width, height) not in ((0, 0), size):
            return Screen(sha256, width, height, refused=f"the PNG is {size[0]} x {size[1]}, not as recorded")
        return Screen(sha256, size[0], size[1], png=data, private=sha256 in self.private)

    def private_line(self) -> str:
        """What the export says of the run's private screens, left out or included ("" when there are none)."""
        return private_line(len(self.private), self.include_private)

    def refused(self) -> list[Screen]:
        """The screens read so far that have no picture, in the order they were first asked for."""
        return [screen for screen in self._screens.values() if screen.png is None]

    def close(self) -> None:
        if self._folder is not None:
            self._folder.close()
            self._folder = None

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_run(path: str | Path, key: AuditKey | None = None) -> Run:
    """Read a run directory for export. Raises RunUnusable (one line) when there is nothing to export:
    not a directory, no audit.jsonl, an audit log over the cap or one that cannot be read."""
    path = Path(path)
    try:
        folder = RunFolder.open(path)
    except RunFileError as exc:
        raise RunUnusable(f"{visible(str(path))}: not a run directory ({visible(exc.detail)})") from None
    try:
        return _read(folder, path, key)
    except BaseException:
        folder.close()
        raise


def _read(folder: RunFolder, path: Path, key: AuditKey | None) -> Run:
    where = visible(str(path))
    kind = folder.kind(AUDIT)
    if kind is None:
        raise RunUnusable(f"{where}: no audit.jsonl (not a cua-tui run directory)")
    report = verify_run(folder, key)
    if report.code == VerifyExit.UNUSABLE:
        raise RunUnusable(visible(report.summary))
    notes: list[str] = []
    stamped: list[ev.Stamped] = []
    try:
        # only to refuse a log over the cap before reading it
        fd, _size = folder.open_file(AUDIT, AUDIT_CAP)
        os.close(fd)
        with RunLog(folder) as log:
            stamped = log.poll()
        _hold(report, stamped, log.broken)
    except RunFileError as exc:
        if exc.reason != "not_regular":
            raise RunUnusable(f"{where}: audit.jsonl: {visible(exc.detail)}") from None
        notes.append(f"audit.jsonl: {exc.detail}: its events cannot be shown")
    info = _run_json(folder, notes)
    sizes: dict[str, tuple[int, int]] = {}
    for item in stamped:
        event = item.event
        if isinstance(event, ev.ScreenCaptured) and isinstance(event.sha256, str) and event.sha256 not in sizes:
            sizes[event.sha256] = (_int(event.width), _int(event.height))
        elif isinstance(event, ev.Note) and event.message.startswith("line "):
            notes.append(f"audit.jsonl {event.message}")
    run_id = info.get("run_id") if isinstance(info.get("run_id"), str) else path.name
    try:
        line = timeline.build(stamped)
    except (TypeError, AttributeError, ValueError) as exc:
        # fields of the wrong type in an edited log
        raise RunUnusable(f"{where}: audit.jsonl holds records of the wrong shape ({type(exc).__name__})") from None
    started = line.started.screen if line.started is not None else None
    limit = ScreenLimit.of_run(info.get("screen"), started)
    private = private_screens(item.event for item in stamped)
    return Run(path, str(run_id), info, stamped, line, report, sizes, limit, notes, private, _folder=folder)


def _hold(report: VerifyReport, stamped: list[ev.Stamped], broken: int | None) -> None:
    """The lines exported are the lines ``verify`` checked (read again after it: the log may have changed
    in between): they link, the one it ended on hashes to its head, and a sealed log has no more. Where
    they are not, the report says TAMPERED from there."""
    if report.code != VerifyExit.INTACT:
        return
    count = report.events
    ours = GENESIS if count == 0 else stamped[count - 1].head if count <= len(stamped) else ""
    if broken is None and ours == report.head and not (report.sealed and len(stamped) > count):
        return
    line = broken + 1 if broken is not None else count
    report.findings.insert(0, Finding(FindingKind.EDITED, "the log changed after it was verified", line))


def _run_json(folder: RunFolder, notes: list[str]) -> dict[str, Any]:
    try:
        info = folder.read_json("run.json")
    except RunFileError as exc:
        notes.append(f"run.json: {exc.detail}")
        return {}
    if not isinstance(info, dict):
        notes.append("run.json: not a JSON object")
        return {}
    return info


def key(value: Any) -> int | str:
    """A record's field as a dictionary key (turn numbers): an edited log may hold a list or an object."""
    return value if type(value) in (int, str) else repr(value)[:40]


def _int(value: Any) -> int:
    return value if type(value) is int and 0 < value <= 1 << 16 else 0
