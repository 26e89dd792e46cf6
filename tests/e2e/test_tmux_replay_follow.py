"""End to end through a real terminal: ``cua-tui replay --follow`` of a hostile run, in tmux (issue #20, point 8).

A run directory a hostile sandbox could have written (tests/literal_runs.py: markup and escapes in the task,
the model's text, an egress host, an error and the end reason) is followed while its last events arrive.
The end reason is a notification: shown literally on the terminal, the App still up (as markup, ``[/]``
killed it with a traceback, and the command exited 0), no escape obeyed (``ESC [2J`` would have cleared the
screen). q then leaves with exit status 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from literal_runs import MARKUP, finish, forged, recorded
from test_tmux_demo import Tmux, cua_tui_shell

pytestmark = [pytest.mark.terminal, pytest.mark.timeout(180)]


def test_replay_follow_shows_a_hostile_end_reason_literally_in_tmux(tmp_path: Path) -> None:
    path, tail, writer = forged(recorded(tmp_path / "real"), tmp_path / "runs" / "followed")
    tmux = Tmux(cua_tui_shell(tmp_path, "replay", "--follow", str(path)), width=200, height=50)
    try:
        screen = tmux.wait_for(lambda s: "following" in s, "the replay following the run")
        assert MARKUP in screen and "␛[2J" in screen  # the task in the goal bar, literally
        finish(path, writer, tail)
        screen = tmux.wait_for(lambda s: "the run has ended" in s or "EXIT=" in s, "the end of the run said")
        assert "Traceback" not in screen and "EXIT=" not in screen, screen  # the App is still up
        screen = tmux.wait_for(lambda s: "the run ended: error" in s, "the end reason in a notification")
        lines = [line for line in screen.splitlines() if MARKUP in line]
        assert len(lines) >= 2, screen  # the goal bar's task, and the notification's reason
        tmux.keys("q")
        screen = tmux.wait_for(lambda s: "EXIT=" in s, "the command to end")
        assert "EXIT=0" in screen and "Traceback" not in screen, screen
    finally:
        tmux.close()
