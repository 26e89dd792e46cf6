"""Lower a running process tree's CPU priority: ``python scripts/step_aside.py NICE PID`` sets every thread
of PID and of all its descendants to nice NICE (a thread's nice is its own on Linux; a child started later
takes its parent thread's).

The test job (scripts/setup.sh) uses it when the alone part starts: the first part, still running, then
takes only the CPU the alone part leaves, as the beside lane does from the start.
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


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: step_aside.py NICE PID", file=sys.stderr)
        return 2
    nice, root = int(argv[1]), int(argv[2])
    lowered = 0
    for pid in descendants(root):
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in threads:
            try:
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)
                lowered += 1
            except OSError:  # gone, or already lower than NICE (raising it back needs privilege)
                continue
    print(f"step_aside: {lowered} thread(s) below {root} at nice {nice}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
