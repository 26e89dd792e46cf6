"""What an answer on a team's queue carries beyond approve or reject (issue 38, point 2), against a real
PostgreSQL server with the analysts' own login roles: a scope's grant (``a``) and an edit (``e``) travel with
an approval only, are final once committed, and the edited text is held only until the run's worker reads
it; "read by" marks are each session's own, and lapse the moment that session ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from team_cases import TEMPLATE, as_role, one, posted, ready, wait_for

from cua_tui.core.actions import Action, Kind
from cua_tui.core.ports import Answer
from cua_tui.team import analyst, approver
from cua_tui.team.control import LOOK_LEASE_S, TeamFleet
from tests.fakes.pgserver import PgServer

pytestmark = pytest.mark.pgserver

EDITED = Action(Kind.TYPE, text="the reviewer's words")


@pytest.fixture
def url(pg_server: PgServer) -> str:
    return ready(pg_server).new_database(TEMPLATE)


def test_an_edit_and_a_grant_go_with_an_approval_only_and_the_edited_text_until_it_is_read(url: str) -> None:
    request = posted(url, {"action": "the model's words"})
    with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
        with pytest.raises(ValueError, match="only an approval"):
            analyst.answer(conn, request, Answer.REJECT, how="human", edit=EDITED)
        # the server holds the same rule, whatever a client sends
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE cua_tui.requests SET answer = 'reject', scope_grant = true WHERE id = %s", (request,))
        # nothing of an answer is set before the answer
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE cua_tui.requests SET edit = '{}', edit_text = 'x' WHERE id = %s", (request,))
        won = analyst.answer(conn, request, Answer.APPROVE, how="human", grant=True, edit=EDITED)
    assert won.won and won.line.endswith("approved as edited")
    edit, text, grant, texts = (
        psycopg.connect(url)
        .execute("SELECT edit, edit_text, scope_grant, texts FROM cua_tui.requests WHERE id = %s", (request,))
        .fetchone()
        or (None,) * 4
    )
    # the record holds the text as its length and SHA-256; the text itself waits for the worker
    assert edit == EDITED.to_record() and "text" not in edit and text == EDITED.text and grant is True
    assert texts is None  # the model's text went with the answer
    for change in ("edit_text = 'other words'", "edit = '{}'", "scope_grant = false"):
        with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(f"UPDATE cua_tui.requests SET {change} WHERE id = %s", (request,))
    # the worker's read: the text from the row as it was, wiped by the same statement
    with psycopg.connect(url, autocommit=True) as conn:
        read = conn.execute(
            "UPDATE cua_tui.requests q SET applied_at = now() FROM cua_tui.requests o WHERE o.id = q.id "
            f"AND q.id = %s RETURNING {approver.answer_columns('o')}",
            (request,),
        ).fetchone()
    assert read is not None
    ruling = approver._ruling(request, *read)
    assert ruling.edit == EDITED and ruling.grant and ruling.operator == "alice"
    assert one(url, "SELECT edit_text FROM cua_tui.requests WHERE id = %s", request) is None
    # read again (its acknowledgement lost): the text is gone, so the answer rejects, never runs as proposed
    again = (
        psycopg.connect(url)
        .execute(f"SELECT {approver.ANSWER_COLUMNS} FROM cua_tui.requests q WHERE id = %s", (request,))
        .fetchone()
    )
    assert again is not None
    refused = approver._ruling(request, *again)
    assert refused.answer is Answer.REJECT and refused.edit is None and "could not be read" in refused.note


def test_an_answer_not_applied_takes_its_edited_text_with_it(url: str) -> None:
    request = posted(url)
    with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
        assert analyst.answer(conn, request, Answer.APPROVE, how="human", edit=EDITED).won
    one(url, "UPDATE cua_tui.requests SET not_applied = 'deadline (5 s)' WHERE id = %s RETURNING id", request)
    assert one(url, "SELECT edit_text FROM cua_tui.requests WHERE id = %s", request) is None


def _mark_and_wait(url: str, request: int, role: str) -> subprocess.Popen[bytes]:
    """A process of its own (a terminal of ``role``) that marks ``request`` read for a long lease, then waits."""
    code = (
        "import sys, time, psycopg\n"
        "c = psycopg.connect(sys.argv[1], autocommit=True)\n"
        "c.execute('SELECT cua_tui.look(ARRAY[%s]::bigint[], 60)', (int(sys.argv[2]),))\n"
        "print('marked', flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, as_role(url, role), str(request)], stdout=subprocess.PIPE, env=dict(os.environ)
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"marked\n"
    return proc


def test_read_by_marks_are_each_sessions_own_and_lapse_when_it_ends(url: str) -> None:
    request = posted(url)
    fleet_id = one(url, "SELECT fleet_id FROM cua_tui.requests WHERE id = %s", request)
    with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
        # a mark is made by the server, as the session's own role: never written directly, never another's
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO cua_tui.looks VALUES (%s, 'alice', 1, now() + interval '1 hour')", (request,))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("SELECT cua_tui.look(array(SELECT generate_series(1, 101))::bigint[], 10)")
    alice = TeamFleet(as_role(url, "alice"), fleet_id, poll_s=0.05)
    alice.start()
    marker = _mark_and_wait(url, request, "bob")
    try:
        wait_for("alice to see bob's mark", lambda: alice.readers().get(request) == ("bob",), 10)
        # the lease is a minute; the terminal goes (as a SIGHUP or a dropped connection does): at once
        marker.send_signal(signal.SIGKILL)
        marker.wait(10)
        gone = time.monotonic()
        wait_for("bob's mark to lapse with his session", lambda: request not in alice.readers(), 10)
        assert time.monotonic() - gone < LOOK_LEASE_S / 2
        # alice's own mark is bob's to see, not her own
        alice.looking([request])
        with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
            seen = wait_for(
                "alice's mark",
                lambda: conn.execute(
                    "SELECT role, until > now() FROM cua_tui.looks WHERE request_id = %s "
                    "AND pid IN (SELECT pid FROM pg_stat_activity)",  # a session that lives
                    (request,),
                ).fetchall(),
                10,
            )
        assert seen == [("alice", True)] and request not in alice.readers()
    finally:
        marker.kill()
        alice.close()
    # a clean detach takes its marks away too
    assert one(url, "SELECT count(*) FROM cua_tui.looks WHERE role = 'alice'") == 0


def test_an_answer_never_waits_on_a_mark(url: str, tmp_path: Path) -> None:
    request = posted(url)
    marker = _mark_and_wait(url, request, "alice")
    try:
        with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
            assert analyst.answer(conn, request, Answer.REJECT, how="human").won
    finally:
        marker.kill()


def test_a_models_call_for_the_person_is_a_request_the_queue_holds_and_an_analyst_answers(url: str) -> None:
    """Version 5: an open-weight model's call_user() is a request of kind "ask" (no action), answered n."""
    request = posted(url, kind="ask")
    with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
        won = analyst.answer(conn, request, Answer.REJECT, how="human")
    assert won.won
    assert one(url, "SELECT answer FROM cua_tui.requests WHERE id = %s", request) == "reject"
    with pytest.raises(psycopg.errors.CheckViolation):
        posted(url, kind="shell")
