"""End to end through a real terminal: `cua-tui fleet --tasks FILE --backend local` in tmux, three form-lab
runs on real local desktops (Xvfb + openbox + Chromium, each in its own sandbox), every decision approved
with y as a person would (reading the screen with capture-pane), until every run has ended; then q.

The exit status must say every run passed, and every run directory must be complete: passed and verified
by its lab, its audit log intact and sealed (``cua-tui verify``), its decisions made by a human through the
TUI, and the fleet's manifest must list the three runs."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_tmux_demo import Tmux, cua_tui_command

from cua_tui.desktops.local import missing_programs
from cua_tui.labs import get_lab

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

TASKS = ("form-1", "form-2", "form-3")


def fleet_command(tmp_path: Path, tasks: Path) -> str:
    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    command = " ".join(
        [
            "env",
            "-u",
            "COLUMNS",
            "-u",
            "LINES",
            *(f"{key}={shlex.quote(value)}" for key, value in env.items()),
            *map(shlex.quote, cua_tui_command()),
            "fleet",
            "--tasks",
            shlex.quote(str(tasks)),
            "--backend",
            "local",
            "--concurrency",
            "3",
            "--runs-dir",
            shlex.quote(str(tmp_path / "runs")),
        ]
    )
    return f"{command}; echo EXIT=$?; sleep 30"


def test_a_fleet_of_three_local_desktops_answered_with_y_in_tmux(tmp_path: Path) -> None:
    assert shutil.which("tmux"), "tmux is not installed (apt-get install tmux)"
    assert missing_programs() == [], "run `bash scripts/setup.sh env` as root"
    script = get_lab("form").script_file()
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(
        'version = 1\nname = "tmux-trio"\n\n'
        + "".join(
            f'[[tasks]]\nname = "{name}"\nlab = "form"\nagent = "script:{script}"\ndeadline_seconds = 180\n\n'
            for name in TASKS
        )
    )
    runs = tmp_path / "runs"
    tmux = Tmux(fleet_command(tmp_path, tasks), width=200, height=50)
    approvals = 0
    try:
        screen = tmux.wait_for(lambda s: "FLEET" in s and "Approval queue" in s, "the fleet TUI", 60)
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            screen = tmux.screen()
            if "every run ended" in screen:
                break
            if "DECISION NEEDED" in screen:
                tmux.keys("y")
                approvals += 1
                # the next request (or none) replaces this one in the panel before another y
                time.sleep(0.8)
            else:
                time.sleep(0.3)
        else:
            raise AssertionError(f"the fleet did not end within 200 s; the screen:\n{screen}")
        assert "3 ended (3 passed)" in screen, screen
        assert "0 waiting for you" in screen
        tmux.keys("q")
        screen = tmux.wait_for(lambda s: "EXIT=" in s, "the fleet command to exit", 60)
        assert "EXIT=0" in screen, screen
        assert "3 of 3 passed" in screen
    finally:
        tmux.close()

    (manifest,) = json.loads((runs / "fleet.json").read_text())["fleets"].values()
    assert [r["task"] for r in manifest["runs"]] == list(TASKS)
    humans = 0
    for entry in manifest["runs"]:
        run_dir = runs / entry["run_id"]
        assert entry["status"] == "passed" and entry["intact"] is True, entry
        result = json.loads((run_dir / "result.json").read_text())
        assert result["status"] == "passed" and result["verified"] is True
        info = json.loads((run_dir / "run.json").read_text())
        assert (info["fleet"], info["fleet_task"], info["lab"]) == (manifest["fleet"], entry["task"], "form")
        verify = subprocess.run(
            [*cua_tui_command(), "verify", str(run_dir)], capture_output=True, text=True, timeout=60
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        records = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
        decisions = [r for r in records if r["kind"] == "decision" and r["by"] != "policy"]
        assert decisions and all((d["decision"], d["by"]) == ("approve", "human (TUI)") for d in decisions)
        humans += len(decisions)
    assert humans <= approvals  # every decision came from a y pressed in the terminal
