"""The audit pane: the run's audit events (selectable; Enter opens one in full), the chain's state and head
hash, and ``/`` to search and filter them by text and by kind."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Static

from ..core import events as ev
from ..core.text import visible
from .audit_list import KINDS, AuditList, Entry, Query
from .detail import event_detail
from .keys import RUN, bindings
from .literal import LiteralInput


class AuditPane(Vertical):
    can_focus = False
    BINDINGS = bindings(RUN, only=("search",))  # / also in a replay's audit pane (tui/keys.toml)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Audit log"
        self.events = 0
        self.head = "0" * 64
        self.state = "live"

    def compose(self) -> ComposeResult:
        yield Static(id="chain")
        yield AuditList(id="audit-log")  # the search box is mounted above it by `/`

    def on_mount(self) -> None:
        self._show_chain()

    @property
    def audit_list(self) -> AuditList:
        return self.query_one(AuditList)

    def entries(self) -> list[Entry]:
        """The events this pane still holds, oldest first."""
        return list(self.audit_list.entries)

    def record(self, event: ev.Event, seq: int, head: str, *, chain: bool = True) -> None:
        prev = self.head if seq == self.events else None  # the line before, when this pane saw it
        self.events, self.head = seq + 1, head
        self.audit_list.add(seq, head, event, prev)
        if chain:
            self._show_chain()

    def show_tail(self, events: Sequence[ev.Stamped], upto: int, tail: int) -> None:
        """Show the events of a run read back up to event ``upto`` (the last ``tail`` of them). Moving on
        by a few events only appends those (replay steps forward one action at a time)."""
        log = self.audit_list
        if upto < self.events or upto - self.events > tail:
            log.clear()
            start = max(0, upto - tail)
            self.head = events[start - 1].head if start else "0" * 64
            self.events = start
        else:
            start = self.events
        for stamped in events[start:upto]:
            self.record(stamped.event, stamped.seq, stamped.head, chain=False)
        self.events = upto
        if upto and upto <= len(events):
            self.head = events[upto - 1].head
        self._show_chain()

    def set_state(self, state: str) -> None:
        self.state = state
        self._show_chain()

    def _show_chain(self) -> None:
        text = Text()
        text.append("record ", style="bold")  # the audit log's state (core/ending.py)
        text.append(f"{self.state} · {self.events} events · head {self.head[:16]}…")
        self.query_one("#chain", Static).update(text)
        search = self.audit_list.search
        if search.active:
            shown, held = len(self.audit_list.shown), len(self.audit_list.entries)
            unknown = f" · no kind {visible(', '.join(search.unknown), limit=40)}" if search.unknown else ""
            # Text: a str border title is parsed as markup, and the filter may be text pasted from
            # the page
            self.border_subtitle = Text(f"filter: {visible(search.text, limit=40)} · {shown} of {held}{unknown}")
        else:
            self.border_subtitle = ""

    # ---------------------------------------------------------------------------------------------
    # Search and detail
    # ----------------------------------------------------------------------------------------------
    def action_search(self) -> None:
        """``/``: type words (all must appear) and ``kind:NAME`` terms; the list filters as you type."""
        found = self.query("#audit-search").results(Input)
        search = next(found, None)
        if search is None:
            search = LiteralInput(
                self.audit_list.search.text,
                placeholder="search: words, kind:NAME[,NAME] · Enter keeps the filter, Esc clears it",
                id="audit-search",
            )
            self.mount(search, before=self.audit_list)
        search.focus()

    def on_input_changed(self, message: Input.Changed) -> None:
        if message.input.id != "audit-search":
            return
        message.stop()
        self.audit_list.apply_query(Query.parse(message.value))
        self._show_chain()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        """Enter keeps the filter and goes to the list."""
        if message.input.id != "audit-search":
            return
        message.stop()
        unknown = self.audit_list.search.unknown
        if unknown:
            self.app.notify(
                f"no event kind {visible(', '.join(unknown), limit=80)}; kinds: {' '.join(KINDS)}",
                title="search",
                severity="warning",
                markup=False,
            )
        self._close_search(keep=True)

    def on_key(self, event: events.Key) -> None:
        search = next(self.query("#audit-search").results(Input), None)
        if event.key == "escape" and search is not None and search.has_focus:
            # Esc clears the filter
            event.stop()
            self._close_search(keep=False)

    def _close_search(self, *, keep: bool) -> None:
        search = next(self.query("#audit-search").results(Input), None)
        if not keep:
            self.audit_list.apply_query(Query())
        if search is not None and not (keep and search.value.strip()):
            search.remove()  # an active filter stays in view; no filter, no box
        self.audit_list.focus()
        self._show_chain()

    def on_audit_list_opened(self, message: AuditList.Opened) -> None:
        message.stop()
        self.app.push_screen(event_detail(message.entry))
