"""The fleet queue's rules, the same for the fleet TUI and a headless fleet: what is read of each pending
request's screen (a possible injection, or that it could not be read), the order (possible injections
first, before every tier; then the model's safety checks, then the risk tiers, then age), and the groups
(the same decision in many runs, core/grouping.py's likeness). The rules, for people: docs/commands/fleet.md,
"The queue" and "Groups". Pure: the screen's text comes in read (an engine behind core.screentext's
``ScreenTextReader``, run by the front end); no threads, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .fleet_queue import QueueItem
from .grouping import Likeness
from .injection import Injection, find_injection
from .screentext import ScreenText
from .text import visible

# the order above, as the fleet's screen states it under the queue (``QueueRules.ordered`` and the tiers)
ORDER_LINE = (
    "Queue order: possible injections first, then the model's safety checks, then clicks in marked regions "
    "and transmissions (typing, Return and the keys that send), then any other rule; the oldest first within "
    "each. On a team's queue, a request escalated to your group comes first, and one on another analyst's panel "
    "(read by them) after the others."
)


class QueueRules:
    """The pending requests of a fleet (``items``, first to decide first) and what their order and groups
    depend on: ``hints``, a possible injection per request whose screen was read (None: none found, or
    nothing to read); ``unreadable``, those whose screen the engine could not read; ``held``, those kept
    out of every group for now, and why; ``groups``. ``reading``: an engine reads screens (without one, no
    request waits to be read before it joins a group). ``read_by``: on a team's queue, who else has a request
    on their panel now; those come after the unread ones (a possible injection stays first)."""

    def __init__(self, *, grouping: bool = True, reading: bool = True) -> None:
        self.grouping = grouping
        self.reading = reading
        self.items: list[QueueItem] = []
        self.hints: dict[int, Injection | None] = {}
        self.unreadable: set[int] = set()
        self.held: dict[int, str] = {}
        self.groups: list[Group] = []
        self.read_by: Mapping[int, tuple[str, ...]] = {}

    @property
    def tickets(self) -> set[int]:
        return {item.ticket for item in self.items}

    def pending(self, items: Iterable[QueueItem]) -> None:
        """The requests pending now (what is known of those that left is forgotten); then ``settle``."""
        self.items = list(items)
        tickets = self.tickets
        for ticket in [t for t in self.hints if t not in tickets]:
            del self.hints[ticket]
        self.unreadable &= tickets
        self.settle()

    def answered(self, tickets: Collection[int]) -> None:
        """``tickets`` left the queue (answered here): the others keep their order; then the groups again."""
        self.items = [item for item in self.items if item.ticket not in tickets]
        self.regroup()

    def ordered(self, items: Iterable[QueueItem]) -> list[QueueItem]:
        """The fleet's order (tier, then age), with the possible injections before every tier, and on a team's
        queue those another analyst reads after those nobody else does."""
        return sorted(
            items,
            key=lambda item: (
                not (item.deciders is not None and item.deciders.escalated),
                self.hints.get(item.ticket) is None,
                bool(self.read_by.get(item.ticket)) and self.hints.get(item.ticket) is None,
                item.order,
            ),
        )

    def settle(self) -> None:
        """The order and the groups again, after a screen was read or the queue changed."""
        self.items = self.ordered(self.items)
        self.regroup()

    def to_read(self, like: QueueItem | None = None) -> QueueItem | None:
        """The next pending request whose screen is to be read (None: every one is read); those that read like
        ``like`` first (each joins its group once read). A request with no screen to read (a safety check, a
        budget's question) has nothing to find."""
        seen = look(like) if like is not None else None
        for item in sorted(self.items, key=lambda item: look(item) != seen):
            if item.ticket in self.hints:
                continue
            if item.request.kind != "action" or item.request.frame is None:
                self.hints[item.ticket] = None
                continue
            return item
        return None

    def read(self, item: QueueItem, text: ScreenText | None, model_text: str, allowed: Iterable[str]) -> None:
        """What the engine read of ``item``'s screen (None: it could not, or there is no engine), beside the
        model's words for the turn (``model_text``) and the hosts its task lets the browser reach."""
        self.hints[item.ticket] = find_injection(text, model_text, allowed)
        if text is None:
            self.unreadable.add(item.ticket)

    def first(self) -> QueueItem | None:
        """The request to decide first once every pending one's screen is read (None while one is not, or while
        none waits): a headless fleet asks its approver this one."""
        if self.to_read() is not None or not self.items:
            return None
        return self.items[0]

    def regroup(self) -> None:
        self.held = self._held()
        self.groups = group_items(self.items, self.held)

    def _held(self) -> dict[int, str]:
        """The pending requests kept out of every group for now, and why (``why_apart`` says it of a row that
        reads like another)."""
        if not self.grouping:
            return {item.ticket: "grouping is off" for item in self.items}
        held: dict[int, str] = {}
        # With an engine, a request joins a group only once its screen was read and no possible
        # injection found: one answer must never carry a marked request along unseen.
        if self.reading:
            for item in self.items:
                if item.ticket in self.unreadable:
                    held[item.ticket] = "its screen could not be read as text, so it stays a row of its own"
                elif item.ticket not in self.hints:
                    held[item.ticket] = "its screen is not read as text yet (it joins once read)"
        for ticket, hint in self.hints.items():
            if hint is not None:
                held[ticket] = "a possible injection is never grouped"
        for item in self.items:
            if item.deciders is not None and item.deciders.quorum > 1:
                held[item.ticket] = f"it needs {item.deciders.quorum} approvals: never grouped"
        return held

    def apart(self, item: QueueItem) -> str:
        """Why ``item`` is not one row with another that reads the same in the queue (the same rule and action
        in words), from ``why_apart``; "" when no other row does."""
        if not self.grouping or item.ticket not in self.tickets:
            return ""
        seen = look(item)
        others = [g.first for g in self.groups if item.ticket not in g.tickets and look(g.first) == seen]
        why = why_apart(item, others[0], self.held) if others else None
        if why is None:
            return ""
        more = f" (and {len(others) - 1} more rows)" if len(others) > 1 else ""
        return f"not one row with {visible(others[0].task, limit=40)}{more}, which reads the same: {why}"


# ------------------------------------------------------------------------------------------------
# The groups the queue shows
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Group:
    """Pending requests that are one decision, first to decide first. ``id`` names it while it lasts: its
    key's hash and its first member's ticket (``g1a2b3c-17``). A single request is a group of one."""

    id: str
    members: tuple[QueueItem, ...]

    @property
    def first(self) -> QueueItem:
        return self.members[0]

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def tickets(self) -> tuple[int, ...]:
        return tuple(item.ticket for item in self.members)


def group_items(items: Sequence[QueueItem], alone: Collection[int] = frozenset()) -> list[Group]:
    """``items`` (in the queue's order) as groups, in the order of their first members: each request joins
    the first group with its key whose first member's screen is its own (a caret aside).
    ``alone``: tickets not grouped (a possible injection, a screen not read as text yet, say)."""
    groups: list[list[QueueItem]] = []
    open_by_key: dict[str, list[list[QueueItem]]] = {}
    for item in items:
        like = item.likeness
        if like is None or not like.groupable or item.ticket in alone:
            groups.append([item])
            continue
        candidates = open_by_key.setdefault(like.key, [])
        home = next((g for g in candidates if _likeness(g[0]).looks_like(like)), None)
        if home is None:
            home = [item]
            candidates.append(home)
            groups.append(home)
        else:
            home.append(item)
    return [Group(_group_id(members), tuple(members)) for members in groups]


def _likeness(item: QueueItem) -> Likeness:
    assert item.likeness is not None
    return item.likeness


def _group_id(members: list[QueueItem]) -> str:
    first = members[0]
    key = first.likeness.key if first.likeness is not None else str(first.ticket)
    return f"g{hashlib.sha256(key.encode()).hexdigest()[:6]}-{first.ticket}"


# ------------------------------------------------------------------------------------------------
# Why two requests that look alike are not one group
# --------------------------------------------------------------------------------------------------
def look(item: QueueItem) -> tuple[str, str, str]:
    """What a person reads of a request in the queue: its kind, the rule that asked and the action in words
    (``type 16 characters``, ``click at (250, 182)``). Two requests that read the same may still be two
    decisions (another text of that length, another screen): ``why_apart`` says why."""
    action = item.request.action
    return item.request.kind, item.priority.rule, action.describe() if action is not None else ""


def why_apart(item: QueueItem, other: QueueItem, alone: Mapping[int, str] | None = None) -> str | None:
    """Why ``item`` and ``other`` are not one decision, for people (None: the rule makes them one, and they
    are one group unless ``alone`` holds one). ``alone``: why a ticket is kept out of every group for now
    (its screen not read as text yet, a possible injection); the reason names the task it is about."""
    for one in (item, other):
        held = (alone or {}).get(one.ticket)
        if held:
            return f"{visible(one.task, limit=64)}: {held}"
    for one in (item, other):
        if one.likeness is None:
            return f"{visible(one.task, limit=64)}: not compared yet"
        if one.likeness.alone:
            return f"{visible(one.task, limit=64)}: {one.likeness.alone}"
    mine, theirs = _likeness(item), _likeness(other)
    if mine.key != theirs.key:
        return _key_apart(mine.key, theirs.key)
    return mine.screen_apart(theirs)


def _key_apart(key: str, other: str) -> str:
    """Which part of two keys (``likeness``'s JSON) differs, for people."""
    a, b = json.loads(key), json.loads(other)
    if a["rule"] != b["rule"]:
        return f"another rule asked ({visible(a['rule'], limit=40)} and {visible(b['rule'], limit=40)})"
    if a["focused"] != b["focused"]:
        return f"a different focused field ({_point(a['focused'])} and {_point(b['focused'])})"
    if a["action"] != b["action"]:
        mine, theirs = a["action"], b["action"]
        if mine.get("text_len") != theirs.get("text_len"):
            return f"the typed text differs ({mine.get('text_len')} and {theirs.get('text_len')} characters)"
        if mine.get("text_sha256") != theirs.get("text_sha256"):
            return "the typed text differs (the same length, another SHA-256)"
        fields = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        return f"the action differs ({', '.join(fields)})"
    if a["checks"] != b["checks"]:
        return "the model's safety checks differ"
    if a["policy"] != b["policy"]:
        return "their runs' policies differ"
    return "another queue tier"


def _point(point: object) -> str:
    if isinstance(point, list) and len(point) == 2:
        return f"({point[0]}, {point[1]})"
    return "none known"
