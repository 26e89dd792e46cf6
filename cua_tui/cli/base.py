"""The command group and what every command shares: the usage error (exit 2) and the settings."""

from __future__ import annotations

from typing import Any

import click

from .. import __version__

EXIT_USAGE = 2


class UsageFailure(click.ClickException):
    """Bad usage or configuration: exit status 2, message on stderr."""

    exit_code = EXIT_USAGE


def settings() -> Any:
    """The user's settings (config file + environment); a broken file is a usage error."""
    from ..config import ConfigError, Settings

    try:
        return Settings.load()
    except ConfigError as exc:
        raise UsageFailure(str(exc)) from None


# Options several commands share, defined once.
theme_option = click.option(
    "--theme", default=None, help="TUI theme (built-in, themes/ or your config folder's themes/)."
)
operator_option = click.option(
    "--operator",
    default=None,
    help="Who reviews, recorded with every decision a person makes (default: user@host).",
)
headless_option = click.option(
    "--headless", is_flag=True, help="No TUI: print events as lines and decide with --on-confirm."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="cua-tui")
def main() -> None:
    """Supervise computer-use agents: every proposed action is classified by a policy, risky ones wait
    for your decision (y approve, n reject, k kill switch), and every run leaves a hash-chained audit
    log that `cua-tui verify` checks offline."""
