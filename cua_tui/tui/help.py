"""The help screen: keys and a summary of the active policy."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core.text import visible

KEYS = [
    ("y", "approve the pending action (only while a decision is pending)"),
    ("a", "approve it and every later action of its scope (shown in the panel) for the rest of the run"),
    ("e", "edit it (the text, the point, the chord, the scroll), then Enter approves it as edited"),
    ("n", "reject it, with an optional reason the model hears: the batch halts"),
    ("k", "kill switch: nothing more runs, input released, desktop stopped, run ends killed (ctrl+k too)"),
    ("ctrl+\\", "kill switch too, in passthrough as well (there every other key but ctrl+] is the desktop's)"),
    ("g", "the scoped approvals in force; Enter revokes the selected one"),
    ("x", "the alerts have been seen: the alert line goes until the next one"),
    ("z", "whole screen / zoom: at a decision the pane frames the target (for typing, the field clicked last)"),
    ("t", "the screen as text (OCR): the words nearest the target first, then the whole page; type to search"),
    ("o", "write the full-resolution screenshot to a file (says where) and open it in the system viewer"),
    ("/", "search the audit log: words, kind:NAME (Enter keeps the filter, Esc clears it)"),
    ("enter", "in the audit log (up/down or a click selects): the event in full; c copies its hash"),
    ("click", "a batch row or an earlier turn: its detail; the wheel scrolls the panes"),
    ("?", "this help"),
    ("ctrl+p", "command palette: approve, reject, kill, zoom, copy, verify now, show policy, themes, ..."),
    ("q", "quit once the run has ended"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "close")]

    def __init__(self, policy_lines: list[str], keys: list[tuple[str, str]] = KEYS) -> None:
        super().__init__()
        self.policy_lines = policy_lines
        self.keys = keys

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Keys\n", style="bold underline")
        for key, what in self.keys:
            text.append(f"  {key:<8}", style="bold")
            text.append(what + "\n")
        text.append("\nActive policy\n", style="bold underline")
        for line in self.policy_lines:
            text.append("  " + visible(line) + "\n")
        text.append("\nPress escape to close.", style="dim")
        with VerticalScroll(id="help-body"):
            yield Static(text)
