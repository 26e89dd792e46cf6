"""The status bar: run, backend, agent and model, turn and step against limits, time, tokens, phase."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from ..core import ending
from ..core.describe import PHASE_LABELS, isolation_label
from ..core.events import RunPhase, VerificationDone
from ..core.run_view import RunView
from ..core.text import visible

PHASE_VALUES = frozenset(phase.value for phase in RunPhase if phase in PHASE_LABELS)
# the theme's colour of each tone of a status (core/ending.py); plain has none
TONE_COLOURS = {ending.Tone.GOOD: "success", ending.Tone.BAD: "error", ending.Tone.CLAIM: "warning"}


# (theme, colour's name) -> the colour: the theme's variables take 1.5 ms to compute, on the UI thread
_THEME_COLOURS: dict[tuple[str, str], str] = {}


def tone_colour(widget: Widget, tone: ending.Tone) -> str:
    """The colour of ``tone`` in ``widget``'s theme: its success, error or warning colour ("" for plain)."""
    name = TONE_COLOURS.get(tone)
    if name is None:
        return ""
    key = (widget.app.theme, name)
    if key not in _THEME_COLOURS:
        _THEME_COLOURS[key] = widget.app.get_css_variables().get(name, "")
    return _THEME_COLOURS[key]


def tone_style(widget: Widget, tone: ending.Tone) -> str:
    """A status's style in ``widget``'s theme: reverse video in its tone's colour."""
    return f"bold reverse {tone_colour(widget, tone)}".strip()


@dataclass
class RunInfo:
    run_id: str = ""
    backend: str = ""
    agent: str = ""
    model: str | None = None
    max_turns: int = 0
    max_steps: int = 0
    deadline: int = 0
    # The goal, in view in every state: what the agent was asked, where, what it may reach, under
    # which policy.
    task: str = ""
    target: str = ""  # "lab form", or the URL the desktop opened
    allowed: tuple[str, ...] = ()  # hosts the browser may reach besides its own target
    policy: str = ""  # name and the start of its SHA-256
    drills: bool = False  # drills may come before real requests (core/drills.py)


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
        self.verification: VerificationDone | None = None
        # the record as verified (a replay's; a live run's own record is intact): what the status may claim
        self.record = ending.INTACT
        # the browser's routine refused requests (core.attention), only counted
        self.folded = 0

    view: reactive[RunView | None] = reactive(None, init=False, always_update=True, layout=False, repaint=False)

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def watch_view(self, view: RunView | None) -> None:
        if view is None:
            return
        if view.ended is None:
            self.final = ""
        elif not self.final:
            # the end as recorded (a live run's result may say more: ``final``)
            self.final = f"{view.ended.status} · {visible(view.ended.reason, limit=80)}"
            self.ended = self.ended or self.clock()
        self.show(view)

    def show(self, view: RunView) -> None:
        """Take the run's counters and phase from its RunView."""
        self.turn, self.steps, self.tokens, self.cost = view.turn, view.steps, view.tokens, view.cost
        self.phase, self.detail = view.phase, view.detail
        self.isolation = view.isolation
        self.verification = view.verification
        self.folded = view.attention.folded
        self.redraw()

    def stopping(self) -> None:
        """The kill switch was pressed: say so at once, before the run's own events tell."""
        self.phase = "stopping"
        self.redraw()

    def redraw(self) -> None:
        """One line; where it does not fit, the least important fields go first (the phase, the turn and
        step and a missing bubblewrap stay to the last)."""
        fields = self._fields()
        width = self.size.width or 10_000
        keep = sorted(range(len(fields)), key=lambda i: fields[i][0])  # most important first
        chosen: set[int] = set()
        used = -3  # each field but the first comes after a " · "
        for i in keep:
            # strictly by importance: once one does not fit, none less important is shown
            cost = len(fields[i][1]) + 3
            if used + cost > width and chosen:
                break
            chosen.add(i)
            used += cost
        room = width - used - 3
        left = [i for i in keep if i not in chosen]
        if left and room >= 12:
            # the most important field left out gets what room is left, cut short
            part = fields[left[0]][1].copy()
            part.truncate(room, overflow="ellipsis")
            fields[left[0]] = (fields[left[0]][0], part)
            chosen.add(left[0])
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, (_rank, part) in enumerate(fields):
            if i in chosen:
                if len(text):
                    text.append(" · ")
                text.append_text(part)
        self.update(text)

    def _fields(self) -> list[tuple[int, Text]]:
        """(rank, text) of each field in the order shown; rank 0 is the most important."""
        info = self.info
        elapsed = (self.ended or self.clock()) - self.started
        fields: list[tuple[int, Text]] = [
            (2, Text(f" run {info.run_id}", style="bold")),  # which run: kept nearly to the last
            (4, Text(visible(info.backend))),
        ]
        agent = visible(info.agent, limit=40) + (f" ({visible(info.model, limit=30)})" if info.model else "")
        fields.append((8, Text(agent)))
        fields.append((1, Text(f"turn {self.turn}/{info.max_turns} · step {self.steps}/{info.max_steps}")))
        fields.append((3, Text(f"{int(elapsed)}s/{info.deadline}s")))
        if self.tokens:
            fields.append((4, Text(f"{self.tokens} tok")))
        if self.cost is not None:
            fields.append((4, Text(f"${self.cost:.4f}")))
        if self.final:
            # "status · reason": the status stays to the last; the reason outlives the names
            status, _sep, reason = self.final.partition(" · ")
            said = ending.headline(status, self.record)
            label = said.text if said.claimed else f"status: {said.text}"
            fields.append((0, Text(label, style=tone_style(self, said.tone))))
            if reason:
                fields.append((5, Text(reason, style="bold")))  # why it ended: outlives the names
            if self.verification is not None:
                # where it was checked, kept with the status; the sandbox's own word (or a place not
                # recorded) stands out; the verifier's name is in the log
                where = ending.checked_in(self.verification.where, self.verification.user)
                style = "" if ending.ours(self.verification) else "bold reverse"
                fields.append((1, Text(f"checked {where}", style=style)))
        else:
            # the phase as recorded, or a replay's own word for it
            label = PHASE_LABELS[RunPhase(self.phase)] if self.phase in PHASE_VALUES else self.phase
            fields.append((0, Text(label, style="bold reverse" if self.phase == "awaiting_decision" else "bold")))
        if self.isolation is not None:
            # a missing bubblewrap stands out and stays; the full label is less vital
            weak = self.isolation.get("bubblewrap") is False
            fields.append(
                (2 if weak else 9, Text(isolation_label(self.isolation), style="bold reverse" if weak else ""))
            )
        if self.folded:
            fields.append((7, Text(f"{self.folded} routine refused")))
        return fields

    def on_resize(self) -> None:
        self.redraw()
