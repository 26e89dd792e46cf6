"""The batch pane: the current turn's actions, one row each, risk and state as CSS classes; in a live run
the earlier turns above it, one compact section each (scroll back). A click on a row or a section opens
its detail."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual import events
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from ..core.run_view import ActionState, RunView
from ..core.text import visible
from .detail import RowSnapshot
from .literal import literal

# earlier turns kept as sections; older ones are counted in one line
EARLIER_TURNS = 50


class ActionRow(Static):
    """index · kind · parameters · verdict and reason · state. Classes: risk-*, state-*, pending."""

    class Selected(Message):
        """A click on the row: show its detail."""

        def __init__(self, row: RowSnapshot) -> None:
            super().__init__()
            self.row = row

    def __init__(self, index: int, kind: str, params: str, *, error: str = "", turn: int = 0) -> None:
        super().__init__(classes="action-row state-waiting")
        self.turn = turn
        self.index = index
        self.kind = kind
        self.params = params
        self.error = error
        self.verdict = "malformed" if error else "…"
        self.reason = error
        self.state = "waiting"
        self.decided_by = ""
        # the model's proposal, when the reviewer changed it before approving it (``params``: what runs)
        self.proposed = ""

    def on_mount(self) -> None:
        self.redraw()

    def set_action(self, kind: str, params: str) -> None:
        """Another action in this row's place (a drill's, then the real one's back)."""
        self.kind, self.params = kind, params
        self.redraw()

    def set_edited(self, params: str, proposed: str) -> None:
        self.params, self.proposed = params, proposed
        self.redraw()

    def set_verdict(self, verdict: str | None, reason: str) -> None:
        # None: not a verdict this version knows (a hostile run directory)
        verdict = verdict or "…"
        self.verdict, self.reason = verdict, reason
        for risk in ("allow", "confirm", "block"):
            self.set_class(verdict == risk, f"risk-{risk}")
        self.redraw()

    def set_state(self, state: str, by: str = "") -> None:
        for name in ActionState:
            self.set_class(name == state, f"state-{name}")
        self.state = state
        if by:
            self.decided_by = by
        self.redraw()

    def snapshot(self) -> RowSnapshot:
        return RowSnapshot(
            self.turn, self.index, self.kind, self.params, self.verdict, self.reason, self.state, self.decided_by,
            self.proposed,
        )  # fmt: skip

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.post_message(self.Selected(self.snapshot()))

    def redraw(self) -> None:
        text = Text(no_wrap=False, overflow="fold")
        marker = "▶ " if self.has_class("pending") else "  "
        text.append(marker, style="bold")
        text.append(f"{self.index + 1:>2} ", style="bold")
        text.append(f"{visible(self.kind, limit=16):<14}", style="bold")
        text.append(literal(self.params, limit=80))
        if self.proposed:
            text.append("  (edited; proposed: ", style="italic")
            text.append(literal(self.proposed, limit=60, style="italic"))
            text.append(")", style="italic")
        text.append("\n     ")
        verdict = self.verdict.upper()
        text.append(f"{verdict:<8}", style="bold")
        if self.reason:
            text.append(literal(self.reason, limit=120))
        text.append("  →  ")
        state = self.state.replace("_", " ")
        text.append(state.upper() if self.state != "waiting" else state, style="bold")
        if self.decided_by and self.decided_by != "policy":
            text.append(Text.assemble(" (", literal(self.decided_by, limit=40), ")", style="italic"))
        self.update(text)


class TurnSummary(Static):
    """An earlier turn, compact: a header ("Turn 3 · 4 actions · model: ...") and one line per action."""

    class Selected(Message):
        """A click on the section: show the turn in full."""

        def __init__(self, summary: TurnSummary) -> None:
            super().__init__()
            self.summary = summary

    def __init__(self, turn: int, text: str, rows: list[RowSnapshot], final: str | None = None) -> None:
        super().__init__(classes="turn-summary")
        self.turn = turn
        self.text = text
        self.rows = rows
        self.final = final

    def on_mount(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        count = len(self.rows)
        text.append(f"Turn {self.turn} · {count} action{'s' if count != 1 else ''}", style="bold")
        if self.text:
            text.append(Text.assemble(" · model: ", literal(self.text, limit=120)))
        for row in self.rows:
            text.append(f"\n  {row.index + 1:>2} {visible(row.kind, limit=16):<14}")
            params = literal(row.params, limit=60)
            text.append(params.append(" " * (22 - len(params))))
            verdict = f" · {row.verdict.upper()}" if row.verdict not in ("", "allow", "…") else ""
            text.append(f"{verdict} → {row.state.replace('_', ' ').upper()}", style="bold")
        if self.final is not None:
            text.append(Text.assemble("\n  final: ", literal(self.final, limit=120) if self.final else "(no text)"))
        self.update(text)

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.post_message(self.Selected(self))


# refreshes a scroll to the pending row waits for the row to be placed, at most
PLACE_TRIES = 20


class BatchPane(VerticalScroll):
    """Rows of the current turn. With ``history`` (a live run) each earlier turn stays above it as a
    compact section (at most ``keep`` of them, older ones counted in one line), and the view follows the
    current turn unless the reviewer scrolled back; without it (replay shows one turn at a time) a new
    turn clears the pane."""

    can_focus = False
    # earlier turns kept as sections, unless ``keep`` says otherwise
    KEEP = EARLIER_TURNS

    def __init__(self, *, history: bool = False, keep: int | None = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.history = history
        self.keep = self.KEEP if keep is None else keep
        self.turn = 0
        self.text = ""
        self.rows: dict[int, ActionRow] = {}
        self.earlier: deque[TurnSummary] = deque()
        self.dropped = 0  # earlier turns beyond ``keep``, no longer shown
        # the view follows the current turn (until the reviewer scrolls back)
        self.following = True
        # the current turn's widgets: its words, its rows, its end
        self._current: list[Widget] = []
        self._words: Static | None = None  # the model's words above the current turn's rows
        self._final: str | None = None
        self._elided: Static | None = None
        self.pending: int | None = None
        self.border_title = "Pending batch"

    view: reactive[RunView | None] = reactive(None, init=False, always_update=True, layout=False, repaint=False)

    def watch_view(self, view: RunView | None) -> None:
        """The shown turn as the run's state has it: a new turn starts the pane again (a live run keeps
        the earlier one above it); new rows are added, changed verdicts and states redrawn."""
        if view is None or not view.batch_turn:
            return
        if view.batch_turn != self.turn:
            self.start_turn(view.batch_turn, view.batch_text)
        elif view.batch_text != self.text:
            self._say(view.batch_text)  # a drill's words in the turn's place while it is up, then the turn's
        for index in sorted(view.actions):
            action = view.actions[index]
            row = self.rows.get(index)
            if row is None:
                row = self.add(index, action.kind, action.params, error=action.error)
            elif (row.kind, row.params) != (action.kind, action.params) and not action.proposed:
                row.set_action(action.kind, action.params)
            if action.verdict is not None and (row.verdict, row.reason) != (action.verdict, action.reason):
                row.set_verdict(action.verdict, action.reason)
            if (row.state, row.decided_by) != (action.state, action.decided_by or row.decided_by):
                row.set_state(action.state, action.decided_by)
            if action.proposed and row.proposed != action.proposed:
                row.set_edited(action.params, action.proposed)
        if view.final_text is not None and self._final is None:
            self.final_text(view.final_text)

    def _put(self, widget: Widget) -> None:
        self._current.append(widget)
        self.mount(widget)
        if self.history and self.following:
            self.call_after_refresh(self._follow)

    def start_turn(self, turn: int, text: str) -> None:
        if self.history and self.rows:
            self._keep_turn()
        self.rows.clear()
        if self.history:
            for widget in self._current:
                widget.remove()
        else:
            self.remove_children()
        self._current = []
        self._final = None
        self.following = True
        self.turn, self.text = turn, ""
        self._words = None
        self.border_title = Text(f"Turn {turn} batch")  # Text: a str title is parsed as markup
        self._say(text)

    def _say(self, text: str) -> None:
        """The model's words for the shown turn, above its rows (none: no line)."""
        self.text = text
        words = Text.assemble("model: ", literal(text, limit=400))
        if self._words is not None:
            self._words.update(words)
            self._words.display = bool(text)
        elif text:
            self._words = Static(words, classes="model-text")
            if self._current:
                self._current.insert(0, self._words)
                self.mount(self._words, before=self._current[1])
            else:
                self._put(self._words)

    def _keep_turn(self) -> None:
        """The turn shown so far becomes one compact section above the next one."""
        rows = [self.rows[i].snapshot() for i in sorted(self.rows)]
        summary = TurnSummary(self.turn, self.text, rows, self._final)
        self.earlier.append(summary)
        self.mount(summary, before=self._current[0] if self._current else None)
        while len(self.earlier) > self.keep:
            self.earlier.popleft().remove()
            self.dropped += 1
        if self.dropped:
            line = Text(
                f"{self.dropped} earlier turn{'s' if self.dropped != 1 else ''} not shown here "
                "(the audit log has them all: cua-tui replay)",
                style="italic",
            )
            if self._elided is None:
                self._elided = Static(line, classes="turn-summary turn-elided")
                self.mount(self._elided, before=0)
            else:
                self._elided.update(line)

    def final_text(self, text: str) -> None:
        self._final = text
        self._put(
            Static(
                Text.assemble("final: ", literal(text, limit=400)) if text else Text("final: (no text)"),
                classes="model-text final-text",
            )
        )

    def add(self, index: int, kind: str, params: str, error: str = "") -> ActionRow:
        row = ActionRow(index, kind, params, error=error, turn=self.turn)
        self.rows[index] = row
        self._put(row)
        return row

    def _follow(self) -> None:
        """Bring the current turn into view: as much of it as fits, from its start."""
        if not self._current or not self.following:
            return
        if self.pending is not None and self.pending in self.rows:  # the decision comes first
            self.scroll_to_widget(self.rows[self.pending], animate=False, top=True)
            return
        top = self._current[0].virtual_region.y
        self.scroll_to(y=min(self.max_scroll_y, top), animate=False, immediate=True)

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        # the reviewer reads back: new rows do not pull the view away
        self.following = False
        super()._on_mouse_scroll_up(event)

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        super()._on_mouse_scroll_down(event)
        if self.scroll_offset.y >= self.max_scroll_y:
            self.following = True

    def watch_virtual_size(self) -> None:
        """Rows mounted or removed (an earlier turn folded away) change the layout after a scroll to the
        pending row was asked for, and on a loaded machine after it ran: the pending row is brought back."""
        self.reveal_pending()

    def reveal_pending(self) -> None:
        """After a resize: the pending row back in view, unless the reviewer has scrolled back to read."""
        if self.following and self.pending is not None and self.pending in self.rows:
            self.call_after_refresh(self._to_pending)

    def _to_pending(self, tries: int = 0) -> None:
        # decided when it runs: a wheel turned after it was asked for wins
        if not (self.following and self.pending is not None and self.pending in self.rows):
            return
        row = self.rows[self.pending]
        if row.region.height == 0 and tries < PLACE_TRIES:
            # mounted but not yet placed (a loaded machine lays out a refresh or two later): a scroll to it
            # now would go nowhere, and no resize may follow to ask again
            self.call_after_refresh(self._to_pending, tries + 1)
            return
        self.scroll_to_widget(row, animate=False, top=True)

    def mark_pending(self, index: int | None) -> None:
        self.pending = index
        if index is not None:
            # a decision brings the view back to the current turn
            self.following = True
        for i, row in self.rows.items():
            pending = i == index
            if row.has_class("pending") != pending:
                row.set_class(pending, "pending")
                row.redraw()
        if index is not None and index in self.rows:
            # after the next refresh: rows mounted just now have no place in the layout yet
            self.call_after_refresh(self._to_pending)
