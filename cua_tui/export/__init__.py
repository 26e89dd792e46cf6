"""Exports of a run directory: a self-contained HTML report, an animated film strip, a replayable script.

Pure of Textual; everything is read through ``source.open_run`` (safeio, runlog, imaging), and every file
is written whole or not at all (``write_atomic``).
"""

from __future__ import annotations

import os
from pathlib import Path

from .source import AUDIT_CAP, Run, RunUnusable, open_run


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it, so a reader (or a failed export) never
    leaves half a file; the temporary file is removed on failure."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


__all__ = ["AUDIT_CAP", "Run", "RunUnusable", "open_run", "write_atomic"]
