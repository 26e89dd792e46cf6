"""Many ``cua-tui`` commands in one child process, each answered as if it ran alone: its exit status, the
bytes it wrote on file descriptors 1 and 2, its wall and CPU time and its peak memory (the process's peak
is reset before each command). A corpus of hostile cases costs one interpreter start, not one per case.

    answers = batch(tmp_path, [["verify", run] for run in runs], ceiling=True)
    code, out, err = answers[0].checked()   # the bounds tests/hostile_runs.py's ``cli`` holds one child to
"""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hostile_runs import MAX_CPU_SECONDS, MAX_RSS_KB, MAX_WALL_SECONDS, MEMORY_CEILING

# Each command's output goes to files of its own (dup2 over fds 1 and 2, as a child's pipes would take
# what the process writes there, Python or not); a line per command on the results file, written as it
# ends, so that a command that hangs is named by the one missing after it.
DRIVER = r"""
import base64, json, os, sys, tempfile, time, traceback
from cua_tui.cli import main

with open(sys.argv[1], encoding="utf-8") as fh:
    commands = json.load(fh)
results = open(sys.argv[2], "a", encoding="utf-8")
for argv in commands:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # the peak resident size starts again from the current one
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    kept = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    os.dup2(kept[0], 1); os.dup2(kept[1], 2); os.close(kept[0]); os.close(kept[1])
    with open("/proc/self/status") as status:
        peak = int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    out.seek(0); err.seek(0)
    said = {"out": base64.b64encode(out.read()).decode(), "err": base64.b64encode(err.read()).decode()}
    results.write(json.dumps({"code": code, "wall": wall, "cpu": cpu, "peak_kb": peak, **said}) + "\n")
    results.flush()
"""


@dataclass(frozen=True)
class Answer:
    """One command's answer, or why there is none (``missing``: an earlier command hung or the child died)."""

    argv: tuple[str, ...]
    code: int = -1
    out: str = ""
    err: str = ""
    wall: float = 0.0
    cpu: float = 0.0
    peak_kb: int = 0
    missing: str = ""

    def answered(self) -> tuple[int, str, str]:
        """``(code, stdout, stderr)``, once there is an answer."""
        assert not self.missing, f"cua-tui {' '.join(self.argv)}: {self.missing}"
        return self.code, self.out, self.err

    def checked(self, cpu: float = MAX_CPU_SECONDS) -> tuple[int, str, str]:
        """``(code, stdout, stderr)`` once the answer came within the bounds a child of its own is held to."""
        self.answered()
        assert "Traceback" not in self.err, self.err
        assert self.cpu < cpu, f"took {self.cpu} s of CPU ({self.wall} s)"
        assert self.wall < MAX_WALL_SECONDS, f"took {self.wall} s ({self.cpu} s of CPU)"
        assert self.peak_kb < MAX_RSS_KB, f"max RSS {self.peak_kb // 1024} MB"
        return self.code, self.out, self.err


def _ceiling() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))


def batch(
    folder: Path, commands: Sequence[Sequence[str | Path]], *, ceiling: bool = False, env: dict[str, str] | None = None
) -> list[Answer]:
    """Run every command of ``commands`` (each ``cua-tui``'s arguments) in turn in one child, with no user
    settings; ``ceiling``: under the address-space ceiling of tests/hostile_runs.py. The answers in order."""
    argvs = [tuple(map(str, argv)) for argv in commands]
    folder.mkdir(parents=True, exist_ok=True)
    listed, results = folder / "commands.json", folder / "answers.jsonl"
    listed.write_text(json.dumps(argvs), encoding="utf-8")
    results.write_text("", encoding="utf-8")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, str(listed), str(results)],
            capture_output=True,
            timeout=30 + 2 * MAX_WALL_SECONDS * len(argvs) ** 0.5,
            preexec_fn=_ceiling if ceiling else None,
            env={**os.environ, "CUA_TUI_CONFIG": str(folder / "no-config.toml"), **(env or {})},
        )
        ended = f"the child exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
    except subprocess.TimeoutExpired:
        ended = "it or an earlier command hung (the child was stopped at its timeout)"
    lines = results.read_text(encoding="utf-8").splitlines()
    answers = []
    for n, argv in enumerate(argvs):
        if n >= len(lines):
            answers.append(Answer(argv, missing=ended if n == len(lines) else f"not run: command {len(lines)} {ended}"))
            continue
        got = json.loads(lines[n])
        out, err = (base64.b64decode(got[key]).decode("utf-8") for key in ("out", "err"))
        answers.append(Answer(argv, got["code"], out, err, got["wall"], got["cpu"], got["peak_kb"]))
    return answers
