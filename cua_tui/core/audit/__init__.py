"""Hash-chained JSONL audit log: keys, the chained writer with its seal and signature, and an independent,
typed verifier.

Line n+1's ``prev`` is the SHA-256 hex of the exact bytes of line n (without its newline); line 0's is
64 zeros. Lines are flushed and fsynced as written. The seal in result.json fixes the event count and
the head hash, so truncation is detected; a key kept outside the run directory signs the seal (HMAC-SHA256
with a secret file, or Ed25519 with a PEM key), so a chain recomputed after an edit is detected too.

Modules: :mod:`.keys` (AuditKey, key files, what seals and checkpoints sign), :mod:`.chain` (the line
format), :mod:`.writer` (AuditWriter), :mod:`.verify` (verify_run, VerifyReport) with its chain walk
(:mod:`.walk`, :mod:`.breaks`) and typed results (:mod:`.findings`), :mod:`.errors` (the exceptions).
"""

from __future__ import annotations

from .chain import GENESIS, encode_record
from .errors import AuditClosed, AuditError, AuditKeyError, AuditWriteError
from .findings import Finding, FindingKind, VerifyExit
from .keys import CHECKPOINT_CONTEXT, MAX_KEY_BYTES, SEAL_CONTEXT, AuditKey, checkpoint_message, seal_message
from .verify import VerifyReport, verify_run
from .writer import CHECKPOINT_EVERY, AuditWriter, write_all

__all__ = [
    "CHECKPOINT_CONTEXT",
    "CHECKPOINT_EVERY",
    "GENESIS",
    "MAX_KEY_BYTES",
    "SEAL_CONTEXT",
    "AuditClosed",
    "AuditError",
    "AuditKey",
    "AuditKeyError",
    "AuditWriteError",
    "AuditWriter",
    "Finding",
    "FindingKind",
    "VerifyExit",
    "VerifyReport",
    "checkpoint_message",
    "encode_record",
    "seal_message",
    "verify_run",
    "write_all",
]
