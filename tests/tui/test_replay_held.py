"""Replay shows only what its verdict checked (issue 34, point 2): a log edited in place after the banner
said INTACT (same size, modification time put back) never shows a step as it now reads. The run is real
(the one builder on the sim desktop); the edit is one an attacker with write access to the run makes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from export_runs import sim_run
from pilot_helpers import plain, replay_screen, until
from textual.widgets import Static

from cua_tui.core import timeline as tl
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.runlog import RunLog, RunReader
from cua_tui.core.safeio import RunFolder
from cua_tui.tui.app import CuaApp
from cua_tui.tui.replay import chain_state, replay_app

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 48)
BLOCK, ALLOW = b'"verdict":"block","reason":"a system key', b'"verdict":"allow","reason":"a system key'


def banner(app: CuaApp) -> str:
    return plain(app.query_one("#banner", Static))


def panel(app: CuaApp) -> str:
    return plain(app.query_one("#step", Static))


def blocked_step(path: Path) -> int:
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        steps = tl.build(log.poll()).steps
    return next(s.number for s in steps if s.verdict is not None and s.verdict.verdict == "block")


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    assert len(old) == len(new)
    info, data = path.stat(), path.read_bytes()
    with path.open("r+b") as fh:
        fh.write(data.replace(old, new, 1))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size and path.stat().st_mtime_ns == info.st_mtime_ns


async def test_a_blocked_step_edited_to_allow_after_intact_reads_tampered_not_allow(tmp_path: Path) -> None:
    path = sim_run(tmp_path / "runs")
    blocked = blocked_step(path)
    app = replay_app(RunReader(path), lambda: chain_state(path))  # verified in the background, as the CLI does
    main = replay_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.index.done and main.verified_at > 0, "the log read and verified")
        assert banner(app).startswith(" passed  · record intact ")
        edit_in_place(path / "audit.jsonl", BLOCK, ALLOW)
        assert verify_run(path).code == VerifyExit.TAMPERED
        for _ in range(blocked):
            await pilot.press("right")
        await pilot.pause()
        assert main.selected == blocked
        assert "ALLOW" not in panel(app) and "UNTRUSTED" in panel(app)
        assert banner(app).startswith(" claimed: passed  · record TAMPERED: ")
        assert "changed after it was verified" in banner(app)
        # walking back to the steps before the edit: they still read as verified
        await pilot.press("home")
        await pilot.pause()
        assert "UNTRUSTED" not in panel(app) and "record TAMPERED" in banner(app)


async def test_a_log_rewritten_between_the_verdict_and_the_reading_is_tampered(tmp_path: Path) -> None:
    """The verdict given (as a screenshot script gives it) was of another log than the one read: the
    head it checked is not the head read, so nothing is vouched for."""
    path = sim_run(tmp_path / "runs")
    verdict = chain_state(path)
    assert verdict.state == "intact"
    edit_in_place(path / "audit.jsonl", BLOCK, ALLOW)
    app = replay_app(RunReader(path), verdict)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await until(pilot, lambda: "record TAMPERED" in banner(app), "the banner turned")
        assert replay_screen(app).chain.bad_seq is not None
