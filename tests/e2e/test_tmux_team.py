"""Two analysts on one team fleet, each in a terminal of their own (issue 38, point 5): a real PostgreSQL server
(tests/fakes/pgserver.py), two `cua-tui worker` processes sharing the fleet's runs, and `cua-tui attach` as
alice (160x48) and as bob (80x24) in tmux, read with capture-pane and answered with send-keys as people
would. Both press y on the same request at once, then n: one answer counts, the other is told who answered
it. Bob's terminal goes (SIGHUP): his "read by" marks lapse and the fleet goes on; he attaches again and
sees what alice sees; the runs end, each request answered exactly once. Sim desktops: the terminals, the
workers and the database are the point."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from team_cases import TEMPLATE, TWICE, as_role, one, ready, spec, wait_for
from test_tmux_demo import GUARD_WAIT_S, Tmux, cua_tui_command, cua_tui_shell
from test_tmux_fleet import children

from cua_tui.team.submit import submit
from tests.fakes.pgserver import PgServer

pytestmark = [pytest.mark.terminal, pytest.mark.pgserver, pytest.mark.timeout(180)]

RUN_LINE = re.compile(r"run\s+(\S+) · run (\S+)")
TASKS = ("form-a", "form-b")


def shown_run(screen: str) -> str | None:
    """The run id of the request on the panel (None: none shown)."""
    if "DECISION NEEDED" not in screen:
        return None
    match = RUN_LINE.search(screen)
    return match.group(2) if match else None


def attach(tmp_path: Path, url: str, role: str, fleet_id: str, size: tuple[int, int]) -> Tmux:
    command = cua_tui_shell(tmp_path / role, "attach", "--queue", as_role(url, role), fleet_id)
    return Tmux(command, width=size[0], height=size[1])


def on_a_request(tmux: Tmux, who: str, timeout: float = 60) -> str:
    """The run id of the open request on the panel: a request that closed stays there, saying who answered
    it, until the cursor moves (what the cursor is on is what y answers), so the cursor moves on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = tmux.wait_for(lambda s: shown_run(s) or "CLOSED" in s, f"a request on {who}'s panel", timeout)
        if (run := shown_run(screen)) is not None:
            return run
        tmux.keys("Down")
        time.sleep(0.4)
    raise AssertionError(f"no open request on {who}'s panel:\n{tmux.screen()}")


def on_the_same_request(alice: Tmux, bob: Tmux) -> str:
    """Bob's cursor moved to the request on alice's panel (his queue may put it after the unread ones, read by
    her); its run id."""
    target = on_a_request(alice, "alice")
    for _ in range(8):
        if on_a_request(bob, "bob") == target:
            return target
        bob.keys("Down")
        time.sleep(0.4)
    raise AssertionError(f"bob's panel never showed run {target}:\n{bob.screen()}")


def at_once(*presses: tuple[Tmux, tuple[str, ...]]) -> None:
    """Each terminal's keys sent at the same moment, once both decisions are past their input guard."""
    time.sleep(max(0.0, max(t.seen_at for t, _ in presses) + GUARD_WAIT_S - time.monotonic()))
    start = threading.Barrier(len(presses))

    def press(tmux: Tmux, keys: tuple[str, ...]) -> None:
        start.wait()
        for key in keys:
            tmux.keys(key)
            if key == "n":
                time.sleep(0.3)  # the reason's box opens; Enter sends no reason

    threads = [threading.Thread(target=press, args=p) for p in presses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def open_request(url: str, run_id: str) -> int:
    """The request of ``run_id`` waiting now (a run asks one at a time)."""
    return int(one(url, "SELECT id FROM cua_tui.requests WHERE run_id = %s AND answer IS NULL", run_id))


def told_who(url: str, request: int, verb: str, alice: Tmux, bob: Tmux) -> str:
    """The one answer to the request on both panels, and the other analyst told who gave it."""
    winner, answer = wait_for(
        "the answer's commit",
        lambda: one(url, "SELECT array[answered_by, answer] FROM cua_tui.requests WHERE id = %s AND answer "
                    "IS NOT NULL", request),
        15,
    )  # fmt: skip
    assert answer == verb, (winner, answer)
    loser = bob if winner == "alice" else alice
    done = {"approve": "approved", "reject": "rejected"}[verb]
    # a toast ("not answered"), or the panel of a request that closed before the key: who, what, when
    loser.wait_for(lambda s: f"{winner} {done} it at" in s and "already answered" in s, "the other told who", 15)
    return str(winner)


def start_worker(url: str, tmp_path: Path, number: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A `cua-tui worker` of its own runs folder, one run at a time (the two share the fleet's two runs)."""
    return subprocess.Popen(
        [*cua_tui_command(), "worker", "--queue", url, "--backend", "sim", "--concurrency", "1", "--lease", "5",
         "--runs-dir", str(tmp_path / f"runs{number}"), "--max-runs", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def queue_runs(screen: str) -> set[str]:
    """The tasks whose requests the queue table lists as pending (a row that closed under the cursor stays,
    marked closed, until the cursor moves: not pending)."""
    box = screen.split("Approval queue", 1)[1].split("╰", 1)[0]
    # only the queue's own column: a wide terminal puts the desktop pane beside it, titled by the task its
    # panel shows (the run of a closed request too)
    rows = [cells[1] for line in box.splitlines()[1:] if len(cells := line.split("│")) > 2]
    rows = [row for row in rows if "closed" not in row]
    return {task for task in TASKS if any(task in row for row in rows)}


def test_two_analysts_in_two_terminals_answer_one_fleet_of_two_workers(pg_server: PgServer, tmp_path: Path) -> None:
    url = ready(pg_server).new_database(TEMPLATE)
    fleet = submit(url, [spec(name, TWICE) for name in TASKS], tasks_sha256="5" * 64, name="two analysts")
    env = {**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml")}
    workers = [start_worker(url, tmp_path, i, env) for i in range(2)]
    alice = attach(tmp_path, url, "alice", fleet.fleet_id, (160, 48))
    bob = attach(tmp_path, url, "bob", fleet.fleet_id, (80, 24))
    again: Tmux | None = None
    try:
        # both press y on the same request at once: one answer counts, the other is told who gave it
        request = open_request(url, on_the_same_request(alice, bob))
        at_once((alice, ("y",)), (bob, ("y",)))
        told_who(url, request, "approve", alice, bob)
        # and n, each with no reason
        request = open_request(url, on_the_same_request(alice, bob))
        at_once((alice, ("n", "Enter")), (bob, ("n", "Enter")))
        told_who(url, request, "reject", alice, bob)
        # each request on one panel is read by that analyst for the other; bob's go with his terminal
        bob_on = on_a_request(bob, "bob")
        alice.wait_for(lambda s: "read by bob" in s, "bob's mark on alice's screen", 10)
        (pane,) = [int(p) for p in bob.tmux("list-panes", "-F", "#{pane_pid}").split()]
        (cua,) = [c for c in children(pane) if "attach" in Path(f"/proc/{c}/cmdline").read_text()]
        os.kill(cua, signal.SIGHUP)  # the terminal goes away
        bob.wait_for(lambda s: "EXIT=" in s, "bob's attach to end", 30)
        alice.wait_for(lambda s: "read by bob" not in s, "bob's marks to lapse", 5)
        # the fleet went on: nothing was killed, the request on his panel is still open
        assert one(url, "SELECT count(*) FROM cua_tui.runs WHERE status = 'killed'") == 0
        assert one(url, "SELECT count(*) FROM cua_tui.requests WHERE run_id = %s AND answer IS NULL", bob_on) == 1
        # bob attaches again, from another terminal: the same state as alice's
        again = attach(tmp_path, url, "bob", fleet.fleet_id, (80, 24))
        on_a_request(again, "bob")
        # the fleet goes on meanwhile (a worker may post its next request between two captures): the two
        # terminals agree once each has read the queue since
        again.wait_for(lambda s: queue_runs(s) == queue_runs(alice.screen()) != set(), "bob's queue to be alice's", 10)
        # every request left answered by whoever's panel it is on
        for _ in range(4):
            if one(url, "SELECT count(*) FROM cua_tui.runs WHERE state <> 'ended'") == 0:
                break
            for tmux in (alice, again):
                screen = tmux.screen()
                if shown_run(screen):
                    tmux.answer("y")
                elif "CLOSED" in screen:
                    tmux.keys("Down")
            time.sleep(1.5)
        alice.wait_for(lambda s: "2 ended" in s, "every run ended", 60)
    finally:
        for terminal in (alice, bob, again):
            if terminal is not None:
                terminal.close()
        for worker in workers:
            worker.terminate()
            worker.wait(30)
    # each request answered exactly once, as a role; each run's chain holds each answer once
    answers = one(url, "SELECT array_agg(DISTINCT answered_by) FROM cua_tui.requests")
    assert set(answers) <= {"alice", "bob"}
    assert one(url, "SELECT count(*) FROM cua_tui.requests WHERE answer IS NULL") == 0
    verified = subprocess.run(
        [*cua_tui_command(), "verify", "--queue", url, fleet.fleet_id],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
