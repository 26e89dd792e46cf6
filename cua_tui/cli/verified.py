"""What ``cua-tui runs`` remembers of the runs it verified, so that a listing of thousands answers at once.

A verdict is kept with the identity of every file the verifier read: the run directory, each entry in it and
in its screens/ folder, by inode, size, modification and change time (nanoseconds). The change time is set
by the kernel on any write, rename, link or chmod and no user can set it, so a run whose files all still
have the identity they had when it was verified is the run that was verified; any other is verified again.
A run changed within the last seconds is not remembered (a file system with coarse times could miss an edit
made in the same tick). The cache is this user's own file (never a run directory's), read with a cap, and
anything in it that is not what was written is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from .. import __version__

NAME = "verified-runs.json"
FORMAT = 1
# far beyond any runs directory listed at once; the oldest entries go first
MAX_ENTRIES = 50_000
MAX_BYTES = 64 << 20
# entries of a run directory or its screens/ looked at: the verifier tracks at most 200,000 screenshots
MAX_LISTED = 200_016
# a run with a file changed this recently is verified every time (coarse file-system clocks)
SETTLED_S = 2.0


@dataclass(frozen=True)
class Verdict:
    """What ``runs`` shows of a verification."""

    verified: str  # intact, unsealed, tampered, unusable
    summary: str
    unknown_outcomes: int = 0
    decisions: int | None = None
    proposals: int | None = None


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


class Cache:
    """The verdicts remembered, by run directory path; ``save`` writes them back (whole, or not at all)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._runs: dict[str, dict[str, Any]] = _load(path) if path is not None else {}
        self._changed = False
        self.hits = self.misses = 0

    def get(self, run: str, identity: str) -> Verdict | None:
        entry = self._runs.get(run)
        if entry is None or entry.get("identity") != identity:
            self.misses += 1
            return None
        try:
            verdict = Verdict(**{k: v for k, v in entry.items() if k != "identity"})
        except TypeError:
            self.misses += 1
            return None
        if not _well_formed(verdict):
            self.misses += 1
            return None
        self.hits += 1
        # most recently used last: the oldest are dropped first
        self._runs[run] = self._runs.pop(run)
        return verdict

    def put(self, run: str, identity: str, verdict: Verdict) -> None:
        self._runs.pop(run, None)
        self._runs[run] = {"identity": identity, **asdict(verdict)}
        self._changed = True

    def save(self) -> None:
        if self.path is None or not self._changed:
            return
        runs = dict(list(self._runs.items())[-MAX_ENTRIES:])
        data = json.dumps({"format": FORMAT, "version": __version__, "runs": runs}, ensure_ascii=True).encode()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.path)
        except OSError:
            # a cache that cannot be written costs the next listing its time, nothing else
            tmp.unlink(missing_ok=True)


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return {}
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = msgspec.json.decode(fh.read(MAX_BYTES))
    except (OSError, msgspec.DecodeError, RecursionError):
        return {}
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != __version__:
        return {}  # another version's verifier may judge differently: verify again
    runs = data.get("runs")
    if not isinstance(runs, dict):
        return {}
    return {k: v for k, v in runs.items() if isinstance(k, str) and isinstance(v, dict)}


def _well_formed(verdict: Verdict) -> bool:
    def count(value: Any) -> bool:
        return value is None or (type(value) is int and value >= 0)

    return (
        verdict.verified in ("intact", "unsealed", "tampered", "unusable")
        and isinstance(verdict.summary, str)
        and type(verdict.unknown_outcomes) is int
        and count(verdict.decisions)
        and count(verdict.proposals)
    )
