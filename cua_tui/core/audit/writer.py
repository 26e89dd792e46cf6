"""The chained JSONL writer: every line flushed and (by default) fsynced, signed checkpoints, the seal."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from .chain import GENESIS, encode_record
from .errors import AuditClosed, AuditWriteError
from .keys import AuditKey, checkpoint_message, seal_message, signature

# a signed run signs its chain every 256 events, so a crash loses at most that much
CHECKPOINT_EVERY = 256


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
    ) -> None:
        self.path = Path(path)
        self.run_id = run_id
        self.fsync = fsync
        self.key = key
        self._clock = clock
        self._lock = threading.Lock()
        self._fh = open(self.path, "ab", buffering=0)  # noqa: SIM115 - kept open for the run's lifetime
        self._size = self._fh.tell()
        self.seq = 0
        self.head = GENESIS
        self.last_ts = 0.0  # the ts of the last line written (the listeners get it with the event)
        self.closed = False

    def append(self, kind: str, payload: dict[str, Any]) -> tuple[int, str]:
        """Write one record; return (seq, sha256 of the line). Envelope keys in payload are refused.

        Raises AuditWriteError when the line cannot be written whole."""
        with self._lock:
            if self.closed:
                raise AuditClosed("the audit log is sealed")
            seq, digest = self._write(kind, payload)
            if self.key is not None and self.seq % CHECKPOINT_EVERY == 0:
                self._write(
                    "checkpoint",
                    {
                        "events": self.seq,
                        "head": self.head,
                        "signature": signature(self.key, checkpoint_message(self.run_id, self.seq, self.head)),
                    },
                )
            return seq, digest

    def _write(self, kind: str, payload: dict[str, Any]) -> tuple[int, str]:
        self.last_ts = round(self._clock(), 6)
        record = {"seq": self.seq, "ts": self.last_ts, "run": self.run_id, "kind": kind, "prev": self.head}
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
                seal["signature"] = signature(key, seal_message(self.run_id, self.seq, self.head))
            return seal

    def close(self) -> None:
        """Close the log without a seal (an interrupted run leaves it so)."""
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
