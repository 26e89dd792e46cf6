"""An analyst's side of a team's queue: answering a request (a compare-and-set the database commits before
any worker acts on it, as the role the session authenticated as), a group of them in one transaction, and
the headless analyst of ``cua-tui attach --headless``, which answers a fleet's requests through the same
statement with a rule or an approver command, and can come and go while the fleet runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..core.actions import Action, Kind
from ..core.ports import Answer, Ruling
from ..core.text import one_line, visible
from ..headless_approvers import APPROVER_COMMAND, CommandApprover
from . import db, schema
from . import requests as rq

# a headless analyst reads the queue at least this often without a notification
POLL_S = 1.0
# an attached analyst's sessions, as the server's views name them (who is attached: team/control.py)
ATTACH = "cua-tui attach"
# open requests read per pass (the first ones in the queue's order)
BATCH = 50
DONE = {"approve": "approved", "reject": "rejected", "kill": "killed the run of"}


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of an answer: ``won``, or why not in one line (who answered what, when)."""

    request_id: int
    won: bool
    line: str
    answer_id: int | None = None
    # an approval counted under a two-person rule (a quorum): recorded, and the request stays open
    pending: bool = False
    # the request is still open after this (not answered here, and nobody else's answer or a closing either)
    open: bool = False


def answer(
    conn: psycopg.Connection[Any],
    request_id: int,
    decision: Answer,
    *,
    how: str,
    note: str = "",
    screen: str = "",
    shown_ms: int | None = None,
    grant: bool = False,
    edit: Action | None = None,
) -> Outcome:
    """Answer one request, once: zero rows updated means someone else did (or it closed) first. ``screen`` and
    ``shown_ms``: what a person was shown with it, and for how long (recorded in the run's chain); ``grant``
    (``a``): the run approves later actions of the request's scope too; ``edit`` (``e``): the action to run
    instead, its typed text held by the row only until the run's worker reads it."""
    if decision is not Answer.APPROVE and (grant or edit is not None):
        raise ValueError("only an approval grants a scope or carries an edit")
    record = Jsonb(edit.to_record()) if edit is not None else None
    text = edit.text if edit is not None and edit.kind is Kind.TYPE else None
    try:
        with conn.transaction():
            row = conn.execute(
                "UPDATE cua_tui.requests SET answer = %s, how = %s, note = %s, screen_shown = %s, shown_ms = %s, "
                "scope_grant = %s, edit = %s, edit_text = %s "
                "WHERE id = %s AND answer IS NULL AND closed_at IS NULL RETURNING answer_id, approvals, quorum",
                (decision.value, how[:100], note[:2000] or None, screen or None, _ms(shown_ms), grant or None,
                 record, text, request_id),
            ).fetchone()  # fmt: skip
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UniqueViolation) as exc:
        # the server's rule for this request: a role it does not name, or the same role approving twice
        return Outcome(request_id, False, f"not answered: {refusal(exc)}", open=True)
    if row is None:
        return _not_won(conn, request_id)
    answer_id, approvals, quorum = row
    if answer_id is None:
        line = f"request {request_id}: approval {approvals} of {quorum} recorded; another role must approve it too"
        return Outcome(request_id, False, line, pending=True, open=True)
    done = DONE[decision.value] + (" as edited" if edit is not None else " and its scope" if grant else "")
    return Outcome(request_id, True, f"request {request_id}: {done}", int(answer_id))


def refusal(exc: psycopg.Error) -> str:
    """The server's refusal of an answer, in one line (its own words, shown literally)."""
    said = exc.diag.message_primary or str(exc)
    return visible(one_line(said, 300), limit=300)


def _ms(shown_ms: int | None) -> int | None:
    return None if shown_ms is None else max(0, min(int(shown_ms), 864_000_000))


def answer_group(
    conn: psycopg.Connection[Any],
    request_ids: Sequence[int],
    decision: Answer,
    *,
    how: str,
    group_id: str,
    note: str = "",
    screen: str = "",
    shown_ms: int | None = None,
    grant: bool = False,
) -> list[Outcome]:
    """One answer to a group (the fleet TUI's, through the core's grouping rules), in one transaction: each
    member still open gets it, naming the group and its size; the others say why not, in one line each.
    ``grant``: each member's run grants its own request's scope (a group is never edited: one run's view)."""
    if decision is not Answer.APPROVE and grant:
        raise ValueError("only an approval grants a scope")
    with conn.transaction():
        won = {
            int(r[0]): int(r[1])
            for r in conn.execute(
                "UPDATE cua_tui.requests SET answer = %s, how = %s, note = %s, group_id = %s, group_size = %s, "
                "screen_shown = %s, shown_ms = %s, scope_grant = %s "
                # only what this role may answer alone: the others stay pending, each saying why
                "WHERE id = ANY(%s) AND answer IS NULL AND closed_at IS NULL AND quorum = 1 "
                "AND cua_tui.may_answer(approvers) RETURNING id, answer_id",
                (decision.value, how[:100], note[:2000] or None, group_id, len(request_ids), screen or None,
                 _ms(shown_ms), grant or None, list(request_ids)),
            ).fetchall()
        }  # fmt: skip
        return [
            Outcome(i, True, f"request {i}: {DONE[decision.value]} with group {group_id}", won[i])
            if i in won
            else _not_won(conn, i)
            for i in request_ids
        ]


def _not_won(conn: psycopg.Connection[Any], request_id: int) -> Outcome:
    line, still = _why(conn, request_id)
    return Outcome(request_id, False, line, open=still)


def why_not(conn: psycopg.Connection[Any], request_id: int) -> str:
    """Why ``request_id`` takes no answer now, in one line: who answered what and when, or why it closed."""
    return _why(conn, request_id)[0]


def _why(conn: psycopg.Connection[Any], request_id: int) -> tuple[str, bool]:
    """``why_not``'s line, and whether the request is still open (a rule kept this answer from it)."""
    row = conn.execute(
        "SELECT answer, left(answered_by, 64), answered_at, left(closed_why, 200), closed_at, approvers[1:10], "
        "quorum, cua_tui.may_answer(approvers) FROM cua_tui.requests WHERE id = %s",
        (request_id,),
    ).fetchone()
    if row is None:
        return f"request {request_id}: no such request", False
    answered, role, at, closed_why, closed_at, approvers, quorum, may = row
    if answered is not None:
        done = DONE.get(str(answered), "?")
        who = visible(str(role), limit=64)
        return f"request {request_id} was already answered: {who} {done} it at {_at(at)}", False
    if closed_at is not None:
        return f"request {request_id} is closed ({visible(str(closed_why), limit=120)}) since {_at(closed_at)}", False
    if not may:
        return f"request {request_id}: only {who_may(approvers)} may answer it", True
    if quorum > 1:
        return f"request {request_id} needs {quorum} different roles' approvals: answered alone, never in a group", True
    return f"request {request_id} is still open", True


def who_may(approvers: Sequence[str] | None) -> str:
    """The roles a rule names, for people (none: nobody; the task's policy named none of the rule's)."""
    if approvers is None:
        return "any analyst"
    return ", ".join(visible(str(r), limit=63) for r in approvers) if approvers else "nobody"


def _at(when: datetime | None) -> str:
    return when.astimezone().strftime("%H:%M:%S") if when is not None else "?"


# ------------------------------------------------------------------------------------------------
# The headless analyst
# --------------------------------------------------------------------------------------------------
class HeadlessAnalyst:
    """Answers the open requests of ``fleet_id`` with ``on_confirm`` (``approve``, ``reject`` or
    ``approver:CMD``), first in the queue's order first, until the fleet has ended or ``stop`` is set."""

    def __init__(
        self, url: str, fleet_id: str, on_confirm: str, say: Callable[[str], None], *, timeout: float = 60.0
    ) -> None:
        self.url = url
        self.fleet_id = fleet_id
        self.say = say
        self.stop = threading.Event()
        if on_confirm in ("approve", "reject"):
            self._fixed: Answer | None = Answer(on_confirm)
            self._command: CommandApprover | None = None
            self.how = f"headless rule: {on_confirm}"
        elif on_confirm.startswith("approver:"):
            self._fixed = None
            self._command = CommandApprover(on_confirm.removeprefix("approver:"), timeout=timeout)
            self.how = APPROVER_COMMAND
        else:
            raise ValueError(f"--on-confirm must be approve, reject or approver:CMD, not {visible(on_confirm)!r}")
        self.answered = 0
        self.lost = 0

    def run(self) -> int:
        """Answer until the fleet ends; 0, or 1 when the fleet is not on the queue."""
        backoff = db.Backoff(self.say)
        conn: psycopg.Connection[Any] | None = None
        first = True
        while not self.stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = db.connect(self.url, ATTACH, check_schema=first)
                    conn.execute(f"LISTEN {schema.POSTED}")
                    backoff.ok()
                    if first:
                        role = db.session_user(conn)
                        if not self._known(conn):
                            raise db.QueueError(f"no fleet {visible(self.fleet_id, limit=100)} on the queue")
                        self.say(f"attached to {self.fleet_id} as {visible(role, limit=64)} ({self.how})")
                        first = False
                conn.execute("SELECT cua_tui.reap(), cua_tui.escalate()")
                if self._pass(conn) == 0:
                    if self._ended(conn):
                        break
                    for _ in conn.notifies(timeout=POLL_S, stop_after=1):
                        pass
            except db.QueueError:
                raise
            except db.LINK_ERRORS as exc:
                if first:
                    raise db.QueueError(f"queue {db.shown(self.url)}: {db.one_line_error(exc)}") from None
                if conn is not None:
                    conn.close()
                conn = None
                self.stop.wait(backoff.failed("answering", exc))
        if conn is not None:
            conn.close()
        self.say(f"detached from {self.fleet_id}: {self.answered} answered, {self.lost} answered by others first")
        return 0

    def _known(self, conn: psycopg.Connection[Any]) -> bool:
        return conn.execute("SELECT 1 FROM cua_tui.fleets WHERE id = %s", (self.fleet_id,)).fetchone() is not None

    def _ended(self, conn: psycopg.Connection[Any]) -> bool:
        row = conn.execute(
            "SELECT count(*) FROM cua_tui.runs WHERE fleet_id = %s AND state <> 'ended'", (self.fleet_id,)
        ).fetchone()
        return row is not None and row[0] == 0

    def _pass(self, conn: psycopg.Connection[Any]) -> int:
        """Answer the open requests once, first in the queue's order first; how many were open."""
        rows = conn.execute(
            "SELECT id, CASE WHEN octet_length(body::text) <= %s THEN body END, "
            "CASE WHEN octet_length(texts::text) <= %s THEN texts END, octet_length(body::text), "
            "octet_length(texts::text) FROM cua_tui.requests q "
            "WHERE fleet_id = %s AND answer IS NULL AND closed_at IS NULL AND NOT EXISTS (SELECT 1 FROM "
            "cua_tui.asides s WHERE s.request_id = q.id AND s.role = session_user AND s.until > clock_timestamp()) "
            "ORDER BY tier, posted_at, id LIMIT %s",
            (rq.MAX_BODY_BYTES, rq.MAX_TEXTS_BYTES, self.fleet_id, BATCH),
        ).fetchall()
        for request_id, body, texts, body_len, texts_len in rows:
            if self.stop.is_set():
                break
            if body is None or (texts is None and texts_len is not None):
                # too large to hold: refused unread (the server cut it, not this process)
                size = f"{body_len:,} + {texts_len or 0:,} bytes"
                note = f"a request of {size}: refused unread"
                ruling: Ruling | float | None = Ruling(Answer.REJECT, self.how, note=note)
                self.say(f"request {request_id}: {size}, larger than a request may be; rejected unread")
            else:
                ruling = self._decide(int(request_id), body, texts)
            if isinstance(ruling, float):
                # the command set it aside: out of this analyst's reads for that long, not answered
                try:
                    conn.execute("SELECT cua_tui.set_aside(%s, %s)", (int(request_id), ruling))
                    self.say(f"{rq.summary(body)}: set aside for {ruling:g} min")
                except psycopg.errors.CheckViolation as exc:
                    self.say(f"request {request_id}: not set aside ({refusal(exc)})")
                continue
            if ruling is None:
                continue
            done = answer(conn, int(request_id), ruling.answer, how=self.how, note=ruling.note)
            if done.won:
                self.answered += 1
                self.say(f"{rq.summary(body)}: {ruling.answer.value} (answer {done.answer_id})")
            else:
                self.lost += 1
                self.say(done.line)
        return len(rows)

    def _decide(self, request_id: int, body: Any, texts: Any) -> Ruling | float | None:
        if self._fixed is not None:
            return Ruling(self._fixed, self.how)
        assert self._command is not None
        try:
            data = rq.approver_request(body, texts, request_id)
        except rq.RowError as exc:
            self.say(f"request {request_id}: {exc}; rejected")
            return Ruling(Answer.REJECT, self.how, note=one_line(str(exc), 300))
        ruling = self._command.ask_team(data, self.stop)
        if self.stop.is_set():
            return None
        if isinstance(ruling, float):
            return ruling
        # a command's failure is a reject (fail closed), as for a local run; its reason goes with it
        return Ruling(ruling.answer, self.how, note=ruling.note)
