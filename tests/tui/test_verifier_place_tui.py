"""The live TUI's end line and replay say who vouched for the verdict (issue 20, point 7): where the verifier
ran and as which user, the sandbox's own word (or a place not recorded) in reverse video, the controller's
plain. The live run is real (the one builder, the sim desktop, the handshake); the sandbox's verdict and the
older run are run directories written the way the supervisor writes them (tests/verdict_runs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, plain, quick_clock, run_screen, until, until_ended
from rich.text import Text
from textual.widgets import Static
from verdict_runs import LAB, SANDBOX, recorded

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core.ports import process_user
from cua_tui.core.runlog import RunReader
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.replay import chain_state, replay_app
from cua_tui.tui.run_screen import supervisor_app
from cua_tui.tui.source import LiveRun
from cua_tui.tui.status import StatusBar

pytestmark = pytest.mark.timeout(90)

SIZE = (200, 48)  # wide enough for the status bar to hold the verdict's whole line
FORM = {
    "actions": [
        {"type": "click", "x": 250, "y": 182},
        {"type": "type", "text": PHRASE},
        {"type": "click", "x": 550, "y": 182},
    ]
}


def field(status: StatusBar, starts: str) -> Text:
    """The status bar's field that starts so (its style says whether it stands out)."""
    (found,) = [text for _rank, text in status._fields() if text.plain.startswith(starts)]
    return found


async def test_the_live_end_line_names_the_controller_and_its_user(tmp_path: Path) -> None:
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": [FORM], "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=SimDesktop(),
        )
    )
    assert run.handshake is not None
    track(run.supervisor)
    app = supervisor_app(LiveRun(run.supervisor, run.handshake), guard_clock=quick_clock)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the typing's decision")
        await pilot.pause()
        await answer(pilot, "y")
        await until_ended(pilot, app)
        status = app.query_one(StatusBar)
        # the status bar says where it was checked (the verifier's name is in the audit pane and the log)
        checked = f"checked in the controller, as {process_user()}"
        assert "status: passed" in plain(status) and checked in plain(status)
        assert field(status, "checked in").style == ""  # the controller's own check: plain


def replay(path: Path) -> CuaApp:
    return replay_app(RunReader(path), chain_state(path))


@pytest.mark.parametrize(
    ("verification", "said"),
    [
        ({**SANDBOX, "user": "root"}, f"checked by {LAB} inside the sandbox, as root"),
        ({k: v for k, v in SANDBOX.items() if k != "where"}, f"checked by {LAB} in a place not recorded"),
    ],
)
async def test_replay_says_who_vouched_and_marks_what_the_controller_did_not_judge(
    tmp_path: Path, verification: dict[str, Any], said: str
) -> None:
    path = recorded(tmp_path / "runs", "20261201-000000-aaaaaa", verification)
    app = replay(path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        banner = app.query_one("#banner", Static)
        assert "record intact" in plain(banner) and said in plain(banner)
        content = banner.content
        assert isinstance(content, Text)
        (part,) = [span for span in content.spans if content.plain[span.start : span.end] == said]
        assert str(part.style) == "bold reverse"
        status = app.query_one(StatusBar)  # a run without steps is shown at its end
        where = said.split(f"{LAB} ", 1)[1]
        assert "status: passed" in plain(status) and f"checked {where}" in plain(status)
        assert field(status, f"checked {where}").style == "bold reverse"
