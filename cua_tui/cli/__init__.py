"""Command line: one thin module per command (demo, run, fleet, replay, verify, export, runs, stats, sandboxes,
locate, policy).

Exit codes: ``run`` 0 when the run ended passed (or finished where no verifier exists), 1 for any other
end, 2 for bad usage or configuration. ``verify`` 0 intact, 1 tampered, 2 unusable input. ``export`` 0
written, 1 written but the run is tampered, 2 bad usage or an unusable run directory.
Heavy and vendor imports happen inside the commands that need them, so ``--help`` starts fast.
"""

from __future__ import annotations

from . import (
    attach,
    demo,
    drill,
    export,
    fleet,
    locate,
    policy,
    queue,
    replay,
    run,
    runs,
    sandboxes,
    stats,
    verify,
    worker,
)
from .base import main

for _module in (
    demo,
    run,
    fleet,
    worker,
    attach,
    queue,
    replay,
    verify,
    export,
    drill,
    runs,
    stats,
    sandboxes,
    locate,
    policy,
):
    main.add_command(_module.command)

__all__ = ["main"]
