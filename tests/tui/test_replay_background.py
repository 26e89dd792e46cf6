"""Replay at any length: the chain verified and the log read in the background, the run walkable meanwhile.

Runs are real sim runs (test_replay's form, with a decision at step 2 and a refusal at step 4), a long one
grown from it by the benchmark's ``grow_run`` through the real audit writer. The verifier is the real
``chain_state``, held back by an Event the test controls, so that "still verifying" is not a race."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pilot_helpers import SOON, replay_screen, until
from test_replay import banner, panel, recorded, shown
from textual.pilot import Pilot

from bench.replay import grow_run
from cua_tui.cli import main as cli_main
from cua_tui.core import timeline as tl
from cua_tui.core.runlog import RunReader
from cua_tui.tui import replay as replay_module
from cua_tui.tui.app import CuaApp
from cua_tui.tui.replay import VERIFYING, ChainState, chain_state, replay_app

pytestmark = pytest.mark.timeout(90)

SIZE = (160, 48)
UNTRUSTED = "UNTRUSTED: recorded after the chain's first bad line"
LONG = 3000


class HeldVerifier:
    """The real ``chain_state`` of the run, answered only once the test releases it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.asked = threading.Event()
        self.released = threading.Event()

    def __call__(self) -> ChainState:
        self.asked.set()
        self.released.wait(SOON)
        return chain_state(self.path)


async def test_the_banner_says_verifying_until_the_verifier_answers_and_the_run_can_be_walked_meanwhile(
    tmp_path: Path,
) -> None:
    path = recorded(tmp_path)
    verifier = HeldVerifier(path)
    app = replay_app(RunReader(path), verifier)
    main = replay_screen(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await shown(pilot, app)
            await until(pilot, verifier.asked.is_set, "the verifier started in the background")
            assert "record being verified…" in banner(app) and "record intact" not in banner(app)
            assert main.chain.state == VERIFYING
            for number in (2, 3, 4):
                await pilot.press("right")
                await shown(pilot, app)
                assert f"STEP {number} of 6" in panel(app)
            await pilot.press("d", "D")  # the flags are there before the chain is checked
            assert "STEP 2 of 6" in panel(app)
            assert "record being verified…" in banner(app)
            verifier.released.set()
            await until(pilot, lambda: "record intact" in banner(app), "the verdict in the banner")
            assert "being verified" not in banner(app) and "sealed" in banner(app)
            assert main.verified_at > 0 and UNTRUSTED not in panel(app)
    finally:
        verifier.released.set()


def tamper_middle_line(path: Path) -> int:
    """Edit the record in the middle of the log (its time moved by a second); its 0-based line number."""
    log = path / "audit.jsonl"
    lines = log.read_bytes().split(b"\n")
    middle = len([line for line in lines if line]) // 2
    record = json.loads(lines[middle])
    record["ts"] = record["ts"] + 1
    lines[middle] = json.dumps(record, separators=(",", ":")).encode()
    log.write_bytes(b"\n".join(lines))
    return middle


async def test_a_tampered_run_is_verifying_then_tampered_with_the_later_steps_untrusted(tmp_path: Path) -> None:
    path = recorded(tmp_path)
    bad = tamper_middle_line(path)
    verifier = HeldVerifier(path)
    app = replay_app(RunReader(path), verifier)
    main = replay_screen(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await shown(pilot, app)
            await until(pilot, verifier.asked.is_set, "the verifier started in the background")
            # the reader's own pass sees the next line's link broken, before the verifier answers
            assert "being verified" not in banner(app) and f"TAMPERED: line {bad + 2}: its prev" in banner(app)
            await pilot.press("end")  # after the bad line
            assert main.steps[-1].last_seq >= bad and UNTRUSTED in panel(app)
            verifier.released.set()
            await until(pilot, lambda: main.chain.bad_seq == bad, "the verdict in the banner")
            assert f"line {bad + 1}" in banner(app) and "untrusted" in banner(app)
            assert main.chain.bad_seq == bad
            # the step on screen is marked as soon as the verdict is in
            assert "STEP 6 of 6" in panel(app) and UNTRUSTED in panel(app)
            await pilot.press("home")
            seen = {False: 0, True: 0}
            for number, step in enumerate(main.steps):
                await shown(pilot, app)
                assert f"STEP {number + 1} of 6" in panel(app)
                untrusted = step.last_seq >= bad
                assert (UNTRUSTED in panel(app)) == untrusted, (number, step.last_seq, bad)
                seen[untrusted] += 1
                await pilot.press("right")
            assert seen[False] and seen[True]  # steps on both sides of the bad line
    finally:
        verifier.released.set()


@pytest.mark.long
async def test_a_long_run_shows_its_first_screen_before_its_log_is_read(tmp_path: Path) -> None:
    path = grow_run(recorded(tmp_path), tmp_path / "long", LONG)
    with RunReader(path) as reader:
        whole = tl.build(reader.poll())
    assert len(whole.steps) == LONG
    decisions = [step.number for step in whole.steps if tl.DECISION in step.flags]
    refusals = [step.number for step in whole.steps if tl.REFUSAL in step.flags]
    assert len(decisions) > 100 and len(refusals) > 100
    app = replay_app(RunReader(path), lambda: chain_state(path))
    main = replay_screen(app)
    # The App runs on this thread: holding the index's lock (reentrant) lets the App's own reads through
    # and keeps the background reader waiting, so the first frame certainly comes before the log is read.
    lock = main.index.lock
    lock.acquire()
    held = True
    try:
        async with app.run_test(size=SIZE) as pilot:
            await shown(pilot, app)
            assert not main.index.done and "reading the log… " in banner(app)
            first = len(main.steps)
            assert 0 < first < LONG and f"STEP 1 of {first}" in panel(app)
            await pilot.press("right")
            await shown(pilot, app)
            assert f"STEP 2 of {first}" in panel(app)
            lock.release()
            held = False
            await until(pilot, lambda: main.index.done, "the whole log read")
            await until(pilot, lambda: "reading the log" not in banner(app), "the banner told")
            assert f"{LONG:,} steps" in banner(app)
            await until(pilot, lambda: "record intact" in banner(app), "the verdict")
            await pilot.press("end")
            await shown(pilot, app)
            assert main.selected == LONG - 1 and f"STEP {LONG} of {LONG}" in panel(app)
            for key, expected in (("R", refusals[-1]), ("D", decisions[-1]), ("home", 0), ("d", decisions[0])):
                await pilot.press(key)
                assert main.selected == expected, key
                assert f"STEP {expected + 1} of {LONG}" in panel(app)
            await pilot.press("r")
            assert main.selected == min(n for n in refusals if n > decisions[0])
            # every flagged step of the run, as the keys find them, is the one the whole timeline flags
            for flag, expected_steps in ((tl.DECISION, decisions), (tl.REFUSAL, refusals)):
                found, at = [], -1
                while (nxt := main.index.find(flag, at, 1)) is not None:
                    found.append(nxt)
                    at = nxt
                assert found == expected_steps, flag
    finally:
        if held:
            lock.release()


def test_the_replay_command_verifies_the_chain_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cua-tui replay RUN`` as typed: the App is given how to verify, not a verdict; it is run headless
    here (no terminal) until the banner has the verdict."""
    path = recorded(tmp_path)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "no-config.toml"))
    given: list[object] = []
    banners: list[str] = []
    real_app, real_run = replay_module.replay_app, CuaApp.run

    def replay_app_seen(reader: RunReader, chain: ChainState | Callable[[], ChainState], **options: Any) -> CuaApp:
        given.append(chain)
        return real_app(reader, chain, **options)

    async def pilot_run(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, CuaApp)
        await until(pilot, lambda: "record intact" in banner(app), "the verdict in the banner")
        banners.append(banner(app))
        app.exit()

    def headless(self: CuaApp, **_options: Any) -> Any:
        return real_run(self, headless=True, size=SIZE, auto_pilot=pilot_run)

    monkeypatch.setattr(replay_module, "replay_app", replay_app_seen)
    monkeypatch.setattr(CuaApp, "run", headless)
    result = CliRunner().invoke(cli_main, ["replay", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert len(given) == 1 and callable(given[0]) and not isinstance(given[0], ChainState)
    assert banners and "record intact · sealed" in banners[0]


def long_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[RunReader, CuaApp, replay_module.ReplayScreen, list[BaseException | None]]:
    """A replay of a long run (its log read in the background for a while), and the exceptions any thread
    raises meanwhile."""
    path = grow_run(recorded(tmp_path), tmp_path / "long", LONG)
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    reader = RunReader(path)
    app = replay_app(reader, lambda: chain_state(path))
    return reader, app, replay_screen(app), raised


async def test_leaving_while_the_log_is_read_ends_the_reader_before_the_log_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """q while a long log is still read: the replay waits for the reader's slice under way, so that the log
    closed after it (the command's ``with reader``) is never read closed (it was: a traceback on leaving)."""
    reader, app, main, raised = long_replay(tmp_path, monkeypatch)
    with reader:
        async with app.run_test(size=SIZE) as pilot:
            await shown(pilot, app)
            await until(pilot, lambda: main._reading is not None, "the background reader started")
            assert not main.index.done
        thread = main._reading
        assert thread is not None and not thread.is_alive()
    assert not main.index.done and not raised, raised


async def test_a_read_that_fails_in_the_background_ends_the_reading_and_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log failing under a replay (here its file closed under the reader): the background reading ends
    and says why, each step that cannot be read again is said when walked to, and nothing crashes, the App
    or a thread (the verifier's verdict shows the selected step again)."""
    reader, app, main, raised = long_replay(tmp_path, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        await until(pilot, lambda: main._reading is not None, "the background reader started")
        reader.close()  # its file gone from under it: the next slice's read fails
        said = "the rest of the log could not be read: audit.jsonl: cannot read it"
        await until(pilot, lambda: any(said in n.message for n in app._notifications), "the failure said")
        assert main._reading is not None
        main._reading.join(SOON)
        assert not main._reading.is_alive() and not main.index.done
        # walking on: each step that cannot be read again is said, and the replay stays up
        shown_before = panel(app)
        for key in ("right", "b", "end", "left", "home", "d", "T"):
            await pilot.press(key)
        await pilot.pause(0.3)  # the poll timer's turns too
        assert app.is_running and app.return_code is None
        unreadable = [n.message for n in app._notifications if "could not be read: audit.jsonl" in n.message]
        assert any(m.startswith("step ") for m in unreadable), unreadable
        assert "STEP 1 of" in shown_before and panel(app).startswith(shown_before.split(" of")[0])
    assert not raised, raised
