"""What ``cua-tui runs`` remembers of the runs it verified, so that a listing of thousands answers at once.

A verdict is kept with the identity of every file the verifier read (the run directory, each entry in it and
in its screens/ folder: inode, size, modification and change time in nanoseconds; no user sets a change
time), so a run whose files all still have that identity is the run verified; any other is verified again,
as is a run changed in the last seconds (coarse file-system clocks). The cache is this user's own file (never
a run directory's), read with a cap; anything in it that is not what was written is ignored. The cache
folder may be shared (``CUA_TUI_CACHE_DIR``), so each entry carries an HMAC-SHA256 under a key only this
user holds (``cache-key`` in the config folder, 0600); an entry whose tag fails is verified again, and a
key file that is not this user's private file is not used (nothing is remembered). docs/commands/runs.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Any

import msgspec

from .. import __version__
from ..core.runlist import Verdict as Verdict
from ..core.runlist import fingerprint as fingerprint

NAME = "verified-runs.json"
# 2: every entry carries its HMAC ("mac"); entries of format 1 are not taken. 3: decisions counted as
# core/decisions.py counts them (a takeover's own actions and a grant's approvals are not)
FORMAT = 4
# the key that authenticates the entries, in the user's config folder
KEY_NAME = "cache-key"
KEY_BYTES = 32
# far beyond any runs directory listed at once; the oldest entries go first
MAX_ENTRIES = 50_000
MAX_BYTES = 64 << 20


class KeyRefused(Exception):
    """The cache key cannot be used; ``str()`` is one line naming the file and why."""


def cache_key(config_dir: Path, cache_dir: Path | None) -> bytes:
    """The key that authenticates the cache's entries: ``config_dir``/cache-key, 32 random bytes made on
    first use (mode 0600, complete before it has its name). KeyRefused when there is none to use: a file
    that is not a regular file of this user's with mode 0600 and 32 bytes (a link, another owner, other
    permissions), one inside the cache folder, or one that cannot be made."""
    path = config_dir / KEY_NAME
    if cache_dir is not None and path.resolve().is_relative_to(cache_dir.resolve()):
        raise KeyRefused(f"{path}: the cache key would be inside the cache folder {cache_dir}")
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    try:
        _make_key(path)
        return _read_key(path)
    except OSError as exc:
        raise KeyRefused(f"{path}: cannot make the cache key ({exc.strerror or exc})") from None


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KeyRefused(f"{path}: cannot read the cache key ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyRefused(f"{path}: the cache key is not a regular file")
        if info.st_uid != os.geteuid():
            raise KeyRefused(f"{path}: the cache key belongs to another user (uid {info.st_uid})")
        if stat.S_IMODE(info.st_mode) != 0o600:
            raise KeyRefused(f"{path}: the cache key has mode {stat.S_IMODE(info.st_mode):04o}, not 0600")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise KeyRefused(f"{path}: the cache key is not {KEY_BYTES} bytes")
    return key


def _make_key(path: Path) -> None:
    """A new key, written whole under a name of its own, then linked to ``path`` (no reader ever sees it
    half written; when another process got there first, its key stands)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)


def _tag(key: bytes, run: str, identity: str, verdict: dict[str, Any]) -> str:
    message = json.dumps([FORMAT, run, identity, verdict], sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


class Cache:
    """The verdicts remembered, by run directory path, each authenticated with ``key`` (None: nothing is
    remembered); ``save`` writes them back (whole, or not at all)."""

    def __init__(self, path: Path | None, key: bytes | None) -> None:
        self.path = path if key is not None else None
        self._key = key or b""
        self._runs: dict[str, dict[str, Any]] = _load(self.path) if self.path is not None else {}
        self._changed = False
        self.hits = self.misses = 0

    def get(self, run: str, identity: str) -> Verdict | None:
        entry = self._runs.get(run)
        if entry is None or entry.get("identity") != identity:
            self.misses += 1
            return None
        fields = {k: v for k, v in entry.items() if k not in ("identity", "mac")}
        mac = entry.get("mac")
        if not (
            isinstance(mac, str) and mac.isascii() and hmac.compare_digest(mac, _tag(self._key, run, identity, fields))
        ):
            # not written with this user's key: a hint nobody vouches for
            self.misses += 1
            return None
        try:
            verdict = Verdict(**fields)
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
        if self.path is None:
            return
        self._runs.pop(run, None)
        fields = asdict(verdict)
        self._runs[run] = {"identity": identity, **fields, "mac": _tag(self._key, run, identity, fields)}
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
        and (verdict.ended is None or (isinstance(verdict.ended, str) and len(verdict.ended) <= 32))
    )
