"""Bounded reads inside a run directory: regular files only, no link followed, sizes and lines capped.

A run directory is untrusted input (it may come from another machine, or from an attacker who edited it):
``result.json`` may be a symbolic link to ``/dev/zero`` or to a 3 GB file elsewhere, a FIFO that never
answers, a directory; ``screens/`` may point outside the run. cua-tui never writes a link, a FIFO or a
device into a run directory, so every such entry is refused instead of followed. Files are opened relative
to the run directory's descriptor with ``O_NOFOLLOW | O_NONBLOCK`` after an ``lstat`` (a FIFO or a device
is never opened), and the descriptor's ``fstat`` must be the same regular file. Every read is capped, and
``audit.jsonl`` is streamed line by line with a per-line cap and strict UTF-8, so memory stays bounded
whatever the directory holds. Every command that opens run directories (verify, runs, replay, export)
reads through this module.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import msgspec

from .threads import give_way

MiB = 1 << 20
JSON_CAP = 16 * MiB  # run.json, result.json: a few KB in practice
# one PNG screenshot: well under 10 MB even for an 8K screen
SCREEN_CAP = 64 * MiB
LINE_CAP = 8 * MiB  # one audit record: a few hundred bytes in practice
_BLOCK = 1 * MiB
# a paced read's block (core/threads.give_way): a few ms of a verifier's work between two looks
_PACED_BLOCK = 128 << 10

# status of a line read from a JSONL file
LINE_OK = 0
# the last line, without its newline (an interrupted write)
LINE_INCOMPLETE = 1
LINE_TOO_LONG = 2  # longer than the cap; its bytes are not kept
LINE_BAD_UTF8 = 3  # not valid UTF-8

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = _OPEN_FLAGS | os.O_DIRECTORY


class RunFileError(Exception):
    """A run file or folder that cannot be read safely. ``str()`` is one line: the name and why.

    ``reason``: ``missing``, ``not_regular`` (a link, FIFO, device, socket or directory where a file
    belongs, or the reverse), ``too_large``, ``unreadable`` (an I/O error) or ``invalid`` (not strict
    UTF-8 JSON)."""

    def __init__(self, name: str, reason: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.reason = reason
        self.detail = detail


def kind_of(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _check_name(name: str) -> None:
    # one component only: nothing can climb out with "..", and no path is resolved through a link
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a single file name: {name!r}")


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n:,} bytes"


class FdOwner:
    """Owns one open file descriptor, ``fd`` (-1 once closed): ``close`` closes it once; a context manager."""

    fd: int

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunFolder(FdOwner):
    """An open directory of a run; every read is relative to its descriptor and stays inside it.

    ``path`` is only for messages. Use as a context manager (or call ``close``)."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: str | Path, *, follow_link: bool = False) -> RunFolder:
        """Open a directory named by the user. A run directory's last component must be a real directory,
        not a link (a link planted among runs could stand in for another run); ``follow_link`` is for the
        user's own runs folder, which may well be a link to another disk."""
        path = Path(path)
        name = str(path)
        try:
            st = os.stat(path) if follow_link else os.lstat(path)
        except OSError as exc:
            raise _os_error(name, exc) from None
        if not stat.S_ISDIR(st.st_mode):
            raise RunFileError(name, "not_regular", f"{kind_of(st.st_mode)}, not a directory")
        try:
            fd = os.open(path, (_DIR_FLAGS & ~os.O_NOFOLLOW) if follow_link else _DIR_FLAGS)
        except OSError as exc:
            raise _os_error(name, exc) from None
        return cls._checked(fd, st, name, path)

    @classmethod
    def _checked(cls, fd: int, st: os.stat_result, name: str, path: Path) -> RunFolder:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISDIR(now.st_mode):
            os.close(fd)
            raise RunFileError(name, "not_regular", "replaced while it was being opened")
        return cls(fd, path)

    def subdir(self, name: str) -> RunFolder:
        """A directory inside this one (``screens``, or a run inside a runs directory)."""
        st = self._lstat(name)
        if not stat.S_ISDIR(st.st_mode):
            raise RunFileError(name, "not_regular", f"{kind_of(st.st_mode)}, not a directory")
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise _os_error(name, exc) from None
        return self._checked(fd, st, name, self.path / name)

    def entries(self) -> list[tuple[str, int]]:
        """(name, lstat mode) of every entry, sorted by name; links are reported, never followed."""
        return sorted(self.scan())

    def scan(self) -> Iterator[tuple[str, int]]:
        """(name, lstat mode) of each entry, in directory order, one at a time."""
        try:
            with os.scandir(self.fd) as it:
                for entry in it:
                    try:
                        yield entry.name, entry.stat(follow_symlinks=False).st_mode
                    except OSError:
                        continue  # vanished while listing
        except OSError as exc:
            raise _os_error(str(self.path), exc) from None

    def kind(self, name: str) -> str | None:
        """What ``name`` is (``a regular file``, ``a directory``, ``a symbolic link``...), or None if absent."""
        _check_name(name)
        try:
            return kind_of(os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _os_error(name, exc) from None

    def _lstat(self, name: str) -> os.stat_result:
        _check_name(name)
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError as exc:
            raise _os_error(name, exc) from None

    def open_file(self, name: str, cap: int) -> tuple[int, int]:
        """(descriptor, size) of a regular file of at most ``cap`` bytes. The caller closes the descriptor."""
        st = self._lstat(name)
        if not stat.S_ISREG(st.st_mode):
            # refused before open: opening a FIFO or a device can block or act
            raise RunFileError(name, "not_regular", f"{kind_of(st.st_mode)}, not a regular file")
        if st.st_size > cap:
            raise RunFileError(name, "too_large", f"larger than {_size(cap)} ({st.st_size:,} bytes)")
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            raise _os_error(name, exc) from None
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
            os.close(fd)
            raise RunFileError(name, "not_regular", "replaced while it was being opened")
        return fd, now.st_size

    def read_bytes(self, name: str, cap: int) -> bytes:
        """The whole of a regular file of at most ``cap`` bytes (a file that grows past it is refused too)."""
        fd, size = self.open_file(name, cap)
        try:
            chunks = []
            total = 0
            while True:
                chunk = _read(fd, name, min(max(size, 1 << 16), cap + 1 - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > cap:
                    raise RunFileError(name, "too_large", f"larger than {_size(cap)} (it grew while being read)")
            return b"".join(chunks)
        finally:
            os.close(fd)

    def sha256(self, name: str, cap: int = SCREEN_CAP) -> str:
        """SHA-256 hex of a regular file of at most ``cap`` bytes, read in blocks."""
        return self.digest(name, cap)[0]

    def digest(self, name: str, cap: int = SCREEN_CAP, head: int = 64) -> tuple[str, bytes]:
        """SHA-256 hex of a regular file of at most ``cap`` bytes, read in blocks, and its first ``head``
        bytes (a PNG's header, checked without a second read)."""
        fd, _size_now = self.open_file(name, cap)
        try:
            digest = hashlib.sha256()
            total = 0
            first = b""
            while chunk := _read(fd, name, _BLOCK):
                if total < head:
                    first += chunk[: head - total]
                total += len(chunk)
                if total > cap:
                    raise RunFileError(name, "too_large", f"larger than {_size(cap)} (it grew while being read)")
                digest.update(chunk)
            return digest.hexdigest(), first
        finally:
            os.close(fd)

    def read_json(self, name: str, cap: int = JSON_CAP) -> Any:
        """A JSON file, strictly decoded (UTF-8 everywhere, no trailing data, nesting within reason)."""
        return decode_json(name, self.read_bytes(name, cap))

    def lines(self, name: str, max_line: int = LINE_CAP) -> LineReader:
        """Stream a JSONL file; see ``LineReader``."""
        fd, _size_now = self.open_file(name, 1 << 62)  # streamed: only each line is capped
        return LineReader(fd, name, max_line)


class LineReader(FdOwner):
    """Iterates ``(line, status)`` over a JSONL file, one block at a time: ``line`` without its newline,
    ``status`` one of ``LINE_OK``, ``LINE_INCOMPLETE`` (the last line lacks its newline), ``LINE_TOO_LONG``
    (longer than the cap: ``line`` is empty, the rest up to the next newline is skipped) or ``LINE_BAD_UTF8``.
    Each block is decoded as UTF-8 once (C speed), so a line with a bad byte anywhere, in a key or in a value
    that a decoder would skip, is flagged. Iterating again starts over from the beginning."""

    def __init__(self, fd: int, name: str, max_line: int) -> None:
        self.fd = fd
        self.name = name
        self.max_line = max_line

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        for lines, marks in self.blocks():
            if marks is None:
                for line in lines:
                    yield line, LINE_OK
            else:
                for index, line in enumerate(lines):
                    yield line, marks.get(index, LINE_OK)

    def blocks(self) -> Iterator[tuple[list[bytes], dict[int, int] | None]]:
        """The same lines a block at a time, for loops that count every microsecond: ``(lines, marks)``,
        ``marks`` mapping the index of each line whose status is not ``LINE_OK`` to it (None if there is none)."""
        fd, cap = self.fd, self.max_line
        too_long: tuple[list[bytes], dict[int, int]] = ([b""], {0: LINE_TOO_LONG})
        offset = 0
        carry = b""
        skipping = False  # inside an over-long line, until its newline
        while True:
            # paced (a replay's background verification): a smaller block, and a wait while it is held
            chunk = _pread(fd, self.name, offset, _PACED_BLOCK if give_way() else _BLOCK)
            offset += len(chunk)
            if not chunk:
                if carry and not skipping:
                    yield ([carry], {0: LINE_INCOMPLETE}) if len(carry) <= cap else too_long
                return
            if skipping:
                cut = chunk.find(b"\n")
                if cut < 0:
                    continue
                chunk = chunk[cut + 1 :]
                skipping = False
            data = carry + chunk if carry else chunk
            end = data.rfind(b"\n") + 1
            if end == 0:
                if len(data) > cap:
                    yield too_long
                    carry, skipping = b"", True
                else:
                    carry = data
                continue
            body, carry = data[:end], data[end:]
            yield _block_lines(body, cap)
            if len(carry) > cap:
                yield too_long  # the rest of it is skipped up to its newline
                carry, skipping = b"", True


def _block_lines(body: bytes, cap: int) -> tuple[list[bytes], dict[int, int] | None]:
    """The complete lines of ``body`` (which ends with a newline) and the marks of the bad ones."""
    lines = body.split(b"\n")
    lines.pop()
    marks: dict[int, int] = {}
    start = 0
    while True:
        # one C-speed pass; after a bad byte, go on from the next line
        try:
            body[start:].decode("utf-8") if start else body.decode("utf-8")
            break
        except UnicodeDecodeError as exc:
            at = start + exc.start
            marks[body.count(b"\n", 0, at)] = LINE_BAD_UTF8
            start = body.find(b"\n", at) + 1
            if start == 0 or start >= len(body):
                break
    if len(body) > cap:
        for index, line in enumerate(lines):
            if len(line) > cap:
                lines[index] = b""
                marks[index] = LINE_TOO_LONG
    return lines, marks or None


def _pread(fd: int, name: str, offset: int, size: int = _BLOCK) -> bytes:
    try:
        return os.pread(fd, size, offset)
    except OSError as exc:
        raise _os_error(name, exc) from None


def _read(fd: int, name: str, n: int) -> bytes:
    try:
        return os.read(fd, n)
    except OSError as exc:
        raise _os_error(name, exc) from None


def _os_error(name: str, exc: OSError) -> RunFileError:
    if exc.errno == errno.ENOENT:
        return RunFileError(name, "missing", "does not exist")
    if exc.errno == errno.ELOOP:
        return RunFileError(name, "not_regular", "a symbolic link (refused: run directories hold no links)")
    if exc.errno == errno.ENOTDIR:
        return RunFileError(name, "not_regular", "not a directory")
    return RunFileError(name, "unreadable", f"cannot read it ({exc.strerror or exc})")


_json_decode = msgspec.json.decode


def decode_json(name: str, data: bytes) -> Any:
    """Strict JSON: the whole text must be UTF-8 (msgspec checks only the strings it keeps)."""
    try:
        data.decode("utf-8")
        return _json_decode(data)
    except UnicodeDecodeError as exc:
        raise RunFileError(name, "invalid", f"not valid UTF-8 (byte {exc.start})") from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise RunFileError(name, "invalid", f"not valid JSON ({exc})") from None


def read_json(run_dir: str | Path, name: str, cap: int = JSON_CAP) -> Any:
    """One JSON file of a run directory, read safely (see ``RunFolder``)."""
    with RunFolder.open(run_dir) as folder:
        return folder.read_json(name, cap)


# ------------------------------------------------------------------------------------------------
# A settings-like file given by name (a policy file, a tasks file): bounded, regular files only
# --------------------------------------------------------------------------------------------------
class FileProblem(Exception):
    """Why a named file could not be read (the caller says which file it was)."""


def read_small_file(path: Path, cap: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes. A FIFO or a device is refused before it is
    opened (opening may block or have effects), and again on the open descriptor, in case the name was
    swapped in between (O_NONBLOCK: a FIFO's open never waits); the file may grow while it is read: never
    more than ``cap`` + 1 bytes are read. ``what`` names the kind of file in the reason ("a policy file")."""
    too_large = f"too large ({what} is at most {cap} bytes)"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise FileProblem("cannot read it (not a regular file)")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise FileProblem(f"cannot read it ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileProblem("cannot read it (not a regular file)")
        if info.st_size > cap:
            raise FileProblem(too_large)
        data = bytearray()
        while len(data) <= cap:
            chunk = os.read(fd, cap + 1 - len(data))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        raise FileProblem(f"cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > cap:
        raise FileProblem(too_large)
    return bytes(data)
