"""Who may decide what, enforced by the database (issue 39), against a real PostgreSQL server with real roles
(tests/team_cases.py: alice and bob in ``payments``, carol an analyst outside it, root_admin in
``cua_tui_admin``): the rules are the admin's alone; each request takes its rule as it is posted, narrowed by
its task's policy and never widened; a role the rule does not name is refused by the server, whatever the
client; a two-person rule counts different roles, any reject ends it, and an edit by the first approver is
what the second approves."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from team_cases import TEMPLATE, as_role, one, posted, ready

from cua_tui.cli import main
from cua_tui.core.actions import Action, Kind
from cua_tui.core.ports import Answer
from cua_tui.team import analyst, db, rules
from tests.fakes.pgserver import PgServer

pytestmark = pytest.mark.pgserver

EDITED = Action(Kind.TYPE, text="the first approver's words")


@pytest.fixture
def url(pg_server: PgServer) -> str:
    return ready(pg_server).new_database(TEMPLATE)


def rule(url: str, key: str, approvers: tuple[str, ...] | None, quorum: int = 1, **more: object) -> None:
    with db.connect(as_role(url, "root_admin"), "test") as conn:
        rules.set_rule(conn, key, approvers, quorum, **more)  # type: ignore[arg-type]


def answer(url: str, role: str, request: int, decision: Answer = Answer.APPROVE, **more: object) -> analyst.Outcome:
    with psycopg.connect(as_role(url, role), autocommit=True) as conn:
        return analyst.answer(conn, request, decision, how="human", **more)  # type: ignore[arg-type]


def test_only_the_admin_role_sets_the_rules_from_the_command_line(url: str, tmp_path: Path) -> None:
    env = {"CUA_TUI_CONFIG": str(tmp_path / "none.toml")}
    runner = CliRunner(env=env)
    admin = ["queue", "rule", "--queue", as_role(url, "root_admin")]
    done = runner.invoke(main, [*admin, "actions.type", "--approvers", "payments,ghost", "--quorum", "2"])
    assert done.exit_code == 0, done.output
    assert "rule set: actions.type: payments, ghost; 2 different roles must approve" in done.stderr
    assert "no role ghost on this server yet" in done.stderr
    listed = runner.invoke(main, [*admin, "--list"])
    assert listed.exit_code == 0 and listed.stdout.startswith("actions.type: payments, ghost; 2 different roles")
    assert "(set by root_admin at " in listed.stdout
    # an analyst may not, through the command or straight SQL
    refused = runner.invoke(main, ["queue", "rule", "--queue", as_role(url, "alice"), "actions.type", "--quorum", "1"])
    assert refused.exit_code == 2 and "only cua_tui_admin may set who decides what; alice is not" in refused.stderr
    with (
        psycopg.connect(as_role(url, "alice"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("UPDATE cua_tui.rules SET approvers = NULL")
    bad = runner.invoke(main, [*admin, "tier:everything", "--approvers", "payments"])
    assert bad.exit_code == 2 and "is neither a policy rule" in bad.stderr and "tier:transmission" in bad.stderr
    gone = runner.invoke(main, [*admin, "actions.type", "--remove"])
    assert gone.exit_code == 0 and "rule actions.type: removed" in gone.stderr
    assert one(url, "SELECT count(*) FROM cua_tui.rules") == 0


def test_a_role_the_rule_does_not_name_is_refused_by_the_server_even_through_direct_sql(url: str) -> None:
    rule(url, "tier:transmission", ("payments",))
    request = posted(url, {"action": "wire 500"}, rule="actions.type", label="transmission")
    assert one(url, "SELECT array[rule_key, approvers::text] FROM cua_tui.requests WHERE id = %s", request) == [
        "tier:transmission",
        "{payments}",
    ]
    # a front end patched to skip every check of its own: the statement itself is refused
    with (
        psycopg.connect(as_role(url, "carol"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("UPDATE cua_tui.requests SET answer = 'approve', how = 'human' WHERE id = %s", (request,))
    said = answer(url, "carol", request)
    assert (
        not said.won
        and said.open
        and said.line == (f"not answered: role carol may not answer request {request}: only payments may")
    )
    assert one(url, "SELECT answer FROM cua_tui.requests WHERE id = %s", request) is None
    assert answer(url, "alice", request).won
    # a request no rule covers: any analyst
    other = posted(url, rule="actions.click", label="other")
    assert answer(url, "carol", other, Answer.REJECT).won


def test_a_role_removed_from_the_group_while_its_answer_is_in_flight_is_refused(url: str) -> None:
    group = f"approvers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {group} NOLOGIN")
        conn.execute(f"GRANT {group} TO alice")
    rule(url, "regions.send", (group,))
    request = posted(url, rule="regions.send", label="region")
    # alice's screen showed it answerable; her group membership goes before her answer reaches the server
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"REVOKE {group} FROM alice")
    said = answer(url, "alice", request)
    assert not said.won and f"only {group} may" in said.line
    assert one(url, "SELECT answer FROM cua_tui.requests WHERE id = %s", request) is None


def test_a_task_policy_narrows_the_rule_and_never_widens_it(url: str) -> None:
    rule(url, "actions.type", ("payments",), 2)

    def taken(approvers: list[str] | None, quorum: int | None) -> Any:
        request = posted(url, rule="actions.type", approvers=approvers, quorum=quorum)
        return one(url, "SELECT array[approvers::text, quorum::text] FROM cua_tui.requests WHERE id = %s", request)

    assert taken(None, None) == ["{payments}", "2"]
    assert taken(["alice"], None) == ["{alice}", "2"]  # a member of the rule's group: fewer approvers
    assert taken(["carol", "bob"], 3) == ["{bob}", "3"]  # carol is not one of the rule's: dropped; quorum raised
    assert taken(["carol"], 1) == ["{}", "2"]  # widening gives nobody, and the quorum is the rule's
    nobody = posted(url, rule="actions.type", approvers=["carol"])
    said = answer(url, "carol", nobody)
    assert not said.won and "only nobody may" in said.line
    # where no rule speaks, the policy's own list stands
    free = posted(url, rule="keys.confirm:Return", approvers=["bob"])
    assert not answer(url, "alice", free).won and answer(url, "bob", free).won


def test_a_two_person_rule_counts_different_roles_and_any_reject_ends_it(url: str) -> None:
    rule(url, "actions.type", ("payments",), 2)
    request = posted(url, {"action": "wire 500"}, rule="actions.type")
    first = answer(url, "alice", request)
    assert not first.won and first.pending and first.open
    assert first.line == f"request {request}: approval 1 of 2 recorded; another role must approve it too"
    # still open, its typed text kept for the second approver
    assert one(
        url, "SELECT array[answer, texts->>'action', approvals::text] FROM cua_tui.requests WHERE id = %s", request
    ) == [
        None,
        "wire 500",
        "1",
    ]
    again = answer(url, "alice", request)
    assert not again.won and "alice has approved it already; the same role twice counts once" in again.line
    assert "only payments may" in answer(url, "carol", request).line
    second = answer(url, "bob", request)
    assert second.won
    row = one(url, "SELECT array[answer, answered_by, approvals::text] FROM cua_tui.requests WHERE id = %s", request)
    assert row == ["approve", "bob", "2"]
    assert one(url, "SELECT array_agg(role ORDER BY id) FROM cua_tui.approvals WHERE request_id = %s", request) == [
        "alice",
        "bob",
    ]
    # any reject ends it rejected
    other = posted(url, rule="actions.type")
    assert answer(url, "alice", other).pending
    assert answer(url, "bob", other, Answer.REJECT).won
    assert one(url, "SELECT answer FROM cua_tui.requests WHERE id = %s", other) == "reject"
    # never in a group: a group answer leaves it pending, saying why
    grouped = posted(url, rule="actions.type")
    with psycopg.connect(as_role(url, "alice"), autocommit=True) as conn:
        (out,) = analyst.answer_group(conn, [grouped], Answer.APPROVE, how="human", group_id="g1")
    assert (
        not out.won and out.open and "needs 2 different roles' approvals: answered alone, never in a group" in out.line
    )


def test_the_first_approvers_edit_is_what_the_second_approves(url: str) -> None:
    rule(url, "actions.type", ("payments",), 2)
    request = posted(url, {"action": "wire 500"}, rule="actions.type")
    assert answer(url, "alice", request, edit=EDITED).pending
    # bob's y on the edit his screen shows names it: the quorum is met, the answer carries it
    assert answer(url, "bob", request, edit=EDITED).won
    row = one(url, "SELECT array[edit->>'text_len', edit_text] FROM cua_tui.requests WHERE id = %s", request)
    assert row == [str(len(EDITED.text)), EDITED.text]  # for the worker to read once, then wiped
    assert one(url, "SELECT count(*) FROM cua_tui.approvals WHERE edit_text IS NOT NULL") == 0
    # a y on the action as proposed, from a screen a moment behind alice's edit, never approves her edit: it
    # counts only with approvals of what it saw, and starts the count again
    behind = posted(url, {"action": "wire 500"}, rule="actions.type")
    assert answer(url, "alice", behind, edit=EDITED).pending
    assert answer(url, "bob", behind).pending
    assert one(url, "SELECT array[answer, approvals::text] FROM cua_tui.requests WHERE id = %s", behind) == [None, "1"]
    # an approval with an edit of its own starts the count again with it
    changed = posted(url, {"action": "wire 500"}, rule="actions.type")
    assert answer(url, "alice", changed).pending
    assert answer(url, "bob", changed, edit=EDITED).pending  # alice's approval was of the other action
    assert answer(url, "alice", changed, edit=EDITED).won  # her y on bob's edit, as her screen shows it
    assert one(url, "SELECT edit_text FROM cua_tui.requests WHERE id = %s", changed) == EDITED.text


def test_two_roles_racing_on_a_two_person_request_both_count(url: str) -> None:
    rule(url, "actions.type", ("payments",), 2)
    for _ in range(5):
        request = posted(url, rule="actions.type")
        start = threading.Barrier(2)
        outcomes: dict[str, analyst.Outcome] = {}

        def press(
            role: str, request: int = request, start: threading.Barrier = start,
            outcomes: dict[str, analyst.Outcome] = outcomes,
        ) -> None:  # fmt: skip
            with psycopg.connect(as_role(url, role), autocommit=True) as conn:
                start.wait()
                outcomes[role] = analyst.answer(conn, request, Answer.APPROVE, how="human")

        threads = [threading.Thread(target=press, args=(role,)) for role in ("alice", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # one recorded the first approval, the other made the answer: never two "first"s, never lost
        assert sorted((o.won, o.pending) for o in outcomes.values()) == [(False, True), (True, False)]
        assert one(url, "SELECT array[answer, approvals::text] FROM cua_tui.requests WHERE id = %s", request) == [
            "approve",
            "2",
        ]


def test_set_aside_is_not_an_answer_and_escalation_is_marked_on_time(url: str) -> None:
    rule(url, "actions.type", None, 1, escalate_after_s=0.3, escalate_to="payments")
    request = posted(url, rule="actions.type")
    with psycopg.connect(as_role(url, "carol"), autocommit=True) as conn:
        back = conn.execute("SELECT cua_tui.set_aside(%s, 10)", (request,)).fetchone()
        assert back is not None
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("SELECT cua_tui.set_aside(%s, 100000)", (request,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO cua_tui.asides VALUES (%s, 'bob', now(), now())", (request,))
    assert one(url, "SELECT array[answer, escalated_at::text] FROM cua_tui.requests WHERE id = %s", request) == [
        None,
        None,
    ]
    assert one(url, "SELECT array_agg(role) FROM cua_tui.asides WHERE request_id = %s", request) == ["carol"]
    time.sleep(0.35)
    with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
        conn.execute("LISTEN cua_tui_escalated")
        assert conn.execute("SELECT cua_tui.escalate()").fetchone() == (1,)
        assert [n.channel for n in conn.notifies(timeout=2, stop_after=1)] == ["cua_tui_escalated"]
    assert one(url, "SELECT escalate_to FROM cua_tui.requests WHERE escalated_at IS NOT NULL") == "payments"


def test_a_runs_chain_records_each_approval_the_quorum_and_the_times_set_aside(url: str, tmp_path: Path) -> None:
    """End to end on a worker: a two-person rule on typing; carol sets the request aside, alice and bob approve.
    The decision in the run's chain names both approvers, the quorum and the aside; verify agrees."""
    import json

    from team_cases import settings, spec, wait_for

    from cua_tui.core.audit import verify_run
    from cua_tui.team.submit import submit
    from cua_tui.team.worker import Worker, WorkerOptions

    rule(url, "actions.type", ("payments",), 2)
    done = submit(url, [spec("t0")], tasks_sha256="6" * 64, name="two persons")
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=1, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=1),
        lambda line: None,
    )  # fmt: skip
    working = threading.Thread(target=worker.run)
    working.start()
    try:
        request = wait_for("the typing's request", lambda: one(url, "SELECT id FROM cua_tui.requests"))
        with psycopg.connect(as_role(url, "carol"), autocommit=True) as conn:
            conn.execute("SELECT cua_tui.set_aside(%s, 10)", (request,))
        assert answer(url, "alice", request).pending
        time.sleep(0.3)  # the worker reads the row meanwhile: an approval alone applies nothing
        assert one(url, "SELECT applied_at FROM cua_tui.requests WHERE id = %s", request) is None
        assert answer(url, "bob", request).won
        working.join(60)
    finally:
        worker.stop()
        working.join(60)
    run_dir = tmp_path / "runs" / done.runs[0][1]
    records = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
    (decided,) = [r for r in records if r["kind"] == "decision" and r.get("queue")]
    queue = decided["queue"]
    assert decided["decision"] == "approve" and decided["operator"] == "bob"
    assert queue["quorum"] == 2 and [a["role"] for a in queue["approvals"]] == ["alice", "bob"]
    assert queue["set_aside"] == 1 and queue["role"] == "bob"
    assert verify_run(run_dir).intact
    # the team's record: bob's decision met the quorum; carol set it aside (and decided nothing)
    done_stats = CliRunner().invoke(main, ["stats", "--queue", url, "--fleet", done.fleet_id, "--json"])
    assert done_stats.exit_code == 0, done_stats.output
    figures = {row["operator"]: row for row in json.loads(done_stats.stdout)}
    assert figures["bob"]["decisions"] == 1 and figures["bob"]["second_approvals"] == 1
    table = CliRunner().invoke(main, ["stats", "--queue", url])
    assert table.exit_code == 0 and "SECOND" in table.stdout and "ESCALATED" in table.stdout


def test_a_submitter_whose_task_policy_tries_to_widen_the_approvers_gets_nobody(url: str, tmp_path: Path) -> None:
    """The rule says payments; the task's policy names carol (not one of them) and a quorum of 1 under the
    rule's 2: the request the worker posts may be answered by nobody, and its quorum is the rule's."""
    from team_cases import settings, spec, wait_for

    from cua_tui.team.submit import submit
    from cua_tui.team.worker import Worker, WorkerOptions

    rule(url, "actions.type", ("payments",), 2)
    widen = '[[approvers]]\nrule = "actions.type"\nroles = ["carol"]\nquorum = 1\n'
    done = submit(as_role(url, "carol"), [spec("t0", extra_policy=widen)], tasks_sha256="7" * 64, name="widen")
    worker = Worker(
        WorkerOptions(url=url, runs_dir=tmp_path / "runs", backends=("sim",), concurrency=1, lease_s=5.0,
                      settings=settings(tmp_path), max_runs=1),
        lambda line: None,
    )  # fmt: skip
    working = threading.Thread(target=worker.run)
    working.start()
    try:
        request = wait_for("the typing's request", lambda: one(url, "SELECT id FROM cua_tui.requests"))
        row = one(url, "SELECT array[approvers::text, quorum::text] FROM cua_tui.requests WHERE id = %s", request)
        assert row == ["{}", "2"]
        for role in ("carol", "alice"):
            said = answer(url, role, request)
            assert not said.won and "only nobody may" in said.line
        with psycopg.connect(as_role(url, "bob"), autocommit=True) as conn:
            conn.execute("SELECT cua_tui.kill_runs(%s)", (list(dict(done.runs).values()),))
        working.join(60)
    finally:
        worker.stop()
        working.join(60)
    assert one(url, "SELECT status FROM cua_tui.runs") == "killed"


def test_on_escalate_comes_from_the_settings_file_alone_and_must_be_a_command(tmp_path: Path) -> None:
    from cua_tui.config import ConfigError, Settings

    config = tmp_path / "config.toml"
    config.write_text("on_escalate = \"notify-send 'escalated'\"\n")
    env = {"CUA_TUI_CONFIG": str(config), "CUA_TUI_ON_ESCALATE": "rm -rf /"}
    assert Settings.load(env).on_escalate == "notify-send 'escalated'"  # no variable sets it
    config.write_text('on_escalate = "unclosed \'quote"\n')
    with pytest.raises(ConfigError, match=r"on_escalate.*is not a command line"):
        Settings.load(env)
