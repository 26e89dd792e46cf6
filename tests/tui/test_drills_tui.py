"""A drill in the TUI (issue 41): at drill_rate 1.0 a drill is pending before each real request, shown as a
request is (its action the batch's pending row, its screen on the pane, its line in the audit pane as a
request's), answered with the same keys, revealed at once, and the real request it held back comes next;
nothing a drill shows ever reaches the desktop."""

from __future__ import annotations

from pathlib import Path

from drill_cases import SIM_FORM, make_library
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import live_app, plain, run_screen, until, until_ended

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.tui.goal import GoalBar

SIZE = (160, 48)


async def test_a_drill_is_answered_like_a_request_revealed_and_the_real_one_follows(tmp_path: Path) -> None:
    library = make_library(tmp_path / "made")
    desktop = SimDesktop()
    run = build_run(
        RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, runs_dir=tmp_path / "runs",
                   decisions=HANDSHAKE, fsync=False, desktop=desktop, drill_rate=1.0, drill_seed=5,
                   drill_library=library)
    )  # fmt: skip
    track(run.supervisor)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the first request (a drill)")
        drill = screen.pending
        assert drill is not None and drill.action is not None
        panel = plain(screen.panel)
        assert "DECISION NEEDED" in panel and "drill" not in panel.lower()
        assert "drills on" in plain(app.query_one(GoalBar))  # said, never which request is one
        await pilot.pause(0.3)  # past the input guard
        await pilot.press("n")
        await pilot.press("enter")  # no reason
        await until(pilot, lambda: any("That was a drill" in n.message for n in app._notifications), "the reveal")
        await until(pilot, lambda: screen.pending is not None and screen.pending is not drill, "the real request")
        real = screen.pending
        assert real is not None and real.action is not None and real.action.text == PHRASE
        await pilot.pause(0.3)
        await pilot.press("y")
        await until_ended(pilot, app)
    # the desktop got the script's own actions only, the phrase typed once
    assert desktop.app.values.get("phrase") == PHRASE and desktop.app.proofs == [PHRASE]


async def test_a_drill_looks_exactly_like_the_real_request_it_was_made_from(tmp_path: Path) -> None:
    """The indistinguishability check: a drill made from this very run's decision (same screen, action, reason
    and words), and the real request after it, compared part by part on the same screen: the panel, the batch
    pane, the desktop pane, the goal bar, the footer's keys, the audit pane's request line, the bell and what
    the signal says. The test lists every difference; there is none."""
    from pilot_helpers import drawn, footer_actions

    library = tmp_path / "one"
    made = make_library(tmp_path / "made")
    # the typing decision, made a drill on its own, from a run like this one
    from cua_tui.core.drills import load_library
    from cua_tui.export.drill import add_to_library

    typed = next(d for d in load_library(made) if d.id == "typed-secret")
    add_to_library(library, typed, typed.frame.png)
    desktop = SimDesktop()
    run = build_run(
        RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, runs_dir=tmp_path / "runs",
                   decisions=HANDSHAKE, fsync=False, desktop=desktop, drill_rate=1.0, drill_seed=5,
                   drill_library=library)
    )  # fmt: skip
    track(run.supervisor)
    app = live_app(run)
    signals: list[tuple[str, str]] = []
    app.signal = lambda title, body: signals.append((title, body))  # type: ignore[method-assign]

    def parts() -> dict[str, object]:
        screen = run_screen(app)
        audit = drawn(screen.audit.query_one("#audit-log")).splitlines()
        return {
            "panel": drawn(screen.panel),
            "batch": drawn(screen.batch_pane),
            "desktop": drawn(screen.desktop),
            "goal": drawn(app.query_one(GoalBar)),
            "footer": sorted(footer_actions(app)),
            # its words, not its place in the chain (the drill's own records come before the real request's)
            "audit request line": next(
                (line.split(None, 1)[1].strip() for line in reversed(audit) if "decision requested" in line), ""
            ),
            "signal": signals[-1] if signals else None,
        }

    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the drill")
        drill = screen.pending
        await until(pilot, lambda: screen.desktop.settled, "the desktop pane")
        await pilot.pause(0.3)
        at_drill = parts()
        await pilot.press("y")  # a miss: approved
        await until(pilot, lambda: screen.pending is not None and screen.pending is not drill, "the real request")
        await until(pilot, lambda: screen.desktop.settled, "the desktop pane")
        await pilot.pause(0.3)
        at_real = parts()
        assert at_drill["audit request line"] == "decision requested #2 (action)"
        differences = [name for name in at_drill if at_drill[name] != at_real[name]]
        assert differences == [], {name: (at_drill[name], at_real[name]) for name in differences}
        await pilot.press("y")
        await until_ended(pilot, app)
    assert len(signals) == 2 and desktop.app.proofs == [PHRASE]
