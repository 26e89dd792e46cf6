"""The audit list: one line per audit event, selectable with the keys and the mouse, filtered, bounded.

It keeps the stamped events it shows (at most ``MAX_ENTRIES``; the oldest go first), so every line still
shown can be opened in full. Lines are drawn through the line API (``render_line``), so a long run costs
no widget per event. Event text is untrusted (model text, reasons, page titles): every line is built as
a ``rich.text.Text`` from ``visible`` text, never parsed as markup.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..core import events as ev
from ..core.describe import audit_line
from ..core.text import visible_parts
from ..core.values import Verdict
from .keys import AUDIT, bindings
from .literal import escape_style
from .scrolling import set_virtual_size

# events kept and shown (the audit log on disk keeps them all)
MAX_ENTRIES = 2000
LINE_LIMIT = 300  # characters of one line
HAYSTACK_LIMIT = 4000  # characters of an event's JSON searched by `/`
KINDS = tuple(sorted(ev.EVENT_TYPES))  # the event type names `kind:` accepts


def marked(head: str, line: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """``head`` and the untrusted ``line`` made visible (at most LINE_LIMIT characters), and where the
    stand-ins are in the result."""
    out, marks = [head], []
    at = len(head)
    for part, escaped in visible_parts(line, limit=LINE_LIMIT):
        if escaped:
            marks.append((at, at + len(part)))
        out.append(part)
        at += len(part)
    return "".join(out), tuple(marks)


# how far back a drill's place is looked for among the pane's lines (a turn's words, its batch's proposals)
STAND_IN_LOOKBACK = 400


@dataclass(slots=True)
class Entry:
    """One event as written, with its chain place: ``head`` is the SHA-256 of its line, ``prev`` that of
    the line before (when this pane saw it)."""

    seq: int
    head: str
    event: ev.Event
    prev: str | None = None
    line: str = ""
    # where ``line`` has a stand-in for a hidden character (drawn in reverse video)
    marks: tuple[tuple[int, int], ...] = ()
    _haystack: str | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        return self.event.kind

    def record(self) -> dict[str, Any]:
        """Every field the audit log has for this event, with its place in the chain."""
        return {"seq": self.seq, "kind": self.kind, **self.event.to_record()}

    @property
    def haystack(self) -> str:
        """What a text search looks in: the line and the event's JSON, lower case."""
        if self._haystack is None:
            record = json.dumps(self.record(), ensure_ascii=False, default=str)[:HAYSTACK_LIMIT]
            self._haystack = f"{self.line}\n{record}\n{self.head}".lower()
        return self._haystack


@dataclass(frozen=True)
class Query:
    """What ``/`` typed: words that must all appear (any case), and ``kind:NAME[,NAME...]`` terms that keep
    only events of those kinds (a NAME that is no kind's name stands for the kinds it begins).
    ``unknown`` lists the names that begin no event type's name."""

    text: str = ""
    words: tuple[str, ...] = ()
    kinds: frozenset[str] = frozenset()
    unknown: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Query:
        words: list[str] = []
        kinds: set[str] = set()
        unknown: list[str] = []
        for token in text.split():
            if token.lower().startswith("kind:"):
                for name in filter(None, token[5:].lower().split(",")):
                    # a name, or the start of names (kind:dec is decision and decision_requested)
                    named = {name} if name in ev.EVENT_TYPES else {k for k in KINDS if k.startswith(name)}
                    kinds.update(named)
                    if not named:
                        unknown.append(name)
            else:
                words.append(token.lower())
        return cls(text, tuple(words), frozenset(kinds), tuple(unknown))

    @property
    def active(self) -> bool:
        return bool(self.words or self.kinds or self.unknown)

    def matches(self, entry: Entry) -> bool:
        if self.unknown:  # a kind that does not exist: nothing is of it
            return False
        if self.kinds and entry.kind not in self.kinds:
            return False
        return all(word in entry.haystack for word in self.words)


class AuditList(ScrollView, can_focus=True):
    """The audit events, newest last. Up/down (and a click) select a line; Enter opens it (``Opened``).
    With no line selected the list follows the newest event."""

    DEFAULT_CSS = """
    AuditList {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        &:focus {
            background-tint: $foreground 5%;
        }
    }
    AuditList > .audit-list--cursor {
        background: $accent 40%;
        text-style: bold;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"audit-list--cursor"}
    # the moves, and enter: the event in full (tui/keys.toml)
    BINDINGS: ClassVar[list[BindingType]] = bindings(AUDIT)

    class Opened(Message):
        """The reviewer asked to see ``entry`` in full (Enter, or a click on the selected line)."""

        def __init__(self, entry: Entry) -> None:
            super().__init__()
            self.entry = entry

    def __init__(self, *, max_entries: int = MAX_ENTRIES, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: deque[Entry] = deque(maxlen=max_entries)
        self.search = Query()
        self._shown: list[Entry] | None = None  # the entries matching the query; None: all of them
        # a live run's pane: a drill's line reads as a request's while it is up (a replay says it was a drill)
        self.live = False
        # while a drill is up on a live pane: the lines of its place (the turn's words, the proposal and the
        # verdict of the action it stands in front of) read as the drill's, and what they were, to put back
        self._stood_in: list[tuple[Entry, ev.Event]] = []
        # index into ``shown``; None follows the newest event
        self.cursor: int | None = None
        self._widest = 0

    # ---------------------------------------------------------------------------------------------
    @property
    def shown(self) -> list[Entry] | deque[Entry]:
        return self.entries if self._shown is None else self._shown

    @property
    def selected_entry(self) -> Entry | None:
        shown = self.shown
        if not shown:
            return None
        return shown[self.cursor] if self.cursor is not None and self.cursor < len(shown) else shown[-1]

    def add(self, seq: int, head: str, event: ev.Event, prev: str | None = None) -> Entry:
        if self.live and isinstance(event, ev.DrillShown):
            self._stand_in(event)
        elif self._stood_in and isinstance(event, ev.DrillAnswered | ev.DecisionRequested | ev.RunEnded):
            self._put_back()
        entry = Entry(seq, head, event, prev, *marked(f"{seq:>4} ", audit_line(event, live=self.live)))
        follow = self.cursor is None and self.scroll_offset.y >= self.max_scroll_y
        evicted = self.entries[0] if len(self.entries) == self.entries.maxlen else None
        self.entries.append(entry)
        if self._shown is not None:
            if evicted is not None and self._shown and self._shown[0] is evicted:
                del self._shown[0]
                self._shifted()
            if self.search.matches(entry):
                self._shown.append(entry)
        elif evicted is not None:
            self._shifted()
        self._widest = max(self._widest, len(entry.line))
        self._resize()
        if follow:
            self.scroll_end(animate=False, immediate=False, x_axis=False)
        return entry

    def _stand_in(self, shown: ev.DrillShown) -> None:
        """The lines a drill's place already has, read as the drill's while it is up: a request of that place
        would have come with them (the pane lists a batch's words and proposals before its requests)."""
        self._put_back()
        request, action = shown.request, shown.request.action if shown.request is not None else None
        if request is None:
            return
        for entry in list(self.entries)[-STAND_IN_LOOKBACK:]:
            event = entry.event
            twin: ev.Event | None = None
            if isinstance(event, ev.ModelTurn) and event.turn == shown.turn and shown.words:
                twin = replace(event, text=shown.words)
            elif isinstance(event, ev.ActionProposed) and (event.turn, event.index) == (shown.turn, shown.index):
                if action is not None:
                    twin = replace(event, action=action.to_record(), summary=action.describe(), parsed=action)
            elif isinstance(event, ev.PolicyVerdict) and (event.turn, event.index) == (shown.turn, shown.index):
                twin = replace(event, verdict=Verdict.CONFIRM, reason=request.reason, rule=shown.rule)
            if twin is not None:
                self._stood_in.append((entry, event))
                self._show_as(entry, twin)
        self.refresh()

    def _put_back(self) -> None:
        """The drill answered (or another request asked): its place's lines read as they were written."""
        for entry, event in self._stood_in:
            self._show_as(entry, event)
        self._stood_in.clear()
        self.refresh()

    @staticmethod
    def _show_as(entry: Entry, event: ev.Event) -> None:
        entry.event = event
        entry.line, entry.marks = marked(f"{entry.seq:>4} ", audit_line(event, live=True))
        entry._haystack = None

    def _shifted(self) -> None:
        """The first line shown went: what was selected moves up one place."""
        if self.cursor is not None:
            self.cursor = max(0, self.cursor - 1)
        if self.scroll_offset.y > 0:
            self.scroll_to(y=self.scroll_offset.y - 1, animate=False, immediate=True)

    def clear(self) -> None:
        self.entries.clear()
        self._shown = None if not self.search.active else []
        self.cursor = None
        self._widest = 0
        self._resize()

    def apply_query(self, query: Query) -> None:
        """Show only the entries ``query`` matches (all of them for an empty query); the newest is followed."""
        self.search = query
        self._shown = [e for e in self.entries if query.matches(e)] if query.active else None
        self.cursor = None
        self._resize()
        self.scroll_end(animate=False, immediate=False, x_axis=False)

    def _resize(self) -> None:
        # no new layout of the screen per event
        set_virtual_size(self, Size(self._widest, len(self.shown)))
        self.refresh()

    # ---------------------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index = scroll_y + y
        shown = self.shown
        if index >= len(shown):
            return Strip.blank(width, self.rich_style)
        style: Style = self.rich_style
        if index == self.cursor:
            style = style + self.get_component_rich_style("audit-list--cursor")
        entry = shown[index]
        text = Text(entry.line, no_wrap=True, overflow="ignore", end="")
        for start, end in entry.marks:
            text.stylize(escape_style(), start, end)
        strip = Strip(list(text.render(self.app.console)))
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_style(style)

    def action_cursor(self, delta: int) -> None:
        count = len(self.shown)
        if not count:
            return
        start = self.cursor if self.cursor is not None else count  # from the newest: up selects it
        self.select_line(max(0, min(count - 1, start + delta)))

    def action_cursor_to(self, index: int) -> None:
        if self.shown:
            self.select_line(index % len(self.shown))

    def select_line(self, index: int) -> None:
        self.cursor = index
        self._keep_in_view(index)
        self.refresh()

    def _keep_in_view(self, index: int) -> None:
        height = self.scrollable_content_region.height
        top = self.scroll_offset.y
        if index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif height and index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False, immediate=True)

    def action_open(self) -> None:
        entry = self.selected_entry
        if entry is not None:
            if self.cursor is None:
                self.select_line(len(self.shown) - 1)
            self.post_message(self.Opened(entry))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = self.scroll_offset.y + offset.y
        if 0 <= index < len(self.shown):
            again = index == self.cursor
            self.focus()
            self.select_line(index)
            if again or event.chain > 1:  # a second click (or a double click) opens it
                self.post_message(self.Opened(self.shown[index]))
