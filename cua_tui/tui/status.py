"""The status bar: run, backend, agent and model, turn and step against limits, time, tokens, phase."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widgets import Static

from ..core.describe import PHASE_LABELS, isolation_label
from ..core.text import visible
from .run_view import RunView


@dataclass
class RunInfo:
    run_id: str = ""
    backend: str = ""
    agent: str = ""
    model: str | None = None
    max_turns: int = 0
    max_steps: int = 0
    deadline: int = 0
    # The goal, in view in every state: what the agent was asked, where, what it may reach, under which policy.
    task: str = ""
    target: str = ""  # "lab form", or the URL the desktop opened
    allowed: tuple[str, ...] = ()  # hosts the browser may reach besides its own target
    policy: str = ""  # name and the start of its SHA-256


class StatusBar(Static):
    """One line about the run. ``clock`` (monotonic seconds) is injectable so pictures and snapshots are stable."""

    def __init__(self, info: RunInfo, *, clock: Callable[[], float] = time.monotonic, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info
        self.clock = clock
        self.turn = 0
        self.steps = 0
        self.tokens = 0
        self.cost: float | None = None
        self.phase = "starting"
        self.detail = ""
        self.started = clock()
        self.ended: float | None = None
        self.final = ""
        self.isolation: dict[str, Any] | None = None

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def show(self, view: RunView) -> None:
        """Take the run's counters and phase from its RunView."""
        self.turn, self.steps, self.tokens, self.cost = view.turn, view.steps, view.tokens, view.cost
        self.phase, self.detail = view.phase, view.detail
        self.isolation = view.isolation
        self.redraw()

    def stopping(self) -> None:
        """The kill switch was pressed: say so at once, before the run's own events tell."""
        self.phase = "stopping"
        self.redraw()

    def redraw(self) -> None:
        info = self.info
        elapsed = (self.ended or self.clock()) - self.started
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" run {info.run_id} ", style="bold")
        text.append(f"· {visible(info.backend)} · {visible(info.agent, limit=40)}")
        if info.model:
            text.append(f" ({visible(info.model, limit=30)})")
        text.append(f" · turn {self.turn}/{info.max_turns} · step {self.steps}/{info.max_steps}")
        text.append(f" · {int(elapsed)}s/{info.deadline}s")
        if self.tokens:
            text.append(f" · {self.tokens} tok")
        if self.cost is not None:
            text.append(f" · ${self.cost:.4f}")
        text.append(" · ")
        if self.final:
            text.append(f"finished: {self.final}", style="bold reverse")
        else:
            label = PHASE_LABELS.get(self.phase, self.phase)
            text.append(label, style="bold reverse" if self.phase == "awaiting_decision" else "bold")
        if self.isolation is not None:  # last, so the phase is never cut off; a missing bubblewrap stands out
            weak = self.isolation.get("bubblewrap") is False
            text.append(" · ")
            text.append(isolation_label(self.isolation), style="bold reverse" if weak else "")
        self.update(text)
