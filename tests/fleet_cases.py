"""Scripts and run options shared by the fleet's tests (the runner's and the fleet TUI's)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bench import fleet as bench_fleet
from cua_tui.build import HANDSHAKE, RunOptions
from cua_tui.config import Settings

# The sim form script the fleet benchmark runs (click the field, type, click Verify): one copy of it.
FORM = bench_fleet.FORM
SAFETY = {
    "turns": [
        {
            "actions": [{"type": "click", "x": 250, "y": 182}],
            "pending_safety_checks": [{"id": "sc1", "code": "malicious_instructions", "message": "odd page"}],
        }
    ],
    "final_text": "done",
}
SAVE_KEY = {"turns": [{"actions": [{"type": "keypress", "keys": ["ctrl", "s"]}]}], "final_text": "done"}


def opts(settings: Settings, script: dict[str, Any] | None = FORM, **changes: Any) -> RunOptions:
    """A sim run of ``script`` deciding through the handshake, as a fleet task's options."""
    base = RunOptions(backend="sim", agent=None, script=script, task="fill the form", decisions=HANDSHAKE, fsync=False)
    return dataclasses.replace(base, settings=settings, **changes)
