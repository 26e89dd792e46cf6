"""The tests' PostgreSQL server (tests/fakes/pgserver.py) and the two database facts the team queue stands on:
``FOR UPDATE SKIP LOCKED`` hands a row to one claimant, and a compare-and-set answers a request once."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from tests.fakes.pgserver import PgServer

# a server of its own per worker process: with the desktops' part, beside the longest (tests/conftest.py)
pytestmark = pytest.mark.pgserver


@pytest.fixture
def server(pg_server: PgServer) -> PgServer:
    return pg_server


@pytest.fixture
def url(server: PgServer) -> str:
    db = server.new_database()
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE task (id int PRIMARY KEY, claimed_by text)")
        conn.execute("CREATE TABLE request (id int PRIMARY KEY, answer text, answered_by text)")
        conn.execute("INSERT INTO task SELECT i, NULL FROM generate_series(1, 4) i")
        conn.execute("INSERT INTO request VALUES (1, NULL, NULL)")
    return db


def test_the_server_listens_on_its_socket_only_and_not_as_root(server: PgServer, url: str) -> None:
    with psycopg.connect(url) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SHOW unix_socket_directories").fetchone() == (str(server.socket_dir),)
        assert conn.execute("SELECT session_user").fetchone() == (server.role,)
    with psycopg.connect(url) as conn:  # the server's process is not root's (PostgreSQL refuses root)
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()
        # looked at while the session lives: its backend ends with it
        assert pid is not None and Path(f"/proc/{pid[0]}").stat().st_uid != 0


def test_skip_locked_hands_each_claimant_another_row(url: str) -> None:
    claim = "SELECT id FROM task WHERE claimed_by IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    with psycopg.connect(url) as one, psycopg.connect(url) as two:
        first = one.execute(claim).fetchone()
        second = two.execute(claim).fetchone()  # one's row is locked: skipped, not waited for
        assert first == (1,) and second == (2,)
        with psycopg.connect(url) as three:
            assert three.execute(claim).fetchone() == (3,)
            three.rollback()
            one.rollback()  # a claimant that dies returns its row; two still holds its own
            assert three.execute(claim).fetchone() == (1,)


def test_a_request_is_answered_once_however_many_answer_at_once(url: str) -> None:
    answer = "UPDATE request SET answer = %s, answered_by = %s WHERE id = 1 AND answer IS NULL RETURNING answered_by"
    start = threading.Barrier(8)
    won: list[str] = []

    def analyst(name: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            start.wait(timeout=30)
            if conn.execute(answer, ("approve" if name.endswith(("0", "2", "4", "6")) else "reject", name)).fetchone():
                won.append(name)

    threads = [threading.Thread(target=analyst, args=(f"analyst-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(won) == 1
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT answered_by FROM request WHERE id = 1").fetchone() == (won[0],)


def test_a_restart_ends_the_sessions_and_keeps_what_was_committed(server: PgServer, url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE request SET answer = 'approve', answered_by = 'alice' WHERE id = 1")
        server.restart()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    with psycopg.connect(url) as again:
        assert again.execute("SELECT answer, answered_by FROM request").fetchone() == ("approve", "alice")
