"""The audit log's exceptions: one small hierarchy, so a caller can catch the domain as a whole.

Each also derives from the builtin it used to be (``ValueError``, ``OSError``, ``RuntimeError``), so code
that caught those keeps working. The verifier raises none of them at its callers: bad input is a report.
"""

from __future__ import annotations


class AuditError(Exception):
    """Base of every error of the audit log (keys, writer, verifier)."""


class AuditKeyError(AuditError, ValueError):
    """An audit key that cannot be used (unreadable, wrong format, readable by others)."""


class AuditWriteError(AuditError, OSError):
    """A record could not be written (disk full, I/O error). The file is cut back to its last whole line,
    so what is on disk stays a valid chain; the caller must stop executing (fail closed)."""


class AuditClosed(AuditError, RuntimeError):
    """An append after the log was sealed."""


class UnusableInput(AuditError):
    """Raised inside the verifier when the run directory cannot be checked at all (exit 2); ``verify_run``
    turns it into a report, never lets it out."""
