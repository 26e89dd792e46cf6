"""The team queue against a real PostgreSQL server (tests/fakes/pgserver.py; Debian's package, a Unix socket only):
the schema's rules, exactly-once answers, a fleet run by a worker and answered by a headless analyst, and
the faults a worker meets (killed, frozen past its lease, a database it cannot reach, a hostile row)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from fleet_cases import FORM
from team_cases import TEMPLATE, WAIT_S, as_role, one, posted, ready, settings, spec, wait_for

from cua_tui.cli import main
from cua_tui.core.audit import VerifyExit
from cua_tui.core.ports import Answer
from cua_tui.team import analyst, db, schema, verify
from cua_tui.team.analyst import HeadlessAnalyst
from cua_tui.team.submit import Submitted, submit
from cua_tui.team.worker import Worker, WorkerOptions
from tests.fakes.pgserver import PgServer

# a server of its own per worker process: with the desktops' part, beside the longest (tests/conftest.py)
pytestmark = pytest.mark.pgserver

CUA = [sys.executable, "-m", "cua_tui.cli"]


@pytest.fixture(scope="module")
def server(pg_server: PgServer) -> PgServer:
    return ready(pg_server)


@pytest.fixture
def url(server: PgServer) -> str:
    return server.new_database(TEMPLATE)


def env(tmp: Path, url: str) -> dict[str, str]:
    return {
        **os.environ,
        "CUA_TUI_CONFIG": str(tmp / "none.toml"),
        "CUA_TUI_RUNS_DIR": str(tmp / "runs"),
        "CUA_TUI_QUEUE": url,
    }


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*argv: str, environ: dict[str, str] | None = None) -> Ran:
    """A cua-tui command run in this process (a process of its own only where a signal is the point)."""
    done = CliRunner().invoke(main, list(argv), env=environ)
    return Ran(done.exit_code, done.stdout, done.stderr)


def reaped(url: str, run_id: str) -> bool:
    """Any session may declare lapsed workers lost: this one does, then looks at the run (a reap that waited
    past its statement timeout on a frozen session's locks has not happened yet)."""
    try:
        one(url, "SELECT cua_tui.reap()")
    except psycopg.errors.QueryCanceled:
        return False
    return bool(one(url, "SELECT status FROM cua_tui.runs WHERE id = %s", run_id) == "lost")


def executed(run_dir: Path, *, turn: int, index: int) -> int:
    """How many times the run's log says the action at (turn, index) was handed to the desktop."""
    records = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
    return sum(1 for r in records if r["kind"] == "executing" and (r["turn"], r["index"]) == (turn, index))


# ------------------------------------------------------------------------------------------------
# The schema and its rules
# --------------------------------------------------------------------------------------------------
def test_the_schema_is_versioned_and_made_once(url: str) -> None:
    with db.connect(url, "test", check_schema=False) as conn:
        assert schema.version(conn) == schema.LATEST
        assert schema.migrate(conn) == (schema.LATEST, schema.LATEST)
        conn.execute("UPDATE cua_tui.meta SET value = '99' WHERE key = 'version'")
        with pytest.raises(schema.SchemaError, match="newer than this cua-tui knows"):
            schema.ensure(conn)


def test_a_database_of_an_older_version_is_upgraded_in_place_keeping_its_fleets(
    server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = server.new_database()
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
    monkeypatch.setattr(schema, "LATEST", 1)
    done = submit(old, [spec("t0")], tasks_sha256="4" * 64, name="from v1")
    monkeypatch.undo()
    with db.connect(old, "test") as conn:  # at first use: brought up to date
        assert schema.version(conn) == schema.LATEST > 1
        row = conn.execute("SELECT state, kill_at FROM cua_tui.runs WHERE id = %s", (done.runs[0][1],)).fetchone()
    assert row == ("queued", None)


def test_queue_init_and_upgrade_from_the_command_line(server: PgServer, tmp_path: Path) -> None:
    empty = server.new_database()  # no schema yet

    def queue(*argv: str) -> Ran:
        return cli("queue", *argv, "--queue", empty)

    made = queue("init")
    assert made.returncode == 0 and f"schema made: version 0 -> {schema.LATEST}" in made.stderr
    again = queue("upgrade")
    assert again.returncode == 0 and f"schema version {schema.LATEST}, up to date" in again.stderr
    for wrong in (queue("init", "--older-than", "1d"), queue("prune")):
        assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1


def test_tls_is_required_beyond_this_machine() -> None:
    # the rule only: no connection is made
    remote = psycopg.conninfo.conninfo_to_dict(db.conninfo_for("postgresql://alice@db.example/cua", "t"))
    assert remote["sslmode"] == "require"
    said = psycopg.conninfo.conninfo_to_dict(db.conninfo_for("postgresql://a@db.example/cua?sslmode=verify-full", "t"))
    assert said["sslmode"] == "verify-full"
    for local in (
        "postgresql://a@localhost/cua",
        "postgresql://a@/cua?host=/run/postgresql",
        "postgresql://a@127.0.0.1/c",
    ):
        assert "sslmode" not in psycopg.conninfo.conninfo_to_dict(db.conninfo_for(local, "t"))
    assert "secret" not in db.shown("postgresql://alice:secret@db.example/cua")
    # a URL libpq cannot read is quoted in its message: never its password
    for broken in ("postgresql://alice:s3cret@[::1/cua", "host=db.example password=s3cret dbname"):
        with pytest.raises(db.QueueError) as refused:
            db.conninfo_for(broken, "t")
        assert "s3cret" not in str(refused.value)


def test_who_answered_is_the_database_role_and_the_text_goes_with_the_answer(url: str) -> None:
    request = posted(url, {"action": "my secret text"})
    assert one(url, "SELECT texts->>'action' FROM cua_tui.requests WHERE id = %s", request) == "my secret text"
    with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
        # a client cannot say who answered: the trigger sets session_user
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE cua_tui.requests SET answered_by = 'bob' WHERE id = %s", (request,))
        won = analyst.answer(conn, request, Answer.APPROVE, how="human")
    assert won.won
    row = (
        psycopg.connect(url)
        .execute("SELECT answered_by, answer_id, texts FROM cua_tui.requests WHERE id = %s", (request,))
        .fetchone()
    )
    assert row == ("alice", won.answer_id, None)
    # the answer is final, even for the database's owner, and so is what was shown with it
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE cua_tui.requests SET answer = 'reject' WHERE id = %s", (request,))
    with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE cua_tui.requests SET shown_ms = 1 WHERE id = %s", (request,))
    # what was shown is set with an answer only
    other = posted(url)
    with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("UPDATE cua_tui.requests SET screen_shown = repeat('b', 64) WHERE id = %s", (other,))
        shown = analyst.answer(conn, other, Answer.REJECT, how="human", screen="c" * 64, shown_ms=1234)
    assert shown.won
    assert one(url, "SELECT array[screen_shown, shown_ms::text] FROM cua_tui.requests WHERE id = %s", other) == [
        "c" * 64,
        "1234",
    ]


def test_two_analysts_at_once_one_wins_the_other_is_told_who(url: str) -> None:
    for _ in range(5):
        request = posted(url)
        results: dict[str, analyst.Outcome] = {}
        start = threading.Barrier(2)

        def press(
            role: str, decision: Answer, request: int = request, start: threading.Barrier = start,
            results: dict[str, analyst.Outcome] = results,
        ) -> None:  # fmt: skip
            with psycopg.connect(as_role(url, role), autocommit=True) as conn:
                start.wait()
                results[role] = analyst.answer(conn, request, decision, how="human")

        threads = [
            threading.Thread(target=press, args=("alice", Answer.APPROVE)),
            threading.Thread(target=press, args=("bob", Answer.REJECT)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [r for r, o in results.items() if o.won]
        assert len(winners) == 1
        loser = "bob" if winners == ["alice"] else "alice"
        verb = "approved" if winners == ["alice"] else "rejected"
        assert f"already answered: {winners[0]} {verb} it at " in results[loser].line


def test_a_group_answer_is_one_transaction_and_each_chain_names_the_group(url: str, tmp_path: Path) -> None:
    done = submit(url, [spec(f"t{i}") for i in range(2)], tasks_sha256="a" * 64, name="group")
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=2, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=2),
        lambda line: None,
    )  # fmt: skip
    working = threading.Thread(target=worker.run)
    working.start()
    try:
        count = "SELECT count(*) FROM cua_tui.requests WHERE fleet_id = %s"
        wait_for("both runs waiting", lambda: one(url, count, done.fleet_id) == 2)
        with psycopg.connect(url) as conn:
            ids = [int(r[0]) for r in conn.execute("SELECT id FROM cua_tui.requests ORDER BY id").fetchall()]
        with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
            answered = analyst.answer_group(conn, ids, Answer.APPROVE, how="human", group_id="g-typing-1")
            assert all(o.won for o in answered)
        with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
            again = analyst.answer_group(conn, ids, Answer.REJECT, how="human", group_id="g-typing-2")
        assert not any(o.won for o in again) and all("alice approved it at" in o.line for o in again)
        # the rest of each run approved one by one
        HeadlessAnalyst(url, done.fleet_id, "approve", lambda line: None).run()
    finally:
        working.join(WAIT_S)
    for _task, run_id in done.runs:
        records = [json.loads(x) for x in (tmp_path / "runs" / run_id / "audit.jsonl").read_text().splitlines()]
        (decided,) = [r for r in records if r["kind"] == "decision" and (r.get("queue") or {}).get("request") in ids]
        assert decided["group"] == {"id": "g-typing-1", "size": 2} and decided["operator"] == "alice"


# ------------------------------------------------------------------------------------------------
# A fleet on the queue
# --------------------------------------------------------------------------------------------------
def run_fleet(url: str, tmp_path: Path, runs: int) -> Submitted:
    """A fleet of ``runs`` sim runs, run by one worker (in this process) and approved by alice, headless."""
    done = submit(url, [spec(f"t{i}") for i in range(runs)], tasks_sha256="1" * 64, name="fleet")
    lines: list[str] = []
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=2, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=runs),
        lines.append,
    )  # fmt: skip
    working = threading.Thread(target=worker.run)
    working.start()
    person = HeadlessAnalyst(as_role(url, "alice"), done.fleet_id, "approve", lines.append)
    assert person.run() == 0
    working.join(WAIT_S)
    assert not working.is_alive()
    return done


def test_a_fleet_runs_on_a_worker_and_every_answer_is_in_exactly_one_chain(url: str, tmp_path: Path) -> None:
    run_fleet(url, tmp_path, 3)
    with psycopg.connect(url) as conn:
        runs = conn.execute("SELECT id, status, sealed_locally, mirrored FROM cua_tui.runs").fetchall()
        answers = conn.execute(
            "SELECT id, run_id, answer_id, answered_by, applied_at IS NOT NULL, texts FROM cua_tui.requests"
        ).fetchall()
        mirrored = conn.execute("SELECT run_id, line FROM cua_tui.events ORDER BY run_id, seq").fetchall()
    assert {r[1] for r in runs} == {"passed"} and all(r[2] for r in runs)
    assert len(answers) == 3 and all(a[3] == "alice" and a[4] and a[5] is None for a in answers)
    for run_id, _status, _sealed, count in runs:
        local = (tmp_path / "runs" / run_id / "audit.jsonl").read_bytes().splitlines()
        copied = [bytes(line) for rid, line in mirrored if rid == run_id]
        assert copied == local and count == len(local)
        decided = [json.loads(x) for x in local if b'"kind":"decision"' in x and b'"queue":{' in x]
        (record,) = decided
        (answer,) = [a for a in answers if a[1] == run_id]
        assert record["queue"]["answer"] == answer[2] and record["queue"]["role"] == "alice"
        # the typed text is nowhere in what was copied
        assert not any(b"cua-tui verified" in bytes(line) for _rid, line in mirrored)


def test_detach_sends_each_task_whole_and_no_key_and_a_worker_takes_only_its_backends(url: str, tmp_path: Path) -> None:
    from cua_tui.core.policy import DEFAULT_POLICY_TOML

    (tmp_path / "form.json").write_text(json.dumps(FORM))
    (tmp_path / "policy.toml").write_text(DEFAULT_POLICY_TOML.replace('name = "default"', 'name = "team"'))
    (tmp_path / "tasks.toml").write_text(
        'name = "mixed"\n'
        '[[tasks]]\nname = "on-sim"\ntask = "fill the form"\nagent = "script:form.json"\npolicy = "policy.toml"\n'
        '[[tasks]]\nname = "on-dry"\ntask = "fill the form"\nagent = "script:form.json"\nbackend = "dry"\n'
    )
    keys = {
        "OPENAI_API_KEY": "sk-sentinel-4d1f",
        "ANTHROPIC_API_KEY": "ak-sentinel-9c2e",
        "CWSANDBOX_API_KEY": "cw-s-77",
    }
    out = cli(
        "fleet", "--tasks", str(tmp_path / "tasks.toml"), "--detach", "--backend", "sim",
        environ={**env(tmp_path, url), **keys},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    fleet_id = out.stdout.strip()
    with psycopg.connect(url) as conn:
        rows: dict[str, Any] = dict(
            conn.execute("SELECT task_name, spec FROM cua_tui.runs WHERE fleet_id = %s", (fleet_id,))
        )
        everything = " ".join(
            str(r) for table in ("fleets", "runs", "workers", "requests")
            for r in conn.execute(f"SELECT * FROM cua_tui.{table}").fetchall()
        )  # fmt: skip
    assert rows["on-sim"]["backend"] == "sim" and rows["on-dry"]["backend"] == "dry"
    assert rows["on-sim"]["script"] == FORM and rows["on-sim"]["agent"] == "script"
    text = (tmp_path / "policy.toml").read_text()
    assert rows["on-sim"]["policy"] == {"text": text, "sha256": hashlib.sha256(text.encode()).hexdigest()}
    assert rows["on-dry"]["policy"]["text"] == DEFAULT_POLICY_TOML  # the task names none: the built-in one
    assert not any(key in everything for key in keys.values())
    # a worker that offers dry only takes the dry task, and leaves the other queued
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("dry",), concurrency=2, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=1),
        lambda line: None,
    )  # fmt: skip
    working = threading.Thread(target=worker.run)
    working.start()
    deadline = time.monotonic() + WAIT_S
    while working.is_alive() and time.monotonic() < deadline:
        with psycopg.connect(url, autocommit=True) as conn:
            for (open_id,) in conn.execute(
                "SELECT id FROM cua_tui.requests WHERE answer IS NULL AND closed_at IS NULL"
            ).fetchall():
                analyst.answer(conn, int(open_id), Answer.APPROVE, how="human")
        working.join(0.2)
    assert not working.is_alive()
    states: dict[str, str] = dict(
        psycopg.connect(url).execute("SELECT task_name, coalesce(status, state) FROM cua_tui.runs")
    )
    assert states == {"on-dry": "finished", "on-sim": "queued"}


def test_a_run_and_a_fleet_verify_from_the_database_alone(url: str, tmp_path: Path) -> None:
    done = run_fleet(url, tmp_path, 2)
    run_id = done.runs[0][1]
    # the worker's folders are gone: the database is all there is
    shutil.rmtree(tmp_path / "runs")
    check = cli("verify", "--queue", url, run_id)
    assert check.returncode == 0 and check.stdout.startswith("intact: "), check.stdout + check.stderr
    check = cli("verify", "--queue", url, done.fleet_id)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "2 committed answers, each in exactly one chain" in check.stderr + check.stdout
    # an answer changed behind the trigger's back (the owner may disable it): the chains disagree
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE cua_tui.requests DISABLE TRIGGER guard_request")
        conn.execute("UPDATE cua_tui.requests SET answered_by = 'bob' WHERE run_id = %s", (run_id,))
    with db.connect(url, "test") as conn:
        fleet = verify.check_fleet(conn, done.fleet_id, None)
    assert fleet.code == VerifyExit.TAMPERED
    (problem,) = fleet.problems
    assert f"run {run_id}" in problem and "by bob in the database" in problem and "by alice in the chain" in problem
    # a mirrored line changed: that run's chain says so, as a folder's would
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE cua_tui.events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'passed', 'failed'), "
            "'UTF8') WHERE run_id = %s AND convert_from(line, 'UTF8') LIKE '%%run_ended%%'",
            (done.runs[1][1],),
        )
    check = cli("verify", "--queue", url, done.runs[1][1])
    assert check.returncode == 1, check.stdout + check.stderr


async def test_runs_replay_and_export_read_a_run_whose_workers_folder_is_gone(url: str, tmp_path: Path) -> None:
    """On a machine that never had the run's folder: ``runs`` lists it from the database; the run made from
    its mirrored bytes alone, its chain checked as a folder's; a changed line says TAMPERED there as it does
    in a folder."""
    from cua_tui.core.runlog import RunReader
    from cua_tui.team.verify import run_folder
    from cua_tui.tui.replay import chain_state, replay_app

    done = run_fleet(url, tmp_path, 1)
    run_id = done.runs[0][1]
    written = (tmp_path / "runs" / run_id / "run.json").read_bytes()
    shutil.rmtree(tmp_path / "runs")
    other = submit(url, [spec("later")], tasks_sha256="5" * 64, name="not run")  # queued, no worker
    listed = cli("runs", "--queue", url, "--json")
    assert listed.returncode == 0, listed.stderr
    runs = {r["id"]: r for r in json.loads(listed.stdout)}
    assert runs[run_id]["status"] == "passed" and runs[run_id]["fleet"] == done.fleet_id
    assert runs[run_id]["decisions"] == 1 and runs[run_id]["task"] == "fill the form"
    assert runs[other.runs[0][1]]["status"] == "unfinished"
    only = cli("runs", "--queue", url, "--fleet", done.fleet_id, "--status", "passed")
    assert only.returncode == 0 and run_id in only.stdout and other.runs[0][1] not in only.stdout
    html = tmp_path / "out" / "run.html"
    html.parent.mkdir()
    made = cli("export", "--queue", url, run_id, "--html", str(html))
    assert made.returncode == 0, made.stdout + made.stderr
    page = html.read_text(encoding="utf-8")
    assert run_id in page and "INTACT" in page.upper() and "data:image/png;base64," in page
    assert "fill the form" in page and "run.json" not in page  # its task, and no note of a missing file
    with run_folder(url, run_id) as path:
        assert chain_state(path).state == "intact"
        # run.json as the worker's run wrote it: the replay's header has its task, policy and limits
        assert (path / "run.json").read_bytes() == written
        with RunReader(path) as reader:
            assert reader.info["task"] == "fill the form" and reader.info["policy"]["name"] == "default"
            app = replay_app(reader, lambda: chain_state(path))
            async with app.run_test(size=(160, 48)) as pilot:
                await pilot.press("end", "home", "right")
                await pilot.pause()
                assert not app.return_code
        folder = path
    assert not folder.exists()  # nothing of it is left behind
    gone = cli("replay", "--queue", url, "no-such-run")
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1 and "no run no-such-run on the queue" in gone.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE cua_tui.events SET line = convert_to(replace(convert_from(line, 'UTF8'), 'passed', 'failed'), "
            "'UTF8') WHERE run_id = %s AND convert_from(line, 'UTF8') LIKE '%%run_ended%%'",
            (run_id,),
        )
    tampered = cli("export", "--queue", url, run_id, "--html", str(html))
    assert tampered.returncode == 1 and "TAMPERED" in tampered.stderr, tampered.stderr


def test_the_mirror_copies_every_line_but_never_a_private_stretch_screen(url: str, tmp_path: Path) -> None:
    from cua_tui.team.link import Link
    from cua_tui.team.mirror import Mirror

    run_id = submit(url, [spec("a")], tasks_sha256="b" * 64, name="t").runs[0][1]
    folder = tmp_path / run_id
    (folder / "screens").mkdir(parents=True)
    shown, private = "1" * 64, "2" * 64
    for sha in (shown, private):
        (folder / "screens" / f"{sha}.png").write_bytes(sha.encode())
    kinds: list[dict[str, Any]] = [
        {"kind": "screen", "sha256": shown},
        {"kind": "takeover_private", "turn": 1, "private": True},
        {"kind": "screen", "sha256": private},
        {"kind": "takeover_private", "turn": 1, "private": False},
    ]
    lines = [json.dumps({"seq": n, **k}, separators=(",", ":")).encode() for n, k in enumerate(kinds)]
    (folder / "audit.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    link = Link(url, "test", size=2, say=lambda line: None)
    link.open()
    mirror = Mirror(link, lambda line: None)
    mirror.start()
    try:
        mirror.add(run_id, folder)
        assert mirror.close(run_id, WAIT_S)
    finally:
        link.close()
    with psycopg.connect(url) as conn:
        copied = [bytes(r[0]) for r in conn.execute("SELECT line FROM cua_tui.events ORDER BY seq").fetchall()]
        screens = [r[0] for r in conn.execute("SELECT sha256 FROM cua_tui.screens").fetchall()]
    assert copied == lines and screens == [shown]


def test_prune_removes_old_finished_fleets_but_never_a_last_copy_unless_told(url: str, tmp_path: Path) -> None:
    done = run_fleet(url, tmp_path, 1)
    lost = submit(url, [spec("x")], tasks_sha256="5" * 64, name="lost").runs[0][1]
    with psycopg.connect(url, autocommit=True) as conn:
        # a run whose worker was lost: its mirrored lines are the only ones (its folder was never sealed)
        conn.execute(
            "UPDATE cua_tui.runs SET state = 'ended', status = 'lost', ended_at = now() WHERE id = %s", (lost,)
        )
        conn.execute("INSERT INTO cua_tui.events VALUES (%s, 0, 'x')", (lost,))

    def prune(*more: str) -> str:
        ran = cli("queue", "prune", "--queue", url, *more)
        assert ran.returncode == 0, ran.stderr
        return ran.stderr

    assert "pruned 0 runs of 0 finished fleets" in prune("--older-than", "1h")
    said = prune("--older-than", "0s")
    assert "pruned 1 runs of 2 finished fleets" in said and "kept 1 whose lines exist nowhere else" in said
    count = "SELECT count(*) FROM cua_tui.events WHERE run_id = %s"
    assert one(url, count, done.runs[0][1]) == 0 and one(url, count, lost) == 1
    assert one(url, "SELECT count(*) FROM cua_tui.screens") == 0
    assert "pruned 1 runs" in prune("--older-than", "0s", "--even-last-copy")
    assert one(url, count, lost) == 0


def test_a_hostile_task_row_is_refused_in_one_line(url: str, tmp_path: Path) -> None:
    done = submit(url, [spec("ok")], tasks_sha256="2" * 64, name="t")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE cua_tui.runs SET spec = jsonb_set(spec, '{task}', to_jsonb(%s::text)) WHERE id = %s",
            ("\x1b[31m" + "x" * 50 + "[/red]", done.runs[0][1]),
        )
    # a row whose id is a path: the schema's check is the owner's to drop, the worker checks again
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE cua_tui.runs DROP CONSTRAINT runs_id_check")
        conn.execute(
            "INSERT INTO cua_tui.runs (id, fleet_id, position, task_name, backend, spec, spec_sha256) "
            "SELECT '../escape', id, 1, 'ok', 'sim', %s::jsonb, %s FROM cua_tui.fleets",
            (spec("ok").encode().decode(), spec("ok").sha256),
        )
    lines: list[str] = []
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=1, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=2),
        lines.append,
    )  # fmt: skip
    assert worker.run() == 0
    assert one(url, "SELECT reason FROM cua_tui.runs WHERE id = '../escape'").startswith("refused: run id:")
    assert not (tmp_path / "escape").exists()
    run_id = done.runs[0][1]
    assert one(url, "SELECT status FROM cua_tui.runs WHERE id = %s", run_id) == "error"
    assert "does not match its SHA-256" in one(url, "SELECT reason FROM cua_tui.runs WHERE id = %s", run_id)
    assert not (tmp_path / "runs" / run_id).exists()


def test_a_hostile_answer_is_cut_by_the_server_before_the_worker_holds_it(url: str, tmp_path: Path) -> None:
    done = submit(url, [spec("a")], tasks_sha256="7" * 64, name="t")
    run_id = done.runs[0][1]
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=1, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=1),
        lambda line: None,
    )  # fmt: skip
    working = threading.Thread(target=worker.run)
    working.start()
    try:
        request = wait_for("the request", lambda: one(url, "SELECT id FROM cua_tui.requests WHERE run_id = %s", run_id))
        with psycopg.connect(url, autocommit=True) as conn:  # the owner lifts the schema's bound
            conn.execute("ALTER TABLE cua_tui.requests DROP CONSTRAINT requests_note_check")
        note = "\x1b]0;pwned\x07[red]x[/red]" + "n" * (5 * 2**20)
        with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
            assert analyst.answer(conn, int(request), Answer.REJECT, how="human", note=note).won
        HeadlessAnalyst(as_role(url, "bob"), done.fleet_id, "reject", lambda line: None).run()
    finally:
        working.join(WAIT_S)
    records = [json.loads(x) for x in (tmp_path / "runs" / run_id / "audit.jsonl").read_text().splitlines()]
    (decided,) = [r for r in records if r["kind"] == "decision" and (r.get("queue") or {}).get("request") == request]
    assert decided["decision"] == "reject" and decided["operator"] == "alice"
    assert len(decided["note"]) <= 2000 and decided["note"].startswith("\x1b]0;pwned")
    heard = [r["message"] for r in records if r["kind"] == "outcome" and r["index"] == 1]
    assert len(heard[0]) < 400  # what the model hears of the reviewer's words is bounded too


def test_oversized_rows_are_refused_unread_in_one_line(url: str, tmp_path: Path) -> None:
    done = submit(url, [spec("a")], tasks_sha256="8" * 64, name="t")
    run_id = done.runs[0][1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE cua_tui.runs SET state = 'ended', status = 'error' WHERE id = %s", (run_id,))
        conn.execute(
            "INSERT INTO cua_tui.requests (run_id, fleet_id, turn, index, kind, seq, body, content_sha256, tier) "
            "VALUES (%s, %s, 1, 0, 'action', 3, jsonb_build_object('pad', repeat('x', 3 * 1024 * 1024)), "
            "repeat('a', 64), 1)",
            (run_id, done.fleet_id),
        )
        # a line larger than any record this program writes
        conn.execute(
            "INSERT INTO cua_tui.events VALUES (%s, 0, convert_to(repeat('x', 9 * 1024 * 1024), 'UTF8'))", (run_id,)
        )
    said: list[str] = []
    asked = tmp_path / "asked"
    command = f'approver:sh -c \'touch {asked}; echo {{"decision": "approve"}}\''
    assert HeadlessAnalyst(url, done.fleet_id, command, said.append).run() == 0
    assert any("larger than a request may be; rejected unread" in line for line in said), said
    assert not asked.exists()  # the command never saw it
    assert one(url, "SELECT answer FROM cua_tui.requests WHERE run_id = %s", run_id) == "reject"
    check = cli("verify", "--queue", url, run_id)
    assert check.returncode == 2 and check.stderr.count("\n") == 1 and "more than" in check.stderr


# ------------------------------------------------------------------------------------------------
# The command line and the faults
# --------------------------------------------------------------------------------------------------
def test_operator_is_refused_with_a_queue(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[[tasks]]\ntask = "x"\nagent = "script:f.json"\n')
    out = cli(
        "fleet", "--tasks", str(tmp_path / "t.toml"), "--detach", "--operator", "alice",
        environ=env(tmp_path, "postgresql://a@/db?host=/nonexistent"),
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "session_user" in out.stderr


def test_attach_names_a_fleet_on_the_queue_or_says_in_one_line_why_not(url: str, tmp_path: Path) -> None:
    """Before any TUI opens: a fleet that is not on the queue, or none running to pick, is one line, exit 2."""
    environ = env(tmp_path, as_role(url, "alice"))
    gone = cli("attach", "fleet-nope", environ=environ)
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1 and "no fleet fleet-nope on the queue" in gone.stderr
    idle = cli("attach", environ=environ)
    assert idle.returncode == 2 and "no fleet is running on the queue" in idle.stderr, idle.stderr
    assert "cua-tui attach FLEET" in idle.stderr  # the hint


def test_a_worker_that_cannot_reach_the_database_says_so_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [*CUA, "worker", "--queue", f"postgresql://a@/db?host={tmp_path}/no-socket"],
        env=env(tmp_path, ""), capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.startswith("Error: queue ") and "cannot connect" in out.stderr and out.stderr.count("\n") == 1


def _worker(tmp_path: Path, url: str, lease: float, concurrency: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CUA, "worker", "--backend", "sim", "--lease", str(lease), "--concurrency", str(concurrency)],
        env=env(tmp_path, url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_killed_worker_is_declared_lost_and_its_request_closes(url: str, tmp_path: Path) -> None:
    done = submit(url, [spec("a")], tasks_sha256="3" * 64, name="t")
    run_id = done.runs[0][1]
    proc = _worker(tmp_path, url, lease=2.0)
    try:
        wait_for("the request", lambda: one(url, "SELECT id FROM cua_tui.requests WHERE run_id = %s", run_id))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        started = time.monotonic()
        wait_for("the run to read lost", lambda: reaped(url, run_id), timeout=10)
        # within the lease (2 s) of its last renewal, plus the poll
        assert time.monotonic() - started < 4.0
        why = one(url, "SELECT closed_why FROM cua_tui.requests WHERE run_id = %s", run_id)
        assert why.startswith("lost")
        # nothing is re-run by itself; --retry makes a new run of the task
        out = cli("fleet", "--retry", run_id, environ=env(tmp_path, url))
        assert out.returncode == 0, out.stderr
        new = out.stdout.strip()
        assert one(url, "SELECT retry_of FROM cua_tui.runs WHERE id = %s", new) == run_id
    finally:
        proc.kill()
        proc.wait(10)


def test_a_server_restart_mid_fleet_loses_no_answer_and_applies_none_twice(
    server: PgServer, url: str, tmp_path: Path
) -> None:
    done = submit(url, [spec(f"t{i}") for i in range(2)], tasks_sha256="6" * 64, name="restart")
    proc = _worker(tmp_path, url, lease=20.0, concurrency=2)
    try:
        count = "SELECT count(*) FROM cua_tui.requests WHERE fleet_id = %s"
        wait_for("both requests", lambda: one(url, count, done.fleet_id) == 2)
        server.restart()
        # answered once the server is back: the worker, which lost every session, must hear of it
        person = HeadlessAnalyst(as_role(url, "alice"), done.fleet_id, "approve", lambda line: None)
        assert person.run() == 0 and person.answered == 2
        wait_for("the runs to end", lambda: one(url, "SELECT bool_and(state = 'ended') FROM cua_tui.runs"))
        # its listener back too (its backoff may wait seconds more than the pool's): then it says so
        listening = f"SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN {schema.KILL}'"
        wait_for("the worker listening again", lambda: one(url, listening) > 0)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=WAIT_S)
    assert "reconnecting" in err and "reconnected after" in err, err
    # said once each, in one line: not the pool's own attempts
    assert "error connecting" not in err and "Is the server running" not in err, err
    statuses = {one(url, "SELECT status FROM cua_tui.runs WHERE id = %s", run_id) for _task, run_id in done.runs}
    assert statuses == {"passed"}
    with db.connect(url, "test") as conn:
        fleet = verify.check_fleet(conn, done.fleet_id, None)
    assert fleet.code == VerifyExit.INTACT and fleet.answers == 2, fleet.problems
    for _task, run_id in done.runs:
        # the typing ran once, after its one answer
        assert executed(tmp_path / "runs" / run_id, turn=1, index=1) == 1


def test_a_frozen_worker_past_its_lease_executes_nothing_and_ends_interrupted(url: str, tmp_path: Path) -> None:
    done = submit(url, [spec("a")], tasks_sha256="4" * 64, name="t")
    run_id = done.runs[0][1]
    proc = _worker(tmp_path, url, lease=2.0)
    try:
        request = wait_for("the request", lambda: one(url, "SELECT id FROM cua_tui.requests WHERE run_id = %s", run_id))
        proc.send_signal(signal.SIGSTOP)
        # frozen, perhaps mid-transaction: the server ends that transaction after 10 s idle, freeing its locks
        wait_for("the frozen worker to be declared lost", lambda: reaped(url, run_id), timeout=40)
        # an analyst's answer now finds the request closed
        with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
            late = analyst.answer(conn, int(request), Answer.APPROVE, how="human")
        assert not late.won and "closed" in late.line
        proc.send_signal(signal.SIGCONT)
        _out, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == 1, err
        result = json.loads((tmp_path / "runs" / run_id / "result.json").read_text())
        assert result["status"] == "interrupted" and result["seal"]
        # the typing it asked about never ran
        assert executed(tmp_path / "runs" / run_id, turn=1, index=1) == 0
        assert one(url, "SELECT status FROM cua_tui.runs WHERE id = %s", run_id) == "interrupted"
        verified = cli("verify", str(tmp_path / "runs" / run_id))
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        proc.kill()
        proc.wait(10)


def test_a_session_of_ours_frozen_inside_a_transaction_gives_its_locks_back(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker frozen mid-transaction (SIGSTOP, a suspended VM) holds its row locks: the server ends a
    session of ours idle in a transaction past IDLE_IN_TRANSACTION_MS, so the lock's waiter goes on."""
    from cua_tui.team import db

    monkeypatch.setattr(db, "IDLE_IN_TRANSACTION_MS", 1000)
    frozen = db.connect(url, "frozen-worker")
    with pytest.raises(psycopg.Error, match="idle-in-transaction"), frozen.transaction():
        frozen.execute("SELECT id FROM cua_tui.fleets FOR UPDATE")
        frozen.execute("LOCK TABLE cua_tui.meta IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        # the waiter: blocked by the lock until the server ends the frozen transaction
        assert one(url, "SELECT count(*) FROM cua_tui.meta") >= 1
        waited = time.monotonic() - started
        time.sleep(0.1)
        frozen.execute("SELECT 1")  # the session was ended under it
    assert 0.5 <= waited < 10
    frozen.close()
