"""A signal to the supervision TUI of one run (a service manager's SIGTERM, ``kill -INT``, SIGHUP when the
terminal goes away) kills the run, seals it and gives the terminal back, in tmux with the real binary.
Sim desktop: the TUI and the signal are the point."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_tmux_demo import Tmux, cua_tui_command, cua_tui_shell, decision
from test_tmux_fleet import children

pytestmark = [pytest.mark.terminal, pytest.mark.timeout(120)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_the_run_tui_kills_and_seals_the_run_and_leaves(tmp_path: Path, sig: signal.Signals) -> None:
    from bench.fleet import FORM

    script = tmp_path / "form.json"
    script.write_text(json.dumps(FORM))
    runs = tmp_path / "runs"
    command = cua_tui_shell(
        tmp_path, "run", "--task", "fill the form", "--backend", "sim", "--agent", f"script:{script}",
        "--runs-dir", str(runs),
    )  # fmt: skip
    tmux = Tmux(command)
    try:
        tmux.wait_for(lambda s: decision(s) is not None, "the first decision", 60)
        (pid,) = [int(p) for p in tmux.tmux("list-panes", "-F", "#{pane_pid}").split()]
        (cua,) = [c for c in children(pid) if "run" in Path(f"/proc/{c}/cmdline").read_text()]
        os.kill(cua, sig)
        started = time.monotonic()
        screen = tmux.wait_for(lambda s: "EXIT=" in s, "the run command to exit", 30)
        # about 2 s alone; a hang would reach the 30 s wait, a loaded machine (the suite's first part) takes longer
        assert time.monotonic() - started < 20, screen
        assert "EXIT=1" in screen, screen
        assert "DECISION NEEDED" not in screen  # the TUI closed and gave the terminal back
    finally:
        tmux.close()
    (run_dir,) = runs.iterdir()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "killed" and result["reason"] == f"killed by signal {sig.name}", result
    verify = subprocess.run([*cua_tui_command(), "verify", str(run_dir)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
