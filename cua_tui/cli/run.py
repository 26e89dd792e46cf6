"""``cua-tui run``: an agent on a sandboxed desktop under supervision, in the TUI or headless."""

from __future__ import annotations

from typing import Any

import click

from .base import fail
from .flags import FLAGS, run_flags, run_options


@click.command("run")
@run_flags(*FLAGS)
def command(**values: Any) -> None:
    """Run an agent on a sandboxed desktop under supervision, in the TUI (or --headless).

    Every action the agent proposes is parsed strictly, classified by the policy (allow, confirm, block),
    and executed only if allowed or approved. The run directory (run.json, audit.jsonl, screens/,
    transcript.jsonl, result.json) is written under --runs-dir. Exit status: 0 passed or finished, and
    sealed; 1 any other end (failed, killed, limit, error, or a seal that could not be written: the run
    ends error and says why in one line); 2 bad usage or configuration.
    """
    options = run_options(values)
    # --model and --base-url with a script agent: refused where every run's agent is made
    # (factory.py)
    if options.lab and options.url:
        fail("--lab and --url: choose one")
    from .session import execute

    execute(options, headless=values["headless"], theme=values["theme"], otel=values["otel"])
