"""The goal bar: what the agent was asked to do, where, what it may reach and under which policy, in view
in every state of a run (live or replayed). All of it is shown literally."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..core.text import visible
from .status import RunInfo


class GoalBar(Static):
    """Two lines: the task; then the target, the allowed hosts and the policy in effect."""

    def __init__(self, info: RunInfo, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info

    def on_mount(self) -> None:
        info = self.info
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" TASK ", style="bold reverse")
        text.append(" " + visible(info.task or "(none given)", limit=400) + "\n")
        text.append(" on ", style="bold")
        text.append(visible(info.target, limit=120))
        text.append(" · may reach ", style="bold")
        text.append(", ".join(visible(a, limit=60) for a in info.allowed) if info.allowed else "its own origin only")
        text.append(" · policy ", style="bold")
        text.append(visible(info.policy, limit=80))
        self.update(text)
