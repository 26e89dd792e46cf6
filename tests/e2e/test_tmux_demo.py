"""Driving the real binary in a real terminal: tmux on a private socket, read with ``capture-pane`` and
answered with ``send-keys``, as a person would. The demos themselves, each lab from its first decision to
its exit (the form and search labs to a passed and verified run, the injection lab to its egress alert),
are driven in test_tmux_labels.py; the other tmux tests import these helpers."""

from __future__ import annotations

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

from cua_tui.core.guard import DEFAULT_GUARD_S

pytestmark = [pytest.mark.terminal, pytest.mark.timeout(180)]

DECISION = re.compile(r"DECISION NEEDED · turn (\d+) · action (\d+)")
# A decision's y / a / n count once its screenshot has been on the pane this long (its input guard); the
# picture lands a moment after the panel, up to a second later on the loaded suite machine.
GUARD_WAIT_S = DEFAULT_GUARD_S + 1.0


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

    def wait_for(self, found: Callable[[str], object], what: str, timeout: float = 40.0, *, poll: float = 0.2) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if found(screen):
                self.seen_at = time.monotonic()
                return screen
            time.sleep(poll)
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
