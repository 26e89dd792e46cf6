"""``--otel URL`` (or the settings' ``otel_endpoint``): the span sink of a command's runs, opened only when
asked (the OpenTelemetry SDK costs start-up time), closed with a bounded wait (docs/otel.md)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..export.otel import Sink


def open_sink(flag: str | None, settings: Any, *, headless: bool) -> Sink | None:
    """The sink for ``--otel`` or the settings' endpoint; None when neither names one. Headless, a failed send
    is said on stderr at once; under a TUI it is held and said when the TUI has closed."""
    endpoint = flag or settings.otel_endpoint
    if not endpoint:
        return None
    from ..agents.vendors import otel_systems
    from ..export.otel import Sink

    return Sink(endpoint, say=_say if headless else None, systems=otel_systems())


def close_sink(sink: Sink | None) -> None:
    """Send what is queued (a bounded wait) and say what is left to say: held notices, how many were sent."""
    if sink is None:
        return
    for line in sink.close():
        click.echo(line, err=True)


def _say(line: str) -> None:
    # on the SDK's export thread: one write of a whole line
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
