"""Damaged and hostile run directories through every export: a one-line answer and the documented exit code
(1 tampered but written, 2 nothing to export), never a traceback, a hang or a read outside the run.

The damaged directories come from ``export_runs.DAMAGED`` (switch to tests/hostile_runs.py's corpus there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from export_runs import DAMAGED, bomb_png, sim_run

from cua_tui.export import html as html_export
from cua_tui.export import open_run

FORMATS = ("--html", "--gif", "--webp", "--script")
SUFFIX = {"--html": "html", "--gif": "gif", "--webp": "webp", "--script": "json"}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim_run(tmp_path_factory.mktemp("good") / "runs")


def damaged(good_run: Path, tmp_path: Path, name: str) -> Path:
    copy = tmp_path / good_run.name
    shutil.copytree(good_run, copy)
    DAMAGED[name][0](copy)
    return copy


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_run_gets_one_line_and_its_exit_code(good_run: Path, tmp_path: Path, name: str) -> None:
    run = damaged(good_run, tmp_path, name)
    expected = DAMAGED[name][1]
    outs = tmp_path / "out"
    outs.mkdir()
    args = [arg for flag in FORMATS for arg in (flag, str(outs / f"x.{SUFFIX[flag]}"))]
    # A real process with a timeout: a FIFO that got opened would hang it, and the test would say so.
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", "export", str(run), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path / "runs")},
        check=False,
    )
    assert proc.returncode == expected, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    problem = [line for line in proc.stderr.splitlines() if line.startswith(("Error:", "TAMPERED"))]
    assert len(problem) == 1, proc.stderr
    written = sorted(p.name for p in outs.iterdir())
    assert written == (sorted(f"x.{s}" for s in SUFFIX.values()) if expected == 1 else [])


def test_a_refused_screen_is_named_never_decoded_never_followed(good_run: Path, tmp_path: Path) -> None:
    run = damaged(good_run, tmp_path, "symlinked screen")
    with open_run(run) as opened:
        page = html_export.render(opened)
    assert "root:x:0:0" not in page  # /etc/passwd was not read through the link
    assert "a symbolic link" in page
    bomb = tmp_path / "bomb"
    shutil.copytree(good_run, bomb)
    target = sorted((bomb / "screens").iterdir())[0]
    target.write_bytes(bomb_png())
    with open_run(bomb) as opened:
        screen = opened.screen(target.name[:-4])
    assert screen.png is None and "altered" in screen.refused  # its hash no longer matches its name


def test_a_bomb_whose_name_is_its_hash_is_refused_from_its_header(good_run: Path, tmp_path: Path) -> None:
    import hashlib

    run = tmp_path / "r"
    shutil.copytree(good_run, run)
    data = bomb_png()
    sha = hashlib.sha256(data).hexdigest()
    (run / "screens" / f"{sha}.png").write_bytes(data)
    with open_run(run) as opened:
        screen = opened.screen(sha)
    assert screen.png is None and "40000 x 40000" in screen.refused
