"""Run directory layout and the content-addressed screenshot store.

```
<runs-dir>/<run-id>/
  run.json  sandbox-id.txt  audit.jsonl  screens/<sha256>.png  transcript.jsonl  result.json
```
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .audit import encode_record, write_all
from .text import encodable

RUN_ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class RunNotFound(LookupError):
    """A RUN argument that names no run directory; ``str()`` says why in one line."""


def resolve_run(arg: str | Path, runs_dir: Path) -> Path:
    """A RUN argument as commands take it: a run directory's path, or a run id as ``runs`` prints it
    (also a unique beginning of one) looked up in ``runs_dir``. Nothing is opened here: what the path
    holds is for the bounded reader (safeio) to judge."""
    path = Path(arg)
    if os.path.lexists(path):
        return path
    name = str(arg)
    if RUN_ID_RE.match(name):
        candidate = runs_dir / name
        if os.path.lexists(candidate):
            return candidate
        raise RunNotFound(f"no run {name} in {runs_dir}")
    if os.sep in name or not re.fullmatch(r"[0-9a-f-]{4,22}", name):
        raise RunNotFound(f"{name}: no such run directory, nor the beginning of a run id in {runs_dir}")
    try:
        matches = sorted(e for e in os.listdir(runs_dir) if RUN_ID_RE.match(e) and e.startswith(name))
    except OSError:
        raise RunNotFound(f"{name}: no such run directory, and no runs in {runs_dir}") from None
    if len(matches) == 1:
        return runs_dir / matches[0]
    if not matches:
        raise RunNotFound(f"{name}: no such run directory, and no run id in {runs_dir} starts so")
    raise RunNotFound(f"{name}: {len(matches)} runs in {runs_dir} start so ({', '.join(matches[:3])}, ...)")


# a run directory's name when one is given (RUN_ID_RE is new_run_id's form): one folder, never a path
RUN_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def new_run_id(now: float | None = None) -> str:
    """Sortable, unique: ``YYYYMMDD-HHMMSS-<6 hex>`` (UTC)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a reader never sees half a file: temp file, fsync, rename, fsync the folder.
    Any text encodes (the audit log's encoder); only the file system can fail it, with OSError."""
    payload = msgspec.json.format(encode_record(data), indent=2) + b"\n"
    _replace_whole(path, path.with_name(f".{path.name}.{os.getpid()}.tmp"), payload)
    _fsync_dir(path.parent)


def _replace_whole(path: Path, tmp: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole, or is left as it was: written to ``tmp``, fsynced, renamed."""
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            # no half-written temp file left beside the run's files
            tmp.unlink()
        raise


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ScreenStore:
    """``screens/<sha256>.png``: each distinct screenshot stored once, written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def put(self, sha256: str, png: bytes) -> bool:
        """Store the PNG under its hash; return False when it was already there."""
        with self._lock:
            if sha256 in self._known:
                return False
            self._known.add(sha256)
        path = self.folder / f"{sha256}.png"
        if path.exists():
            return False
        try:
            _replace_whole(path, self.folder / f".{sha256}.tmp", png)
        except OSError:
            with self._lock:
                self._known.discard(sha256)
            raise
        return True

    def path(self, sha256: str) -> Path:
        if not _SHA_RE.match(sha256):
            raise ValueError(f"not a SHA-256 hex digest: {sha256!r}")
        return self.folder / f"{sha256}.png"

    def get(self, sha256: str) -> bytes:
        return self.path(sha256).read_bytes()


class _File:
    """A file of the run directory, as an attribute of ``RunDir``: its path inside the run's folder."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: RunDir, owner: type[RunDir] | None = None) -> Path:
        return run.path / self.name


@dataclass
class RunDir:
    """One run's folder. ``create`` makes it; ``open`` reads an existing one."""

    path: Path
    run_id: str

    # The files of the run directory contract (DESIGN.md), by the names the code gives them.
    run_json = _File("run.json")
    audit = _File("audit.jsonl")
    transcript = _File("transcript.jsonl")
    result_json = _File("result.json")
    sandbox_id = _File("sandbox-id.txt")

    @property
    def screens(self) -> ScreenStore:
        return ScreenStore(self.path / "screens")

    @classmethod
    def create(cls, runs_dir: str | Path, run_id: str | None = None) -> RunDir:
        """A new run directory in ``runs_dir``, named ``run_id`` (ValueError for a name that is not a run id:
        one a team's queue hands a worker is someone else's writing) or a fresh id."""
        if run_id is not None and not RUN_NAME_RE.fullmatch(run_id):
            raise ValueError(f"{run_id[:120]!r} is not a run id (letters, digits, '.', '_', '-'; not a path)")
        runs = Path(runs_dir).expanduser()
        runs.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            rid = run_id or new_run_id()
            path = runs / rid
            try:
                path.mkdir(mode=0o700)
            except FileExistsError:
                if run_id:
                    raise
                continue
            (path / "screens").mkdir(mode=0o700)
            return cls(path, rid)
        raise RuntimeError("could not allocate a fresh run directory")

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        path = Path(path)
        return cls(path, path.name)

    def write_run_json(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.run_json, data)

    def write_result(self, data: dict[str, Any]) -> None:
        write_json_atomic(self.result_json, data)

    def write_sandbox_id(self, sandbox_id: str) -> None:
        tmp = self.sandbox_id.with_suffix(".tmp")
        # an id the sandbox side named
        tmp.write_text(encodable(sandbox_id) + "\n", encoding="utf-8")
        os.replace(tmp, self.sandbox_id)

    @property
    def _reserve(self) -> Path:
        return self.path / ".reserve"

    def reserve_space(self, nbytes: int) -> None:
        """Set aside ``nbytes`` of disk (allocated, not written) that ``release_reserve`` gives back when a
        write fails, so the end of the run can still be recorded on a full file system."""
        try:
            fd = os.open(self._reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except OSError:
            # no room even now, or a file system without fallocate: run without a reserve
            pass
        finally:
            os.close(fd)

    def release_reserve(self) -> None:
        try:
            self._reserve.unlink(missing_ok=True)
        except OSError:
            pass

    def read_json(self, name: str) -> Any:
        """A JSON file of the run, read through safeio (regular file, no link, capped, strict)."""
        from .safeio import read_json

        return read_json(self.path, name)


class TranscriptWriter:
    """transcript.jsonl: model turns without images or secrets, one JSON object per line."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "ab", buffering=0)  # noqa: SIM115 - kept open for the run
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        """Append one line; raises OSError when it cannot be written (the caller stops the run)."""
        with self._lock:
            if not self._fh.closed:
                write_all(self._fh, encode_record(record) + b"\n")

    def close(self) -> None:
        with self._lock:
            self._fh.close()
