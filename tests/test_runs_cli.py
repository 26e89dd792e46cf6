"""`cua-tui runs` over a hostile runs folder (issue 8, points 2, 6 and 10): every run directory is read
through safeio, every cell is shown literally (no terminal escapes from a directory name or a file), a
hostile run is a row saying so, and an interrupted run counts its actions whose outcome is unknown."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_supervisor
from runlogs import UNSIGNED, interrupted_turn, write_run

from cua_tui.core.approvers import FixedApprover
from cua_tui.core.ports import Answer

OSC52 = "\x1b]52;c;SGVsbG8=\x07"  # a clipboard write, if a terminal ever received it raw
TURNS = [{"actions": [{"type": "click", "x": 250, "y": 182}]}]


def runs_cli(runs: Path, tmp_path: Path) -> tuple[int, list[str], str]:
    """`cua-tui runs` in a child process: a hang is a timeout, unbounded memory hits the ceiling."""
    limit = 1536 * 1024**2
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", "runs", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
        env={**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not any(c in proc.stdout for c in "\x1b\x07\x9b\r"), repr(proc.stdout)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def rows_by_name(lines: list[str]) -> dict[str, list[str]]:
    header, *rows = lines
    assert header.split() == ["RUN", "DATE", "TASK", "STATUS", "STEPS", "VERIFIED", "AUDIT"]
    return {row.split("  ")[0].strip(): row for row in rows}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sup, _events, _agent = make_supervisor(
        tmp_path_factory.mktemp("runs-cli"), TURNS, approver=FixedApprover(Answer.APPROVE), task="a real task"
    )
    return sup.run().path


def copy(real_run: Path, runs: Path, name: str) -> Path:
    target = runs / name
    shutil.copytree(real_run, target)
    return target


def test_escapes_in_a_directory_name_a_task_and_a_status_are_shown_literally(real_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    hostile = copy(real_run, runs, f"20261201-000000-aaaaaa{OSC52}")
    result = json.loads((hostile / "result.json").read_text())
    result["status"] = f"passed{OSC52}"
    (hostile / "result.json").write_text(json.dumps(result))
    info = json.loads((hostile / "run.json").read_text())
    info["task"] = f"task{OSC52}\r"
    (hostile / "run.json").write_text(json.dumps(info))
    code, lines, _ = runs_cli(runs, tmp_path)
    assert code == 0
    (row,) = rows_by_name(lines).values()
    assert "20261201-000000-aaaaaa␛]52;c;SGVsbG8=␇" in row
    assert "passed␛]52" in row and "task␛]52;c;SGVsbG8=␇␍" in row
    assert row.rstrip().endswith("intact")  # the seal covers the log, not the status line of result.json


def test_hostile_run_directories_are_rows_never_a_hang_or_a_traceback(real_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    outside = tmp_path / "outside"
    outside.mkdir()
    good = copy(real_run, runs, "20261201-000001-aaaaaa")
    zero = copy(real_run, runs, "20261201-000002-aaaaaa")
    (zero / "result.json").unlink()
    (zero / "result.json").symlink_to("/dev/zero")
    fifo = copy(real_run, runs, "20261201-000003-aaaaaa")
    (fifo / "audit.jsonl").unlink()
    os.mkfifo(fifo / "audit.jsonl")
    screens = copy(real_run, runs, "20261201-000004-aaaaaa")
    shutil.move(screens / "screens", outside / "screens")
    (screens / "screens").symlink_to(outside / "screens")
    odd = copy(real_run, runs, "20261201-000005-aaaaaa")
    result = json.loads((odd / "result.json").read_text())
    result.update(counts=5, verified="yes", status={"nested": [1]})
    (odd / "result.json").write_text(json.dumps(result))
    copy(real_run, outside, "elsewhere")
    (runs / "20261201-000006-aaaaaa").symlink_to(outside / "elsewhere")  # a run's name, but a link
    (runs / "fleet.json").write_text("{}")  # not a run: not listed
    (runs / "notes").mkdir()
    code, lines, _ = runs_cli(runs, tmp_path)
    assert code == 0
    rows = rows_by_name(lines)
    assert set(rows) == {good.name, zero.name, fifo.name, screens.name, odd.name, "20261201-000006-aaaaaa"}
    assert rows[good.name].split()[-1] == "intact"
    assert rows[zero.name].split()[-1] == "TAMPERED" and " ? " in rows[zero.name]
    assert rows[fifo.name].split()[-1] == "unusable"
    assert rows[screens.name].split()[-1] == "TAMPERED"
    assert rows[odd.name].split()[-1] == "intact" and "{'nested': [1]}" in rows[odd.name]
    assert rows["20261201-000006-aaaaaa"].split()[-1] == "unusable"


def test_interrupted_run_counts_its_unknown_outcomes(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs / "20261201-000000-bbbbbb", None, interrupted_turn(), signed=UNSIGNED, seal=False)
    code, lines, _ = runs_cli(runs, tmp_path)
    assert code == 0
    (row,) = rows_by_name(lines).values()
    assert row.endswith("unsealed, 1 unknown")
    assert " unfinished " in row
