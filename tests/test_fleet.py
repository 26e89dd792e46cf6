"""The fleet runner (cua_tui/fleet_runner.py): real runs of the real supervisor on the sim desktop, many at once,
one approval queue. Answers reach their own request only; kills, deadlines and crashes stay with their run."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fleet_cases import FORM, SAFETY, SAVE_KEY, opts

from cua_tui.build import RunOptions
from cua_tui.cli import main
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core import fleet_queue as cf
from cua_tui.core.audit import verify_run
from cua_tui.core.ports import Answer
from cua_tui.desktops.sim import SimDesktop
from cua_tui.fleet_runner import Fleet, FleetTask, concurrency_for, local_desktop_limit


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})


class Told:
    """A fleet listener that keeps every event and lets a test wait for one (no polling of the fleet)."""

    def __init__(self) -> None:
        self.events: list[cf.FleetEvent] = []
        self.cond = threading.Condition()
        self.threads: set[str] = set()

    def __call__(self, event: cf.FleetEvent) -> None:
        with self.cond:
            self.events.append(event)
            self.threads.add(threading.current_thread().name)
            self.cond.notify_all()

    def wait(self, what: Callable[[list[cf.FleetEvent]], Any], timeout: float = 15.0) -> Any:
        with self.cond:
            assert self.cond.wait_for(lambda: what(self.events), timeout), self.events[-10:]
            return what(self.events)

    def queued(self, n: int) -> list[cf.QueueItem]:
        items: list[cf.QueueItem] = self.wait(
            lambda es: (q := [e.item for e in es if isinstance(e, cf.RequestQueued)]) and len(q) >= n and q
        )
        return items

    def of(self, kind: type) -> list[Any]:
        with self.cond:
            return [e for e in self.events if isinstance(e, kind)]


def fleet_of(tmp_path: Path, tasks: dict[str, RunOptions], concurrency: int = 8) -> tuple[Fleet, Told]:
    fleet = Fleet(
        [FleetTask(name, options) for name, options in tasks.items()],
        runs_dir=tmp_path / "runs",
        concurrency=concurrency,
        tasks_sha256="ab" * 32,
    )
    told = Told()
    fleet.subscribe(told)
    fleet.start()
    return fleet, told


def audit(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (Path(path) / "audit.jsonl").read_text().splitlines()]


def sealed_intact(path: str) -> bool:
    report = verify_run(path)
    return report.intact and report.sealed


# ---------------------------------------------------------------------------------------------------
# Answers: to that request only
# ---------------------------------------------------------------------------------------------------
def test_an_answer_reaches_its_own_run_only_and_never_twice(tmp_path: Path, settings: Settings) -> None:
    fleet, told = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    items = {item.task: item for item in told.queued(2)}
    a, b = items["a"], items["b"]
    assert a.run_id != b.run_id and a.ticket != b.ticket
    assert {i.ticket for i in fleet.queue()} == {a.ticket, b.ticket}
    # An item forged from A's ticket with B's request is not a pending item: refused, nothing applied.
    forged = dataclasses.replace(a, request=b.request, run_id=b.run_id, task="b")
    assert fleet.answer(forged, Answer.APPROVE) is not None
    assert fleet.answer(a, Answer.APPROVE, note="looks right") is None
    assert fleet.answer(a, Answer.APPROVE) == "no longer pending: answered"  # answered twice: refused
    assert told.wait(lambda es: any(isinstance(e, cf.RunFinished) and e.row.task == "a" for e in es))
    assert fleet.row("a").status == "passed"
    assert [i.ticket for i in fleet.queue()] == [b.ticket]  # B still waits, untouched
    assert fleet.row("b").state == cf.RunState.WAITING and fleet.row("b").waiting_since == b.asked_at
    assert fleet.answer(b, Answer.REJECT, note="not this one") is None
    assert fleet.wait(15)
    assert fleet.row("b").status == "failed"
    decisions = [r for r in audit(fleet.row("a").path) if r["kind"] == "decision" and r["by"] != "policy"]
    assert [(d["decision"], d["by"], d["note"]) for d in decisions] == [("approve", "human (TUI)", "looks right")]
    assert all(sealed_intact(r.path) for r in fleet.rows())
    # Listeners were called on the fleet's one dispatcher thread, and told of the end last.
    assert told.threads == {"cua-fleet-events"}
    assert isinstance(told.events[-1], cf.FleetFinished)


def test_an_answer_to_a_killed_run_is_refused_and_the_others_go_on(tmp_path: Path, settings: Settings) -> None:
    fleet, told = fleet_of(tmp_path, {"a": opts(settings), "b": opts(settings)})
    items = {item.task: item for item in told.queued(2)}
    assert fleet.kill("a")
    told.wait(lambda es: any(isinstance(e, cf.RequestClosed) and e.item.task == "a" for e in es))
    closed = [e for e in told.of(cf.RequestClosed) if e.item.task == "a"]
    assert closed[0].why == "run killed"
    assert fleet.answer(items["a"], Answer.APPROVE) == "no longer pending: run killed"
    assert fleet.answer(items["b"], Answer.APPROVE) is None
    assert fleet.wait(15)
    assert (fleet.row("a").status, fleet.row("b").status) == ("killed", "passed")
    assert not fleet.kill("a")  # already ended: harmless
    kinds = [r["kind"] for r in audit(fleet.row("a").path)]
    assert "kill" in kinds and kinds[-1] == "run_ended" and "executing" not in kinds[kinds.index("kill") :]
    assert sealed_intact(fleet.row("a").path) and fleet.row("a").intact is True


def test_an_answer_after_the_run_timed_out_is_refused(tmp_path: Path, settings: Settings) -> None:
    fleet, told = fleet_of(tmp_path, {"slow": opts(settings, deadline=1)})
    (item,) = told.queued(1)
    assert fleet.wait(15)
    assert fleet.row("slow").status == "limit" and "deadline" in fleet.row("slow").reason
    assert fleet.answer(item, Answer.APPROVE) == "no longer pending: run ended (limit)"
    executed = [r for r in audit(fleet.row("slow").path) if r["kind"] == "outcome" and r["status"] == "executed"]
    assert len(executed) == 1  # the first click only: the typing that waited never ran
    assert sealed_intact(fleet.row("slow").path)


def test_a_headless_rule_answers_by_itself_and_the_queue_refuses_answers(tmp_path: Path, settings: Settings) -> None:
    approver = tmp_path / "slow.py"
    approver.write_text(
        'import json, sys, time\njson.load(sys.stdin)\ntime.sleep(0.5)\nprint(\'{"decision": "approve"}\')\n'
    )
    fleet, told = fleet_of(tmp_path, {"a": opts(settings, decisions=f"approver:{sys.executable} {approver}")})
    (item,) = told.queued(1)
    assert (
        fleet.answer(item, Answer.REJECT)
        == "decided by this fleet's rule (approver:" + (f"{sys.executable} {approver})") + ", not here"
    )
    assert fleet.wait(15) and fleet.row("a").status == "passed"
    assert [e.why for e in told.of(cf.RequestClosed)] == ["decided by approver command"]


# ---------------------------------------------------------------------------------------------------
# The order of the queue, from real runs
# ---------------------------------------------------------------------------------------------------
def test_the_queue_puts_safety_checks_first_then_sending_then_the_rest(tmp_path: Path, settings: Settings) -> None:
    policy = tmp_path / "save.toml"
    policy.write_text('[keys]\nconfirm = ["Return", "ctrl+s"]\n')
    tasks = {
        "other": opts(settings, SAVE_KEY, policy_path=policy),
        "typing-1": opts(settings),
        "safety": opts(settings, SAFETY),
        "typing-2": opts(settings),
    }
    fleet, told = fleet_of(tmp_path, tasks)
    told.queued(4)
    order = fleet.queue()
    assert [i.priority.label for i in order] == ["safety check", "transmission", "transmission", "other"]
    assert order[0].task == "safety" and order[0].request.kind == "safety_check"
    assert order[-1].task == "other" and order[-1].priority.rule == "keys.confirm:ctrl+s"
    assert {i.task for i in order[1:3]} == {"typing-1", "typing-2"}
    assert order[1].asked_at <= order[2].asked_at  # same tier: the older first
    assert all(i.priority.why for i in order)
    fleet.kill_all()
    assert fleet.wait(15)
    assert {r.status for r in fleet.rows()} == {"killed"}
    assert all(sealed_intact(r.path) for r in fleet.rows())


# ---------------------------------------------------------------------------------------------------
# Kills, crashes, the concurrency limit
# ---------------------------------------------------------------------------------------------------
def test_kill_all_kills_every_run_and_starts_nothing_more(tmp_path: Path, settings: Settings) -> None:
    fleet, told = fleet_of(tmp_path, {f"t{i}": opts(settings) for i in range(4)}, concurrency=2)
    told.queued(2)
    assert [r.state for r in fleet.rows()] == ["waiting", "waiting", "queued", "queued"]
    fleet.kill_all()
    assert fleet.wait(15)
    rows = fleet.rows()
    assert [r.status for r in rows] == ["killed"] * 4
    assert all(sealed_intact(r.path) and r.intact for r in rows[:2])
    assert [r.path for r in rows[2:]] == ["", ""]  # never built: no run directory
    assert fleet.queue() == []
    manifest = json.loads(fleet.manifest_path.read_text())["fleets"][fleet.fleet_id]
    assert [(r["task"], r["status"]) for r in manifest["runs"]] == [(f"t{i}", "killed") for i in range(4)]
    assert manifest["runs"][2]["run_id"] is None and "ended_at" in manifest
    names = sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    assert names == sorted([r.run_id for r in rows[:2]] + ["fleet.json"])


class RaisingAgent:
    name = "raising"
    model = None

    def start(self, task: str, frame: Any) -> Any:
        raise RuntimeError("the adapter broke")

    def next_turn(self, results: Any, frame: Any, note: str = "") -> Any:
        raise RuntimeError("unreachable")

    def cancel(self) -> None:
        pass


def dying_desktop() -> SimDesktop:
    desktop = SimDesktop()

    def die(d: SimDesktop, action: Any) -> None:
        if action.kind == "type":
            d.dead = True  # the sandbox went away mid-run

    desktop.before_action = die
    return desktop


def test_a_crashing_run_ends_error_alone(tmp_path: Path, settings: Settings) -> None:
    tasks = {
        "ok-1": opts(settings, decisions="approve"),
        "raises": opts(settings, script=None, agent_impl=RaisingAgent(), decisions="approve"),
        "dies": opts(settings, desktop=dying_desktop(), decisions="approve"),
        "ok-2": opts(settings, decisions="approve"),
        "unbuildable": opts(settings, lab="no-such-lab"),
    }
    fleet, told = fleet_of(tmp_path, tasks, concurrency=5)
    assert fleet.wait(20)
    status = {r.task: (r.status, r.reason) for r in fleet.rows()}
    assert status["ok-1"][0] == status["ok-2"][0] == "passed"
    assert status["raises"][0] == "error" and "the adapter broke" in status["raises"][1]
    assert status["dies"][0] == "error" and "gone" in status["dies"][1]
    assert status["unbuildable"][0] == "error" and "could not build" in status["unbuildable"][1]
    for row in fleet.rows():
        if row.path:
            assert sealed_intact(row.path), row.task
    assert len(told.of(cf.RunFinished)) == 5


def test_runs_start_up_to_the_limit_and_the_next_when_one_ends(tmp_path: Path, settings: Settings) -> None:
    running: set[str] = set()
    most = 0
    lock = threading.Lock()

    def track(event: cf.FleetEvent) -> None:
        nonlocal most
        with lock:
            if isinstance(event, cf.RunChanged) and not event.row.ended and event.row.run_id:
                running.add(event.row.task)
            elif isinstance(event, cf.RunFinished):
                running.discard(event.row.task)
            most = max(most, len(running))

    fleet = Fleet(
        [FleetTask(f"t{i}", opts(settings, decisions="approve")) for i in range(6)],
        runs_dir=tmp_path / "runs",
        concurrency=2,
    )
    fleet.subscribe(track)
    rows = fleet.run()
    assert [r.status for r in rows] == ["passed"] * 6
    assert most == 2


def test_local_concurrency_is_what_the_machine_fits() -> None:
    assert local_desktop_limit(mem_total=24 * 2**30, cpus=2) == 6  # 3 per CPU (measured)
    assert local_desktop_limit(mem_total=2 * 2**30, cpus=16) == 3  # memory decides: half of 2 GiB / 300 MiB
    limit = local_desktop_limit()
    used, message = concurrency_for("local", limit + 5, 100)
    assert used == limit and message is not None and f"fits {limit} local desktops" in message
    assert concurrency_for("local", None, 100) == (limit, None)
    assert concurrency_for("sim", 32, 200) == (32, None)
    assert concurrency_for("sim", None, 3) == (3, None)


def test_watch_gives_a_view_and_then_every_event(tmp_path: Path, settings: Settings) -> None:
    fleet, told = fleet_of(tmp_path, {"a": opts(settings)})
    (item,) = told.queued(1)
    # the run tells its phase just after its decision_requested event (the one that queued the request)
    deadline = time.monotonic() + 15
    while fleet.view("a").phase != "awaiting_decision" and time.monotonic() < deadline:
        time.sleep(0.01)
    seen: list[ev.Stamped] = []
    view, unwatch = fleet.watch("a", seen.append)
    assert view.pending is item.request and view.phase == "awaiting_decision"
    assert fleet.answer(item, Answer.APPROVE) is None
    assert fleet.wait(15)
    assert seen and seen[0].seq == view.seq + 1 and isinstance(seen[-1].event, ev.RunEnded)
    assert fleet.view("a").ended is not None
    unwatch()


# ---------------------------------------------------------------------------------------------------
# The manifest, run.json, `runs`, and the headless fleet through the real command line
# ---------------------------------------------------------------------------------------------------
def write_tasks(tmp_path: Path, names: list[str]) -> Path:
    (tmp_path / "form.json").write_text(json.dumps(FORM))
    body = "".join(f'[[tasks]]\nname = "{n}"\ntask = "fill the form"\nagent = "script:form.json"\n\n' for n in names)
    path = tmp_path / "suite.toml"
    path.write_text('version = 1\nname = "suite"\n\n' + body)
    return path


APPROVER = """\
import json, pathlib, sys
request = json.load(sys.stdin)
info = json.loads((pathlib.Path(sys.argv[1]) / request["run"] / "run.json").read_text())
decision = "approve" if info["fleet_task"].startswith("yes") else "reject"
with open(sys.argv[2], "a") as log:
    log.write(f"{request['run']} {info['fleet_task']} {decision}\\n")
print(json.dumps({"decision": decision}))
"""


def test_headless_fleet_with_one_approver_command_by_run_id(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path, ["yes-1", "no-1", "yes-2"])
    runs = tmp_path / "runs"
    approver, log = tmp_path / "approver.py", tmp_path / "decisions.log"
    approver.write_text(APPROVER)
    env = {**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml"), "PYTHONUNBUFFERED": "1"}
    args = ["fleet", "--tasks", str(tasks), "--backend", "sim", "--runs-dir", str(runs), "--concurrency", "3"]
    command = f"approver:{sys.executable} {approver} {runs} {log}"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", *args, "--headless", "--on-confirm", command],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr  # one run was rejected: not every run passed
    out = proc.stderr
    (fleet_id, manifest), *others = json.loads((runs / "fleet.json").read_text())["fleets"].items()
    assert not others
    assert manifest["fleet"] == fleet_id and manifest["tasks_file"] == str(tasks)
    import hashlib

    assert manifest["tasks_sha256"] == hashlib.sha256(tasks.read_bytes()).hexdigest()
    by_task = {r["task"]: r for r in manifest["runs"]}
    assert {t: r["status"] for t, r in by_task.items()} == {"yes-1": "passed", "no-1": "failed", "yes-2": "passed"}
    decided = dict(line.split(" ", 1) for line in log.read_text().splitlines())
    assert decided == {
        by_task[t]["run_id"]: f"{t} {d}" for t, d in (("yes-1", "approve"), ("no-1", "reject"), ("yes-2", "approve"))
    }
    for task, row in by_task.items():
        info = json.loads((runs / row["run_id"] / "run.json").read_text())
        assert (info["fleet"], info["fleet_task"]) == (manifest["fleet"], task)
        assert f"  {task:<5}  {row['status']:<8}  record intact      {runs / row['run_id']}" in out
    assert "2 of 3 passed" in out
    assert "[no-1] waits: turn 1 #2 type 16 characters" in out and "(transmission: actions.type)" in out
    assert "cua-tui verified" not in out  # typed text goes to the approver, never to the log lines
    # `runs` shows the fleet of each run, and filters by it
    result = CliRunner().invoke(main, ["runs", "--runs-dir", str(runs)])
    header, *lines = result.output.splitlines()
    assert header.split()[-1] == "FLEET" and len(lines) == 3
    assert all(f"{manifest['fleet']}/" in line for line in lines)
    result = CliRunner().invoke(main, ["runs", "--runs-dir", str(runs), "--fleet", manifest["fleet"], "--json"])
    listed = json.loads(result.output)
    assert sorted(e["fleet_task"] for e in listed) == ["no-1", "yes-1", "yes-2"]
    assert (
        CliRunner()
        .invoke(main, ["runs", "--runs-dir", str(runs), "--fleet", "fleet-x"])
        .output.endswith("match the filters\n")
    )
    # each run verifies as any run does
    assert CliRunner().invoke(main, ["verify", str(runs / by_task["no-1"]["run_id"])]).exit_code == 0
    # all approved: exit 0
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_tui.cli",
            *args[:-2],
            "--concurrency",
            "2",
            "--headless",
            "--on-confirm",
            "approve",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 of 3 passed" in proc.stderr


def test_fleet_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    runner = CliRunner()
    tasks = write_tasks(tmp_path, ["a"])
    bad = tmp_path / "bad.toml"
    bad.write_text('[[tasks]]\nname = "a"\nlab = "frm"\n')
    result = runner.invoke(main, ["fleet", "--tasks", str(bad), "--headless", "--runs-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and f"tasks file {bad}, line 3: tasks.0.lab: unknown lab 'frm'" in result.output
    # the fleet TUI's theme is checked before anything starts (the TUI itself: tests/tui/test_fleet_tui.py)
    result = runner.invoke(
        main, ["fleet", "--tasks", str(tasks), "--backend", "sim", "--theme", "nope", "--runs-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 2 and "--theme 'nope': no such theme" in result.output
    missing = tmp_path / "missing-policy.toml"
    missing.write_text('[[tasks]]\ntask = "x"\npolicy = "nope.toml"\n')
    result = runner.invoke(main, ["fleet", "--tasks", str(missing), "--headless", "--backend", "sim"])
    assert result.exit_code == 2 and "task task-1: policy file" in result.output
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------------------------------------------
# Issue 35, point 5: a fleet tried on the sim desktop works from the manual
# ---------------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def readme_fleet() -> tuple[str, list[str]]:
    """The README's fleet section: its tasks-file example (the labs') and its `cua-tui fleet` lines."""
    import re

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## A fleet\n")
    section = text[start : text.index("\n## ", start + 1)]
    toml = re.search(r"^```toml\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert toml is not None
    return toml.group(1), re.findall(r"^cua-tui fleet .*$", section, re.MULTILINE)


def test_the_readmes_sim_fleet_runs_headless_and_every_run_passes(tmp_path: Path) -> None:
    import shlex

    _labs, lines = readme_fleet()
    on_sim = [line for line in lines if "--backend sim" in line]
    (headless,) = [line for line in on_sim if "--headless" in line]
    assert len(on_sim) == 2  # the fleet TUI's line, and this one
    args = shlex.split(headless)[1:]
    tasks = ROOT / args[args.index("--tasks") + 1]
    assert "for --backend sim" in tasks.read_text().splitlines()[0]  # the file says what it is for
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", *args, "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        cwd=ROOT,  # its paths are the README's, from the checkout
        env={**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml")},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    (manifest,) = json.loads((runs / "fleet.json").read_text())["fleets"].values()
    assert len(manifest["runs"]) == 6 and "6 of 6 passed" in proc.stderr
    for row in manifest["runs"]:
        result = json.loads((runs / row["run_id"] / "result.json").read_text())
        assert (result["status"], result["verified"]) == ("passed", True), row
        assert verify_run(runs / row["run_id"]).intact


@pytest.mark.parametrize("backend", ["sim", "dry"])
def test_the_readmes_lab_fleet_on_a_desktop_without_a_browser_is_refused_at_submit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    labs, _lines = readme_fleet()
    smoke = tmp_path / "smoke.toml"
    smoke.write_text(labs)
    runs = tmp_path / "runs"
    args = ["fleet", "--tasks", str(smoke), "--backend", backend, "--headless", "--runs-dir", str(runs)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: tasks file {smoke}, line 6: tasks.0.lab: lab 'form' needs a desktop with a browser: "
        f"--backend local, cwsandbox or docker, not {backend}\n"
    )
    assert not runs.exists()  # nothing started


def test_fleet_json_keeps_every_fleet_of_the_runs_directory_and_sets_aside_what_it_cannot_read(tmp_path: Path) -> None:
    """DESIGN.md: a fleet adds fleet.json in the runs directory. Several fleets share one: each keeps its
    entry; a fleet.json that is not such an index (damaged, hostile) is set aside, never overwritten."""
    from cua_tui.fleet_runner import _update_manifest

    path = tmp_path / "fleet.json"
    _update_manifest(path, "f1", {"fleet": "f1", "runs": []})
    _update_manifest(path, "f2", {"fleet": "f2", "runs": []})
    _update_manifest(path, "f1", {"fleet": "f1", "runs": [{"task": "a"}]})
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and set(data["fleets"]) == {"f1", "f2"}
    assert data["fleets"]["f1"]["runs"] == [{"task": "a"}]
    path.write_text("{not json")
    _update_manifest(path, "f3", {"fleet": "f3"})
    assert set(json.loads(path.read_text())["fleets"]) == {"f3"}
    (aside,) = tmp_path.glob("fleet.json.unreadable-*")
    assert aside.read_text() == "{not json"
