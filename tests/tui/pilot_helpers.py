"""Pilot helpers shared by the TUI tests: polled waits with generous deadlines, and what widgets show."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Footer, Static

from cua_tui.tui.app import SupervisorApp

# Deadlines for things that happen "soon": generous, because a loaded machine (a full suite next to other
# work, a busy disk: every run fsyncs run.json, screenshots and its sealed log) is many times slower than an
# idle one. Waits poll, so a fast machine never waits longer than it takes.
SOON = 30.0


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str, timeout: float = SOON) -> float:
    """Let the app run until ``condition`` holds (polling); return how long that took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)
    return time.monotonic() - started


async def until_ended(pilot: Pilot[Any], app: SupervisorApp, timeout: float = SOON) -> float:
    took = await until(pilot, lambda: not app.running and bool(app.final_status), "the end of the run", timeout)
    await pilot.pause()
    return took


def plain(widget: Static) -> str:
    """The text a Static was given (its Rich Text is built by the app, never parsed as markup)."""
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def drawn(widget: Widget) -> str:
    """What the widget actually draws on the terminal, line by line."""
    width, height = widget.size
    lines = widget.render_lines(Region(0, 0, width, height))
    return "\n".join("".join(segment.text for segment in line) for line in lines)


def footer_actions(app: SupervisorApp) -> set[str]:
    """Actions the footer shows as applicable now."""
    return {key.action for key in app.query_one(Footer).query("FooterKey") if not key.has_class("-disabled")}
