"""``cua-tui policy``: print the built-in policy, or check a policy file."""

from __future__ import annotations

from pathlib import Path

import click

from .base import path_option


@click.command("policy")
@click.option("--print", "print_default", is_flag=True, help="Print the built-in policy as TOML.")
@path_option("--check", "check_path", help="Validate a policy file and summarise it.")
def command(print_default: bool, check_path: Path | None) -> None:
    """Show the built-in policy, or check a policy file (exit 2 with the line of the error)."""
    from ..core.policy import DEFAULT_POLICY_TOML, Policy
    from ..core.text import visible

    if print_default:
        click.echo(DEFAULT_POLICY_TOML, nl=False)
        return
    # a PolicyError is a usage error: the command line says it, with its line
    policy = Policy.load(check_path) if check_path else Policy.default()
    lines = policy.summary()
    if policy.description:
        lines.insert(1, f"description: {policy.description}")
    lines += [f"region {r.name} reason: {r.reason}" for r in policy.regions]
    # Names, descriptions, reasons and the path come from the file: shown literally, never as
    # escapes.
    for line in lines:
        click.echo(visible(line))
