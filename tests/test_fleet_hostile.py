"""One hostile run cannot take the fleet down (issue 20, point 4).

Whatever escapes a run's thread (an exception none of the supervisor's handlers expects, one raised while
the run ends, in a listener, in the manifest's write) ends that run ``error``, sealed where its supervisor
still can, and recorded in fleet.json, while the other runs go on and the fleet ends by itself. SIGTERM and
SIGINT end a fleet in every state (runs starting, a run mid-exec on a sandbox that never answers, a run
waiting for a decision, runs queued behind the concurrency), each run killed and sealed, fleet.json complete,
no sandbox left live. The fast cases run the real runner on the sim desktop; the rest run the real command
line in a subprocess with the real cwsandbox client against the hostile local service.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_batch import batch
from fleet_cases import opts
from hostile_sandbox import HostileLocalService, HostileService

from cua_tui import fleet_runner as fleet_module
from cua_tui.build import Run, RunOptions, build_run
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core import fleet_queue as cf
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.ports import Answer
from cua_tui.desktops.sim import SimDesktop
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.labs import get_lab
from tests.fakes.cwsandbox_local import HOST_IMAGE, Fault

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
KEY = "cw-fleet-hostile-key-7c1e"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})


class Escaped(BaseException):
    """Derives from neither Exception nor any kind a handler names: nothing but the last defence catches it."""


class Told:
    """A fleet listener that keeps every event."""

    def __init__(self) -> None:
        self.events: list[cf.FleetEvent] = []
        self.lock = threading.Lock()

    def __call__(self, event: cf.FleetEvent) -> None:
        with self.lock:
            self.events.append(event)

    def finished(self) -> list[str]:
        with self.lock:
            return [e.row.task for e in self.events if isinstance(e, cf.RunFinished)]


def start(tmp_path: Path, tasks: dict[str, RunOptions], **kwargs: Any) -> tuple[Fleet, Told]:
    fleet = Fleet([FleetTask(name, options) for name, options in tasks.items()], runs_dir=tmp_path / "runs", **kwargs)
    told = Told()
    fleet.subscribe(told)
    fleet.start()
    return fleet, told


def manifest_of(runs: Path) -> dict[str, Any]:
    fleets: dict[str, dict[str, Any]] = json.loads((runs / "fleet.json").read_text())["fleets"]
    (entry,) = fleets.values()
    return entry


def result_of(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(path) / "result.json").read_text())
    return data


def sealed_intact(path: str | Path) -> bool:
    report = verify_run(path)
    return report.code is VerifyExit.INTACT and report.sealed


def raising_on_type(kind: type[BaseException]) -> SimDesktop:
    """A sim desktop (the real one, through its own hook) that raises ``kind`` as it is asked to type."""
    desktop = SimDesktop()

    def hook(_desktop: SimDesktop, action: Any) -> None:
        if action.kind == "type":
            raise kind(f"injected {kind.__name__}")

    desktop.before_action = hook
    return desktop


# ------------------------------------------------------------------------------------------------------
# Whatever escapes a run's thread ends that run alone, recorded
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [SystemExit, KeyboardInterrupt, Escaped, MemoryError, RuntimeError])
def test_an_exception_escaping_a_run_ends_it_error_sealed_and_the_others_go_on(
    tmp_path: Path, settings: Settings, kind: type[BaseException]
) -> None:
    tasks = {
        "ok-1": opts(settings, decisions="approve"),
        "bad": opts(settings, decisions="approve", desktop=raising_on_type(kind)),
        "ok-2": opts(settings, decisions="approve"),
    }
    fleet, told = start(tmp_path, tasks, concurrency=3)
    assert fleet.wait(30), [r.state for r in fleet.rows()]
    rows = {r.task: r for r in fleet.rows()}
    assert rows["ok-1"].status == rows["ok-2"].status == "passed"
    bad = rows["bad"]
    assert bad.status == "error" and kind.__name__ in bad.reason and "\n" not in bad.reason, bad.reason
    assert bad.intact is True and sealed_intact(bad.path)
    ended = result_of(bad.path)
    assert ended["status"] == "error" and kind.__name__ in ended["reason"]
    assert ended["cleanup"]["ok"] is True  # its desktop was stopped
    assert {r["task"]: r["status"] for r in manifest_of(tmp_path / "runs")["runs"]} == {
        "ok-1": "passed",
        "bad": "error",
        "ok-2": "passed",
    }
    assert sorted(told.finished()) == ["bad", "ok-1", "ok-2"]
    assert isinstance(told.events[-1], cf.FleetFinished)


def test_a_desktop_whose_stop_raises_anything_still_ends_sealed(tmp_path: Path, settings: Settings) -> None:
    """An exception raised while the run ends (the desktop's stop, on the ending's own thread)."""
    desktop = SimDesktop()

    def stop() -> None:
        SimDesktop.stop(desktop)
        raise SystemExit("injected SystemExit")

    desktop.stop = stop  # type: ignore[method-assign]
    fleet, _told = start(
        tmp_path,
        {
            "stops-badly": opts(settings, decisions="approve", desktop=desktop),
            "ok": opts(settings, decisions="approve"),
        },
        concurrency=2,
    )
    assert fleet.wait(30)
    row = fleet.row("stops-badly")
    assert row.status == "passed" and row.intact is True and sealed_intact(row.path)
    assert result_of(row.path)["cleanup"] == {"ok": False, "detail": "stop: injected SystemExit"}
    assert fleet.row("ok").status == "passed"


def test_a_run_whose_ending_fails_past_every_handler_is_recorded_not_sealed(tmp_path: Path, settings: Settings) -> None:
    """Its seal cannot be written (result.json raises what no handler expects): the row says so, the fleet ends."""

    def builder(options: RunOptions) -> Run:
        run = build_run(options)
        if run.options.extra.get("fleet_task") == "unsealable":

            def write_result(data: dict[str, Any]) -> None:
                raise Escaped("injected while writing result.json")

            run.supervisor.rundir.write_result = write_result  # type: ignore[method-assign]
        return run

    fleet, told = start(
        tmp_path,
        {"unsealable": opts(settings, decisions="approve"), "ok": opts(settings, decisions="approve")},
        concurrency=2,
        builder=builder,
    )
    assert fleet.wait(30)
    row = fleet.row("unsealable")
    assert row.status == "error" and row.reason.startswith("not sealed: its run directory has no result.json")
    assert "then the run's thread failed: Escaped: injected while writing result.json" in row.reason, row.reason
    assert row.intact is False and not (Path(row.path) / "result.json").exists()
    assert not verify_run(row.path).sealed  # an intact prefix of its events, unsealed
    assert fleet.row("ok").status == "passed"
    runs = {r["task"]: r for r in manifest_of(tmp_path / "runs")["runs"]}
    assert runs["unsealable"]["status"] == "error" and runs["unsealable"]["intact"] is False
    assert isinstance(told.events[-1], cf.FleetFinished)


def test_listeners_and_watchers_that_raise_anything_do_not_stop_the_fleet(tmp_path: Path, settings: Settings) -> None:
    def broken(_event: Any) -> None:
        raise SystemExit("a listener that exits")

    fleet = Fleet(
        [FleetTask(n, opts(settings, decisions="approve")) for n in ("a", "b")],
        runs_dir=tmp_path / "runs",
        concurrency=1,
    )

    def interrupted(_stamped: Any) -> None:
        raise KeyboardInterrupt

    fleet.subscribe(broken)
    told = Told()
    fleet.subscribe(told)
    fleet.watch("a", interrupted)
    fleet.start()
    assert fleet.wait(30)
    assert [r.status for r in fleet.rows()] == ["passed", "passed"]
    assert sorted(told.finished()) == ["a", "b"] and isinstance(told.events[-1], cf.FleetFinished)


def test_a_manifest_write_that_fails_is_said_and_the_next_one_catches_up(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = fleet_module._update_manifest
    failing = {"on": False}

    def update(path: Path, fleet_id: str, entry: dict[str, Any]) -> None:
        if failing["on"]:
            raise ValueError("injected: not the file system's error")
        real(path, fleet_id, entry)

    monkeypatch.setattr(fleet_module, "_update_manifest", update)
    # Failing from a run's decision to the end: the fleet still ends, and says fleet.json is behind.
    fleet = Fleet([FleetTask("a", opts(settings))], runs_dir=tmp_path / "r1", concurrency=1)
    fleet.start()
    deadline = time.monotonic() + 15
    while not fleet.queue() and time.monotonic() < deadline:
        time.sleep(0.02)
    failing["on"] = True
    deadline = time.monotonic() + 30
    while not fleet.wait(0.05) and time.monotonic() < deadline:
        for item in fleet.queue():
            fleet.answer(item, Answer.APPROVE)
    assert fleet.done and fleet.row("a").status == "passed"
    manifest = tmp_path / "r1" / "fleet.json"
    assert fleet.manifest_problem == f"{manifest} could not be written: injected: not the file system's error"
    assert manifest_of(tmp_path / "r1")["runs"][0]["status"] is None  # behind, as said
    # Failing once in the middle: the writes after it bring fleet.json up to date, and nothing is said.
    failing["on"] = False
    calls = {"n": 0}

    def once(path: Path, fleet_id: str, entry: dict[str, Any]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise MemoryError()
        real(path, fleet_id, entry)

    monkeypatch.setattr(fleet_module, "_update_manifest", once)
    fleet, _told = start(
        tmp_path, {"a": opts(settings, decisions="approve"), "b": opts(settings, decisions="approve")}, concurrency=1
    )
    assert fleet.wait(30)
    assert fleet.manifest_problem is None and calls["n"] > 3
    entry = manifest_of(tmp_path / "runs")
    assert [r["status"] for r in entry["runs"]] == ["passed", "passed"] and "ended_at" in entry


LOCK_HOLDER = """
import fcntl, sys, time
with open(sys.argv[1], "a+b") as fh:
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_fleet_json_locked_by_another_process_does_not_hold_up_the_fleet(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another fleet of the same runs directory that holds the lock and never lets go (stopped, hung)."""
    monkeypatch.setattr(fleet_module, "MANIFEST_LOCK_WAIT", 0.5)
    fleet, _told = start(tmp_path, {"a": opts(settings)}, concurrency=1)  # waits for a decision
    deadline = time.monotonic() + 15
    while not fleet.queue() and time.monotonic() < deadline:
        time.sleep(0.02)
    (item,) = fleet.queue()
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(tmp_path / "runs" / ".fleet.json.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        fleet.kill("a")
        assert fleet.wait(15)
        assert time.monotonic() - started < 5  # two writes (the run's end, the fleet's), 0.5 s each
        assert fleet.row("a").status == "killed" and sealed_intact(fleet.row("a").path)
        assert fleet.manifest_problem is not None and "locked by another process" in fleet.manifest_problem
    finally:
        holder.kill()
        holder.wait()
    assert item.task == "a"


def wedging_listener(release: threading.Event) -> Callable[[ev.Stamped], None]:
    """A run's own listener that never returns once the run proposes to type: it holds the run's emit lock,
    so the run's thread and its kill switch both wait on it (a UI listener that waits for its UI thread)."""

    def listener(stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.ActionProposed) and event.parsed is not None and event.parsed.kind == "type":
            release.wait(120)

    return listener


def quick_stop(options: RunOptions) -> Run:
    """The real builder, with a 1 s stop timeout (the kill's bound on a desktop's stop) instead of 15 s."""
    run = build_run(options)
    run.supervisor.config = dataclasses.replace(run.supervisor.config, stop_timeout=1.0)
    return run


def test_kill_all_ends_the_fleet_even_when_a_runs_thread_is_wedged(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet_module, "SEAL_GRACE", 1.0)
    release = threading.Event()
    tasks = {
        "wedged": opts(settings, decisions="approve", listeners=(wedging_listener(release),)),
        "waiting": opts(settings),
        "queued": opts(settings),
    }
    try:
        fleet, _told = start(tmp_path, tasks, concurrency=2, builder=quick_stop)
        deadline = time.monotonic() + 15
        while not (fleet.queue() and fleet.view("wedged").turn) and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        threading.Thread(target=fleet.kill_all, args=("signal SIGTERM",), daemon=True).start()  # it may block
        assert fleet.wait(10)
        took = time.monotonic() - started
        assert took < 6, took  # the grace: 1 s stop timeout + 1 s, and the verify of what is there
        rows = {r.task: r for r in fleet.rows()}
        assert rows["wedged"].status == "error" and "not sealed within 2 s" in rows["wedged"].reason, rows["wedged"]
        assert rows["wedged"].intact is False
        assert rows["waiting"].status == "killed" and sealed_intact(rows["waiting"].path)
        assert rows["queued"].status == "killed" and rows["queued"].path == ""
        entry = manifest_of(tmp_path / "runs")
        assert [r["status"] for r in entry["runs"]] == ["error", "killed", "killed"] and "ended_at" in entry
    finally:
        release.set()


def test_a_second_signal_stops_waiting_for_a_wedged_run(tmp_path: Path, settings: Settings) -> None:
    """The command line's own signal handling (StopOnSignal), with real signals to this process."""
    from cua_tui.cli.fleet import StopOnSignal

    release = threading.Event()
    tasks = {
        "wedged": opts(settings, decisions="approve", listeners=(wedging_listener(release),)),
        "waiting": opts(settings),
    }
    try:
        fleet, _told = start(tmp_path, tasks, concurrency=2)  # the real stop timeout: a 20 s grace
        deadline = time.monotonic() + 15
        while not (fleet.queue() and fleet.view("wedged").turn) and time.monotonic() < deadline:
            time.sleep(0.02)
        before = signal.getsignal(signal.SIGTERM)
        with StopOnSignal(fleet):
            os.kill(os.getpid(), signal.SIGTERM)
            deadline = time.monotonic() + 10
            while fleet.row("waiting").status != "killed" and time.monotonic() < deadline:
                time.sleep(0.02)
            assert fleet.row("waiting").status == "killed" and not fleet.done  # the wedged run is waited for
            started = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)
            assert fleet.wait(5)
            assert time.monotonic() - started < 3
        assert signal.getsignal(signal.SIGTERM) is before
        wedged = fleet.row("wedged")
        assert wedged.status == "error" and "before the fleet stopped waiting for it" in wedged.reason
        assert result_of(fleet.row("waiting").path)["reason"] == "killed by signal SIGTERM"
    finally:
        release.set()


# ------------------------------------------------------------------------------------------------------
# The real command line, the real cwsandbox client, the hostile service
# ------------------------------------------------------------------------------------------------------
@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[HostileLocalService]:
    svc = HostileLocalService(tmp_path / "service")
    with svc:
        yield svc


def tasks_file(tmp_path: Path, names: list[str]) -> Path:
    script = get_lab("form").script_file()
    path = tmp_path / "tasks.toml"
    path.write_text(
        'version = 1\nname = "hostile"\n\n'
        + "".join(f'[[tasks]]\nname = "{n}"\nlab = "form"\nagent = "script:{script}"\n\n' for n in names)
    )
    return path


def fleet_command(
    tmp_path: Path,
    svc: HostileLocalService,
    names: list[str],
    *,
    concurrency: int = 2,
    on_confirm: str = "approve",
    launcher: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    command = launcher or [sys.executable, "-m", "cua_tui.cli"]
    args = ["fleet", "--tasks", str(tasks_file(tmp_path, names)), "--backend", "cwsandbox"]
    args += ["--runs-dir", str(tmp_path / "runs"), "--concurrency", str(concurrency), "--headless"]
    return subprocess.Popen(
        [*command, *args, "--on-confirm", on_confirm],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "GRPC_VERBOSITY": "ERROR",
            "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"),
            "CWSANDBOX_BASE_URL": svc.base_url,
            "CWSANDBOX_API_KEY": KEY,
            "CUA_TUI_CWSANDBOX_IMAGE": HOST_IMAGE,
            **(env or {}),
        },
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def ended(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"the fleet did not end within {timeout:g} s:\n{err[-3000:]}") from None
    return proc.returncode, err, time.monotonic() - started


def assert_complete(runs: Path, svc: HostileService) -> dict[str, dict[str, Any]]:
    """fleet.json names every task's status and the fleet's end; every run directory verifies intact (with
    ``cua-tui verify``) and holds no credential; no sandbox is left live."""
    entry = manifest_of(runs)
    assert "ended_at" in entry
    by_task = {r["task"]: r for r in entry["runs"]}
    paths = [runs / row["run_id"] for row in by_task.values() if row["run_id"]]
    answers = iter(batch(runs.parent / "verified", [["verify", path] for path in paths]))  # one child for all
    for row in by_task.values():
        assert row["status"] in ("passed", "finished", "failed", "killed", "limit", "error"), row
        if row["run_id"]:
            path = runs / row["run_id"]
            code, out, err = next(answers).answered()
            assert code == 0, out + err
            assert result_of(path)["status"] == row["status"]
            for file in path.rglob("*"):
                if file.is_file():
                    assert KEY.encode() not in file.read_bytes(), file
    assert svc.live() == []
    return by_task


ESCAPES = [("SystemExit", "reply"), ("KeyboardInterrupt", "reply"), ("Escaped", "reply"), ("MemoryError", "reply")]


@pytest.mark.parametrize(("kind", "at"), [*ESCAPES, ("SystemExit", "stop")])
def test_a_cwsandbox_fleet_in_which_one_runs_thread_raises_ends_by_itself(
    tmp_path: Path, hostile: HostileLocalService, kind: str, at: str
) -> None:
    """The hostile sandbox's replies make its run's desktop raise ``kind`` (tests/fleet_escape.py); the other
    sandbox answers honestly (and its verifier passes). The process ends by itself with the documented exit
    status 1 (not every run passed), and fleet.json has both."""
    hostile.hostile.per_sandbox = [{"perform": "escape"}, {"verify": "passed"}]
    launcher = [sys.executable, str(ROOT / "tests" / "fleet_escape.py")]
    proc = fleet_command(
        tmp_path, hostile, ["one", "two"], launcher=launcher, env={"CUA_TEST_ESCAPE": kind, "CUA_TEST_ESCAPE_AT": at}
    )
    code, err, _took = ended(proc, 90)
    runs = tmp_path / "runs"
    by_task = assert_complete(runs, hostile.hostile)
    bad_run = hostile.hostile.runs[0]
    (bad,) = [r for r in by_task.values() if r["run_id"] == bad_run]
    (good,) = [r for r in by_task.values() if r["run_id"] != bad_run]
    assert good["status"] == "passed", err
    if at == "reply":
        assert code == 1, err
        assert bad["status"] == "error" and kind in bad["reason"], bad
        assert result_of(runs / bad_run)["cleanup"]["ok"] is True
        assert f"[{bad['task']}] ended error" in err
        assert "1 of 2 passed" in err
    else:  # raised by the desktop's stop as the run ended: recorded, and the run still sealed
        assert code == 0, err
        assert bad["status"] == "finished" and bad["intact"] is True
        assert result_of(runs / bad_run)["cleanup"] == {"ok": False, "detail": "stop: injected SystemExit"}
    assert "Traceback" not in err


APPROVER = """\
import os, sys, time
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """The process runs (a zombie, ended and not yet reaped by whoever adopted it, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def requested(runs: Path) -> int:
    """How many of the fleet's runs have asked for a decision (their audit logs say so)."""
    return sum(b'"decision_requested"' in log.read_bytes() for log in runs.glob("*/audit.jsonl"))


def waiting(svc: HostileService, what: Callable[[], bool], timeout: float = 45) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, (svc.answered, svc.hanging, svc.runs)
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("state", ["creating", "starting", "mid-exec", "deciding", "queued"])
def test_a_signal_ends_a_headless_cwsandbox_fleet_in_every_state(
    tmp_path: Path, hostile: HostileLocalService, state: str, sig: signal.Signals
) -> None:
    svc = hostile.hostile
    names, concurrency, on_confirm = ["one", "two"], 2, "approve"
    asked = tmp_path / "asked"
    asked.mkdir()
    if state == "creating":  # the service takes 4 s to create each sandbox: the signal comes before they exist
        for _ in names:
            svc.inject(Fault("CreateSandbox", "delay", seconds=4))
        ready = lambda: svc.count("CreateSandbox") == 2  # noqa: E731
    elif state == "starting":  # the sandboxes exist; their desktops never say they are ready
        svc.behave["ready"] = "hang"
        ready = lambda: svc.hanging == 2  # noqa: E731
    elif state == "mid-exec":  # one run's click never comes back; the other run has ended
        svc.per_sandbox = [{"perform": "hang"}]
        ready = lambda: svc.hanging == 1 and svc.count("DeleteSandbox") == 1  # noqa: E731
    elif state == "deciding":  # both runs wait: one for the approver command, which never answers, the
        # other for its turn (a headless fleet asks one request at a time, in the queue's order)
        (tmp_path / "approver.py").write_text(APPROVER)
        on_confirm = f"approver:{sys.executable} {tmp_path / 'approver.py'} {asked}"
        ready = lambda: len(list(asked.iterdir())) == 1 and requested(tmp_path / "runs") == 2  # noqa: E731
    else:  # one at a time: the first run's click hangs, two more wait for their turn
        names, concurrency = ["one", "two", "three"], 1
        svc.per_sandbox = [{"perform": "hang"}]
        ready = lambda: svc.hanging == 1  # noqa: E731
    proc = fleet_command(tmp_path, hostile, names, concurrency=concurrency, on_confirm=on_confirm)
    waiting(svc, ready)
    proc.send_signal(sig)
    code, err, took = ended(proc, 30)
    print(f"{state}, {sig.name}: the fleet exited {took:.2f} s after the signal")
    assert code == 1, err
    # within a few seconds: a create in flight is waited for (4 s from its request) to stop what it makes
    assert took < (8 if state == "creating" else 5), (took, err)
    by_task = assert_complete(tmp_path / "runs", svc)
    killed = [r for r in by_task.values() if r["status"] == "killed"]
    assert killed and all(r["reason"].startswith(f"killed by signal {sig.name}") for r in killed), by_task
    if state == "mid-exec":
        assert sorted(r["status"] for r in by_task.values()) == ["finished", "killed"]
    else:
        assert len(killed) == len(names)
    if state == "queued":
        assert [r["run_id"] is None for r in by_task.values()] == [False, True, True]
        assert by_task["two"]["reason"] == f"killed by signal {sig.name} before it started"
    if state == "creating":
        # both delayed creates have made their sandbox by now (the stop waited for them) or will (it did
        # not, and they would run on): once both exist, none may run
        waiting(svc, lambda: len(svc.sandboxes) == 2, 10)
        assert svc.live() == [] and len(svc.runs) == 2
    if state == "deciding":
        for marker in asked.iterdir():  # the approver commands ended with their runs
            assert not alive(int(marker.name)), marker.name
    assert "Traceback" not in err


def test_the_cwsandbox_client_never_takes_the_signals_from_the_command_line(
    tmp_path: Path, hostile: HostileLocalService
) -> None:
    """The client installs SIGINT/SIGTERM handlers of its own with the first sandbox made on the main thread
    (its handler would exit the process before any run is sealed): the desktop opts out before that."""
    from cua_tui.core.geometry import Size
    from cua_tui.core.rundir import RunDir
    from cua_tui.desktops.cwsandbox import CWSandboxDesktop, SandboxSettings
    from cua_tui.desktops.target import Target

    def ours(signum: int, frame: Any) -> None:
        raise AssertionError("not to be called")

    previous = {s: signal.signal(s, ours) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        settings = SandboxSettings(api_key=KEY, base_url=hostile.base_url, step_timeout=10, image=HOST_IMAGE)
        desktop = CWSandboxDesktop(Size(1024, 720), Target(get_lab("form")), settings)
        desktop.bind_run(RunDir.create(tmp_path / "runs"))
        desktop.start()  # on this, the main thread
        desktop.stop()
        assert signal.getsignal(signal.SIGINT) is ours and signal.getsignal(signal.SIGTERM) is ours
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert hostile.hostile.live() == []


def test_a_fleet_says_whose_word_each_verdict_is(tmp_path: Path, hostile: HostileLocalService) -> None:
    """Sandboxes that did nothing and answered ``passed``: the fleet's summary and rows say it was the
    sandbox's verdict, never the controller's."""
    hostile.hostile.behave["verify"] = "passed"
    code, err, _seconds = ended(fleet_command(tmp_path, hostile, ["a", "b"]), 60)
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.strip().startswith(("a ", "b "))]
    assert len(lines) == 2 and all("passed (checked inside the sandbox)" in line for line in lines), err
    assert_complete(tmp_path / "runs", hostile.hostile)


def test_the_fleet_row_names_the_verdicts_place(tmp_path: Path, settings: Settings) -> None:
    """A sim run's verdict is the controller's own: the row says so."""
    fleet, _told = start(tmp_path, {"sim": opts(settings, decisions="approve")}, concurrency=1)
    assert fleet.wait(60)
    (row,) = fleet.rows()
    assert row.status == "passed" and row.verifier == "controller", row
