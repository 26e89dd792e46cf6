"""Screens of the richer decisions: a rejection's reason, and the list of scoped approvals in force."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..core import events as ev
from ..core.text import visible
from .keys import ASIDE, GRANTS, REASON, bindings
from .literal import LiteralInput

# characters: a one-line reason, as the model hears it after the fixed decline text
REASON_MAX = 300
# minutes a request is set aside for, unless the analyst says otherwise; the most the queue takes
ASIDE_DEFAULT_MIN = 10.0
ASIDE_MAX_MIN = 1440.0


class RejectReason(ModalScreen[str | None]):
    """After ``n``: an optional one-line reason. Enter sends it (empty: none), Esc rejects without one.

    While it is open, ``k`` types into the reason; the kill switch is ``ctrl+k`` (always bound)."""

    BINDINGS = bindings(REASON)  # tui/keys.toml

    def compose(self) -> ComposeResult:
        with Vertical(id="reason-box"):
            yield Static(
                Text.assemble(
                    ("Reject", "bold"),
                    " · a reason for the model (optional, one line): Enter rejects with it, Esc without.\n",
                    ("ctrl+k", "bold reverse"),
                    " is the kill switch while you type.",
                )
            )
            yield LiteralInput(
                placeholder="why (the model hears it after: Declined by the user…)",
                max_length=REASON_MAX,
                # a letter typed before the focus came must not be selected away
                select_on_focus=False,
            )

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_key(self, event: events.Key) -> None:
        """A letter typed in the moment before the field has the focus belongs to the reason: never lost."""
        field = self.query_one(Input)
        if not field.has_focus and event.is_printable and event.character:
            field.focus()
            field.insert_text_at_cursor(event.character)
            event.stop()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        self.dismiss(" ".join(message.value.split()))

    def action_skip(self) -> None:
        self.dismiss(None)


class SetAside(ModalScreen[float | None]):
    """After ``l`` on a team's queue: for how many minutes the request leaves this analyst's view (Enter: 10)."""

    BINDINGS = bindings(ASIDE)  # tui/keys.toml

    def compose(self) -> ComposeResult:
        with Vertical(id="aside-box"):
            yield Static(
                Text.assemble(
                    ("Set aside", "bold"),
                    f" · for how many minutes (Enter: {ASIDE_DEFAULT_MIN:g}; up to {ASIDE_MAX_MIN:g}): it leaves your "
                    "view, not the others', comes back after, and is not answered. Esc keeps it.",
                )
            )
            yield LiteralInput(placeholder=f"{ASIDE_DEFAULT_MIN:g}", max_length=8, select_on_focus=False)
            yield Static("", id="aside-why")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        text = message.value.strip() or f"{ASIDE_DEFAULT_MIN:g}"
        try:
            minutes = float(text)
        except ValueError:
            minutes = -1.0
        if not (0 < minutes <= ASIDE_MAX_MIN):
            self.query_one("#aside-why", Static).update(Text(f"a number of minutes, up to {ASIDE_MAX_MIN:g}"))
            return
        self.dismiss(minutes)

    def action_keep(self) -> None:
        self.dismiss(None)


async def open_reason(app: App[object], done: Callable[[str | None], None]) -> None:
    """The reason's box on top, its field focused when this returns: the keys typed right after ``n`` are
    the reason's, in the order typed."""
    box = RejectReason()
    await app.push_screen(box, done)
    box.set_focus(box.query_one(Input), scroll_visible=False)


class GrantsScreen(ModalScreen[int | None]):
    """The scoped approvals in force; Enter revokes the selected one, Esc closes."""

    BINDINGS = bindings(GRANTS)  # tui/keys.toml

    def __init__(self, grants: list[ev.GrantAdded]) -> None:
        super().__init__()
        self.grants = grants

    def compose(self) -> ComposeResult:
        with Vertical(id="grants-box"):
            if not self.grants:
                yield Static("No scoped approvals in force. (a approves an action and its scope at a decision.)")
                return
            yield Static(Text("Scoped approvals in force · Enter revokes the selected one · Esc closes", "bold"))
            yield OptionList(
                *(
                    Option(
                        Text(
                            f"#{g.grant}  {visible(g.label, limit=100)}  · given by {visible(g.by, limit=60)}"
                            f" at turn {g.turn}, action {g.index + 1}"
                        ),
                        id=str(g.grant),
                    )
                    for g in self.grants
                )
            )

    def on_option_list_option_selected(self, message: OptionList.OptionSelected) -> None:
        self.dismiss(int(message.option.id or 0) or None)

    def action_close(self) -> None:
        self.dismiss(None)
