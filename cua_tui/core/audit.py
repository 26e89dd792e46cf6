"""Hash-chained JSONL audit log: writer, seal and signature, and an independent verifier.

Line n+1's ``prev`` is the SHA-256 hex of the exact bytes of line n (without its newline); line 0's is
64 zeros. Lines are flushed and fsynced as written. The seal in result.json fixes the event count and
the head hash, so truncation is detected; a key kept outside the run directory signs the seal (HMAC-SHA256
with a secret file, or Ed25519 with a PEM key), so a chain recomputed after an edit is detected too.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from .text import encodable

GENESIS = "0" * 64
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
SEAL_CONTEXT = b"cua-tui seal v1"


class AuditClosed(RuntimeError):
    """An append after the log was sealed."""


class KeyError_(ValueError):
    """An audit key that cannot be used (unreadable, wrong format)."""


# ---------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditKey:
    """A signing or verifying key. HMAC: any file of >= 16 bytes that is not a PEM key. Ed25519: PEM."""

    algorithm: str  # "hmac-sha256" | "ed25519"
    secret: bytes = field(repr=False)
    key_id: str = ""

    @classmethod
    def load(cls, path: str | Path, *, for_signing: bool = False) -> AuditKey:
        """Read a key file (a regular file of at most 64 KiB). ``for_signing``: the file holds the secret
        that makes seals trustworthy, so it must be private to this user (no group or other access,
        owned by us): a sandbox user, another run or another user could otherwise read it and forge."""
        path = Path(path)
        try:
            data = _read_key_file(path)
        except OSError as exc:
            raise KeyError_(f"audit key {path}: cannot read it ({exc.strerror or exc})") from None
        if b"-----BEGIN" in data:
            key = cls._load_pem(path, data)
        elif len(data.strip()) < 16:
            raise KeyError_(f"audit key {path}: an HMAC key needs at least 16 bytes")
        else:
            secret = data.strip()
            key = cls("hmac-sha256", secret, hashlib.sha256(b"key-id" + secret).hexdigest()[:16])
        if for_signing and key.can_sign:  # a public key may be readable by anyone; a secret may not
            _check_private(path)
        return key

    @classmethod
    def _load_pem(cls, path: Path, data: bytes) -> AuditKey:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519

        try:
            if b"PRIVATE KEY" in data:
                key = serialization.load_pem_private_key(data, password=None)
                if not isinstance(key, ed25519.Ed25519PrivateKey):
                    raise KeyError_(f"audit key {path}: only Ed25519 private keys are supported")
                public = key.public_key()
            else:
                public = serialization.load_pem_public_key(data)
                if not isinstance(public, ed25519.Ed25519PublicKey):
                    raise KeyError_(f"audit key {path}: only Ed25519 public keys are supported")
        except KeyError_:
            raise
        except (ValueError, TypeError) as exc:
            raise KeyError_(f"audit key {path}: not a usable PEM key ({exc})") from None
        raw_public = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls("ed25519", data, hashlib.sha256(raw_public).hexdigest()[:16])

    @property
    def can_sign(self) -> bool:
        return self.algorithm == "hmac-sha256" or b"PRIVATE KEY" in self.secret

    def sign(self, message: bytes) -> str:
        if self.algorithm == "hmac-sha256":
            return hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        return self._private().sign(message).hex()

    def _private(self) -> Any:
        # Loaded once: a signed run signs a checkpoint every CHECKPOINT_EVERY events.
        cached = _PRIVATE_KEYS.get(self.secret)
        if cached is None:
            from cryptography.hazmat.primitives import serialization

            cached = _PRIVATE_KEYS[self.secret] = serialization.load_pem_private_key(self.secret, password=None)
        return cached

    def check(self, message: bytes, signature: str) -> bool:
        if self.algorithm == "hmac-sha256":
            return signature.isascii() and hmac.compare_digest(self.sign(message), signature)
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization

        if b"PRIVATE KEY" in self.secret:
            public = serialization.load_pem_private_key(self.secret, password=None).public_key()  # type: ignore[union-attr]
        else:
            public = serialization.load_pem_public_key(self.secret)
        try:
            public.verify(bytes.fromhex(signature), message)  # type: ignore[union-attr, call-arg]
        except (InvalidSignature, ValueError):
            return False
        return True


_PRIVATE_KEYS: dict[bytes, Any] = {}
MAX_KEY_BYTES = 64 * 1024


def _read_key_file(path: Path) -> bytes:
    """A bounded read of a regular file: a FIFO, a device or a huge file is refused, never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_size > MAX_KEY_BYTES:
            raise OSError(errno.EFBIG, f"larger than {MAX_KEY_BYTES // 1024} KiB: not a key")
        return os.read(fd, MAX_KEY_BYTES + 1)[:MAX_KEY_BYTES]
    finally:
        os.close(fd)


def _check_private(path: Path) -> None:
    info = path.stat()
    if info.st_mode & 0o077:
        raise KeyError_(
            f"audit key {path}: readable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run `chmod 600 {path}` and keep it outside the runs directory"
        )
    if info.st_uid != os.getuid():
        raise KeyError_(f"audit key {path}: owned by uid {info.st_uid}, not by you (uid {os.getuid()})")


def seal_message(run_id: str, events: int, head: str) -> bytes:
    return b"\n".join([SEAL_CONTEXT, run_id.encode(), str(events).encode(), head.encode()])


CHECKPOINT_CONTEXT = b"cua-tui checkpoint v1"
CHECKPOINT_EVERY = 256  # a signed run signs its chain every 256 events, so a crash loses at most that much


def checkpoint_message(run_id: str, events: int, head: str) -> bytes:
    return b"\n".join([CHECKPOINT_CONTEXT, run_id.encode(), str(events).encode(), head.encode()])


# ---------------------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------------------
class AuditWriteError(OSError):
    """A record could not be written (disk full, I/O error). The file is cut back to its last whole line,
    so what is on disk stays a valid chain; the caller must stop executing (fail closed)."""


class AuditWriter:
    """Appends chained records. Thread-safe; every line is flushed and (by default) fsynced.

    With a signing ``key``, a ``checkpoint`` record signing the chain so far is appended every
    ``CHECKPOINT_EVERY`` events, so a run whose controller dies keeps a signed prefix.
    """

    def __init__(
        self,
        path: str | Path,
        run_id: str,
        *,
        fsync: bool = True,
        clock: Any = time.time,
        key: AuditKey | None = None,
        checkpoint_every: int = CHECKPOINT_EVERY,
    ) -> None:
        self.path = Path(path)
        self.run_id = run_id
        self.fsync = fsync
        self.key = key
        self.checkpoint_every = checkpoint_every
        self._clock = clock
        self._lock = threading.Lock()
        self._fh = open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open for the run's lifetime
        self._size = self._fh.tell()
        self.seq = 0
        self.head = GENESIS
        self.closed = False

    def append(self, kind: str, payload: dict[str, Any]) -> tuple[int, str]:
        """Write one record; return (seq, sha256 of the line). Envelope keys in payload are refused.

        Raises AuditWriteError when the line cannot be written whole."""
        with self._lock:
            if self.closed:
                raise AuditClosed("the audit log is sealed")
            seq, digest = self._write(kind, payload)
            if self.key is not None and self.checkpoint_every and self.seq % self.checkpoint_every == 0:
                self._write(
                    "checkpoint",
                    {
                        "events": self.seq,
                        "head": self.head,
                        "signature": _signature(self.key, checkpoint_message(self.run_id, self.seq, self.head)),
                    },
                )
            return seq, digest

    def _write(self, kind: str, payload: dict[str, Any]) -> tuple[int, str]:
        record = {"seq": self.seq, "ts": round(self._clock(), 6), "run": self.run_id, "kind": kind, "prev": self.head}
        for key, value in payload.items():
            if key in record:
                raise ValueError(f"payload key {key!r} collides with the audit envelope")
            record[key] = value
        line = encode_record(record)
        try:
            write_all(self._fh, line + b"\n")
            if self.fsync:
                os.fsync(self._fh.fileno())
        except OSError as exc:
            # Cut a partly written line off, so the file on disk stays a whole chain that verifies.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fh.fileno(), self._size)
            raise AuditWriteError(exc.errno, f"could not write audit.jsonl: {exc.strerror or exc}") from None
        self._size += len(line) + 1
        digest = hashlib.sha256(line).hexdigest()
        self.head = digest
        self.seq += 1
        return self.seq - 1, digest

    def seal(self, key: AuditKey | None = None) -> dict[str, Any]:
        """Close the log and return the seal for result.json (the seal covers the lines written whole)."""
        key = key or self.key
        with self._lock:
            if not self.closed:
                self.closed = True
                try:
                    os.fsync(self._fh.fileno())
                finally:
                    self._fh.close()
            seal: dict[str, Any] = {"events": self.seq, "head": self.head}
            if key is not None:
                seal["signature"] = _signature(key, seal_message(self.run_id, self.seq, self.head))
            return seal

    def close(self) -> None:
        with self._lock:
            if not self.closed:
                self.closed = True
                self._fh.close()


def write_all(fh: Any, data: bytes) -> None:
    """An unbuffered write may be short (a nearly full disk): write the rest, or fail."""
    view = memoryview(data)
    while view:
        written = fh.write(view)
        if not written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _signature(key: AuditKey, message: bytes) -> dict[str, str]:
    return {"algorithm": key.algorithm, "key_id": key.key_id, "value": key.sign(message)}


_encoder = msgspec.json.Encoder()


def encode_record(record: dict[str, Any]) -> bytes:
    """JSON bytes of a record. Text that UTF-8 cannot carry (lone surrogates from a hostile model reply or
    script) is made encodable rather than failing the run: the log records what it can, literally."""
    try:
        return _encoder.encode(record)
    except UnicodeEncodeError:
        return _encoder.encode(_encodable(record))


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------------
# Verifier
# ---------------------------------------------------------------------------------------------------
class _Envelope(msgspec.Struct):
    seq: Any = None
    run: Any = None
    kind: Any = None
    prev: Any = None
    sha256: Any = None


_env_decoder = msgspec.json.Decoder(_Envelope)


@dataclass
class VerifyReport:
    """The outcome of ``verify_run``. ``code``: 0 intact, 1 tampered, 2 unusable input."""

    code: int
    summary: str
    events: int = 0
    head: str = GENESIS
    sealed: bool = False
    signed: bool = False
    signature_checked: bool = False
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.code == 0


class _Unusable(Exception):
    pass


def _split_lines(data: bytes) -> list[tuple[bytes, bool]]:
    """(line without newline, complete?) for every line; a last line without newline is incomplete."""
    parts = data.split(b"\n")
    tail = parts.pop()  # b"" when the file ends with a newline
    lines = [(part, True) for part in parts]
    if tail:
        lines.append((tail, False))
    return lines


def _index(lines: list[tuple[bytes, bool]]) -> tuple[dict[str, int], dict[int, int]]:
    """For the lines before a break: hash -> line number and seq -> line number (to name the tampering)."""
    hashes: dict[str, int] = {}
    seqs: dict[int, int] = {}
    for number, (line, _complete) in enumerate(lines, 1):
        hashes[hashlib.sha256(line).hexdigest()] = number
        seq = _env_decoder.decode(line).seq
        if type(seq) is int:
            seqs[seq] = number
    return hashes, seqs


def verify_run(run_dir: str | Path, key: AuditKey | None = None, *, check_screens: bool = True) -> VerifyReport:
    """Check a run directory's chain, seal, signature and screenshots. Never raises for bad input."""
    try:
        return _verify(Path(run_dir), key, check_screens)
    except _Unusable as exc:
        return VerifyReport(2, str(exc))


def _verify(run_dir: Path, key: AuditKey | None, check_screens: bool) -> VerifyReport:
    if not run_dir.is_dir():
        raise _Unusable(f"{run_dir}: not a run directory")
    audit = run_dir / "audit.jsonl"
    if not audit.is_file():
        raise _Unusable(f"{run_dir}: no audit.jsonl (not a cua-tui run directory)")
    result_path = run_dir / "result.json"
    seal = None
    problems: list[str] = []
    notes: list[str] = []
    if result_path.exists():
        try:
            result = msgspec.json.decode(result_path.read_bytes())
            seal = result.get("seal") if isinstance(result, dict) else None
            if (
                not isinstance(seal, dict)
                or not isinstance(seal.get("events"), int)
                or not isinstance(seal.get("head"), str)
            ):
                problems.append("result.json: the seal is missing or malformed")
                seal = None
        except (msgspec.DecodeError, OSError, UnicodeDecodeError):
            problems.append("result.json: not valid JSON (edited or damaged)")

    lines = _split_lines(audit.read_bytes())
    run_id = None
    expected_prev = GENESIS
    screens: dict[str, int] = {}
    count = 0
    sealed_events = seal["events"] if seal is not None else -1
    sha256 = hashlib.sha256
    decode = _env_decoder.decode
    for number, (line, complete) in enumerate(lines, 1):
        if count == sealed_events and expected_prev == seal["head"]:  # type: ignore[index]
            # the sealed part is whole: anything after it, well-formed or not, was appended
            problems.append(f"line {number}: appended after the run was sealed at {count} events")
            break
        if not complete:
            if seal is None and not problems:
                notes.append(f"line {number}: incomplete last line (write interrupted); ignored")
                break
            problems.append(f"line {number}: incomplete line without a newline (truncated or edited)")
            break
        digest = sha256(line).hexdigest()
        try:
            env = decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            problems.append(f"line {number}: not a valid JSON record (edited)")
            break
        seq, prev = env.seq, env.prev
        if type(seq) is not int or type(prev) is not str or type(env.kind) is not str or type(env.run) is not str:
            problems.append(f"line {number}: missing seq, run, prev or kind (edited)")
            break
        if prev != expected_prev or seq != count:
            hashes, seqs = _index(lines[: number - 1])
            later, next_prev, next_hash = _later_seqs(lines[number:])
            if number == len(lines) and seal is not None:
                next_prev = seal["head"]  # the seal links to the last line as a next line would
            problems.append(
                _explain(number, seq, prev, digest, count, expected_prev, hashes, seqs, later, next_prev, next_hash)
            )
            break
        if run_id is None:
            run_id = env.run
        elif env.run != run_id:
            _, next_prev, _ = _later_seqs(lines[number:])
            how = "inserted" if next_prev == prev else "edited"
            problems.append(f"line {number}: {how} (it belongs to run {env.run!r}, not {run_id!r})")
            break
        if env.kind == "screen":
            sha = env.sha256
            if type(sha) is not str or not _SHA_RE.match(sha):
                problems.append(f"line {number}: edited (a screen event without a valid sha256)")
                break
            screens.setdefault(sha, number)
        expected_prev = digest
        count += 1
    report = VerifyReport(0, "", events=count, head=expected_prev)

    if not problems and seal is not None:
        report.sealed = True
        if count < seal["events"]:
            problems.append(f"truncated: the seal records {seal['events']} events, the log has {count}")
        elif count > seal["events"]:
            problems.append(f"line {seal['events'] + 1}: appended after the run was sealed at {seal['events']} events")
        elif expected_prev != seal["head"]:
            problems.append(f"line {count}: edited, or the seal's head altered (the line's hash is not the head)")
    if not problems and seal is not None:
        sig = seal.get("signature")
        report.signed = isinstance(sig, dict)
        if key is not None:
            if not report.signed:
                problems.append("the seal is not signed, but a key was given (signature removed?)")
            elif sig.get("algorithm") != key.algorithm or not isinstance(sig.get("value"), str):
                problems.append(f"the seal's signature is {sig.get('algorithm')!r}, the key is {key.algorithm}")
            elif not key.check(seal_message(run_id or "", seal["events"], seal["head"]), sig["value"]):
                problems.append("the seal's signature does not match: the chain was recomputed or the seal edited")
            else:
                report.signature_checked = True
        elif report.signed:
            notes.append("the seal is signed; pass --key to check the signature")
    if not problems and check_screens:
        for sha, number in screens.items():
            png = run_dir / "screens" / f"{sha}.png"
            if not png.is_file():
                problems.append(f"line {number}: screenshot {sha[:12]}… is missing from screens/")
                break
            if hashlib.sha256(png.read_bytes()).hexdigest() != sha:
                problems.append(f"line {number}: screenshot {sha[:12]}… was altered (its hash differs)")
                break
    report.problems, report.notes = problems, notes
    if problems:
        report.code = 1
        report.summary = f"TAMPERED: {problems[0]}"
    elif seal is None:
        report.summary = (
            f"intact prefix, UNSEALED: {count} events verified; the run has no result.json "
            f"(interrupted), so truncation cannot be ruled out"
        )
    else:
        signed = (
            "signature verified"
            if report.signature_checked
            else "signed (signature not checked)"
            if report.signed
            else "unsigned"
        )
        report.summary = f"intact: {count} events, sealed, {signed}, head {expected_prev[:16]}…"
    return report


def _later_seqs(rest: list[tuple[bytes, bool]]) -> tuple[set[int], Any, str | None]:
    """The seqs of the lines after a break, and the prev and hash of the next line (to tell inserts,
    swaps and edits apart)."""
    out = set()
    next_prev = None
    next_hash = hashlib.sha256(rest[0][0]).hexdigest() if rest else None
    for i, (line, _complete) in enumerate(rest):
        try:
            env = _env_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if i == 0:
            next_prev = env.prev
        if type(env.seq) is int:
            out.add(env.seq)
    return out, next_prev, next_hash


def _explain(
    number: int,
    seq: int,
    prev: str,
    digest: str,
    expected_seq: int,
    expected_prev: str,
    hashes: dict[str, int],
    seqs: dict[int, int],
    later: set[int],
    next_prev: Any,
    next_hash: str | None,
) -> str:
    """Name the first bad line and the likely tampering where a chain link does not hold."""
    if next_prev == expected_prev and expected_seq in later and prev != next_hash:  # a swap also links past
        return f"line {number}: inserted (the next line links past it to line {number - 1})"
    if seq == expected_seq:
        if prev in hashes:
            return f"line {number}: its prev points to line {hashes[prev]}, not to the line before it (lines reordered)"
        if number == 1:
            return "line 1: edited (its prev is not the genesis hash), or lines were deleted from the start"
        if next_prev is not None and next_prev != digest:  # the next link is broken too: this line changed
            return f"line {number}: edited (its prev does not match line {number - 1})"
        return f"line {number - 1}: edited (its hash no longer matches the prev recorded on line {number})"
    if seq > expected_seq:
        if prev == expected_prev:
            return f"line {number}: edited (seq {seq} where {expected_seq} was expected)"
        if expected_seq in later:
            return f"line {number}: seq {seq} where {expected_seq} was expected (lines reordered)"
        missing = seq - expected_seq
        what = "line" if missing == 1 else "lines"
        return f"line {number}: seq {seq} where {expected_seq} was expected ({missing} {what} deleted before it)"
    if seq in seqs and prev == expected_prev:
        return f"line {number}: edited (seq {seq} repeats line {seqs[seq]})"
    links_to = 0 if prev == GENESIS else hashes.get(prev)
    if seq in seqs and (links_to == seqs[seq] - 1 or prev == expected_prev):
        return f"line {number - 1}: inserted (line {number} repeats its seq {seq} and links past it)"
    if seq in seqs:
        return f"line {number}: seq {seq} repeats line {seqs[seq]} (lines reordered or inserted)"
    return f"line {number}: seq {seq} where {expected_seq} was expected (lines reordered)"
