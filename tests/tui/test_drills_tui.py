"""A drill in the TUI (issue 41): at drill_rate 1.0 a drill is pending before each real request, shown as a
request is (its action the batch's pending row, its screen on the pane, its line in the audit pane as a
request's), answered with the same keys, revealed at once, and the real request it held back comes next;
nothing a drill shows ever reaches the desktop."""

from __future__ import annotations

from pathlib import Path

from drill_cases import SIM_FORM, make_library
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, live_app, plain, run_screen, until, until_ended

from cua_tui.build import HANDSHAKE, Run, RunOptions, build_run
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.tui.goal import GoalBar

SIZE = (160, 48)


def drilled_run(runs: Path, library: Path, *, rate: float = 1.0, desktop: SimDesktop | None = None) -> Run:
    """A sim run of the form answered through the TUI, with drills from ``library`` only at ``rate``."""
    run = build_run(
        RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, runs_dir=runs,
                   decisions=HANDSHAKE, fsync=False, desktop=desktop or SimDesktop(), drill_rate=rate, drill_seed=5,
                   drill_library=library, drill_shipped=False)
    )  # fmt: skip
    track(run.supervisor)
    return run


async def test_a_drill_is_answered_like_a_request_revealed_and_the_real_one_follows(tmp_path: Path) -> None:
    library = make_library(tmp_path / "made")
    desktop = SimDesktop()
    run = drilled_run(tmp_path / "runs", library, desktop=desktop)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the first request (a drill)")
        drill = screen.pending
        assert drill is not None and drill.action is not None
        panel = plain(screen.panel)
        assert "DECISION NEEDED" in panel and "drill" not in panel.lower()
        assert "drills on" in plain(app.query_one(GoalBar))  # said, never which request is one
        await answer(pilot, "n")  # once past the input guard
        await pilot.press("enter")  # no reason
        await until(pilot, lambda: any("That was a drill" in n.message for n in app._notifications), "the reveal")
        await until(pilot, lambda: screen.pending is not None and screen.pending is not drill, "the real request")
        real = screen.pending
        assert real is not None and real.action is not None and real.action.text == PHRASE
        # the panel says it, above the request that follows, until that one is answered
        await until(pilot, lambda: "That was a drill" in plain(screen.panel), "the reveal in the panel")
        await answer(pilot, "y")
        await until_ended(pilot, app)
        assert not screen.panel.revealed
    # the desktop got the script's own actions only, the phrase typed once
    assert desktop.app.values.get("phrase") == PHRASE and desktop.app.proofs == [PHRASE]


async def test_a_drill_looks_exactly_like_the_real_request_it_was_made_from(tmp_path: Path) -> None:
    """The indistinguishability check: a drill made from a run's decision (same screen, action, reason and
    words), shown in one run, and the real request shown in another run of the same script with drills on
    but none due: compared part by part on the same screen (the panel, the batch pane, the desktop pane, the
    goal bar, the footer's keys, the audit pane's request line, the bell and what the signal says). The test
    lists every difference; there is none."""
    from pilot_helpers import drawn, footer_actions

    from cua_tui.core.drills import load_library
    from cua_tui.export.drill import add_to_library

    made = make_library(tmp_path / "made")
    library = tmp_path / "one"  # the typing decision, made a drill on its own
    typed = next(d for d in load_library(made) if d.id == "typed-secret")
    add_to_library(library, typed, typed.frame.png)

    async def first_request(rate: float, name: str) -> dict[str, object]:
        run = drilled_run(tmp_path / name, library, rate=rate)
        app = live_app(run)
        signals: list[tuple[str, str]] = []
        app.signal = lambda title, body: signals.append((title, body))  # type: ignore[method-assign]
        async with app.run_test(size=SIZE) as pilot:
            screen = run_screen(app)
            await until(pilot, lambda: screen.pending is not None, "the first request")
            await until(pilot, lambda: screen.desktop.settled, "the desktop pane")
            await pilot.pause(0.3)
            audit = drawn(screen.audit.query_one("#audit-log")).splitlines()
            seen: dict[str, object] = {
                "panel": drawn(screen.panel),
                "batch": drawn(screen.batch_pane),
                "desktop": drawn(screen.desktop),
                "goal": drawn(app.query_one(GoalBar)),
                "footer": sorted(footer_actions(app)),
                # its words, not its place in the chain (a drill's own records come before the request's)
                "audit request line": next(
                    (line.split(None, 1)[1].strip() for line in reversed(audit) if "decision requested" in line), ""
                ),
                "signals": list(signals),
            }
            run.supervisor.kill()
        return seen

    drill, real = await first_request(1.0, "drilled"), await first_request(1e-12, "real")
    assert drill["audit request line"] == "decision requested #2 (action)" and "drills on" in str(real["goal"])
    differences = [name for name in drill if drill[name] != real[name]]
    assert differences == [], {name: (drill[name], real[name]) for name in differences}


async def test_in_a_fleet_a_drills_row_and_panel_look_as_the_real_requests_would(tmp_path: Path) -> None:
    """The fleet screen of this process: the first request of a one-run fleet at drill_rate 1.0 (a drill made
    from that very moment) and at ~0 (the real one). The queue row, the panel and the footer's keys: the test
    lists any difference; there is none."""
    import difflib
    import re
    from functools import partial

    from fleet_cases import opts
    from pilot_helpers import drawn, fleet_screen, footer_actions, guard_of, quick_clock

    from cua_tui.config import Settings
    from cua_tui.core.drills import load_library
    from cua_tui.export.drill import add_to_library
    from cua_tui.fleet_runner import Fleet, FleetTask
    from cua_tui.tui.app import CuaApp
    from cua_tui.tui.fleet_screen import FleetScreen
    from cua_tui.tui.row_table import RowTable

    made = make_library(tmp_path / "made")
    library = tmp_path / "one"
    typed = next(d for d in load_library(made) if d.id == "typed-secret")
    add_to_library(library, typed, typed.frame.png)
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "none.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path)})

    async def first(rate: float, name: str) -> dict[str, object]:
        task = FleetTask("form", opts(settings, SIM_FORM, drill_rate=rate, drill_seed=5, drill_library=library,
                                      drill_shipped=False, desktop=SimDesktop()))  # fmt: skip
        fleet = Fleet([task], runs_dir=tmp_path / name, concurrency=1, tasks_sha256="ab" * 32)
        app = CuaApp(partial(FleetScreen, fleet=fleet, grouping=False), guard_clock=quick_clock)
        async with app.run_test(size=(200, 50)) as pilot:
            main = fleet_screen(app)
            await until(pilot, lambda: main.selected is not None, "the first request")
            await until(pilot, guard_of(app).passed, "its input guard")  # its screen painted, its keys live
            await pilot.pause()
            rows = drawn(app.query_one("#queue", RowTable)).splitlines()
            seen: dict[str, object] = {
                "row": [" ".join(r.split()[:-2]) for r in rows if "form" in r],  # its waited time left out
                "panel": re.sub(r"run \d{8}-\d{6}-[0-9a-f]{6}", "run (its id)", drawn(main.panel)),
                "keys": sorted(footer_actions(app)),
                # the header says drills are on, never which request is one
                "drills on": "drills on" in drawn(app.query_one("#fleet-header")),
            }
            fleet.kill_all()
        return seen

    drill, real = await first(1.0, "drilled"), await first(1e-12, "real")
    assert drill["row"] and "DECISION NEEDED" in str(drill["panel"]) and drill["drills on"] is True
    differences = {name: (drill[name], real[name]) for name in drill if drill[name] != real[name]}
    told = [
        line
        for a, b in differences.values()
        for line in difflib.unified_diff(str(a).splitlines(), str(b).splitlines(), "drill", "real", lineterm="")
    ]
    assert differences == {}, "\n".join(told)


async def test_while_a_drill_is_up_the_audit_pane_reads_its_place_as_the_drills(tmp_path: Path) -> None:
    """A shipped drill (a 14-character password) in front of the form's typing (16 characters): while it is
    up, the live audit pane's lines of its place (the turn's words, the proposal, the verdict) read as the
    drill's, as a request of that place would have come with them; once it is answered, as written."""
    from pilot_helpers import answer

    from cua_tui.core.drills import load_library
    from cua_tui.export.drill import add_to_library
    from cua_tui.labs import SHIPPED_DRILLS

    library = tmp_path / "one"
    password = next(d for d in load_library(SHIPPED_DRILLS) if d.id == "password-1")
    add_to_library(library, password, password.frame.png)
    run = drilled_run(tmp_path / "runs", library)
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)

        def lines() -> str:
            return "\n".join(entry.line for entry in screen.audit.audit_list.entries)

        await until(pilot, lambda: screen.pending is not None, "the drill")
        await until(pilot, lambda: "proposal #2 type 14 characters" in lines(), "the drill's proposal")
        audit = lines()
        assert "type 16 characters" not in audit and "Entering the" in audit  # the drill's words, not the turn's
        # its typing goes to its own screen's field, which the panel names as a request's would
        assert screen.view.focused == password.focus == (280, 240)
        assert "(280, 240)" in plain(screen.panel)
        assert "Hunter2" not in audit  # typed text never on a line
        await answer(pilot, "n")
        await pilot.press("enter")
        await until(pilot, lambda: "proposal #2 type 16 characters" in lines(), "the lines as written")
        assert "type 14 characters" not in lines()
        assert screen.view.focused == (250, 182)  # the run's own field again
        run.supervisor.kill()
