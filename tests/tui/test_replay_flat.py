"""Replay as flat in a run's length as it can be: the log's background reading and the chain's verification
give way while a step is shown (core/threads.GiveWay), and the first frame is converted once, at the pane's
size. The benchmark times it in a real terminal (``python -m bench replay``); these hold what makes
it so. Runs are real sim runs, a long one grown by the benchmark's ``grow_run``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pilot_helpers import replay_screen, until
from test_replay import panel, recorded, shown

from bench.replay import grow_run
from cua_tui.core.runlog import RunReader
from cua_tui.tui import desktop_view
from cua_tui.tui.frames import prepare
from cua_tui.tui.replay import SWITCH_S, VERIFYING, chain_state, replay_app

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
    way.go = lambda after=0.0: None  # type: ignore[method-assign]  # the first frame does not let it go
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


async def test_the_first_frame_is_converted_alone_at_the_panes_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the layout gives the desktop pane a size, a frame would be fitted to nothing and converted
    again once it has one, and the frames ahead were converted beside it: the first screen waited for all.
    Every frame made is for the pane's size, and the first is made before any frame ahead begins."""
    path = recorded(tmp_path)
    app = replay_app(RunReader(path), chain_state(path))
    main = replay_screen(app)
    made: list[tuple[str, object]] = []
    real = prepare  # what desktop_view calls

    def spy(png: bytes, *args: Any, **kwargs: Any) -> Any:
        made.append(("begin", args[2] if len(args) > 2 else kwargs.get("target")))
        if len(made) == 1:
            time.sleep(0.3)  # a frame ahead converted beside the first would begin meanwhile
        try:
            return real(png, *args, **kwargs)
        finally:
            made.append(("end", None))

    monkeypatch.setattr(desktop_view, "prepare", spy)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        await until(pilot, lambda: len(made) >= 4, "a frame ahead converted too")
        frames = list(main.desktop._cache)
        assert frames and all(width > 0 and height > 0 for _sha, width, height, *_rest in frames), frames
        first = main.desktop._key(main.desktop.shot, main.desktop.target)[3]  # type: ignore[arg-type]
        assert made[:2] == [("begin", first), ("end", None)], made  # the shown step's frame, alone
        await pilot.press("right")
        await shown(pilot, app)
        assert all(width > 0 and height > 0 for _sha, width, height, *_rest in main.desktop._cache)


async def test_the_ui_thread_takes_the_interpreter_back_sooner_while_a_replay_is_open(tmp_path: Path) -> None:
    """Python hands the interpreter to a thread that asks for it after 5 ms by default: a key passing the
    event loop dozens of times waited that long each time for the background threads. A replay lowers it
    while it is open and puts it back when it closes."""
    path = recorded(tmp_path)
    before = sys.getswitchinterval()
    app = replay_app(RunReader(path), chain_state(path))
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        assert sys.getswitchinterval() == pytest.approx(min(before, SWITCH_S))
    assert sys.getswitchinterval() == before
