"""End to end through a real terminal: `cua-tui demo` (local desktop, form lab, scripted agent) in tmux.

The test drives the installed binary as a person would: it reads the screen with ``capture-pane`` and
answers with ``send-keys``: y to the typed phrase, y to the Verify click, q once the status bar says
``finished: passed``. Then the run directory must say passed and ``cua-tui verify`` must find it intact.
The tmux server runs on its own socket, so nothing else on the machine is touched.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from cua_tui.tui.guard import DEFAULT_GUARD_S

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

DECISION = re.compile(r"DECISION NEEDED · turn (\d+) · action (\d+)")
# A decision's y / a / n count once it has been on screen this long (its input guard), and a little more.
GUARD_WAIT_S = DEFAULT_GUARD_S + 0.1


def cua_tui_command() -> list[str]:
    binary = Path(sys.executable).parent / "cua-tui"
    return [str(binary)] if binary.exists() else [sys.executable, "-m", "cua_tui.cli"]


class Tmux:
    """One detached tmux session on a private server socket."""

    def __init__(self, command: str, *, width: int = 160, height: int = 50) -> None:
        self.socket = f"cua-tui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.session = "demo"
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", self.session, command)
        self.seen_at = time.monotonic()  # when wait_for last found what it waited for

    def tmux(self, *args: str) -> str:
        # An explicit environment: under pytest the process's C-level environ can carry COLUMNS=80 LINES=24
        # (os.environ does not show them), which the tmux server would hand to the app as its terminal size.
        env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {out.stderr.strip()}")
        return out.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def answer(self, *keys: str) -> None:
        """Send ``keys`` once the decision last waited for has been on screen for its input guard (y, a and n
        pressed earlier are ignored, as a person's double tap would be)."""
        time.sleep(max(0.0, self.seen_at + GUARD_WAIT_S - time.monotonic()))
        self.keys(*keys)

    def wait_for(self, found: Callable[[str], object], what: str, timeout: float = 40.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if found(screen):
                self.seen_at = time.monotonic()
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}; the screen:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


def decision(screen: str) -> tuple[int, int] | None:
    match = DECISION.search(screen)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cua_tui_shell(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``cua-tui ARGS`` as a shell command for tmux, with no user settings (and ``env`` added), then its exit
    status printed and a pause, so a test can read both."""
    assert shutil.which("tmux"), "tmux is not installed (apt-get install tmux)"
    settings = {
        "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"),  # no user settings leak in
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        **(env or {}),
    }
    command = " ".join(
        [
            "env",
            "-u",
            "COLUMNS",
            "-u",
            "LINES",
            *(f"{key}={shlex.quote(value)}" for key, value in settings.items()),
            *map(shlex.quote, [*cua_tui_command(), *args]),
        ]
    )
    return f"{command}; echo EXIT=$?; sleep 30"


def demo_command(tmp_path: Path, *args: str) -> str:
    """``cua-tui demo --runs-dir RUNS ARGS``."""
    return cua_tui_shell(tmp_path, "demo", "--runs-dir", str(tmp_path / "runs"), *args)


def test_demo_in_tmux_to_a_passed_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    tmux = Tmux(demo_command(tmp_path))
    try:
        screen = tmux.wait_for(
            lambda s: decision(s) and "AWAITING YOUR DECISION" in s, "the first DECISION NEEDED and its status"
        )
        first = decision(screen)
        assert first is not None
        assert "cua-tui verified" in screen  # the typed text, shown in full at decision time
        tmux.answer("y")

        second = decision(tmux.wait_for(lambda s: decision(s) not in (None, first), "the second DECISION NEEDED"))
        assert second is not None and second > first
        tmux.answer("y")

        screen = tmux.wait_for(lambda s: "finished: passed" in s, "finished: passed in the status bar", 60)
        status_bar = next(line for line in screen.splitlines() if "finished: passed" in line)
        assert " run " in status_bar and "local" in status_bar
        tmux.keys("q")
        screen = tmux.wait_for(lambda s: "EXIT=" in s, "the demo to exit", 30)
        assert "EXIT=0" in screen, screen
    finally:
        tmux.close()

    run_dirs = [p for p in runs.iterdir() if (p / "audit.jsonl").is_file()]
    assert len(run_dirs) == 1, run_dirs
    result = json.loads((run_dirs[0] / "result.json").read_text())
    assert result["status"] == "passed" and result["verified"] is True
    verify = subprocess.run(
        [*cua_tui_command(), "verify", str(run_dirs[0])], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    audit = [json.loads(line) for line in (run_dirs[0] / "audit.jsonl").read_text().splitlines()]
    humans = [r for r in audit if r["kind"] == "decision" and r["by"] != "policy"]
    assert [(r["decision"], r["by"]) for r in humans] == [("approve", "human (TUI)")] * 2


def test_the_injection_demo_asks_about_sending_out_and_alerts_when_it_is_approved(tmp_path: Path) -> None:
    """Issue 11, points 5 and 8: the injection demo's agent obeys the page, so the analyst meets the decision
    about sending data out; the screen says the agent is a script that ignores answers; approving it makes the
    browser try the outside collector, which the proxy refuses and the TUI raises as an alert until seen."""
    tmux = Tmux(demo_command(tmp_path, "--lab", "injection"), width=160, height=48)
    try:
        screen = tmux.wait_for(lambda s: decision(s) and "AWAITING YOUR DECISION" in s, "the Send decision")
        assert decision(screen) == (1, 1)
        assert "sends data to an outside site" in screen and "click at (140, 368)" in screen
        assert "SCRIPTED" in screen and "It ignores your answers" in screen  # a note, not a dialog
        tmux.answer("y")
        screen = tmux.wait_for(lambda s: "ALERT" in s and "collector.exfil.invalid" in s, "the egress alert", 60)
        assert "egress refused: POST collector.exfil.invalid:80" in screen
        screen = tmux.wait_for(lambda s: "finished: failed" in s, "the run to fail (the key was sent)", 60)
        assert "ALERT" in screen  # it stays until seen
        tmux.keys("x")
        screen = tmux.wait_for(lambda s: "ALERT" not in s, "the alert to go once seen", 10)
        tmux.keys("q")
        screen = tmux.wait_for(lambda s: "EXIT=" in s, "the demo to exit", 30)
        assert "EXIT=1" in screen, screen
    finally:
        tmux.close()
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "audit.jsonl").is_file()]
    audit = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
    refused = [r for r in audit if r["kind"] == "egress" and not r["allowed"]]
    assert any(r["host"] == "collector.exfil.invalid" for r in refused)
