"""What the fleet screen shows of its queue and runs: the approval queue's rows (a row per group, its runs where
unfolded), the table of runs, and the lines above and under them. The queue's order and groups are the core's
(core/queue_rules.py); these only draw them. Task names, rules and paths are untrusted: shown literally."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

from ..core import ending
from ..core.describe import URGENT_S
from ..core.fleet_queue import QueueItem, RunRow, RunState
from ..core.injection import Injection
from ..core.ports import VerifierPlace
from ..core.queue_rules import ORDER_LINE, Group
from ..core.text import visible
from .literal import literal
from .row_table import RowTable

WHAT_CHARS = 60  # the queue's "what" column
# what: flex
QUEUE_COLUMNS = (("#", 2), ("priority", 12), ("rule", 14), ("task", 12), ("what", 16), ("waited", 6))
RUN_COLUMNS = (
    ("task", 10),  # at least: it takes the width the others leave
    ("backend", 7),
    ("state", 7),
    ("turn·step", 9),
    ("waiting", 7),
    ("status", 8),
    ("checked in", 10),
    ("record", 10),
)


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A row of the queue table: one request, or a group's (``group``, more than one run) first line, or one
    of an unfolded group's runs (``member``)."""

    key: str
    item: QueueItem
    group: Group | None = None
    member: bool = False


def queue_rows(
    groups: Sequence[Group], unfolded: Collection[str], selected: QueueItem | None, selected_group: Group | None
) -> list[QueueRow]:
    """What the queue table lists: a row per group (its runs too where unfolded) in the fleet's order, and the
    selected request even once it has closed (marked so), until the selection moves: what the cursor is on
    is what y / n / a answer."""
    rows: list[QueueRow] = []
    for group in groups:
        if group.size == 1:
            rows.append(QueueRow(str(group.first.ticket), group.first))
            continue
        rows.append(QueueRow(group.id, group.first, group))
        if group.id in unfolded:
            rows += [QueueRow(str(item.ticket), item, member=True) for item in group.members]
    if selected is not None and selected_group is None and all(r.item.ticket != selected.ticket for r in rows):
        place = next((i for i, r in enumerate(rows) if r.item.order > selected.order), len(rows))
        rows.insert(place, QueueRow(str(selected.ticket), selected))
    return rows


def reselect(
    groups: Sequence[Group],
    items: Sequence[QueueItem],
    selected: QueueItem | None,
    chosen: Group | None,
    unfolded: Collection[str],
) -> tuple[QueueItem | None, Group | None]:
    """The selection once the groups changed: a request selected alone that others joined is now its group's
    row (unless the group is listed run by run), what y answers being what the row shows; a group selected
    is that group again, or the one its first runs went on in (its first member answered or closed)."""
    if chosen is None:
        home = next((g for g in groups if selected is not None and selected.ticket in g.tickets), None)
        if home is not None and home.size > 1 and home.id not in unfolded:
            return home.first, home
        return selected, None
    tickets = set(chosen.tickets)
    again = next((g for g in groups if g.id == chosen.id), None) or next(
        (g for g in groups if g.size > 1 and tickets & set(g.tickets)), None
    )
    if again is not None:
        return again.first, again
    if selected is not None and all(item.ticket != selected.ticket for item in items):
        return (items[0] if items else None), None
    return selected, None


def waited_cell(item: QueueItem, now: float) -> Text:
    """How long a request has waited, or with a deadline the seconds left before it is rejected (``⏱``)."""
    deadline = item.request.deadline_s
    if deadline is None:
        return Text(f"{int(item.waited(now))}s")
    left = max(0, math.ceil(deadline - item.waited(now)))
    return Text(f"⏱{left}s", style="bold reverse" if left < URGENT_S else "bold")


class QueueTable(RowTable):
    """The approval queue: the rows ``show`` is given, the cursor on the selected one."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(QUEUE_COLUMNS, flex="what", id=id)
        self.rows: list[QueueRow] = []
        # what the table lists, and which are pending
        self._shown: tuple[tuple[str, tuple[int, ...], bool, tuple[str, ...] | None], ...] = ()

    def row_of(self, key: str | None) -> QueueRow | None:
        return next((row for row in self.rows if row.key == key), None)

    def show(
        self,
        rows: list[QueueRow],
        pending: Collection[int],
        hints: Mapping[int, Injection | None],
        unfolded: Collection[str],
        now: float,
        *,
        cursor: str | None,
        only_if_changed: bool = False,
        readers: Mapping[int, tuple[str, ...]] | None = None,
    ) -> None:
        """List ``rows`` (numbered, a group's runs under it), the cursor on the row ``cursor``; ``readers``: on a
        team's queue, who else has each request on their panel."""
        readers = readers or {}
        shown = tuple(
            (row.key, row.group.tickets if row.group else (), row.item.ticket in pending, readers.get(row.item.ticket))
            for row in rows
        )
        if only_if_changed and shown == self._shown:
            return  # each rebuild redraws the table: not for nothing
        self._shown = shown
        self.rows = rows
        place = 0
        lines = []
        for row in rows:
            if not row.member:
                place += 1
            alive = row.item.ticket in pending
            marked = alive and hints.get(row.item.ticket) is not None
            read_by = readers.get(row.item.ticket, ()) if alive else ()
            lines.append((row.key, queue_cells(row, place, now, alive, marked, unfolded, read_by)))
        self.set_rows(lines)
        index = next((i for i, row in enumerate(rows) if row.key == cursor), None)
        if index is not None:
            self.move_cursor(row=index)

    def tick(self, now: float, pending: Collection[int]) -> None:
        """Each second: the waiting times."""
        for row in self.rows:
            if row.item.ticket in pending:
                self.update_cell(row.key, "waited", waited_cell(row.item, now))


def read_by_line(roles: Sequence[str]) -> str:
    """Who else has a request on their panel, as a queue row and the line under the queue say it."""
    return "read by " + ", ".join(visible(role, limit=32) for role in roles)


def queue_cells(
    row: QueueRow,
    position: int,
    now: float,
    pending: bool,
    injection: bool,
    unfolded: Collection[str],
    read_by: Sequence[str] = (),
) -> list[Text]:
    item = row.item
    request = item.request
    what = (
        request.action.describe()
        if request.action is not None
        else "a soft budget: go on?"
        if request.kind == "budget"
        else "the model asks for you"
        if request.kind == "ask"
        else "the model's safety checks"
    )
    dim = "" if pending else "dim strike"
    if injection:
        return [
            Text(str(position), style="bold"),
            Text("INJECTION?", style="bold reverse"),
            literal(item.priority.rule, limit=40, style="bold"),
            literal(item.task, limit=64, style="bold"),
            Text(f"t{request.turn} #{request.index + 1} ", style="bold").append_text(
                literal(what, limit=WHAT_CHARS, style="bold")
            ),
            waited_cell(item, now),
        ]
    if row.group is not None:
        fold = "▾" if row.group.id in unfolded else "▸"
        return [
            Text(str(position), style="bold"),
            Text(item.priority.label, style="bold" if item.priority.tier == 0 else ""),
            literal(item.priority.rule, limit=40),
            Text(f"{fold} ×{row.group.size} runs", style="bold reverse"),
            Text(f"t{request.turn} #{request.index + 1} {visible(what, limit=WHAT_CHARS)}"),
            waited_cell(item, now),
        ]
    # another analyst has it on their panel: said first, where a narrow terminal still shows it
    seen = Text(f"{read_by_line(read_by)} · ", style="italic") if read_by else Text()
    return [
        Text(" ·" if row.member else str(position) if pending else "-", style=dim),
        Text(item.priority.label, style="bold" if item.priority.tier == 0 else dim),
        literal(item.priority.rule, limit=40, style=dim),
        literal(item.task, limit=64, style=dim),
        seen.append_text(Text(f"t{request.turn} #{request.index + 1} ", style=dim)).append_text(
            literal(what, limit=WHAT_CHARS, style=dim)
        ),
        waited_cell(item, now) if pending else Text("closed", style=dim),
    ]


def why_line(
    item: QueueItem,
    group: Group | None,
    pending: bool,
    hint: Injection | None,
    closed: str,
    apart: str = "",
    read_by: Sequence[str] = (),
) -> Text:
    """The line under the queue: what the selected row is, and why it sits where it does (``apart``: why it is
    not one row with another that reads the same, said first; ``closed``: why it left the queue; ``read_by``:
    who else has it on their panel, which never stops an answer)."""
    text = Text()
    if pending and read_by:
        text.append(f" {read_by_line(read_by)} ", style="reverse")
        text.append("(on their panel now; you may still answer) · ")
    if apart:
        text.append(" APART ", style="bold reverse")
        text.append(f" {apart} · ")
    if group is not None:
        text.append(f" {item.priority.label.upper()} ×{group.size} ", style="bold reverse")
        text.append(f" the same decision in {group.size} runs · rule {visible(item.priority.rule, limit=60)} · ")
        text.append("Enter lists them; y / n / a answer each, as its own decision")
    elif pending and hint is not None:
        text.append(" POSSIBLE INJECTION ", style="bold reverse")
        text.append(f" {visible(item.task, limit=64)} · the model's words echo the screen: ")
        text.append(visible(hint.summary, limit=120))
    elif pending:
        text.append(f" {item.priority.label.upper()} ", style="bold reverse")
        text.append(f" {visible(item.task, limit=64)} · rule {visible(item.priority.rule, limit=60)} · ")
        text.append(visible(item.priority.why, limit=120))
    else:
        text.append(" CLOSED ", style="bold reverse")
        text.append(f" {visible(item.task, limit=64)}: {visible(closed, limit=120)} · y / n / a are refused; ")
        text.append("up / down picks another")
    return text


# ------------------------------------------------------------------------------------------------
# The runs
# --------------------------------------------------------------------------------------------------
class RunsTable(RowTable):
    """The table of runs, one row per task of the fleet."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(RUN_COLUMNS, flex="task", id=id)

    def tick(self, rows: Iterable[RunRow], now: float) -> None:
        """Each second: the waiting times."""
        for row in rows:
            if row.waiting_since is not None:
                self.update_cell(row.task, "waiting", Text(f"{int(now - row.waiting_since)}s"))


def run_cells(row: RunRow, now: float) -> list[Text]:
    waiting = f"{int(now - row.waiting_since)}s" if row.waiting_since is not None else ""
    # where its status was checked: the sandbox's word (or from a place not recorded) is its own, not the
    # controller's: it stands out here, and the run's detail line says so too
    checked = ending.checked_in(row.verifier, "", short=True) if row.ended and row.verified is not None else ""
    ours = row.verifier in ("", VerifierPlace.CONTROLLER)
    log = {True: "intact", False: "NOT INTACT", None: "-"}[row.intact] if row.ended else ""
    state_style = {RunState.WAITING: "bold reverse", RunState.RUNNING: "bold"}.get(row.state, "")
    status_style = "bold" if row.status in ("passed", "finished") else "bold reverse" if row.status else ""
    return [
        literal(row.task, limit=64),
        literal(row.backend, limit=20),
        Text(row.state, style=state_style),
        Text(f"{row.turn}·{row.steps}" if row.run_id else ""),
        Text(waiting),
        literal(row.status, limit=20, style=status_style),
        Text(checked or ("-" if row.ended else ""), style="" if ours else "bold reverse"),
        Text(log, style="bold reverse" if row.intact is False else ""),
    ]


def tail_path(path: str, width: int) -> str:
    """``path`` in ``width`` characters: whole, or "…/" and as many of its last folders as fit."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        if len(f"…/{part}/{tail}") > width:
            break
        tail = f"{part}/{tail}"
    return f"…/{tail}"


def run_detail(row: RunRow | None, width: int) -> tuple[Text, Text]:
    """The selected run's line (its task, id, phase, directory cut to ``width``) and why it ended."""
    text, why = Text(no_wrap=True, overflow="ellipsis"), Text()
    if row is None:
        return text, why
    text.append(visible(row.task, limit=64), style="bold")
    if row.run_id:
        text.append(f" · run {visible(row.run_id)}")
    if row.phase and not row.ended:
        text.append(f" · {visible(row.phase, limit=40)}")
    if row.worker:  # on a team's queue: the worker process that runs it
        text.append(f" · on {visible(row.worker, limit=100)}")
    if row.path:
        # where it is, by its last folders when the line is short: they tell runs apart
        path = visible(row.path, limit=300)
        text.append(f" · {tail_path(path, width - text.cell_len - 3) if width else path}")
    if row.reason:  # why it ended, in full (two lines, wrapped)
        why.append(visible(row.reason, limit=300), style="bold")
    if row.ended and row.verified is not None:
        where = ending.checked_in(row.verifier, "")
        ours = row.verifier == VerifierPlace.CONTROLLER
        why.append(f"{' · ' if row.reason else ''}checked {where}", style="" if ours else "bold reverse")
    return text, why


def header_text(
    fleet_id: str, rows: Collection[RunRow], waiting: int, finished: bool, link: str = "", *, drills: bool = False
) -> Text:
    """The fleet's first line (its runs by state, how many requests wait, whether drills are on, a team
    queue's link when it is down) and the queue's order."""
    counts: dict[str, int] = {}
    ended: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
        if row.ended:
            ended[row.status] = ended.get(row.status, 0) + 1
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(" FLEET ", style="bold reverse")
    runs = len(rows)
    text.append(f" {visible(fleet_id, limit=60)} · {runs} run{'s' if runs != 1 else ''}: ")
    text.append(
        ", ".join(f"{counts.get(s, 0)} {s}" for s in (RunState.QUEUED, RunState.RUNNING, RunState.WAITING))
        + f", {counts.get(RunState.ENDED, 0)} ended"
    )
    if ended:
        text.append(" (" + ", ".join(f"{n} {visible(s, limit=20)}" for s, n in sorted(ended.items())) + ")")
    text.append(" · ")
    text.append(f"{waiting} waiting for you", style="bold" if waiting else "")
    if drills:  # said, never which request is one
        text.append(" · drills on", style="bold")
    if finished:
        text.append(" · every run ended: q quits", style="bold")
    if link:
        text.append(" · ")
        text.append(visible(link, limit=120), style="bold reverse")
    text.append("\n " + ORDER_LINE, style="dim")
    return text
