"""scripts/step_aside.py, which the test job runs on the first part and the beside lane when the alone part
starts: every thread of each tree goes to the given nice and the idle class, and nothing outside the trees
does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# a parent with a second thread and a child of its own, all waiting until stdin closes
TREE = """
import subprocess, sys, threading
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
threading.Thread(target=sys.stdin.read, daemon=True).start()
print(child.pid, flush=True)
sys.stdin.read()
child.stdin.close()
child.wait()
"""


def _nice(pid: int, tid: int) -> int:
    stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19 of stat(5): nice


def _policy(pid: int, tid: int) -> int:
    stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[38])  # field 41 of stat(5): policy


def _threads(pid: int) -> list[int]:
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def test_every_thread_of_the_tree_steps_aside_and_nothing_else() -> None:
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    beside = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert len(_threads(parent.pid)) >= 2
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "step_aside.py"), "19", str(parent.pid), str(other.pid)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        assert f"below {parent.pid} at nice 19, idle class" in done.stderr and f"below {other.pid}" in done.stderr
        for pid in (parent.pid, child, other.pid):
            assert [_nice(pid, tid) for tid in _threads(pid)] == [19] * len(_threads(pid))
            assert {_policy(pid, tid) for tid in _threads(pid)} == {os.SCHED_IDLE}
        # not in a tree: as it was
        assert _nice(beside.pid, beside.pid) == os.getpriority(os.PRIO_PROCESS, 0)
        assert _policy(beside.pid, beside.pid) == os.sched_getscheduler(0)
    finally:
        for proc in (parent, other, beside):
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(10)


def test_a_tree_already_gone_and_a_bad_call_are_said_not_raised() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "step_aside.py"), "19", gone.stdout.strip()],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and "0 thread(s)" in done.stderr
    usage = subprocess.run([sys.executable, str(ROOT / "scripts" / "step_aside.py")], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: step_aside.py NICE PID..." in usage.stderr
