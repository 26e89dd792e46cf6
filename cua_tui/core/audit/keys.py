"""Audit keys: HMAC-SHA256 secrets and Ed25519 PEM keys, the checks on key files, and what a seal or a
checkpoint signs.

A key lives outside the run directory; a signing key must be private to its owner, or a sandbox user,
another run or another user could read it and forge seals.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import AuditKeyError

SEAL_CONTEXT = b"cua-tui seal v1"
CHECKPOINT_CONTEXT = b"cua-tui checkpoint v1"
ALGORITHMS = ("hmac-sha256", "ed25519")
MAX_KEY_BYTES = 64 * 1024

Checker = Callable[[bytes, str], bool]


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
            raise AuditKeyError(f"audit key {path}: cannot read it ({exc.strerror or exc})") from None
        if b"-----BEGIN" in data:
            key = cls._load_pem(path, data)
        elif len(data.strip()) < 16:
            raise AuditKeyError(f"audit key {path}: an HMAC key needs at least 16 bytes")
        else:
            secret = data.strip()
            key = cls("hmac-sha256", secret, hashlib.sha256(b"key-id" + secret).hexdigest()[:16])
        if for_signing and key.can_sign:
            # a public key may be readable by anyone; a secret may not
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
                    raise AuditKeyError(f"audit key {path}: only Ed25519 private keys are supported")
                public = key.public_key()
            else:
                loaded = serialization.load_pem_public_key(data)
                if not isinstance(loaded, ed25519.Ed25519PublicKey):
                    raise AuditKeyError(f"audit key {path}: only Ed25519 public keys are supported")
                public = loaded
        except AuditKeyError:
            raise
        except (ValueError, TypeError) as exc:
            raise AuditKeyError(f"audit key {path}: not a usable PEM key ({exc})") from None
        raw_public = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls("ed25519", data, hashlib.sha256(raw_public).hexdigest()[:16])

    @property
    def can_sign(self) -> bool:
        """An HMAC secret or an Ed25519 private key; a public key only checks."""
        return self.algorithm == "hmac-sha256" or b"PRIVATE KEY" in self.secret

    def sign(self, message: bytes) -> str:
        """The signature of ``message`` as hex."""
        if self.algorithm == "hmac-sha256":
            return hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        signature: bytes = self._private().sign(message)
        return signature.hex()

    def _private(self) -> Any:
        # Loaded once: a signed run signs a checkpoint every CHECKPOINT_EVERY events.
        cached = _PRIVATE_KEYS.get(self.secret)
        if cached is None:
            from cryptography.hazmat.primitives import serialization

            cached = _PRIVATE_KEYS[self.secret] = serialization.load_pem_private_key(self.secret, password=None)
        return cached

    def check(self, message: bytes, signature: str) -> bool:
        """Whether ``signature`` (hex) signs ``message`` with this key."""
        if self.algorithm == "hmac-sha256":
            return signature.isascii() and hmac.compare_digest(self.sign(message), signature)
        return _ed25519_checker(self.secret)(message, signature)

    def checker(self) -> Checker:
        """``check``, with an Ed25519 key parsed once (a verifier checks a checkpoint every 256 events)."""
        if self.algorithm != "ed25519":
            return self.check
        return _ed25519_checker(self.secret)


_PRIVATE_KEYS: dict[bytes, Any] = {}


def _ed25519_checker(pem: bytes) -> Checker:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization

    if b"PRIVATE KEY" in pem:
        public = serialization.load_pem_private_key(pem, password=None).public_key()
    else:
        public = serialization.load_pem_public_key(pem)

    def check(message: bytes, signature: str) -> bool:
        try:
            public.verify(bytes.fromhex(signature), message)  # type: ignore[union-attr, call-arg]
        except (InvalidSignature, ValueError):
            return False
        return True

    return check


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
        raise AuditKeyError(
            f"audit key {path}: readable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run `chmod 600 {path}` and keep it outside the runs directory"
        )
    if info.st_uid != os.getuid():
        raise AuditKeyError(f"audit key {path}: owned by uid {info.st_uid}, not by you (uid {os.getuid()})")


def seal_message(run_id: str, events: int, head: str) -> bytes:
    """What a seal signs: the run, its event count and the hash of its last line."""
    return b"\n".join([SEAL_CONTEXT, run_id.encode(), str(events).encode(), head.encode()])


def checkpoint_message(run_id: str, events: int, head: str) -> bytes:
    """What a checkpoint signs: the count of lines before it and the hash of the last of them."""
    return b"\n".join([CHECKPOINT_CONTEXT, run_id.encode(), str(events).encode(), head.encode()])


def signature(key: AuditKey, message: bytes) -> dict[str, str]:
    """The ``signature`` object of a seal or a checkpoint."""
    return {"algorithm": key.algorithm, "key_id": key.key_id, "value": key.sign(message)}
