"""Lower running process trees' CPU priority: ``python scripts/step_aside.py NICE PID...`` sets every thread
of each PID and of all its descendants to nice NICE and to the idle scheduling class (SCHED_IDLE, where the
kernel allows it; a thread's nice and class are its own on Linux; a child started later takes its parent
thread's).

The test job (scripts/setup.sh) uses it when the alone part starts, on the first part and the beside lane:
they then take only the CPU the alone part leaves. Nice 19 alone was not enough: a thread at nice 19 keeps
its CPU for a while when a normal one wakes, so a measurement made of many short wake-ups (typing 20
characters on a desktop: the controller, the X server, Chromium's processes) took 2 to 3 times its quiet
time; a normal thread waking preempts an idle-class one at once.
"""

from __future__ import annotations

import os
import sys


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, read from /proc (a process gone meanwhile is skipped)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as stat:
                # the command name is in parentheses and may hold spaces: the fields follow the last ")"
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def step_aside(tid: int, nice: int) -> bool:
    """One thread to ``nice`` and the idle class; False if it is gone (or already lower: raising a nice back
    needs privilege)."""
    try:
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:
        return False
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:  # gone meanwhile, or a container that refuses it: the nice holds
        pass
    return True


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: step_aside.py NICE PID...", file=sys.stderr)
        return 2
    nice, roots = int(argv[1]), [int(arg) for arg in argv[2:]]
    for root in roots:
        lowered = 0
        for pid in descendants(root):
            try:
                threads = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            lowered += sum(step_aside(int(tid), nice) for tid in threads)
        print(f"step_aside: {lowered} thread(s) below {root} at nice {nice}, idle class", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
