"""The help screen: the shown view's keys, as its bindings say them (tui/keys.py), and its active policy."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core.text import visible
from .keys import HELP, bindings


class HelpScreen(ModalScreen[None]):
    BINDINGS = bindings(HELP)  # esc, ? and q close it (tui/keys.toml)

    def __init__(self, policy_lines: list[str], keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.policy_lines = policy_lines
        self.keys = keys

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Keys\n", style="bold underline")
        for key, what in self.keys:
            text.append(f"  {key:<7} ", style="bold")  # a key longer than the column: still a space after
            text.append(what + "\n")
        text.append("\nActive policy\n", style="bold underline")
        for line in self.policy_lines:
            text.append("  " + visible(line) + "\n")
        text.append("\nPress escape to close.", style="dim")
        with VerticalScroll(id="help-body"):
            yield Static(text)
