"""Detail screens: one audit event in full, one action of the batch, a turn of the history, a text (the
policy), and copying ids and hashes to the clipboard.

Everything shown comes from the run (model text, page titles, reasons): it is built as ``rich.text.Text``
from ``visible`` text, so markup such as ``[red]`` and escape sequences are shown, never obeyed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core import events as ev
from ..core.text import visible
from .audit_list import Entry
from .keys import DETAIL, bindings

# characters of one event's JSON shown (a model's text can be long)
DETAIL_LIMIT = 200_000
# characters of a copied value the notification shows
COPIED_SHOWN = 400


def copy(app: App[Any], label: str, value: str) -> None:
    """Put ``value`` on the clipboard (OSC 52: the terminal's own clipboard, over ssh too) and say what."""
    app.copy_to_clipboard(value)
    # whole up to a long path's length (a run directory under a deep temporary folder passed 100): the person
    # checks what went to the clipboard; a model's long text is still cut
    app.notify(f"copied {label}: {visible(value, limit=COPIED_SHOWN)}", title="clipboard", markup=False)


@dataclass(frozen=True)
class Copyable:
    key: str  # the key that copies it in the detail screen
    label: str
    value: str


class DetailScreen(ModalScreen[None]):
    """A scrollable, literal text over the TUI; ``c`` / ``j`` / ``r`` copy what the screen offers."""

    BINDINGS = bindings(DETAIL)  # esc or q closes, c j r copy (tui/keys.toml)

    def __init__(self, title: str, body: Text, copies: Iterable[Copyable] = ()) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.copies = {c.key: c for c in copies}

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail-body") as body:
            # a str border title is parsed as markup
            body.border_title = Text(visible(self.title_text, limit=100))
            keys = "  ".join(f"{c.key} copies the {c.label}" for c in self.copies.values())
            body.border_subtitle = Text(f"{keys}  · esc closes" if keys else "esc closes")
            yield Static(self.body, id="detail-text")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "copy":
            return parameters[0] in self.copies
        return True

    def action_copy(self, key: str) -> None:
        found = self.copies.get(key)
        if found is not None:
            copy(self.app, found.label, found.value)


# ------------------------------------------------------------------------------------------------
# What the screens show
# --------------------------------------------------------------------------------------------------
def pretty(record: dict[str, Any]) -> str:
    """The record as indented JSON, shown literally: control characters come out as JSON escapes
    (``\\u001b``) and the rest through ``visible`` (bidi overrides, zero-width characters)."""
    text = json.dumps(record, indent=2, ensure_ascii=False, default=str)
    if len(text) > DETAIL_LIMIT:
        text = text[:DETAIL_LIMIT] + f"\n… (cut at {DETAIL_LIMIT} characters; the audit log has all of it)"
    return visible(text, keep_newlines=True)


def event_detail(entry: Entry) -> DetailScreen:
    """One audit event in full: its seq, its chain hash, the hash before it, and every field."""
    text = Text()
    text.append(f"event {entry.seq}", style="bold")
    text.append(f" · {entry.kind}\n")
    text.append("hash  ", style="bold")
    text.append(f"{entry.head}  (SHA-256 of this line of audit.jsonl)\n")
    if entry.prev is not None:
        text.append("prev  ", style="bold")
        text.append(f"{entry.prev}  (the line before)\n")
    text.append("\n")
    text.append(pretty(entry.record()))
    copies = [
        Copyable("c", "event hash", entry.head),
        Copyable("j", "event JSON", json.dumps(entry.record(), ensure_ascii=False, default=str)),
    ]
    return DetailScreen(f"Audit event {entry.seq} · {entry.kind}", text, copies)


@dataclass(frozen=True)
class RowSnapshot:
    """One action of a turn as the batch pane showed it."""

    turn: int
    index: int
    kind: str
    params: str
    verdict: str
    reason: str
    state: str
    decided_by: str
    # what the model proposed, when the reviewer changed it (``params`` is what ran)
    proposed: str = ""


def _action_events(entries: Iterable[Entry], turn: int, index: int) -> list[Entry]:
    return [e for e in entries if getattr(e.event, "turn", None) == turn and getattr(e.event, "index", None) == index]


def action_detail(row: RowSnapshot, entries: Iterable[Entry]) -> DetailScreen:
    """One action: its parameters in full, the verdict and its reason, its state and who decided, and the
    audit events of it still in the audit pane (what the model heard is in its ``outcome``)."""
    text = Text()
    text.append(f"Turn {row.turn} · action {row.index + 1} · {visible(row.kind, limit=40)}\n", style="bold")
    for label, value in (
        ("parameters", row.params),
        ("as proposed", f"{row.proposed} (the reviewer changed it before it ran)" if row.proposed else ""),
        ("verdict", f"{row.verdict.upper()}: {row.reason}" if row.reason else row.verdict.upper()),
        ("state", row.state.replace("_", " ")),
        ("decided by", row.decided_by),
    ):
        if value:
            text.append(f"{label:<11} ", style="bold")
            text.append(visible(value) + "\n")
    found = _action_events(entries, row.turn, row.index)
    rule = next((e.event.rule for e in found if isinstance(e.event, ev.PolicyVerdict) and e.event.rule), "")
    if rule:
        text.append(f"{'rule':<11} ", style="bold")
        text.append(visible(rule) + "\n")
    copies: list[Copyable] = []
    if found:
        text.append("\nIts audit events\n", style="bold underline")
        for entry in found:
            text.append(f"\nevent {entry.seq} · {entry.kind} · hash {entry.head}\n", style="bold")
            text.append(pretty(entry.event.to_record()) + "\n")
        proposal = next((e for e in found if isinstance(e.event, ev.ActionProposed)), None)
        if proposal is not None:
            copies.append(Copyable("c", "proposal's hash", proposal.head))
    else:
        text.append("\n(its audit events are no longer in the audit pane: `cua-tui replay` has them)\n", style="dim")
    return DetailScreen(f"Turn {row.turn} · action {row.index + 1}", text, copies)


def turn_detail(turn: int, model_text: str, rows: list[RowSnapshot], entries: Iterable[Entry]) -> DetailScreen:
    """An earlier turn of the history: the model's words and each action with its verdict and state."""
    text = Text()
    text.append(f"Turn {turn} · {len(rows)} action{'s' if len(rows) != 1 else ''}\n", style="bold")
    if model_text:
        text.append("model: ", style="bold")
        text.append(visible(model_text, keep_newlines=True) + "\n")
    kept = list(entries)
    for row in rows:
        text.append(f"\n{row.index + 1:>2} {visible(row.kind, limit=40)}  ", style="bold")
        text.append(visible(row.params) + "\n")
        text.append(f"   {row.verdict.upper()}", style="bold")
        if row.reason:
            text.append(f" {visible(row.reason)}")
        text.append(f"  →  {row.state.replace('_', ' ').upper()}")
        if row.decided_by and row.decided_by != "policy":
            text.append(f" ({visible(row.decided_by)})", style="italic")
        text.append("\n")
        outcome = next(
            (e.event for e in _action_events(kept, turn, row.index) if isinstance(e.event, ev.Outcome)), None
        )
        if outcome is not None:
            text.append("   the model heard: ", style="dim")
            text.append(visible(outcome.message, limit=400) + "\n")
    return DetailScreen(f"Turn {turn}", text)


def text_screen(title: str, lines: Iterable[str]) -> DetailScreen:
    """Lines from the run (the policy summary) shown literally."""
    text = Text()
    for line in lines:
        text.append(visible(line) + "\n")
    return DetailScreen(title, text)
