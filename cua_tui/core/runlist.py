"""The runs in a runs directory, read for listing (``cua-tui runs``, ``cua-tui stats``): the folder walk, one
entry per run directory from its run.json and result.json, and each run's record verified (at once, or
after the listing, remembered verdicts first and the rest in worker processes when there are many).

Every run directory is untrusted (it may come from another machine): it is read through core/safeio (regular
files only, no link followed, sizes capped), its chain through core/audit's verifier (one walk, which also
counts the steps and decisions); anything not of the expected type is absent. The listing's table and its
options are the CLI's (cli/runs.py); the verdicts it remembers are cli/verified.py's.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import math
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .stamps import iso_time

if TYPE_CHECKING:
    from .audit import VerifyReport
    from .ending import Headline
    from .safeio import RunFolder

    # a run listed, its name and identity (``fingerprint``), to be verified after the listing
    Later = tuple["RunEntry", str, tuple[str, bool]]

JSON_KEYS = (
    "id",
    "path",
    "started_at",
    "started_at_iso",
    "ended_at",
    "ended_at_iso",
    "duration_seconds",
    "task",
    "backend",
    "agent",
    "model",
    "status",
    "reason",
    "steps",
    "decisions",
    "verified",
    "unknown_outcomes",
    "verify_summary",
    "verifier",
    "fleet",
    "fleet_task",
)
_LAST_EPOCH = 253402300799  # 9999-12-31: any later "start time" is not one
# runs to verify from which worker processes share them (fewer: one process is quicker), and how many
PARALLEL_FROM = 48
MAX_WORKERS = 4

# entries of a run directory or its screens/ looked at: the verifier tracks at most 200,000 screenshots
MAX_LISTED = 200_016
# a run with a file changed this recently is verified every time (coarse file-system clocks)
SETTLED_S = 2.0


class Verdicts(Protocol):
    """Verdicts remembered from earlier listings (cli/verified.py's cache), by run path and identity."""

    def get(self, run: str, identity: str) -> Verdict | None: ...
    def put(self, run: str, identity: str, verdict: Verdict) -> None: ...


@dataclass(frozen=True)
class Verdict:
    """What ``runs`` shows of a verification."""

    verified: str  # intact, unsealed, tampered, unusable
    summary: str
    unknown_outcomes: int = 0
    decisions: int | None = None
    proposals: int | None = None
    ended: str | None = None  # the status the log's run_ended record gives


def fingerprint(folder_fd: int) -> tuple[str, bool] | None:
    """The identity of a run directory's files (its fd open), and whether it has settled (nothing changed
    in the last ``SETTLED_S``); None when it cannot be read whole (it is verified, not remembered)."""
    digest = hashlib.sha256()
    newest = 0
    try:
        own = os.fstat(folder_fd)
        newest = _add(digest, ".", own)
        listed = _listed(folder_fd)
        for name, info in listed:
            newest = max(newest, _add(digest, name, info))
            if name == "screens" and stat.S_ISDIR(info.st_mode):
                newest = max(newest, _screens(digest, folder_fd))
    except (OSError, _TooMany):
        return None
    settled = newest < time.time_ns() - int(SETTLED_S * 1e9)
    return digest.hexdigest(), settled


def _screens(digest: Any, folder_fd: int) -> int:
    fd = os.open("screens", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    try:
        listed = _listed(fd)
        newest = _add(digest, "screens/", os.fstat(fd))
        for name, info in listed:
            newest = max(newest, _add(digest, "screens/" + name, info))
        return newest
    finally:
        os.close(fd)


class _TooMany(Exception):
    """A folder with more entries than any run writes (a hostile one): verified each time, not remembered."""


def _listed(fd: int) -> list[tuple[str, os.stat_result]]:
    """A folder's entries and their identities, sorted; never more than ``MAX_LISTED`` held."""
    listed: list[tuple[str, os.stat_result]] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if len(listed) >= MAX_LISTED:
                raise _TooMany()
            listed.append((entry.name, entry.stat(follow_symlinks=False)))
    return sorted(listed)


def _add(digest: Any, name: str, info: os.stat_result) -> int:
    fields = (info.st_mode, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    digest.update(f"{name}\0{fields}\n".encode("utf-8", "surrogateescape"))
    return max(info.st_mtime_ns, info.st_ctime_ns)


@dataclass
class RunEntry:
    """What ``runs`` knows of one run directory; every text field comes from the directory (untrusted)."""

    id: str
    path: str
    started_at: float | None = None
    ended_at: float | None = None
    task: str | None = None
    backend: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str = "?"
    reason: str | None = None
    steps: int | None = None
    decisions: int | None = None
    # intact, unsealed, tampered, unusable; None when not checked
    verified: str | None = None
    unknown_outcomes: int = 0
    verify_summary: str | None = None
    # Who checked the status, and where (result.json's "verifier"): {"name", "where", "user"}, "where" one
    # of controller, sandbox, unknown; None when the run has no verdict.
    verifier: dict[str, str | None] | None = None
    # the fleet id from run.json, for a run made by `cua-tui fleet`
    fleet: str | None = None
    fleet_task: str | None = None  # its task's name in the tasks file

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.ended_at is None or self.ended_at < self.started_at:
            return None
        return self.ended_at - self.started_at

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` object (keys: ``JSON_KEYS``, documented in the README)."""
        return {
            "id": self.id,
            "path": self.path,
            "started_at": self.started_at,
            "started_at_iso": None if self.started_at is None else iso_time(self.started_at),
            "ended_at": self.ended_at,
            "ended_at_iso": None if self.ended_at is None else iso_time(self.ended_at),
            "duration_seconds": None if self.duration is None else round(self.duration, 3),
            "task": self.task,
            "backend": self.backend,
            "agent": self.agent,
            "model": self.model,
            "status": self.status,
            "reason": self.reason,
            "steps": self.steps,
            "decisions": self.decisions,
            "verified": self.verified,
            "unknown_outcomes": self.unknown_outcomes,
            "verify_summary": self.verify_summary,
            "verifier": self.verifier,
            "fleet": self.fleet,
            "fleet_task": self.fleet_task,
        }

    @property
    def record(self) -> str:
        """The record's state (core/ending.py): intact (and sealed), unsealed, tampered, unusable, or
        unchecked (``--no-check``)."""
        from . import ending

        return self.verified if self.verified is not None else ending.UNCHECKED

    def headline(self) -> Headline:
        """The STATUS cell: how the run ended, a claim unless an intact, sealed record vouches for it."""
        from . import ending

        if self.status in ("?", "unfinished"):
            # no result.json, or none that reads: nothing is claimed
            return ending.headline(None, self.record, no_end=self.status)
        return ending.headline(self.status, self.record)


# ------------------------------------------------------------------------------------------------
# Values from a run directory: anything that is not the expected type is absent
# --------------------------------------------------------------------------------------------------
def _epoch(value: Any) -> float | None:
    if type(value) not in (int, float) or not math.isfinite(value) or not 0 < value <= _LAST_EPOCH:
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _text(value: Any) -> str | None:
    """A text field as text: a string as it is, anything else (a hostile number, list, object) as written."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=True)[:200]


def _id_time(name: str) -> float | None:
    """The start time a run id spells (``YYYYMMDD-HHMMSS-xxxxxx``, UTC), when run.json cannot say."""
    try:
        return float(calendar.timegm(time.strptime(name[:15], "%Y%m%d-%H%M%S")))
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------
def _read_json(run: RunFolder, name: str) -> dict[str, Any] | None:
    """A run's JSON file through safeio: {} when absent, None when hostile or not an object."""
    from .safeio import RunFileError

    try:
        data = run.read_json(name)
    except RunFileError as exc:
        return {} if exc.reason == "missing" else None
    return data if isinstance(data, dict) else None


def _verifier(result: dict[str, Any]) -> dict[str, str | None] | None:
    """Who checked the status and where, from result.json; a verdict recorded before runs said so (or said it
    in a shape this version does not read) is one from a place unknown, never the controller."""
    if type(result.get("verified")) is not bool:
        # no verdict: no verifier ran (or result.json does not say it did)
        return None
    said = result.get("verifier")
    said = said if isinstance(said, dict) else {}
    where = said.get("where")
    return {
        "name": _text(said.get("name")),
        "where": where if where in ("controller", "sandbox") else "unknown",
        "user": _text(said.get("user")),
    }


def _verdict(report: VerifyReport) -> Verdict:
    from .audit import VerifyExit

    if report.code == VerifyExit.TAMPERED:
        return Verdict("tampered", report.summary)
    if report.code == VerifyExit.UNUSABLE:
        return Verdict("unusable", report.summary)
    # counted over the whole chain: only then is it the run's
    state = "intact" if report.sealed else "unsealed"
    return Verdict(
        state, report.summary, len(report.unknown_outcomes), report.decisions, report.proposals, report.ended
    )


def _apply_verify(entry: RunEntry, verdict: Verdict) -> None:
    entry.verified, entry.verify_summary = verdict.verified, verdict.summary
    if verdict.verified in ("intact", "unsealed"):
        entry.unknown_outcomes = verdict.unknown_outcomes
        entry.decisions = verdict.decisions
        if entry.steps is None:
            entry.steps = verdict.proposals
    if verdict.verified == "intact" and verdict.ended and verdict.ended != entry.status:
        # result.json is not sealed: the record's own end is the status, and the difference is said
        said = entry.status
        entry.status = verdict.ended
        entry.reason = f"result.json says {said}; the record says {verdict.ended}"


def _read_run(run: RunFolder, name: str, check: bool, later: list[Later] | None = None) -> RunEntry:
    """One run directory (open): run.json and result.json, then the verifier's one walk of its log (or,
    with ``later``, the run's identity put there to be looked up or verified after the listing)."""
    entry = RunEntry(name, str(run.path), started_at=_id_time(name))
    info, result = _read_json(run, "run.json"), _read_json(run, "result.json")
    if info is not None:
        entry.started_at = _epoch(info.get("started_at")) or entry.started_at
        entry.task, entry.backend = _text(info.get("task")), _text(info.get("backend"))
        entry.agent, entry.model = _text(info.get("agent")), _text(info.get("model"))
        entry.fleet, entry.fleet_task = _text(info.get("fleet")), _text(info.get("fleet_task"))
    if result is not None:
        # {}: no result.json (still running, or interrupted); None: unreadable, "?"
        entry.status = (_text(result.get("status")) or "?") if result else "unfinished"
        entry.reason = _text(result.get("reason"))
        entry.ended_at = _epoch(result.get("ended_at"))
        entry.verifier = _verifier(result)
        counts = result.get("counts")
        entry.steps = _count(counts.get("steps")) if isinstance(counts, dict) else None
    if check:
        known = fingerprint(run.fd) if later is not None else None
        if later is not None and known is not None:
            later.append((entry, name, known))
        else:
            from .audit import verify_run

            _apply_verify(entry, _verdict(verify_run(run)))
    return entry


def _verify_later(top: RunFolder, later: list[Later], cache: Verdicts) -> None:
    """The verdicts of the runs listed: remembered ones as they were (none of their files changed), the
    others verified, in worker processes when there are many (cli/verified; docs/commands/runs.md)."""
    from .audit import verify_run
    from .safeio import RunFileError

    verdicts: list[Verdict | None] = [cache.get(entry.path, known[0]) for entry, _name, known in later]
    missing = [i for i, verdict in enumerate(verdicts) if verdict is None]
    workers = min(os.cpu_count() or 1, MAX_WORKERS)
    # verified by a worker (by path), with the identity of what it verified
    checked: list[tuple[Verdict, str | None] | None] = [None] * len(later)
    if len(missing) >= PARALLEL_FROM and workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        paths = [later[i][0].path for i in missing]
        # fork: the workers start at once, with everything imported; but only from a process of one
        # thread (the command's), as a fork copies no other thread and any lock one of them holds
        method = "fork" if _one_thread() else "forkserver"
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
            for i, done in zip(missing, pool.map(_verify_path, paths, chunksize=16), strict=True):
                checked[i] = done
    for (entry, name, (identity, settled)), remembered, by_path in zip(later, verdicts, checked, strict=True):
        if remembered is not None:
            _apply_verify(entry, remembered)
            continue
        if by_path is not None and by_path[1] == identity:
            # the worker verified the very files listed
            verdict = by_path[0]
        else:
            # not verified yet, or something else than was listed: judged here, on what is there now
            try:
                run = top.subdir(name)
            except RunFileError as exc:
                entry.verified, entry.verify_summary = "unusable", f"{entry.path}: not a run directory ({exc.detail})"
                continue
            with run:
                now = fingerprint(run.fd)
                verdict = _verdict(verify_run(run))
            if now is None or now[0] != identity:
                _apply_verify(entry, verdict)
                continue
        if settled:
            cache.put(entry.path, identity, verdict)
        _apply_verify(entry, verdict)


def _one_thread() -> bool:
    """Whether this process runs one thread (Python's or not: a library may have started its own)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _verify_path(path: str) -> tuple[Verdict, str | None]:
    """A worker's verification of one run directory, with the identity of the files it verified (the
    parent takes the verdict only for the run it listed)."""
    from .audit import verify_run
    from .safeio import RunFileError, RunFolder

    try:
        with RunFolder.open(Path(path)) as folder:
            known = fingerprint(folder.fd)
            return _verdict(verify_run(folder)), known[0] if known is not None else None
    except RunFileError as exc:
        return Verdict("unusable", f"{path}: not a run directory ({exc.detail})"), None


def _unusable(name: str, path: Path, why: str, check: bool) -> RunEntry:
    """A run's name on something that cannot be read as a run directory: a row saying so, never followed."""
    entry = RunEntry(name, str(path), started_at=_id_time(name))
    if check:
        entry.verified, entry.verify_summary = "unusable", f"{path}: not a run directory ({why})"
    return entry


def read_runs(top: RunFolder, check: bool, cache: Verdicts | None = None) -> list[RunEntry]:
    """One entry per run directory under ``top``: a directory holding audit.jsonl, or anything named like
    a run id (a link, a FIFO, an emptied directory: a row saying it is unusable, never followed). With a
    ``cache``, the verdicts of unchanged runs are remembered ones, and the others are verified together."""
    from .rundir import RUN_ID_RE
    from .safeio import RunFileError, kind_of

    later: list[Later] | None = [] if cache is not None and check else None
    entries = []
    for name, mode in top.entries():
        named_as_run = bool(RUN_ID_RE.match(name))
        if not stat.S_ISDIR(mode):
            if named_as_run:
                entries.append(_unusable(name, top.path / name, kind_of(mode), check))
            continue
        try:
            run = top.subdir(name)
        except RunFileError as exc:
            if named_as_run:
                entries.append(_unusable(name, top.path / name, exc.detail, check))
            continue
        with run:
            try:
                has_log = run.kind("audit.jsonl") is not None
            except RunFileError as exc:
                entries.append(_unusable(name, run.path, exc.detail, check))
                continue
            if has_log or named_as_run:
                entries.append(_read_run(run, name, check, later))
    if later and cache is not None:
        _verify_later(top, later, cache)
    return entries
