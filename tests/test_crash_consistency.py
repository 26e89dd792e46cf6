"""Crash consistency (issue 8, point 10), tested the way storage engines test it: the controller is killed
with SIGKILL at 100 random moments across sim and dry runs, and every run directory left behind must
verify as an intact prefix, with no action executed before the intent to execute it was durably written.

Each run is a forked child of a fresh interpreter that does nothing else (the modules are already imported,
so a child starts in milliseconds and the kill lands inside the run loop, not in interpreter start-up; a fork
of the test process itself could inherit a lock held by another test's thread, and hang). The child's desktop
writes a journal (fsynced) the moment an action reaches it; the journal is the ground truth of what ran.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cua_tui.agents.script import Script, ScriptAgent
from cua_tui.core import events as ev
from cua_tui.core.actions import Action
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.audit import verify_run
from cua_tui.core.geometry import Size
from cua_tui.core.policy import Policy
from cua_tui.core.ports import Answer, StepResult
from cua_tui.core.rundir import RunDir
from cua_tui.core.supervisor import RunConfig, Supervisor
from cua_tui.desktops.dry import DryDesktop
from cua_tui.desktops.local import LocalDesktop
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab

pytestmark = pytest.mark.timeout(240)

KILLS = 100
SEED = int(os.environ.get("CUA_TUI_CRASH_SEED", "8"))

TURN = [
    {"type": "click", "x": 250, "y": 182},
    {"type": "type", "text": PHRASE},
    {"type": "keypress", "keys": ["ENTER"]},
    {"type": "screenshot"},
    {"type": "move", "x": 300, "y": 300},
]
TURNS = [{"actions": TURN, "text": f"turn {n}"} for n in range(4)]


class Journal:
    """Ground truth: one fsynced line per action, written the moment the desktop receives it."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def record(self, action: Action) -> None:
        os.write(self.fd, json.dumps({"kind": action.kind.value, "summary": action.describe()}).encode() + b"\n")
        os.fsync(self.fd)


class JournalingSim(SimDesktop):
    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self.journal = journal

    def perform(self, action: Action) -> StepResult:
        self.journal.record(action)
        return super().perform(action)


class JournalingDry(DryDesktop):
    def __init__(self, journal: Journal) -> None:
        super().__init__(Size(1024, 720))
        self.journal = journal

    def perform(self, action: Action) -> StepResult:
        self.journal.record(action)
        return super().perform(action)


def child(backend: str, runs: Path, journal_path: Path, ready: int) -> None:
    """The controller: one real run, fsync on, as the command line would make it."""
    journal = Journal(journal_path)
    desktop = JournalingSim(journal) if backend == "sim" else JournalingDry(journal)
    agent = ScriptAgent(Script.from_data({"turns": TURNS, "final_text": "done"}))
    config = RunConfig(
        task="crash test", backend=backend, agent="script", model=None, screen=desktop.size, policy=Policy.default()
    )
    supervisor = Supervisor(config, desktop, agent, FixedApprover(Answer.APPROVE), RunDir.create(runs))
    os.write(ready, b"1")  # the run directory exists: from here on a kill lands inside the run
    supervisor.run()


def fork_run(backend: str, runs: Path, journal: Path, kill_after: float | None) -> float:
    """Run ``child`` in a forked process; SIGKILL it ``kill_after`` seconds after its run began. Returns the
    time from the run's beginning to the child's end."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        code = 0
        try:
            child(backend, runs, journal, write_end)
        except BaseException:
            code = 3
        os._exit(code)
    os.close(write_end)
    assert os.read(read_end, 1) == b"1"
    os.close(read_end)
    started = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if kill_after is None:
        assert os.waitstatus_to_exitcode(status) == 0
    return time.monotonic() - started


def check_run(run_dir: Path, journal: Path) -> dict[str, Any]:
    """Every run directory is an intact prefix, and nothing ran without its intent on record first."""
    report = verify_run(run_dir)
    assert report.code == 0, f"{run_dir}: {report.summary}"
    records = []
    for line in (run_dir / "audit.jsonl").read_bytes().split(b"\n"):
        try:
            records.append(json.loads(line))
        except ValueError:
            break  # the last line may be incomplete (killed mid-write); verify said so
    proposals = {(r["turn"], r["index"]): r for r in records if r["kind"] == "proposal"}
    intents = [(r["turn"], r["index"]) for r in records if r["kind"] == "executing"]
    outcomes = {(r["turn"], r["index"]) for r in records if r["kind"] == "outcome"}
    performed = [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
    # The desktop's n-th action is the n-th recorded intent of an action the desktop performs.
    intended = [proposals[key]["action"] for key in intents if proposals[key]["action"]["kind"] != "screenshot"]
    assert len(performed) <= len(intended), f"{run_dir}: {len(performed)} actions ran, {len(intended)} intents"
    for ran, meant in zip(performed, intended, strict=False):
        assert ran["kind"] == meant["kind"], (ran, meant)
    unknown = [key for key in intents if key not in outcomes]
    assert len(unknown) <= 1  # one action at a time: at most the one in flight lost its outcome
    return {"sealed": report.sealed, "unknown": len(unknown), "events": report.events, "report": report}


@pytest.fixture
def fast_dir(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Runs on a tmpfs where there is one: a process crash (unlike a power cut) loses nothing that reached
    the page cache, so fsync latency only slows the test down without changing what it checks."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="cua-crash-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.long
def test_sigkill_at_100_random_moments_leaves_only_intact_prefixes(fast_dir: Path) -> None:
    # the forks come from a fresh, single-threaded interpreter running kill_runs below
    done = subprocess.run(
        [sys.executable, __file__, str(fast_dir)],
        capture_output=True,
        text=True,
        timeout=200,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "unsealed" in done.stdout


def kill_runs(tmp_path: Path) -> dict[str, int]:
    """Full runs of each backend, then KILLS runs each killed at a random moment; every directory checked."""
    rng = random.Random(SEED)
    durations = {}
    for backend in ("sim", "dry"):  # whole runs of each, to spread the kills over a run's length
        took = []
        # the fastest of three: one slowed by a moment's load spread the kills past most runs' end
        for attempt in range(3):
            runs, journal = tmp_path / f"full-{backend}-{attempt}", tmp_path / f"full-{backend}-{attempt}.journal"
            took.append(fork_run(backend, runs, journal, None))
            (run_dir,) = runs.iterdir()
            full = check_run(run_dir, journal)
            assert full["sealed"] and full["unknown"] == 0
        durations[backend] = min(took)
    seen = {"sealed": 0, "unsealed": 0, "unknown": 0}
    for n in range(KILLS):
        backend = "sim" if n % 2 == 0 else "dry"
        runs, journal = tmp_path / f"runs-{n}", tmp_path / f"journal-{n}"
        fork_run(backend, runs, journal, rng.uniform(0, durations[backend] * 0.95))
        (folder,) = runs.iterdir()
        outcome = check_run(folder, journal)
        seen["sealed" if outcome["sealed"] else "unsealed"] += 1
        seen["unknown"] += outcome["unknown"]
        if outcome["unknown"]:
            assert any("outcome unknown (interrupted)" in note for note in outcome["report"].notes), outcome
    # The kills really landed inside runs (not all before or after them).
    assert seen["unsealed"] >= KILLS // 2, seen
    return seen


# ---------------------------------------------------------------------------------------------------
# A few on the real local desktop: no desktop process outlives its controller
# ---------------------------------------------------------------------------------------------------
def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (by parent pid), seen in the host's /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def local_child(runs: Path, ready: int) -> None:
    """Everything it needs is imported before the fork: a forked child must not take the import lock."""
    lab = get_lab("form")
    desktop = LocalDesktop(Size(1024, 720), Target(lab))
    script = lab.script(None)
    # A first turn of moves and waits (3 s) keeps the desktop busy, so that each kill lands mid-run.
    busy = {"actions": [{"type": "move", "x": 100 + 40 * n, "y": 300} for n in range(4)] + [{"type": "wait"}] * 3}
    agent = ScriptAgent(Script.from_data({**script, "turns": [busy, *script["turns"]]}))
    policy = Policy.default().with_regions(lab.regions())
    config = RunConfig(task=lab.task, backend="local", agent="script", model=None, screen=desktop.size, policy=policy)

    def started(stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.Phase) and event.phase == "waiting_model":
            os.write(ready, b"1")  # the desktop is up: the kill lands in the middle of the run

    supervisor = Supervisor(
        config, desktop, agent, FixedApprover(Answer.APPROVE), RunDir.create(runs), listeners=(started,)
    )
    supervisor.run()


@pytest.mark.e2e
@pytest.mark.parametrize("moment", [0.0, 0.7, 1.6])
def test_sigkill_of_a_local_run_leaves_no_desktop_process_and_an_intact_prefix(tmp_path: Path, moment: float) -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        try:
            local_child(tmp_path / "runs", write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 1) == b"1", "the local desktop did not start"
        tree = descendants(pid)
        assert tree, "the desktop's processes are children of the controller"
        time.sleep(moment)
        tree |= descendants(pid)
        assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the run ended before the kill: not a crash"
        os.kill(pid, signal.SIGKILL)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in tree):
        time.sleep(0.1)
    survivors = {p: Path(f"/proc/{p}/cmdline").read_bytes()[:80] for p in tree if alive(p)}
    assert not survivors, f"desktop processes outlived their controller: {survivors}"
    (folder,) = (tmp_path / "runs").iterdir()
    report = verify_run(folder)
    assert report.code == 0 and not report.sealed, report.summary


if __name__ == "__main__":
    print(json.dumps(kill_runs(Path(sys.argv[1]))))
