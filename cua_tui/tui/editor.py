"""The editor a reviewer opens with ``e`` at a decision: the pending action changed before it is approved
(the point moved with the arrows or a click on the desktop pane, the text, the chord, the scroll)."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Input, Static

from ..core.actions import Action, ActionError, Kind
from ..core.edits import EDITABLE, apply_edit, check_edit, escape_text, unescape_text
from ..core.geometry import Size
from ..core.policy import Policy, Verdict
from ..core.ports import DecisionRequest
from ..core.text import visible
from .frames import Target
from .keys import EDITOR, bindings
from .literal import EscapeHighlighter, LiteralInput, literal

# a press moves the point one screen pixel; with shift, ten
STEP = 1


class ActionEditor(Vertical, can_focus=True):
    """Edits ``request``'s action on a ``screen``-sized desktop; Enter approves the edit (if the policy
    lets it run), Esc goes back to the decision unchanged. ``policy`` classifies every draft as it is
    made, as the run will classify it again."""

    BINDINGS = bindings(EDITOR)  # the arrows (shift: 10 px), tab, enter, esc (tui/keys.toml)

    class Changed(Message):
        """The draft moved: the desktop pane marks where it lands."""

        def __init__(self, target: Target | None) -> None:
            super().__init__()
            self.target = target

    class Confirmed(Message):
        """Enter on a draft the policy lets run: approve ``action`` in place of the proposal."""

        def __init__(self, request: DecisionRequest, action: Action) -> None:
            super().__init__()
            self.request, self.action = request, action

    class Cancelled(Message):
        """Esc: back to the decision as proposed."""

    def __init__(self, request: DecisionRequest, screen: Size, policy: Policy, *, id: str | None = None) -> None:
        super().__init__(id=id)
        assert request.action is not None and request.action.kind in EDITABLE
        self.request = request
        self.proposed: Action = request.action
        self.desktop_size = screen
        self.policy = policy
        self.point = self.proposed.point
        self.ends = [self.proposed.path[0], self.proposed.path[-1]] if self.proposed.path else []
        self.handle = len(self.ends) - 1  # a drag: the end moves first (where it drops)
        self.field: Input | None = None
        self.problem = ""
        self._redraw = False  # a redraw of the draft's lines is due after the next refresh

    # ---------------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        kind = self.proposed.kind
        # the keys first: on a small terminal the frame cuts the last lines
        yield Static(Text.assemble(("Enter", "bold reverse"), " approves it as edited  ", ("Esc", "bold reverse"),
                                   " back  ", ("ctrl+k", "bold reverse"), " kill switch"))  # fmt: skip
        yield Static(Text(f"proposed: {self.proposed.describe()}"))
        yield Static(id="edit-draft")
        written = self._written()
        if written is not None:
            typing = self.proposed.kind is Kind.TYPE
            highlighter = EscapeHighlighter() if typing else None
            # a paste is written as the field writes text, with its escapes: read back exactly as pasted
            self.field = LiteralInput(
                value=written, highlighter=highlighter, select_on_focus=False, id="edit-field",
                pasted=escape_text if typing else visible,
            )  # fmt: skip
            yield self.field
        yield Static(id="edit-verdict")
        yield Static(Text(self._help(kind), style="dim"), id="edit-help")

    def _written(self) -> str | None:
        """What the one-line field starts with (None: this kind is edited by pointing)."""
        match self.proposed.kind:
            case Kind.TYPE:
                return escape_text(self.proposed.text)
            case Kind.KEYPRESS | Kind.HOLD_KEY:
                return self.proposed.chord
            case Kind.SCROLL:
                return f"{self.proposed.scroll_x} {self.proposed.scroll_y}"
        return None

    @staticmethod
    def _help(kind: Kind) -> str:
        match kind:
            case Kind.TYPE:
                return (
                    "the text to type: \\n is Enter, \\t Tab, \\\\ a backslash, \\xNN, \\uNNNN, \\UNNNNNNNN "
                    "any character (shown reversed: what no one would see)"
                )
            case Kind.KEYPRESS | Kind.HOLD_KEY:
                return "the key chord, e.g. ctrl+shift+t or Return"
            case Kind.SCROLL:
                return "notches right and down (e.g. 0 -3 scrolls up); a click on the desktop moves the point"
            case Kind.DRAG:
                return "arrows move the end (shift: 10 px), Tab the other end, or click on the desktop"
        return "arrows move the point one screen pixel (shift: 10), or click on the desktop"

    def on_mount(self) -> None:
        self.border_title = Text(f"EDIT · turn {self.request.turn} · action {self.request.index + 1}")
        (self.field or self).focus()
        self._show()

    # ---------------------------------------------------------------------------------------------
    # Changing the draft
    # ----------------------------------------------------------------------------------------------
    def action_nudge(self, dx: int, dy: int, step: int = STEP) -> None:
        where = self._moving()
        if where is not None:
            x = min(max(0, where[0] + dx * step), self.desktop_size.width - 1)
            y = min(max(0, where[1] + dy * step), self.desktop_size.height - 1)
            self.place((x, y))

    def action_handle(self) -> None:
        if self.ends:
            self.handle = 1 - self.handle
            self._show()

    def place(self, point: tuple[int, int]) -> None:
        """Put the point (a drag: the end being moved) at ``point`` (a click on the desktop pane)."""
        if self.ends:
            self.ends[self.handle] = point
        elif "point" in EDITABLE[self.proposed.kind]:
            self.point = point
        else:
            return
        self._show()

    def _moving(self) -> tuple[int, int] | None:
        if self.ends:
            return self.ends[self.handle]
        if self.field is None or self.proposed.kind is Kind.SCROLL:
            return self.point
        return None

    def on_input_changed(self, message: Input.Changed) -> None:
        # Coalesced: a burst of keys redraws the draft's lines and the pane's marker once, after the
        # field has painted them, not once per key. Enter reads the field itself, never these lines.
        message.stop()
        if not self._redraw:
            self._redraw = True
            self.call_after_refresh(self._redrawn)

    def _redrawn(self) -> None:
        self._redraw = False
        # the editor may have closed since (Enter, Esc, the decision gone): nothing left to redraw
        if self.is_attached and not self._closing and not self._closed:
            try:
                self._show()
            except NoMatches:
                pass  # its lines are being removed with it

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        self.action_confirm()

    def on_key(self, event: events.Key) -> None:
        # the arrows move the point of a scroll even while its amount has the focus
        if self.field is not None and self.proposed.kind is Kind.SCROLL and event.key in ("up", "down"):
            event.stop()
            self.action_nudge(0, -1 if event.key == "up" else 1)

    # ---------------------------------------------------------------------------------------------
    # The draft
    # ----------------------------------------------------------------------------------------------
    def draft(self) -> Action:
        """The action as edited so far; ActionError (a reason for people) when it is not one."""
        kind, written = self.proposed.kind, self.field.value if self.field is not None else None
        text = unescape_text(written) if kind is Kind.TYPE and written is not None else None
        chord = written.strip() if kind in (Kind.KEYPRESS, Kind.HOLD_KEY) and written is not None else None
        scroll = _notches(written) if kind is Kind.SCROLL and written is not None else None
        point = self.point if self.point != self.proposed.point else None
        start = self.ends[0] if self.ends and self.ends[0] != self.proposed.path[0] else None
        end = self.ends[1] if self.ends and self.ends[1] != self.proposed.path[-1] else None
        return apply_edit(
            self.proposed, self.desktop_size, point=point, start=start, end=end, text=text, chord=chord, scroll=scroll
        )

    def target(self, action: Action | None = None) -> Target | None:
        """Where the draft lands, marked on the desktop pane."""
        action = action or self._draft_or_none() or self.proposed
        return Target.of(action)

    def _draft_or_none(self) -> Action | None:
        try:
            return self.draft()
        except ActionError:
            return None

    def _show(self) -> None:
        """The draft's line and the policy's verdict on it, and the pane's marker moved."""
        draft_line, verdict_line = self.query_one("#edit-draft", Static), self.query_one("#edit-verdict", Static)
        try:
            action = self.draft()
        except ActionError as exc:
            self.problem = exc.reason
            draft_line.update(Text(f"as edited: cannot run: {visible(exc.reason, limit=200)}", style="bold"))
            verdict_line.update("")
            return
        self.problem = ""
        words = Text.assemble(": ", literal(action.text, limit=200)) if action.kind is Kind.TYPE else ""
        handle = f" (moving its {'start' if self.handle == 0 else 'end'})" if self.ends else ""
        draft_line.update(Text.assemble(f"as edited: {action.describe()}{handle}", words, style="bold"))
        verdict_line.update(self._verdict(action))
        self.post_message(self.Changed(self.target(action)))

    def _verdict(self, action: Action) -> Text:
        if action == self.proposed:
            return Text("unchanged: Esc, then y, approves it as proposed", style="dim")
        decision = self.policy.classify(action)
        reason = visible(decision.reason, limit=160)
        match decision.verdict:
            case Verdict.BLOCK:
                return Text(f"BLOCKED by the policy ({decision.rule}): {reason} · this edit cannot run", style="bold")
            case Verdict.CONFIRM:
                return Text(f"needs a decision ({decision.rule}): {reason} · Enter approves it, as you")
        return Text("allowed by the policy · Enter runs it")

    # ---------------------------------------------------------------------------------------------
    # Done
    # ----------------------------------------------------------------------------------------------
    def action_confirm(self) -> None:
        try:
            action = self.draft()
        except ActionError as exc:
            self.notify(f"not approved: {exc.reason}", title="edit", severity="warning", markup=False)
            return
        problem = check_edit(self.proposed, action, self.desktop_size)
        if problem is not None:
            self.notify(f"not approved: {problem}", title="edit", severity="warning", markup=False)
            return
        decision = self.policy.classify(action)
        if decision.verdict is Verdict.BLOCK:
            reason = visible(decision.reason, limit=160)
            self.notify(f"not approved: the policy blocks it ({reason})", title="edit", severity="error", markup=False)
            return
        self.post_message(self.Confirmed(self.request, action))

    def action_cancel(self) -> None:
        self.post_message(self.Cancelled())


def _notches(written: str) -> tuple[int, int]:
    """ "RIGHT DOWN" (or just "DOWN") notches as written in the scroll's field."""
    parts = written.split()
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) not in (1, 2):
        raise ActionError("bad_scroll", "the scroll is one or two whole numbers: notches right and down")
    return (0, numbers[0]) if len(numbers) == 1 else (numbers[0], numbers[1])
