"""``cua-tui demo``: the offline first run (local desktop, a lab, its scripted agent; no model, no key)."""

from __future__ import annotations

import sys
from typing import Any

import click

from .base import fail
from .flags import flag, run_flags, run_options


@click.command("demo")
@flag("lab", default="form", show_default=True)
@run_flags("runs_dir", "screen", "headless", "theme", "operator", "otel")
@flag(
    "on_confirm",
    default=None,
    show_default=False,
    help="Headless decisions: ask (default on a terminal), reject (default otherwise), approve, or approver:CMD.",
)
def command(**values: Any) -> None:
    """Offline first run: the local desktop, a lab, and that lab's SCRIPTED agent (no model, no key).

    The scripted turns solve the lab; they still stop at every confirmation point like any run, and the
    lab's own server decides whether the run passed. Exit status as for `run`.
    """
    import json

    from ..labs import get_lab

    try:
        lab = get_lab(values["lab"])
    except ValueError as exc:
        fail(str(exc))
    script_file = lab.script_file(lab.demo_script or None)
    on_confirm = values["on_confirm"] or ("ask" if sys.stdin.isatty() else "reject")
    click.echo(
        f"SCRIPTED DEMO · lab {values['lab']} · agent: recorded turns from {script_file.name} "
        f"(no model, no API key) · decisions: {on_confirm}",
        err=True,
    )
    options = run_options(
        {**values, "on_confirm": on_confirm},
        task=lab.task,
        backend="local",
        agent=None,
        script=json.loads(script_file.read_text()),
        agent_label=f"script:{script_file} (scripted demo)",
    )
    from .session import execute

    execute(options, headless=values["headless"], theme=values["theme"], otel=values["otel"])
