"""``cua-tui demo``: the offline first run (local desktop, a lab, its scripted agent; no model, no key)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .base import fail, headless_option, operator_option, theme_option


@click.command("demo")
@click.option("--lab", "lab_name", default="form", show_default=True, help="Which lab: form, search-export, injection.")
@click.option("--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run directories go.")
@click.option("--screen", default="1024x720", show_default=True, help="Screen size WIDTHxHEIGHT.")
@headless_option
@theme_option
@operator_option
@click.option(
    "--on-confirm",
    default=None,
    help="Headless decisions: ask (default on a terminal), reject (default otherwise), approve, or approver:CMD.",
)
@click.option("--script-variant", default=None, hidden=True, help="Another scripted variant of the lab (tests).")
def command(
    lab_name: str,
    runs_dir: Path | None,
    screen: str,
    headless: bool,
    theme: str | None,
    operator: str | None,
    on_confirm: str | None,
    script_variant: str | None,
) -> None:
    """Offline first run: the local desktop, a lab, and that lab's SCRIPTED agent (no model, no key).

    The scripted turns solve the lab; they still stop at every confirmation point like any run, and the
    lab's own server decides whether the run passed. Exit status as for `run`.
    """
    import json

    from ..labs import get_lab

    try:
        lab = get_lab(lab_name)
    except ValueError as exc:
        fail(str(exc))
    script_file = lab.script_file(script_variant or lab.demo_script or None)
    if on_confirm is None:
        on_confirm = "ask" if sys.stdin.isatty() else "reject"
    click.echo(
        f"SCRIPTED DEMO · lab {lab_name} · agent: recorded turns from {script_file.name} "
        f"(no model, no API key) · decisions: {on_confirm}",
        err=True,
    )
    # Imported here, not at the top: the builder pulls in the core, and --help should start fast.
    from ..build import HANDSHAKE, RunOptions
    from .session import execute

    execute(
        RunOptions(
            task=lab.task,
            backend="local",
            screen=screen,
            agent=None,
            script=json.loads(script_file.read_text()),
            agent_label=f"script:{script_file} (scripted demo)",
            lab=lab_name,
            runs_dir=runs_dir,
            decisions=on_confirm if headless else HANDSHAKE,
            operator=operator,
        ),
        headless=headless,
        theme=theme,
    )
