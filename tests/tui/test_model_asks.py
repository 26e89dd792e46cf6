"""A model that calls for the person (UI-TARS' call_user(), issue 40 point 2) in the TUI: the panel says
"THE MODEL ASKS FOR YOU" with its words, shown literally, and the keys that answer it: ``y`` approves nothing
(one line says what does), ``n`` lets the model go on (it hears so), ``T`` takes the desktop and the model
hears what the person did when they hand it back. Live runs on the sim desktop through the handshake."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import guard_of, live_app, plain, run_screen, until, until_ended

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core.ports import CallResult, Frame, Turn
from cua_tui.core.supervisor import ASK_DECLINED
from cua_tui.desktops.sim import SimDesktop

SIZE = (160, 48)
ASKED = "I need you to log in for me: [b]the password[/b] is not mine to type."


class AskingAgent:
    """Asks for the person on its first turn, then ends with what it was told."""

    name = "asking"
    model = None

    def __init__(self) -> None:
        self.heard: list[str] = []

    def start(self, task: str, frame: Frame) -> Turn:
        return Turn(text="The login page wants a password.", asks=ASKED)

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        self.heard.append(note)
        return Turn(text="done")

    def cancel(self) -> None:
        pass


@contextlib.asynccontextmanager
async def asking(tmp_path: Path) -> AsyncIterator[tuple[AskingAgent, Any, Any, Any]]:
    """A run whose model asks for the person, in the TUI, its call on the panel past the input guard: the
    agent (what it heard), the app, the pilot and the run's screen."""
    agent = AskingAgent()
    run = build_run(
        RunOptions(task="log in", backend="sim", agent=None, agent_impl=agent, agent_label="asking",
                   runs_dir=tmp_path / "runs", decisions=HANDSHAKE, fsync=False, desktop=SimDesktop())
    )  # fmt: skip
    track(run.supervisor)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the model's call")
        await until(pilot, guard_of(app).passed, "its input guard")
        yield agent, app, pilot, screen


async def test_the_panel_says_the_model_asks_and_y_approves_nothing_n_lets_it_go_on(tmp_path: Path) -> None:
    async with asking(tmp_path) as (agent, app, pilot, screen):
        panel = plain(screen.panel)
        assert "THE MODEL ASKS FOR YOU" in panel and "[b]the password[/b]" in panel
        assert "take over" in panel and "let it go on" in panel and "approve" not in panel
        await pilot.press("y")
        await until(pilot, lambda: any("T takes the desktop" in n.message for n in app._notifications), "one line")
        assert screen.pending is not None  # y answered nothing
        await pilot.press("n")
        await until_ended(pilot, app)
    assert agent.heard == [ASK_DECLINED]


async def test_t_at_the_models_call_takes_the_desktop_and_the_model_hears_of_it(tmp_path: Path) -> None:
    async with asking(tmp_path) as (agent, app, pilot, screen):
        await pilot.press("T")
        await until(pilot, lambda: screen.view.takeover is not None, "the desktop taken over")
        assert "YOU HAVE THE DESKTOP" in plain(screen.takeover_panel)
        await pilot.press("T")
        await until_ended(pilot, app)
    (heard,) = agent.heard
    assert "took control of the desktop" in heard and ASK_DECLINED not in heard
