"""Replay as flat in a run's length as it can be: the log's background reading and the chain's verification
give way while a step is shown (core/threads.GiveWay), and the first frame is converted once, at the pane's
size. The benchmark times it in a real terminal (``python -m cua_tui.bench replay``); these hold what makes
it so. Runs are real sim runs, a long one grown by the benchmark's ``grow_run``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_helpers import replay_screen, until
from test_replay import panel, recorded, shown

from cua_tui.bench.replay import grow_run
from cua_tui.core.runlog import RunReader
from cua_tui.tui.replay import VERIFYING, chain_state, replay_app

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 48)
LONG = 3000


async def test_the_background_reading_and_verification_wait_while_a_step_is_shown(tmp_path: Path) -> None:
    """Held (as a step being shown holds them, the hold kept here past the first frame), neither the log's
    reading nor the chain's verification goes on; once the next step is painted, both do, to the end."""
    path = grow_run(recorded(tmp_path), tmp_path / "long", LONG)
    app = replay_app(RunReader(path), lambda: chain_state(path))
    main = replay_screen(app)
    way = main.give_way
    way.lapse = 60.0
    way.go = lambda: None  # type: ignore[method-assign]  # the first frame does not let it go
    way.hold()
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        await until(pilot, lambda: way.waits >= 2, "the reader and the verifier waiting")
        first = main.index.lines
        await pilot.pause(0.3)
        assert main.index.lines == first and not main.index.done  # the first block, read at mount, alone
        assert main.chain.state == VERIFYING
        del way.go  # a step painted lets them go
        await pilot.press("right")
        await shown(pilot, app)
        assert "STEP 2 of" in panel(app)
        await until(pilot, lambda: main.index.done, "the whole log read")
        await until(pilot, lambda: main.chain.state == "intact", "the verdict")
        assert main.index.count == LONG and not way.held


async def test_the_first_frame_is_converted_at_the_panes_size_only(tmp_path: Path) -> None:
    """Before the layout gives the desktop pane a size, a frame would be fitted to nothing and converted
    again once it has one: the first screen waited for both. Every frame made is for the pane's size."""
    path = recorded(tmp_path)
    app = replay_app(RunReader(path), chain_state(path))
    main = replay_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        frames = list(main.desktop._cache)
        assert frames and all(width > 0 and height > 0 for _sha, width, height, *_rest in frames), frames
        await pilot.press("right")
        await shown(pilot, app)
        assert all(width > 0 and height > 0 for _sha, width, height, *_rest in main.desktop._cache)
