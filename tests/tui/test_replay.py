"""Replay (issue 10): a recorded run in the live TUI's panes, read-only, fed by the events read back from its
run directory through the same reducer. Runs are real: made by the one builder on the sim desktop with a
script agent; ``--follow`` follows a run that another process (the real command line) is still writing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pilot_helpers import plain, possible, replay_screen, until
from textual.pilot import Pilot
from textual.widgets import Static

from cua_tui.build import RunOptions, build_run
from cua_tui.core.runlog import RunReader
from cua_tui.tui.app import CuaApp
from cua_tui.tui.batch import BatchPane
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.replay import ChainState, chain_state, replay_app

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 48)
FIELD = (250, 182)
VERIFY = (550, 182)


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


TURNS = [
    {
        "text": "filling the form",
        "actions": [click(FIELD), {"type": "type", "text": "cua-tui verified"}, click(VERIFY)],
    },
    {"text": "the page says to open a terminal", "actions": [{"type": "keypress", "keys": ["ctrl", "alt", "t"]}]},
    {"text": "checking", "actions": [{"type": "wait"}, {"type": "screenshot"}]},
]


def recorded(tmp_path: Path, turns: list[dict[str, Any]] = TURNS, status: str = "passed") -> Path:
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": turns, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions="approve",
            fsync=False,
        )
    )
    assert run.run().status == status
    return run.path


def replay(path: Path, follow: bool = False) -> CuaApp:
    """The App as ``cua-tui replay [--follow]`` opens it."""

    def verdict() -> ChainState:
        return chain_state(path, follow=follow)

    return replay_app(RunReader(path), verdict(), follow=follow, reverify=verdict)


def panel(app: CuaApp) -> str:
    return plain(app.query_one("#step", Static))


def banner(app: CuaApp) -> str:
    return plain(app.query_one("#banner", Static))


async def shown(pilot: Pilot[Any], app: CuaApp) -> None:
    main = replay_screen(app)
    await until(pilot, lambda: main.desktop.settled, "the step's frame on screen")


async def test_replay_walks_the_steps_with_verdicts_decisions_and_outcomes(tmp_path: Path) -> None:
    app = replay(recorded(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        assert banner(app).startswith(" passed  · record intact · sealed ") and "6 steps" in banner(app)
        text = panel(app)
        assert "STEP 1 of 6" in text and "click at (250, 182)" in text
        assert "ALLOW · rule actions.click" in text and "approve by policy" in text
        assert "EXECUTED" in text and "the model heard: OK" in text
        await pilot.press("right")
        await shown(pilot, app)
        text = panel(app)
        assert "STEP 2 of 6" in text and "type 16 characters" in text and "never stored" in text
        assert "cua-tui verified" not in text  # typed text is never stored, so never shown
        assert "CONFIRM" in text and "approve by headless rule: approve" in text
        await pilot.press("r")  # the next refusal: the blocked chord
        await shown(pilot, app)
        text = panel(app)
        assert "STEP 4 of 6" in text and "BLOCK" in text and "REFUSED" in text
        assert "Refused by sandbox policy. Stop and report." in text
        assert app.query_one(BatchPane).border_title == "Turn 2 batch"
        await pilot.press("D")  # back to the previous decision made by someone other than the policy
        assert "STEP 2 of 6" in panel(app)
        await pilot.press("up")
        assert "STEP 1 of 6" in panel(app)
        await pilot.press("end")
        assert "STEP 6 of 6" in panel(app)


async def test_b_flips_between_the_screens_before_and_after_the_action(tmp_path: Path) -> None:
    app = replay(recorded(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right")  # the typing: its before and after screens differ
        await shown(pilot, app)
        after = app.query_one(DesktopView).rendered
        assert "after it ran" in panel(app)
        await pilot.press("b")
        await shown(pilot, app)
        before = app.query_one(DesktopView).rendered
        assert "before it ran" in panel(app)
        assert after is not None and before is not None and before.image.tobytes() != after.image.tobytes()
        await pilot.press("z")
        await shown(pilot, app)
        zoomed = app.query_one(DesktopView).rendered
        assert zoomed is not None and zoomed.zoomed


async def test_replay_is_read_only(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    before = {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    app = replay(path)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        assert not any(possible(app, action) for action in ("approve", "approve_scope", "reject", "kill"))
        for key in ("y", "n", "k", "right", "b", "d", "r", "e", "g", "left"):
            await pilot.press(key)
        await pilot.pause()
    assert {p.name: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


async def test_a_tampered_run_opens_with_the_steps_after_the_bad_line_untrusted(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    lines = (path / "audit.jsonl").read_bytes().split(b"\n")
    record = json.loads(lines[20])
    record["ts"] = record["ts"] + 1  # an edit: the next line's prev no longer matches
    lines[20] = json.dumps(record, separators=(",", ":")).encode()
    (path / "audit.jsonl").write_bytes(b"\n".join(lines))
    app = replay(path)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        assert "record TAMPERED: line 21" in banner(app)
        assert "UNTRUSTED" not in panel(app)  # step 1 ends before the bad line
        await pilot.press("end")
        assert "UNTRUSTED" in panel(app)


async def test_a_missing_screenshot_is_said_not_crashed_on(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    for png in (path / "screens").iterdir():
        png.unlink()
    app = replay(path)
    main = replay_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.desktop.settled, "the refusal on screen")
        assert "screenshot not shown" in app.query_one(DesktopView).placeholder
        assert "STEP 1 of 6" in panel(app)


async def test_follow_shows_a_run_another_process_is_still_writing(tmp_path: Path) -> None:
    """A headless run in another process waits on a slow approver command; the replay follows it, shows
    each new step within a poll, and says when the run ends."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": TURNS, "final_text": "done"}))
    approver = tmp_path / "approver.py"
    approver.write_text('import sys, time\nsys.stdin.read()\ntime.sleep(1.5)\nprint(\'{"decision": "approve"}\')\n')
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "cua_tui.cli", "run", "--headless", "--backend", "sim"]
    command += ["--agent", f"script:{script}", "--runs-dir", str(runs)]
    command += ["--on-confirm", f"approver:{sys.executable} {approver}"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not (runs.exists() and any(runs.glob("*/audit.jsonl"))) and time.monotonic() < deadline:
            time.sleep(0.05)
        path = next(runs.glob("*/audit.jsonl")).parent
        app = replay(path, follow=True)
        main = replay_screen(app)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "following" in banner(app), "the banner says following", timeout=20)
            await until(pilot, lambda: len(main.steps) >= 2, "the first steps", timeout=20)
            assert banner(app).startswith(" not ended yet  · record unsealed · live")
            await until(pilot, lambda: "the run has ended" in banner(app), "the end of the run", timeout=30)
            assert main.selected == len(main.steps) - 1 == 5  # it followed to the newest step
            await until(pilot, lambda: "record intact" in banner(app), "verified again once sealed", timeout=5)
            assert banner(app).startswith(" passed  · record intact")
    finally:
        proc.wait(30)
    assert proc.returncode == 0
