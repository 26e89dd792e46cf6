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

from .safeio import (
    LINE_BAD_UTF8,
    LINE_CAP,
    LINE_INCOMPLETE,
    LINE_TOO_LONG,
    SCREEN_CAP,
    LineReader,
    RunFileError,
    RunFolder,
    kind_of,
)
from .text import encodable, visible

GENESIS = "0" * 64
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
SEAL_CONTEXT = b"cua-tui seal v1"
CHECKPOINT_CONTEXT = b"cua-tui checkpoint v1"


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


CHECKPOINT_EVERY = 256  # a signed run signs its chain every 256 events, so a crash loses at most that much


def checkpoint_message(run_id: str, events: int, head: str) -> bytes:
    """What a checkpoint signs: the count of lines before it and the hash of the last of them."""
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
# Every read goes through safeio: the run directory is untrusted (links, FIFOs, huge files are refused,
# audit.jsonl is streamed with a per-line cap and checked as strict UTF-8).
_MAX_TRACKED = 200_000  # distinct screenshots, or actions awaiting an outcome: far beyond any real run
_ALGORITHMS = ("hmac-sha256", "ed25519")
_KEY_ID_RE = re.compile(r"^[0-9a-f]{16}$")


class _Envelope(msgspec.Struct):
    seq: Any = None
    run: Any = None
    kind: Any = None
    prev: Any = None
    sha256: Any = None  # screen
    turn: Any = None  # proposal, executing, outcome
    index: Any = None


class _Rare(msgspec.Struct):
    """Fields of the rare records (line 1, checkpoints), decoded apart: each field of the envelope costs
    time on every line."""

    signed: Any = msgspec.UNSET  # run_started: absent in logs written before runs recorded it
    events: Any = None  # checkpoint
    head: Any = None
    signature: Any = None


_env_decoder = msgspec.json.Decoder(_Envelope)
_rare_decoder = msgspec.json.Decoder(_Rare)
_BAD_RECORD = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


@dataclass
class VerifyReport:
    """The outcome of ``verify_run``. ``code``: 0 intact, 1 tampered (or, with a key, not vouched for by
    a signed seal), 2 unusable input.

    For an unsealed (interrupted) run, ``unknown_outcomes`` lists the (turn, index) of actions whose
    intent to execute is on record but whose outcome is not, and ``not_executed`` those proposed but never
    handed to the desktop. ``checkpoint``: the event count covered by the last signed checkpoint whose
    signature was checked. ``run_signed``: what run_started records (None when the log predates that)."""

    code: int
    summary: str
    events: int = 0
    head: str = GENESIS
    sealed: bool = False
    signed: bool = False
    signature_checked: bool = False
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    run_signed: bool | None = None
    checkpoint: int | None = None
    unknown_outcomes: list[tuple[int, int]] = field(default_factory=list)
    not_executed: list[tuple[int, int]] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.code == 0


class _Unusable(Exception):
    pass


def verify_run(
    run_dir: str | Path | RunFolder, key: AuditKey | None = None, *, check_screens: bool = True
) -> VerifyReport:
    """Check a run directory's chain, seal, signatures and screenshots. Never raises for bad input."""
    try:
        if isinstance(run_dir, RunFolder):
            return _verify(run_dir, key, check_screens)
        try:
            folder = RunFolder.open(run_dir)
        except RunFileError as exc:
            return VerifyReport(2, f"{run_dir}: not a run directory ({exc.detail})")
        with folder:
            return _verify(folder, key, check_screens)
    except _Unusable as exc:
        return VerifyReport(2, str(exc))
    except RunFileError as exc:  # a read the checks below did not expect to fail (an I/O error)
        return VerifyReport(2, f"{run_dir}: {exc}")


def _verify(folder: RunFolder, key: AuditKey | None, check_screens: bool) -> VerifyReport:
    run_dir = folder.path
    if folder.kind("audit.jsonl") is None:
        raise _Unusable(f"{run_dir}: no audit.jsonl (not a cua-tui run directory)")
    problems: list[str] = []
    notes: list[str] = []
    seal = _read_seal(folder, problems)
    try:
        reader = folder.lines("audit.jsonl")
    except RunFileError as exc:
        raise _Unusable(f"{run_dir}: audit.jsonl: {exc.detail}") from None
    with reader:
        walk = _walk(reader, seal, key, problems, notes, run_dir)
    count, expected_prev = walk.count, walk.head
    report = VerifyReport(0, "", events=count, head=expected_prev, run_signed=walk.run_signed)
    report.checkpoint = walk.checkpoint

    if not problems and seal is not None:
        report.sealed = True
        if count < seal["events"]:
            problems.append(f"truncated: the seal records {seal['events']} events, the log has {count}")
        elif count > seal["events"]:
            problems.append(f"line {seal['events'] + 1}: appended after the run was sealed at {seal['events']} events")
        elif expected_prev != seal["head"]:
            problems.append(f"line {count}: edited, or the seal's head altered (the line's hash is not the head)")
    if not problems and seal is not None:
        _check_seal_signature(seal, walk, key, report, problems, notes)
    if not problems and seal is not None:
        _check_actions_sealed(walk, problems)
    if not problems:
        _check_entries(folder, problems)
    if not problems and check_screens:
        _check_screens(folder, walk.screens, problems)
    report.problems, report.notes = problems, notes
    if problems:
        report.code = 1
        report.summary = f"TAMPERED: {problems[0]}"
        if walk.checkpoint is not None:  # checked before the walk stopped: that prefix is still vouched for
            notes.append(f"signed up to checkpoint at event {walk.checkpoint} of {count}")
        return report
    if seal is None:
        _report_interrupted(walk, report)
        if key is not None:
            report.code = 1
            report.summary = _unvouched(walk, key, count)
            return report
        if walk.run_signed:
            notes.insert(0, "signed run without a seal: truncation cannot be ruled out; check with --key")
        report.summary = (
            f"intact prefix, UNSEALED: {count} events verified; the run has no result.json "
            f"(interrupted), so truncation cannot be ruled out"
        )
        return report
    signed = (
        "signature verified"
        if report.signature_checked
        else "signed (signature not checked)"
        if report.signed
        else "unsigned"
    )
    report.summary = f"intact: {count} events, sealed, {signed}, head {expected_prev[:16]}…"
    return report


def _read_seal(folder: RunFolder, problems: list[str]) -> dict[str, Any] | None:
    """The seal from result.json; None (with a problem noted) when result.json is there but unusable."""
    if folder.kind("result.json") is None:
        return None
    try:
        result = folder.read_json("result.json")
    except RunFileError as exc:
        if exc.reason == "missing":  # removed between the two looks: an interrupted run
            return None
        if exc.reason == "invalid":
            problems.append("result.json: not valid JSON (edited or damaged)")
        elif exc.reason == "not_regular":
            problems.append(f"result.json: {exc.detail} (run directories hold only regular files)")
        else:
            raise _Unusable(f"{folder.path}: {exc}") from None
        return None
    seal = result.get("seal") if isinstance(result, dict) else None
    if not isinstance(seal, dict) or type(seal.get("events")) is not int or not isinstance(seal.get("head"), str):
        problems.append("result.json: the seal is missing or malformed")
        return None
    return seal


@dataclass
class _Walk:
    """What the chain walk learned besides the chain itself."""

    count: int = 0
    head: str = GENESIS
    run_id: str | None = None
    run_signed: bool | None = None  # run_started's "signed": None when the log predates it
    signer: tuple[str, str] | None = None  # (algorithm, key_id) from run_started
    checkpoint: int | None = None  # last checkpoint whose signature was checked
    screens: dict[str, int] = field(default_factory=dict)  # sha -> first line referencing it
    pending: dict[tuple[int, int], int] = field(default_factory=dict)  # proposed, no outcome: -> line
    executing: dict[tuple[int, int], int] = field(default_factory=dict)  # handed to the desktop: -> line


def _walk(
    reader: LineReader,
    seal: dict[str, Any] | None,
    key: AuditKey | None,
    problems: list[str],
    notes: list[str],
    run_dir: Path,
) -> _Walk:
    """Follow the chain line by line; stop at the first problem (appended to ``problems``)."""
    walk = _Walk()
    screens, pending, executing = walk.screens, walk.pending, walk.executing
    run_id = None
    expected_prev = GENESIS
    count = 0
    sealed_events = seal["events"] if seal is not None else -1
    sealed_head = seal["head"] if seal is not None else None
    check = _checker(key) if key is not None else None
    sha256 = hashlib.sha256
    decode = _env_decoder.decode
    number = 0
    for lines, marks in reader.blocks():
        base = number
        for line in lines:
            number += 1
            if count == sealed_events and expected_prev == sealed_head:
                # the sealed part is whole: anything after it, well-formed or not, was appended
                problems.append(f"line {number}: appended after the run was sealed at {count} events")
                break
            if marks is not None and (status := marks.get(number - base - 1)):
                if status == LINE_INCOMPLETE:
                    if seal is None and not problems:
                        notes.append(f"line {number}: incomplete last line (write interrupted); ignored")
                        break
                    problems.append(f"line {number}: incomplete line without a newline (truncated or edited)")
                elif status == LINE_BAD_UTF8:
                    problems.append(f"line {number}: not a valid JSON record (invalid UTF-8; edited)")
                else:
                    raise _Unusable(
                        f"{run_dir}: audit.jsonl line {number} is longer than {LINE_CAP >> 20} MiB: "
                        f"not an audit record; not checked"
                    )
                break
            digest = sha256(line).hexdigest()
            try:
                env = decode(line)
            except _BAD_RECORD:
                problems.append(f"line {number}: not a valid JSON record (edited)")
                break
            seq, prev, kind = env.seq, env.prev, env.kind
            if type(seq) is not int or type(prev) is not str or type(kind) is not str or type(env.run) is not str:
                problems.append(f"line {number}: missing seq, run, prev or kind (edited)")
                break
            if prev != expected_prev or seq != count:
                ctx = _context(reader, number, seq, prev, count)
                if not ctx.has_next and seal is not None:
                    ctx.next_prev = seal["head"]  # the seal links to the last line as a next line would
                problems.append(_explain(number, seq, prev, digest, count, expected_prev, ctx))
                break
            if run_id is None:
                run_id = env.run
                signed = _rare_decoder.decode(line).signed if kind == "run_started" else msgspec.UNSET
                if not _read_signed(signed, walk, number, problems):
                    break
                if key is not None and walk.signer is not None and walk.signer != (key.algorithm, key.key_id):
                    problems.append(
                        f"the signatures are not by this key: run_started names {walk.signer[0]} key {walk.signer[1]}, "
                        f"the key given is {key.algorithm} key {key.key_id} (wrong --key, or the log was re-signed)"
                    )
                    break
            elif env.run != run_id:
                how = "inserted" if _context(reader, number, seq, prev, count).next_prev == prev else "edited"
                problems.append(f"line {number}: {how} (it belongs to run {env.run!r}, not {run_id!r})")
                break
            if kind == "screen":
                sha = env.sha256
                if type(sha) is not str or not _SHA_RE.match(sha):
                    problems.append(f"line {number}: edited (a screen event without a valid sha256)")
                    break
                if sha not in screens:
                    if len(screens) >= _MAX_TRACKED:
                        raise _Unusable(f"{run_dir}: more than {_MAX_TRACKED:,} distinct screenshots: not checked")
                    screens[sha] = number
            elif kind in _ACTION_KINDS:
                turn, index = env.turn, env.index
                if type(turn) is not int or type(index) is not int:
                    article = "an" if kind[0] in "aeiou" else "a"
                    problems.append(
                        f"line {number}: edited ({article} {kind} record without an integer turn and index)"
                    )
                    break
                slot = (turn, index)
                if kind == "proposal":
                    if slot in pending:
                        problems.append(
                            f"line {number}: edited (a second proposal for {_action(slot)} before its outcome)"
                        )
                        break
                    if len(pending) >= _MAX_TRACKED:
                        raise _Unusable(f"{run_dir}: more than {_MAX_TRACKED:,} actions await an outcome: not checked")
                    pending[slot] = number
                elif kind == "executing":
                    if slot not in pending or slot in executing:
                        problems.append(f"line {number}: edited (executing {_action(slot)}, which awaits no execution)")
                        break
                    executing[slot] = number
                else:
                    if pending.pop(slot, None) is None:
                        problems.append(f"line {number}: edited (an outcome for {_action(slot)}, which awaits none)")
                        break
                    executing.pop(slot, None)
            elif kind == "checkpoint":
                rare = _rare_decoder.decode(line)
                problem = _check_checkpoint(rare, walk, count, expected_prev, run_id, check, number)
                if problem:
                    problems.append(problem)
                    break
            expected_prev = digest
            count += 1
        else:
            continue
        break  # a problem: the inner loop broke out
    walk.count, walk.head, walk.run_id = count, expected_prev, run_id
    return walk


_ACTION_KINDS = frozenset(("proposal", "executing", "outcome"))


def _action(slot: tuple[int, int]) -> str:
    return f"turn {slot[0]}, action {slot[1] + 1}"


def _read_signed(signed: Any, walk: _Walk, number: int, problems: list[str]) -> bool:
    """run_started's ``signed``: {"algorithm", "key_id"} or null. False (with a problem) if malformed."""
    if signed is msgspec.UNSET:
        return True
    if signed is None:
        walk.run_signed = False
        return True
    if (
        isinstance(signed, dict)
        and signed.get("algorithm") in _ALGORITHMS
        and isinstance(signed.get("key_id"), str)
        and _KEY_ID_RE.match(signed["key_id"])
    ):
        walk.run_signed = True
        walk.signer = (signed["algorithm"], signed["key_id"])
        return True
    problems.append(f"line {number}: edited (run_started's signed field is malformed)")
    return False


def _check_checkpoint(
    env: _Rare,
    walk: _Walk,
    count: int,
    expected_prev: str,
    run_id: str | None,
    check: Any,
    number: int,
) -> str | None:
    """A checkpoint fixes the count and head before it, signed like the seal; None when it holds."""
    if walk.signer is None:
        return f"line {number}: edited (a signed checkpoint in a run that run_started records as unsigned)"
    if env.events != count or type(env.events) is not int or env.head != expected_prev:
        return f"line {number}: edited (a checkpoint that does not match the chain before it)"
    sig = env.signature
    if (
        not isinstance(sig, dict)
        or (sig.get("algorithm"), sig.get("key_id")) != walk.signer
        or not isinstance(sig.get("value"), str)
    ):
        return f"line {number}: edited (a checkpoint without a signature by the run's key)"
    if check is not None:
        if not check(checkpoint_message(run_id or "", count, expected_prev), sig["value"]):
            return f"line {number}: the checkpoint's signature does not match: the chain was recomputed or edited"
        walk.checkpoint = count
    return None


def _checker(key: AuditKey) -> Any:
    """``key.check``, with an Ed25519 key parsed once (checkpoints check a signature every 256 events)."""
    if key.algorithm != "ed25519":
        return key.check
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization

    if b"PRIVATE KEY" in key.secret:
        public = serialization.load_pem_private_key(key.secret, password=None).public_key()  # type: ignore[union-attr]
    else:
        public = serialization.load_pem_public_key(key.secret)

    def check(message: bytes, signature: str) -> bool:
        try:
            public.verify(bytes.fromhex(signature), message)  # type: ignore[union-attr, call-arg]
        except (InvalidSignature, ValueError):
            return False
        return True

    return check


def _check_seal_signature(
    seal: dict[str, Any], walk: _Walk, key: AuditKey | None, report: VerifyReport, problems: list[str], notes: list[str]
) -> None:
    sig = seal.get("signature")
    report.signed = isinstance(sig, dict)
    if key is not None:
        if not report.signed:
            problems.append("the seal is not signed, but a key was given (signature removed?)")
        elif sig.get("algorithm") != key.algorithm or not isinstance(sig.get("value"), str):
            problems.append(f"the seal's signature is {sig.get('algorithm')!r}, the key is {key.algorithm}")
        elif not _checker(key)(seal_message(walk.run_id or "", seal["events"], seal["head"]), sig["value"]):
            problems.append("the seal's signature does not match: the chain was recomputed or the seal edited")
        else:
            report.signature_checked = True
        return
    if walk.run_signed and not report.signed:
        # Without the key this proves nothing either way (a forger can rewrite run_started too): say it loudly,
        # and leave the verdict to `verify --key`, which fails such a run.
        notes.append(
            "WARNING: the seal is not signed, but run_started says the run was signed (signature removed?); "
            "only `verify --key` can tell whether this log is authentic"
        )
    elif walk.run_signed is False and report.signed:
        problems.append("the seal is signed, but run_started says the run is unsigned (edited)")
    elif walk.signer is not None and (sig.get("algorithm"), sig.get("key_id")) != walk.signer:  # type: ignore[union-attr]
        problems.append("the seal's signature names another key than run_started (edited)")
    elif report.signed:
        notes.append("the seal is signed; pass --key to check the signature")


def _check_actions_sealed(walk: _Walk, problems: list[str]) -> None:
    """In a sealed run every proposal has exactly one outcome: the run ended and closed them all."""
    if walk.executing:
        slot, number = min(walk.executing.items(), key=lambda item: item[1])
        problems.append(f"line {number}: {_action(slot)} was handed to the desktop, but the sealed log has no outcome")
    elif walk.pending:
        slot, number = min(walk.pending.items(), key=lambda item: item[1])
        problems.append(f"line {number}: {_action(slot)} was proposed, but the sealed log has no outcome")


def _report_interrupted(walk: _Walk, report: VerifyReport) -> None:
    """Actions an interrupted run left open: executing recorded -> outcome unknown; else not executed.
    A log written before intent records existed (no ``signed`` in run_started) cannot tell them apart."""
    intents_recorded = walk.run_signed is not None
    for slot in sorted(walk.pending):
        if slot in walk.executing or not intents_recorded:
            report.unknown_outcomes.append(slot)
            what = "outcome unknown (interrupted)"
        else:
            report.not_executed.append(slot)
            what = "not executed (interrupted)"
        if len(report.notes) < 20:
            report.notes.append(f"{_action(slot)}: {what}")
    if len(walk.pending) > 20:
        report.notes.append(f"... and {len(walk.pending) - 20} more actions without an outcome")


def _unvouched(walk: _Walk, key: AuditKey, count: int) -> str:
    """Summary for a run without a seal checked against a key: nothing vouches for its end."""
    if not walk.run_signed:
        return (
            f"NOT VERIFIED: the run has no seal and is not signed (run_started records no key), so the "
            f"{key.algorithm} key cannot vouch for it; {count} events chain correctly"
        )
    covered = (
        f"signed up to checkpoint at event {walk.checkpoint} of {count}"
        if walk.checkpoint is not None
        else f"no signed checkpoint yet, so none of its {count} events is vouched for"
    )
    return f"NOT VERIFIED: signed run without a seal (interrupted, or cut short and result.json deleted); {covered}"


_RUN_FILES = frozenset(("run.json", "result.json", "transcript.jsonl", "sandbox-id.txt"))


def _check_entries(folder: RunFolder, problems: list[str]) -> None:
    """cua-tui writes only regular files and screens/ into a run directory: a link, FIFO, device or socket
    (where a replay or an export could be led outside the run) is an edit."""
    for name, mode in folder.scan():
        if stat.S_ISREG(mode) or name == "audit.jsonl" or (stat.S_ISDIR(mode) and name not in _RUN_FILES):
            continue
        problems.append(f"{visible(name, limit=80)}: {kind_of(mode)} (run directories hold only regular files)")
        return


def _check_screens(folder: RunFolder, screens: dict[str, int], problems: list[str]) -> None:
    if not screens:
        return
    try:
        store = folder.subdir("screens")
    except RunFileError as exc:
        sha, number = next(iter(screens.items()))
        if exc.reason == "missing":
            problems.append(f"line {number}: screenshot {sha[:12]}… is missing from screens/")
        elif exc.reason == "not_regular":
            problems.append(f"screens/: {exc.detail} (run directories hold no links)")
        else:
            raise _Unusable(f"{folder.path}: {exc}") from None
        return
    with store:
        for sha, number in screens.items():
            try:
                actual = store.sha256(f"{sha}.png", SCREEN_CAP)
            except RunFileError as exc:
                if exc.reason == "missing":
                    problems.append(f"line {number}: screenshot {sha[:12]}… is missing from screens/")
                elif exc.reason == "not_regular":
                    problems.append(f"line {number}: screenshot {sha[:12]}… is {exc.detail} (edited)")
                else:
                    raise _Unusable(f"{folder.path}: line {number}: screenshot {exc}") from None
                return
            if actual != sha:
                problems.append(f"line {number}: screenshot {sha[:12]}… was altered (its hash differs)")
                return


@dataclass
class _Context:
    """What the lines around a broken link say, to tell inserts, swaps, deletions and edits apart.
    Gathered by reading the log again (only when a link is broken), so the walk keeps no per-line state."""

    prev_line: int | None = None  # the earlier line whose hash is the broken line's prev
    seq_line: int | None = None  # the earlier line with the broken line's seq
    seq_later: bool = False  # a later line carries the seq that was expected here
    has_next: bool = False
    next_prev: Any = None
    next_hash: str | None = None


_CONTEXT_AFTER = 100_000  # lines after a broken link searched for the seq it lacks


def _context(reader: LineReader, number: int, seq: int, prev: str, expected_seq: int) -> _Context:
    ctx = _Context()
    decode = _env_decoder.decode
    for n, (line, status) in enumerate(reader, 1):
        if n < number:
            if hashlib.sha256(line).hexdigest() == prev:
                ctx.prev_line = n
            try:
                if decode(line).seq == seq:
                    ctx.seq_line = n
            except _BAD_RECORD:
                pass
            continue
        if n == number:
            continue
        ctx.has_next = True
        if status == LINE_TOO_LONG or n > number + _CONTEXT_AFTER:
            break  # a reordering is told from a deletion nearby; a huge tail is not read to its end
        if n == number + 1:
            ctx.next_hash = hashlib.sha256(line).hexdigest()
        try:
            env = decode(line)
        except _BAD_RECORD:
            continue
        if n == number + 1:
            ctx.next_prev = env.prev
        if type(env.seq) is int and env.seq == expected_seq:
            ctx.seq_later = True
    return ctx


def _explain(
    number: int, seq: int, prev: str, digest: str, expected_seq: int, expected_prev: str, ctx: _Context
) -> str:
    """Name the first bad line and the likely tampering where a chain link does not hold."""
    next_prev, next_hash = ctx.next_prev, ctx.next_hash
    if next_prev == expected_prev and ctx.seq_later and prev != next_hash:  # a swap also links past
        return f"line {number}: inserted (the next line links past it to line {number - 1})"
    if seq == expected_seq:
        if ctx.prev_line is not None:
            where = ctx.prev_line
            return f"line {number}: its prev points to line {where}, not to the line before it (lines reordered)"
        if number == 1:
            return "line 1: edited (its prev is not the genesis hash), or lines were deleted from the start"
        if next_prev is not None and next_prev != digest:  # the next link is broken too: this line changed
            return f"line {number}: edited (its prev does not match line {number - 1})"
        return f"line {number - 1}: edited (its hash no longer matches the prev recorded on line {number})"
    if seq > expected_seq:
        if prev == expected_prev:
            return f"line {number}: edited (seq {seq} where {expected_seq} was expected)"
        if ctx.seq_later:
            return f"line {number}: seq {seq} where {expected_seq} was expected (lines reordered)"
        missing = seq - expected_seq
        what = "line" if missing == 1 else "lines"
        return f"line {number}: seq {seq} where {expected_seq} was expected ({missing} {what} deleted before it)"
    if ctx.seq_line is not None and prev == expected_prev:
        return f"line {number}: edited (seq {seq} repeats line {ctx.seq_line})"
    links_to = 0 if prev == GENESIS else ctx.prev_line
    if ctx.seq_line is not None and (links_to == ctx.seq_line - 1 or prev == expected_prev):
        return f"line {number - 1}: inserted (line {number} repeats its seq {seq} and links past it)"
    if ctx.seq_line is not None:
        return f"line {number}: seq {seq} repeats line {ctx.seq_line} (lines reordered or inserted)"
    return f"line {number}: seq {seq} where {expected_seq} was expected (lines reordered)"
