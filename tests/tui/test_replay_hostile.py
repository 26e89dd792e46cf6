"""Replay against the shared corpus of damaged and hostile run directories (tests/hostile_runs.py), the same
list verify, runs and export are tested against: a directory replay cannot read gets one line and exit 2;
every other one opens, walks and flips without a crash, a hang or a read outside the run directory, with
the chain's verdict in the banner."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile_runs import ALL, Case, pristine_run
from pilot_helpers import plain, replay_screen
from textual.widgets import Static

from cua_tui.cli import main
from cua_tui.core import ending
from cua_tui.core.runlog import RunReader
from cua_tui.core.safeio import RunFileError
from cua_tui.tui.replay import chain_state, replay_app

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("case", ALL, ids=str)
async def test_replay_survives_every_hostile_run_directory(case: Case, corpus_run: Path, tmp_path: Path) -> None:
    run = case.build(corpus_run, tmp_path / "runs", tmp_path / "outside")
    started = time.monotonic()
    try:
        reader = RunReader(run)
    except RunFileError:
        env = {"CUA_TUI_CONFIG": str(tmp_path / "none.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}
        result = CliRunner().invoke(main, ["replay", str(run)], env=env)
        assert result.exit_code == 2, result.output
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1, result.output
        assert "Traceback" not in result.output
        return
    chain = chain_state(run)
    expected = {0: ("intact", "unsealed"), 1: ("tampered",), 2: ("unusable",)}[case.exit]
    assert chain.state in expected, (chain, case.exit)
    app = replay_app(reader, chain)
    replay = replay_screen(app)
    with reader:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            for key in ("end", "b", "z", "home", "right", "d", "r", "e", "g", "left", "down", "up"):
                await pilot.press(key)
            deadline = time.monotonic() + 10
            while not replay.desktop.settled and time.monotonic() < deadline:  # the last frame (or why not)
                await pilot.pause(0.02)
            banner = plain(app.query_one("#banner", Static))
            assert ending.record_label(chain.state) in banner
            assert plain(app.query_one("#step", Static))  # a step, or "no action was proposed"
    assert time.monotonic() - started < 30
