"""The goal bar: what the agent was asked to do, where, what it may reach and under which policy, in view
in every state of a run (live or replayed). All of it is shown literally."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ..core import events as ev
from ..core.describe import scripted_note
from ..core.run_view import RunView
from ..core.text import visible
from .literal import literal
from .status import RunInfo


class GoalBar(Static):
    """Two lines: the task; then the target, the allowed hosts and the policy in effect. A scripted run adds
    two more saying so (a note that stays, not a dialog to dismiss): its answers do not steer the agent.
    Bound to its screen's RunView (data_bind): what its source did not know yet (a fleet's run opened
    before it started) is taken from the run's run_started event once it comes."""

    view: reactive[RunView | None] = reactive(None, init=False, always_update=True, layout=False, repaint=False)

    def __init__(self, info: RunInfo, *, live: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = info
        # a replay is not steered by anyone: no note about answers
        self.live = live
        self._started: ev.RunStarted | None = None

    def on_mount(self) -> None:
        self._draw(self.info)

    def watch_view(self, view: RunView | None) -> None:
        started = view.started if view is not None else None
        if started is None or started is self._started:
            return
        self._started = started
        if not self.info.agent:
            # its source knew of the run only what the fleet's row says: the rest is the run's own record
            policy = f"{started.policy} ({started.policy_sha256[:12]})"
            self._draw(replace(self.info, agent=started.agent, task=started.task, policy=policy))

    def _draw(self, info: RunInfo) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" TASK ", style="bold reverse")
        text.append(" ")
        text.append_text(literal(info.task or "(none given)", limit=400))
        text.append("\n")
        text.append(" on ", style="bold")
        text.append_text(literal(info.target, limit=120))
        text.append(" · may reach ", style="bold")
        for n, host in enumerate(info.allowed):
            text.append(", " if n else "")
            text.append_text(literal(host, limit=60))
        if not info.allowed:
            text.append("its own origin only")
        text.append(" · policy ", style="bold")
        text.append_text(literal(info.policy, limit=80))
        if info.drills:
            # said, never which request is one: drills look like any other
            text.append(" · drills on", style="bold")
        note = scripted_note(info.agent)
        if note is not None and self.live:
            text.append("\n")
            text.append(" SCRIPTED ", style="bold reverse")
            text.append(" " + visible(note[0], limit=200) + "\n")
            text.append(" " * 10 + " " + note[1])
            self.add_class("scripted")
        self.update(text)
