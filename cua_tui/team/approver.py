"""The approver of a team's run: a decision request becomes a row every analyst sees, and the run goes on
only with the one answer the database committed, read back and marked applied by this worker while it
still holds its lease. No transaction is held while a person thinks; a lapsed lease applies nothing.

An answer applies only to the request this worker posted: the row is found by its id, and its content's
SHA-256 must be the one the worker computed when it posted it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..core import drills
from ..core import events as ev
from ..core.actions import MAX_TEXT, Action, ActionError, action_of_record
from ..core.policy import Approvers
from ..core.ports import Answer, DecisionRequest, Ruling
from ..core.text import one_line, visible
from . import db
from . import requests as rq
from .link import Link, Stopped
from .mirror import store_screens

# how often a waiting request's row is read again when no notification came (the fallback)
POLL_S = 1.0
# what a row's ``how`` may say (the run records "unknown" for anything else; "(team queue)" follows)
HOW = frozenset({"human", "approver command", "headless rule: approve", "headless rule: reject"})
# an edit's record, read back (the schema holds it to this; a row is someone else's writing)
EDIT_BYTES = 8192
# drill answers recorded per read, and the largest read back (the schema's bound)
DRILLS_PER_READ = 20
MAX_DRILL_BYTES = drills.MAX_SENT_BYTES


def answer_columns(text: str = "q") -> str:
    """An answer's columns as read back, cut by the server; ``text``: the row the edited text is read from
    (the guard wipes it in the statement that marks the answer applied: read from the row as it was)."""
    return (
        "q.answer, q.answer_id, left(q.answered_by, 64), q.answered_at, left(q.how, 100), left(q.note, 2000), "
        "left(q.group_id, 64), q.group_size, q.screen_shown, q.shown_ms, q.scope_grant, "
        f"CASE WHEN octet_length(q.edit::text) <= {EDIT_BYTES} THEN q.edit END, octet_length(q.edit::text), "
        f"left({text}.edit_text, {MAX_TEXT + 1})"
    )


ANSWER_COLUMNS = answer_columns()


@dataclass(frozen=True, slots=True)
class Claim:
    """What a worker holds of one run: the run, its fleet, and the fencing token it was claimed with."""

    run_id: str
    fleet_id: str
    token: int


class QueueApprover:
    """Posts each request of one run, waits for its committed answer, applies it (see the module)."""

    def __init__(
        self,
        link: Link,
        claim: Claim,
        *,
        seq_of: Callable[[DecisionRequest], tuple[int, str]],
        waiter: Callable[[int], threading.Event],
        forget: Callable[[int], None],
        fenced: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        narrowed: Callable[[str, str], Approvers | None] = lambda rule, tier: None,
    ) -> None:
        self.link = link
        self.claim = claim
        self._seq_of = seq_of
        self._waiter = waiter
        self._forget = forget
        self._fenced = fenced
        self._clock = clock
        # the task's policy's narrowing of the team's rule (``[[approvers]]``): the server keeps only what narrows
        self._narrowed = narrowed
        # where the drill answers of the run's analysts go (the run's chain: the worker sets it to the run's
        # supervisor once built); None: they wait in their rows
        self.drilled: Callable[[ev.Event], None] | None = None

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        asked = self._clock()
        seq, rule = self._seq_of(request)
        post = rq.posting(request, rule, self.claim.fleet_id, seq)
        try:
            request_id = self._post(request, post, seq)
            woken = self._waiter(request_id)
            try:
                return self._wait(request_id, post, woken, cancel, asked, request.deadline_s)
            finally:
                self._forget(request_id)
        except Fenced as exc:
            # nothing more runs: the run ends interrupted (the reject below is never taken)
            self._fenced(str(exc))
            raise

    # ---------------------------------------------------------------------------------------------
    def _post(self, request: DecisionRequest, post: rq.Posting, seq: int) -> int:
        claim = self.claim
        png = {request.frame.sha256: request.frame.png} if request.frame is not None else {}
        narrowed = self._narrowed(str(post.body.get("rule", "")), str(post.body.get("label", "")))

        def insert(conn: psycopg.Connection[Any]) -> int:
            store_screens(conn, claim.run_id, png)
            row = conn.execute(
                "INSERT INTO cua_tui.requests (run_id, fleet_id, turn, index, kind, seq, body, content_sha256, "
                "texts, screen, tier, deadline_s, approvers, quorum) "
                "SELECT %(run)s, %(fleet)s, %(turn)s, %(index)s, %(kind)s, %(seq)s, %(body)s, %(sha)s, %(texts)s, "
                "%(screen)s, %(tier)s, %(deadline)s, %(approvers)s, %(quorum)s "
                "WHERE EXISTS (SELECT 1 FROM cua_tui.runs WHERE id = %(run)s AND token = %(token)s "
                "AND state = 'running') "
                "ON CONFLICT (run_id, seq) DO NOTHING RETURNING id",
                {
                    "run": claim.run_id,
                    "fleet": claim.fleet_id,
                    "turn": request.turn,
                    "index": request.index,
                    "kind": request.kind,
                    "seq": seq,
                    "body": Jsonb(post.body),
                    "sha": post.content_sha256,
                    "texts": Jsonb(post.texts) if post.texts else None,
                    "screen": request.frame.sha256 if request.frame is not None else None,
                    "tier": post.tier,
                    "deadline": request.deadline_s,
                    "token": claim.token,
                    "approvers": list(narrowed.roles) if narrowed is not None and narrowed.roles is not None else None,
                    "quorum": narrowed.quorum if narrowed is not None else 1,
                },
            ).fetchone()
            if row is not None:
                return int(row[0])
            # posted already (a commit whose acknowledgement was lost), or the run is no longer ours
            found = conn.execute(
                "SELECT id, content_sha256 FROM cua_tui.requests WHERE run_id = %s AND seq = %s",
                (claim.run_id, seq),
            ).fetchone()
            if found is None or found[1] != post.content_sha256:
                raise Fenced("the run is no longer this worker's: the request was not posted")
            return int(found[0])

        return self.link.call(insert, f"posting a request of run {claim.run_id}")

    def _wait(
        self,
        request_id: int,
        post: rq.Posting,
        woken: threading.Event,
        cancel: threading.Event,
        asked: float,
        deadline_s: float | None,
    ) -> Ruling:
        last_read = -POLL_S
        while True:
            if cancel.is_set():
                return self._close(request_id, post, asked, deadline_s)
            now = self._clock()
            if woken.is_set() or now - last_read >= POLL_S:
                woken.clear()
                last_read = now
                try:
                    # an analyst's drill stands in front of this request: its answer comes first, in the chain too
                    self._record_drills(cancel)
                    ruling = self._apply(request_id, post, cancel)
                except db.LINK_ERRORS:
                    continue  # cancelled while the server was away: closed above, or said so
                if ruling is not None:
                    return ruling
            # the kill switch or the deadline sets ``cancel``; an answer sets ``woken``
            woken.wait(0.05)

    def _apply(self, request_id: int, post: rq.Posting, cancel: threading.Event) -> Ruling | None:
        """The committed answer, marked applied (with this worker's lease still held); None while there is
        none. A request closed without an answer (the run's worker was declared lost) stops the run."""
        claim = self.claim

        def apply(conn: psycopg.Connection[Any]) -> Ruling | None:
            row = conn.execute(
                "UPDATE cua_tui.requests q SET applied_at = clock_timestamp() FROM cua_tui.requests o "
                "WHERE o.id = q.id AND q.id = %(id)s AND q.run_id = %(run)s AND q.content_sha256 = %(sha)s "
                "AND q.answer IS NOT NULL AND q.applied_at IS NULL AND q.not_applied IS NULL "
                "AND EXISTS (SELECT 1 FROM cua_tui.runs r JOIN cua_tui.workers w ON w.id = r.worker_id "
                "WHERE r.id = q.run_id AND r.state = 'running' AND r.token = %(token)s AND w.token = %(token)s "
                "AND w.state = 'running' AND w.lease_until > now()) "
                f"RETURNING {answer_columns('o')}",
                {"id": request_id, "run": claim.run_id, "sha": post.content_sha256, "token": claim.token},
            ).fetchone()
            if row is not None:
                return _ruling(request_id, *row, more=_what_else(conn, request_id))
            state = conn.execute(
                f"SELECT {ANSWER_COLUMNS}, q.applied_at, left(q.closed_why, 200), q.content_sha256, r.token, r.state "
                "FROM cua_tui.requests q JOIN cua_tui.runs r ON r.id = q.run_id WHERE q.id = %s AND q.run_id = %s",
                (request_id, claim.run_id),
            ).fetchone()
            if state is None:
                raise Fenced(f"request {request_id} is not the one this worker posted")
            *answered, applied, closed_why, content, token, run_state = state
            if content != post.content_sha256:
                raise Fenced(f"request {request_id} is not the one this worker posted")
            answer = answered[0]
            if answer is not None and applied is not None:
                # applied by this very worker, whose acknowledgement was lost (only its worker applies it);
                # an edit's text is wiped by then: that answer is refused below, never run as proposed
                return _ruling(request_id, *answered)
            if token != claim.token or run_state != "running":
                raise Fenced("the worker's lease was taken: the answer is not applied")
            if answer is not None:
                # answered, but the lease is not shown held now: the heartbeat renews it, or the run is
                # taken from this worker; either way the next read says
                return None
            if closed_why is not None:
                raise Fenced(f"the request was closed ({one_line(str(closed_why), 120)})")
            return None

        return self.link.call(apply, f"reading the answer to request {request_id}", cancel=cancel)

    def _record_drills(self, cancel: threading.Event) -> None:
        """The run's drill answers not yet in its chain (each analyst's own, written as rows): taken once by this
        worker while it holds the run, read strictly (someone else's writing), and recorded. Who answered is
        the role the server saw; the verdicts are worked out again here."""
        record = self.drilled
        if record is None:
            return
        claim = self.claim

        def take(conn: psycopg.Connection[Any]) -> list[Any]:
            return conn.execute(
                "UPDATE cua_tui.drill_answers d SET recorded_at = clock_timestamp() FROM cua_tui.requests q "
                "WHERE d.id IN (SELECT id FROM cua_tui.drill_answers WHERE run_id = %(run)s AND recorded_at IS NULL "
                "ORDER BY id LIMIT %(n)s) AND q.id = d.request_id AND q.run_id = %(run)s "
                "AND EXISTS (SELECT 1 FROM cua_tui.runs r WHERE r.id = %(run)s AND r.token = %(token)s "
                "AND r.state = 'running') "
                "RETURNING d.id, q.turn, q.index, left(d.role, 64), "
                "CASE WHEN octet_length(d.record::text) <= %(cap)s THEN d.record END",
                {"run": claim.run_id, "token": claim.token, "n": DRILLS_PER_READ, "cap": MAX_DRILL_BYTES},
            ).fetchall()

        rows = self.link.call(take, f"reading the drill answers of run {claim.run_id}", cancel=cancel)
        for _, turn, index, role, data in sorted(rows, key=lambda row: int(row[0])):
            who = visible(str(role), limit=64)
            try:
                event: ev.Event = drills.answered_of_row(data, int(turn), int(index), "human (team queue)", who)
            except drills.DrillError as exc:
                event = ev.Note(f"a drill answer by {who} could not be read: {one_line(str(exc), 200)}")
            record(event)

    def _close(self, request_id: int, post: rq.Posting, asked: float, deadline_s: float | None) -> Ruling:
        """The run stopped waiting (its deadline, or the kill switch): the request closes unanswered, or, if an
        answer won the race, that answer is marked not applied and returned for the record."""
        due = deadline_s is not None and self._clock() - asked >= deadline_s
        why = f"deadline ({deadline_s:g} s)" if due and deadline_s is not None else "the run stopped waiting"

        def close(conn: psycopg.Connection[Any]) -> Ruling | None:
            row = conn.execute(
                "UPDATE cua_tui.requests SET closed_at = clock_timestamp(), closed_why = %s "
                "WHERE id = %s AND run_id = %s AND answer IS NULL AND closed_at IS NULL RETURNING id",
                (why, request_id, self.claim.run_id),
            ).fetchone()
            if row is not None:
                return None
            late = conn.execute(
                "UPDATE cua_tui.requests q SET not_applied = %s FROM cua_tui.requests o WHERE o.id = q.id "
                "AND q.id = %s AND q.run_id = %s AND q.answer IS NOT NULL AND q.applied_at IS NULL "
                f"RETURNING {answer_columns('o')}",
                (why, request_id, self.claim.run_id),
            ).fetchone()
            return _ruling(request_id, *late) if late is not None else None

        try:
            ruling = self.link.call(close, f"closing request {request_id}", patience=10.0)
        except Stopped:
            raise
        except Exception:
            ruling = None  # the server is away: the run's own deadline has decided; the row stays open
        return ruling or Ruling(
            Answer.REJECT, "no answer (the run stopped waiting)", queue={"request": request_id, "closed": why}
        )


def _what_else(conn: psycopg.Connection[Any], request_id: int) -> dict[str, Any]:
    """What the run's chain records beside an answer that the rules made (schema version 4): a quorum's
    approvals (who, when), how often the request was set aside before, whether it had escalated."""
    row = conn.execute(
        "SELECT q.quorum, q.escalated_at IS NOT NULL, "
        "(SELECT count(*) FROM cua_tui.asides s WHERE s.request_id = q.id), "
        "(SELECT coalesce(json_agg(json_build_object('role', left(a.role, 64), 'at', a.at) ORDER BY a.id), '[]') "
        " FROM (SELECT * FROM cua_tui.approvals a WHERE a.request_id = q.id AND NOT a.superseded ORDER BY a.id "
        " LIMIT 10) a) FROM cua_tui.requests q WHERE q.id = %s",
        (request_id,),
    ).fetchone()
    if row is None:
        return {}
    quorum, escalated, asides, approvals = row
    more: dict[str, Any] = {}
    if quorum > 1:
        more["quorum"] = int(quorum)
        more["approvals"] = [
            {"role": visible(str(a.get("role")), limit=64), "at": str(a.get("at"))[:40]}
            for a in (approvals if isinstance(approvals, list) else [])
            if isinstance(a, dict)
        ]
    if asides:
        more["set_aside"] = int(asides)
    if escalated:
        more["escalated"] = True
    return more


class Fenced(RuntimeError):
    """This worker may not apply the answer: its lease is gone, or the row is not its own."""


def _ruling(
    request_id: int,
    answer: str,
    answer_id: int,
    role: str,
    committed: datetime,
    how: str | None,
    note: str | None,
    group_id: str | None = None,
    group_size: int | None = None,
    screen: str | None = None,
    shown_ms: int | None = None,
    scope_grant: bool | None = None,
    edit: Any = None,
    edit_bytes: int | None = None,
    edit_text: str | None = None,
    *,
    more: dict[str, Any] | None = None,
) -> Ruling:
    """The ruling a committed answer makes: who the database says answered, the answer's id and commit time
    in the record; ``how`` (what the answering program said it is) only as one of the known words. An edit
    (``e``) is the action that runs instead, as the run's own checks let it (core/asking.py); one that cannot
    be read as written, its text included, rejects: never the action as proposed."""
    said = how if how in HOW else "unknown"
    human = said == "human"
    record = {"request": request_id, "answer": answer_id, "role": role, "committed": committed.isoformat()}
    record |= more or {}
    ran: Action | None = None
    if edit is not None or edit_bytes is not None:
        try:
            if edit is None:
                raise ActionError("too_long", f"its record is {edit_bytes:,} bytes, more than {EDIT_BYTES:,}")
            ran = action_of_record(rq.read_json(edit, EDIT_BYTES, "the edit"), edit_text or "")
        except (rq.RowError, ActionError) as exc:
            why = exc.reason if isinstance(exc, ActionError) else str(exc)
            note = f"the edit by {visible(role, limit=64)} could not be read ({one_line(why, 200)}): nothing ran"
            return Ruling(Answer.REJECT, "edit check (fail closed)", note=note, queue=record)
    return Ruling(
        Answer(answer),
        f"{said} (team queue)",
        note=one_line(note or "", 2000),
        human=human,
        operator=role if human else "",
        queue=record,
        # what the person was shown (the schema holds it to a SHA-256 and a number of milliseconds)
        screen=(screen or "") if human else "",
        shown_ms=shown_ms if human else None,
        # the record keeps only a group a fleet could have made (core/grouping.py's group_record)
        group=(group_id, group_size) if group_id is not None and group_size is not None else None,
        # a's grant is a person's; an edit is checked by the run (only a person's is taken)
        grant=bool(scope_grant) and human,
        edit=ran,
    )
