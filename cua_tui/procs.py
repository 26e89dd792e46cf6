"""Process helpers shared by the adapters that start programs of their own (approver commands, the desktop).

Not in core: the core starts no processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def kill_group(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
    """End ``proc``'s process group (it leads one: started with ``start_new_session``): SIGTERM, then SIGKILL
    what is left after ``grace`` seconds. Children that outlive the leader are killed too."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers in the group
        return
