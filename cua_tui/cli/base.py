"""The command group and what every command shares: the usage error (exit 2), the settings, and the
handling of the signals that end a run or a fleet."""

from __future__ import annotations

import queue
import signal
import threading
from typing import Any, Self

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


class OnSignal:
    """While in effect, SIGINT, SIGTERM and SIGHUP (Ctrl-C, a service manager, the terminal going away) are
    acted on by ``act(signum, count)`` on a thread of its own. The handler only records the signal
    (``SimpleQueue.put`` is safe there, whatever lock the interrupted main thread holds); acting on it takes
    locks (a kill switch) and may wait."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        threading.Thread(target=self._act, name="cua-signals", daemon=True).start()
        self._previous = {s: signal.signal(s, self._on_signal) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self.received.put(None)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received.put(signum)

    def _act(self) -> None:
        count = 0
        while (signum := self.received.get()) is not None:
            self.act(signum, count)
            count += 1

    def act(self, signum: int, count: int) -> None:
        """What the ``count``-th signal (from 0) does."""
        raise NotImplementedError
