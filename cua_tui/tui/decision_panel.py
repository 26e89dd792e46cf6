"""The decision panel: what exactly is being decided, shown so it cannot be misread."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ..core import describe
from ..core.injection import Injection
from ..core.ports import DecisionRequest
from ..core.run_view import RunView
from ..core.text import visible
from .literal import escape_style

# The wording is core/describe's; the panel only styles its parts (appended as text, never as
# markup).
STYLES = {
    describe.TITLE: "bold reverse",
    describe.LABEL: "bold",
    describe.TYPED: "reverse",
    describe.KEY: "bold reverse",
    describe.WARN: "bold reverse",
}


def role_style(role: str, default: str | None = None) -> Style | str | None:
    """The style of a part in ``role``: its text's style, and reverse video toggled for a stand-in
    (``describe.ESCAPE``)."""
    if role.endswith(describe.ESCAPE):
        base = STYLES.get(role.removesuffix(describe.ESCAPE), default)
        return (Style.parse(base) if base else Style()) + escape_style(base)
    return STYLES.get(role, default)


# columns, rows: a terminal smaller either way gets the compact panel
COMPACT_BELOW = (120, 36)


def compact_terminal(width: int, height: int) -> bool:
    """Whether a terminal of ``width`` x ``height`` cells gets the compact decision panel (100x30, 80x24)."""
    return width < COMPACT_BELOW[0] or height < COMPACT_BELOW[1]


class DecisionPanel(Static):
    """Hidden unless a decision is pending. Typed text is shown in full with control characters visible."""

    # show_request's
    _shown: tuple[DecisionRequest | None, int, str, bool, str] = (None, 0, "", False, "")
    # Where there are many runs the panel names the one asking (tasks of the same text differ only
    # there), and a request no longer pending reads closed, offering no key that would answer it.
    run_name = ""
    # the fleet queue's group shown (the same decision in many runs): who is in it, and what y answers
    group = ""
    # why the row shown is not one row with another of the queue that reads the same (core/grouping.py)
    apart = ""
    # on a team's queue: who may answer it, its approvals, whose edit it shows (fleet_parts.who_line)
    who = ""
    # why the request shown is no longer pending (None: it is)
    closed: str | None = None
    _destination: str | None = None
    # a small terminal: the same facts in fewer lines, the keys first (describe.request_panel)
    compact = False
    # ``e`` can edit the request shown (its screen says, before it is shown)
    can_edit = False
    # seconds before the request's deadline rejects it (None: it has none); its screen counts them down
    left: float | None = None
    # the on-screen passage the model's words echo (core/injection.py): a hint beside its reason
    injection: Injection | None = None
    # the layout shows no desktop pane (a narrow fleet): the panel says the screen is not shown
    unseen = False
    # the fleet's: how much of the typed text and the target's words is shown, and where the rest is read
    cut: describe.Cut | None = None
    # the drill just answered, revealed (core/drills.py): said above the request that follows it, until
    # that one is answered
    revealed = ""
    # A run's screen binds its RunView here (data_bind, as the batch pane's): the panel shows the request the
    # view has open, with the batch it is of; the screen says what the view does not (``facts``). The
    # fleet's panel is told its request instead (``show_request``).
    view: reactive[RunView | None] = reactive(None, init=False, always_update=True, layout=False, repaint=False)
    run_task = ""
    field = False
    _from_view: tuple[DecisionRequest | None, int, str] = (None, 0, "")

    def watch_view(self, view: RunView | None) -> None:
        """Drawn again when the view's open request, or its batch, moved on."""
        if view is None:
            return
        request, size, words = self._from_view
        if view.open_request is not request or (view.batch_size, view.batch_text) != (size, words):
            self.redraw()

    def facts(self, *, task: str, destination: str | None, field: bool) -> None:
        """What the bound view does not say of its request: the task, the words read at the target, whether
        typing has a known field; drawn with it by ``redraw``."""
        self.run_task, self._destination, self.field = task, destination, field

    def redraw(self) -> None:
        """The bound view's open request (None: the panel hides), as the facts last given say it."""
        view = self.view
        if view is None:
            return
        self._from_view = (view.open_request, view.batch_size, view.batch_text)
        self.show_request(
            view.open_request, view.batch_size, self.run_task, self._destination, field=self.field,
            model_text=view.batch_text,
        )  # fmt: skip

    def show_request(
        self,
        request: DecisionRequest | None,
        batch_size: int = 0,
        task: str = "",
        destination: str | None = None,
        *,
        field: bool = False,
        model_text: str = "",
    ) -> None:
        """Show ``request`` (None hides the panel); ``destination``: the words read at the target (they may
        arrive later, from the screen's OCR: ``set_destination``); ``model_text``: the model's words for
        its batch."""
        self.display = request is not None
        if self.parent is not None:
            # a small terminal at a decision: the panes beside it make room
            self.parent.set_class(request is not None and self.compact, "deciding-compact")
        self._shown = (request, batch_size, task, field, model_text)
        self._destination = destination
        if request is None:
            self.update("")
            return
        text = Text()
        parts = describe.request_panel(
            request, batch_size, task, destination, field=field, model_text=model_text, compact=self.compact,
            edit=self.can_edit, left=self.left, injection=self.injection, cut=self.cut,
        )  # fmt: skip
        for part, role in self.framed(parts):
            text.append(part, style=role_style(role))
        self.update(text)

    def framed(self, parts: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The panel's parts as shown: as ``describe.request_panel`` words them, a fleet's run named."""
        if self.run_name or self.closed:
            parts = fleet_parts(parts, self.run_name, self.closed, self.group, self.apart, self.who)
        if self.unseen and parts:
            note = "screen  not shown at this size: widen the terminal or open the run (Enter)\n"
            parts = [parts[0], (note, describe.WARN), *parts[1:]]
        if self.revealed and parts:
            parts = [(visible(self.revealed, limit=600) + "\n", describe.WARN), *parts]
        return parts

    def set_unseen(self, unseen: bool) -> None:
        """The desktop pane left the layout (or came back): the panel says whether the screen is shown."""
        self.unseen = unseen
        request, batch_size, task, field, model_text = self._shown
        if request is not None:
            self.show_request(request, batch_size, task, self._destination, field=field, model_text=model_text)

    def set_left(self, left: float | None) -> None:
        """The countdown moved (a second passed): the panel says the time left."""
        self.left = left
        request, batch_size, task, field, model_text = self._shown
        if request is not None:
            self.show_request(request, batch_size, task, self._destination, field=field, model_text=model_text)

    def set_injection(self, injection: Injection | None) -> None:
        """The screen's text arrived: a possible injection beside the model's words (or none)."""
        if injection == self.injection:
            return
        self.injection = injection
        request, batch_size, task, field, model_text = self._shown
        if request is not None:
            self.show_request(request, batch_size, task, self._destination, field=field, model_text=model_text)

    def set_destination(self, destination: str | None, *, field: bool = False) -> None:
        """Redraw the shown request with new words read at the target (the OCR of the screen arrived)."""
        request, batch_size, task, _, model_text = self._shown
        if request is not None:
            self.show_request(request, batch_size, task, destination, field=field, model_text=model_text)

    def set_compact(self, compact: bool) -> None:
        """Switch between the full and the compact panel (the terminal was resized)."""
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "compact")
            request, batch_size, task, field, model_text = self._shown
            self.show_request(request, batch_size, task, self._destination, field=field, model_text=model_text)


def fleet_parts(
    parts: list[tuple[str, str]], run_name: str, closed: str | None, group: str = "", apart: str = "", who: str = ""
) -> list[tuple[str, str]]:
    """The single run's panel parts with the run named under the title (and the group it stands for, and
    why it is not one with another row that reads the same); closed: the title says so and the keys that
    answer give way to why it closed."""
    title, rest = parts[0], parts[1:]
    out = [title]
    if closed is not None:
        head = title[0].replace("DECISION NEEDED", "CLOSED", 1)
        out = [(head if head != title[0] else " CLOSED ·" + head, title[1])]
    if run_name:
        out += [("run     ", describe.LABEL), (run_name + "\n", "")]
    if group and closed is None:
        out += [("group   ", describe.LABEL), (group + "\n", "bold")]
    if apart and closed is None:
        out += [("apart   ", describe.LABEL), (apart + "\n", "")]
    if who and closed is None:
        out += [("who     ", describe.LABEL), (who + "\n", "bold")]
    if closed is None:
        return out + rest
    keys = next((i for i, (text, role) in enumerate(rest) if role == describe.KEY and text == "y"), len(rest))
    return [
        *out,
        *rest[:keys],
        ("closed  ", describe.LABEL),
        (f"{closed}: nothing here can be answered; up / down picks another request", ""),
    ]
