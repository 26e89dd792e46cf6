"""Typed text sealed for its trip into a remote sandbox.

A step's request rides in an exec's command line (stdin would cost a round trip more), which a service
may log and the sandbox's other users may read. The text of a typing action goes sealed under a key that
reached the resident helper once, on the ``ready`` exec's stdin. Standard library only (the helper runs
on the image's Python): HMAC-SHA256 as the keystream and as the tag, encrypt-then-MAC, a key of each
derived from the shared one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Any

KEY_BYTES = 32
NONCE_BYTES = 16
TAG_BYTES = 16
MAX_SEALED = 1 << 20  # bytes of text a request may carry sealed


class SealError(ValueError):
    """Sealed text that does not open: malformed, or not sealed under this key (tampered with)."""


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def _derive(key: bytes, purpose: bytes) -> bytes:
    return hmac.new(key, b"cua-tui sealed text: " + purpose, hashlib.sha256).digest()


def _keystream(key: bytes, nonce: bytes, size: int) -> bytes:
    enc = _derive(key, b"encrypt")
    blocks = [
        hmac.new(enc, nonce + counter.to_bytes(8, "big"), hashlib.sha256).digest() for counter in range(-(-size // 32))
    ]
    return b"".join(blocks)[:size]


def _tag(key: bytes, nonce: bytes, data: bytes) -> bytes:
    return hmac.new(_derive(key, b"authenticate"), nonce + data, hashlib.sha256).digest()[:TAG_BYTES]


def seal(key: bytes, text: str) -> dict[str, str]:
    """``text`` sealed (a lone surrogate kept as its own code unit, as the rest of the project does)."""
    plain = text.encode("utf-8", "surrogatepass")
    nonce = secrets.token_bytes(NONCE_BYTES)
    data = bytes(a ^ b for a, b in zip(plain, _keystream(key, nonce, len(plain)), strict=True))
    return {
        "nonce": base64.b64encode(nonce).decode("ascii"),
        "data": base64.b64encode(data).decode("ascii"),
        "tag": base64.b64encode(_tag(key, nonce, data)).decode("ascii"),
    }


def unseal(key: bytes, sealed: Any) -> str:
    """The text, once its tag shows it was sealed under ``key`` and not changed since."""
    if not isinstance(sealed, dict) or not all(isinstance(sealed.get(k), str) for k in ("nonce", "data", "tag")):
        raise SealError("the sealed text is not an object of nonce, data and tag")
    if len(sealed["data"]) > 4 * MAX_SEALED // 3 + 4:
        raise SealError("the sealed text is too long")
    try:
        nonce, data, tag = (base64.b64decode(sealed[k], validate=True) for k in ("nonce", "data", "tag"))
    except (binascii.Error, ValueError):
        raise SealError("the sealed text is not base64") from None
    if len(nonce) != NONCE_BYTES or not hmac.compare_digest(tag, _tag(key, nonce, data)):
        raise SealError("the sealed text does not open under this run's key")
    plain = bytes(a ^ b for a, b in zip(data, _keystream(key, nonce, len(data)), strict=True))
    return plain.decode("utf-8", "surrogatepass")
