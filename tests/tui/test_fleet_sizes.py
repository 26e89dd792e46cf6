"""The fleet at any size (issue 35, point 3): what a y on the selected row approves (the action, its typed text
or the words at its target, the run or the group) is on the terminal, whole up to 160 characters and past
that its first 160 and "N more: enter reads all", at 80x24, 100x30 and 160x48; enter then shows all of it.
Real sim runs through the fleet runner, the fleet TUI under Pilot, what is read off the terminal's cells."""

from __future__ import annotations

import hashlib
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fleet_cases import FORM, opts
from pilot_helpers import answer, fleet_screen, quick_clock, until

from cua_tui.config import Settings
from cua_tui.core import describe
from cua_tui.core.actions import parse_openai
from cua_tui.core.fleet_queue import QueueItem
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.ports import DecisionRequest
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.tui.app import CuaApp
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.fleet_parts import SHOWN_CHARS, AllText
from cua_tui.tui.fleet_screen import RUN_CUT, FleetScreen
from cua_tui.tui.row_table import RowTable

pytestmark = pytest.mark.timeout(90)

SIZES = [(80, 24), (100, 30), (160, 48)]
WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]


def words(length: int) -> str:
    """Words, one space apart, ``length`` characters long and ending in a letter."""
    text = " ".join(WORDS * 10)[:length]
    return text[:-1] + "z" if text.endswith(" ") else text


EXACT = words(SHOWN_CHARS)
LONG = "x" + words(229)  # its character 160 (0-based) a letter: a text cut there cannot pass for whole


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})


def typing(text: str) -> dict[str, Any]:
    script: dict[str, Any] = json.loads(json.dumps(FORM))
    script["turns"][0]["actions"][1]["text"] = text
    return script


def flat(text: str) -> str:
    return " ".join(text.split())


def drawn(app: CuaApp, widget: Any) -> str:
    """The characters the terminal shows inside ``widget``'s region, line by line, as one line of words."""
    region = widget.region
    strips = app.screen._compositor.render_strips()
    lines = [strips[y].text[region.x : region.right] for y in range(region.y, min(region.bottom, len(strips)))]
    return flat(" ".join(line.strip("┃│ ") for line in lines))


def decisions(path: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in (Path(path) / "audit.jsonl").read_text().splitlines()]
    return [r for r in records if r["kind"] == "decision" and r["by"] != "policy"]


def typed_sha(path: str, turn: int, index: int) -> str:
    records = [json.loads(line) for line in (Path(path) / "audit.jsonl").read_text().splitlines()]
    (proposal,) = [r for r in records if r["kind"] == "proposal" and (r["turn"], r["index"]) == (turn, index)]
    return str(proposal["action"]["text_sha256"])


def test_the_texts_are_what_they_claim() -> None:
    assert len(EXACT) == SHOWN_CHARS and len(LONG) == 230 and LONG[SHOWN_CHARS] != " "


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_what_y_approves_is_on_the_terminal_whole_at_every_size(
    tmp_path: Path, settings: Settings, size: tuple[int, int]
) -> None:
    fleet = Fleet(
        [FleetTask("exact", opts(settings, typing(EXACT))), FleetTask("long", opts(settings, typing(LONG)))],
        runs_dir=tmp_path / "runs",
        concurrency=2,
    )
    app = CuaApp(partial(FleetScreen, fleet=fleet), guard_clock=quick_clock)
    main = fleet_screen(app)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(main.items) == 2, "both requests")
        queue = app.query_one("#queue", RowTable)
        panel = app.query_one(DecisionPanel)
        for item in list(main.items):
            queue.move_cursor(row=queue.keys.index(str(item.ticket)))

            def chosen(item: QueueItem = item) -> bool:
                return main.selected is item

            await until(pilot, chosen, f"{item.task} selected")
            await until(pilot, lambda: not main.guard.waiting, "the decision painted")
            await pilot.pause()
            shown = drawn(app, panel)
            text = EXACT if item.task == "exact" else LONG
            assert f"action type {len(text)} characters" in shown, shown
            assert f"run {item.task} · run {item.run_id}" in shown, shown
            assert "y approve" in shown and "n reject" in shown, shown
            assert flat(text[:SHOWN_CHARS]) in shown, shown
            if text is EXACT:
                assert "more:" not in shown, shown
            else:
                assert flat(text[: SHOWN_CHARS + 1]) not in shown, shown
                assert f"{len(LONG) - SHOWN_CHARS} more: enter reads all" in shown, shown
            # the screen is shown where there is room for it, and said not to be where there is not
            narrow = size[0] < 100
            assert main.desktop.on_screen is not narrow
            assert ("screen not shown at this size" in shown) is narrow, shown
        # enter on the long one: all of it, literally; esc returns to the same decision
        long = next(item for item in main.items if item.task == "long")
        queue.move_cursor(row=queue.keys.index(str(long.ticket)))
        await until(pilot, lambda: main.selected is long and not main.guard.waiting, "the long one selected")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AllText), "the whole text")
        await pilot.pause()
        body = app.screen.query_one("#all-text-body")
        assert flat(LONG) in drawn(app, body)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "back to the fleet")
        await until(pilot, main.guard.passed, "the guard")
        await answer(pilot, "y")
        await until(pilot, lambda: len(main.items) == 1, "the long one answered")
        fleet.kill_all()
        await until(pilot, lambda: fleet.done, "every run to end")
    row = next(r for r in fleet.rows() if r.task == "long")
    (decision,) = decisions(row.path)
    # the y went to the request whose text was shown: its SHA-256 is the one recorded when it was proposed
    assert decision["decision"] == "approve"
    assert typed_sha(row.path, decision["turn"], decision["index"]) == hashlib.sha256(LONG.encode()).hexdigest()
    assert (decision["screen"] == "") is (size[0] < 100)


async def test_a_group_says_where_all_its_text_is_read(tmp_path: Path, settings: Settings) -> None:
    """On a group's row enter lists its runs; on one of them, enter reads all."""
    fleet = Fleet(
        [FleetTask(name, opts(settings, typing(LONG))) for name in ("one", "two")],
        runs_dir=tmp_path / "runs",
        concurrency=2,
    )
    app = CuaApp(partial(FleetScreen, fleet=fleet), guard_clock=quick_clock)
    main = fleet_screen(app)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: main.selected_group is not None, "the group of two")
        await until(pilot, lambda: not main.guard.waiting, "the decision painted")
        await pilot.pause()
        panel = app.query_one(DecisionPanel)
        shown = drawn(app, panel)
        group = main.selected_group
        assert group is not None
        named = ", ".join(m.task for m in group.members)
        assert f"group 2 runs ask this on the same screen: {named} · y / n / a answer each" in shown, shown
        assert flat(LONG[:SHOWN_CHARS]) in shown and "70 more: enter lists the runs, enter on one reads all" in shown
        await pilot.press("enter", "down")
        await until(pilot, lambda: main.selected_group is None and main.selected is not None, "one run of it")
        await pilot.pause()
        assert "70 more: enter reads all" in drawn(app, panel)
        fleet.kill_all()
        await until(pilot, lambda: fleet.done, "every run to end")


def test_the_words_at_a_target_are_whole_up_to_160_then_cut_saying_where_the_rest_is() -> None:
    click = parse_openai({"type": "click", "x": 10, "y": 20}, Scaling(Size(100, 100), Size(100, 100)))
    request = DecisionRequest("run", 1, 0, "c1", "action", "why", click)
    label = "Pay " + "x" * 150 + " now: 9,999"  # 165 characters
    text = "".join(part for part, _ in describe.request_panel(request, destination=label[:SHOWN_CHARS], cut=RUN_CUT))
    assert f"action  click “{label[:SHOWN_CHARS]}” at (10, 20)\n" in text and "more:" not in text
    text = "".join(part for part, _ in describe.request_panel(request, destination=label, cut=RUN_CUT))
    assert f"click “{label[:SHOWN_CHARS]}” at (10, 20)\n        5 more: t reads the screen\n" in text
    # a run's own view, with no cut, keeps its shorter line
    assert "“Pay xxx" in "".join(part for part, _ in describe.request_panel(request, destination=label))


async def test_a_terminal_narrowed_under_a_decision_says_the_screen_is_gone_and_guards_again(
    tmp_path: Path, settings: Settings
) -> None:
    """The desktop pane leaves the layout while a decision is shown: the panel says so, the guard starts again
    from then, and the answer records that no screen was shown."""
    fleet = Fleet([FleetTask("one", opts(settings, typing(EXACT)))], runs_dir=tmp_path / "runs", concurrency=1)
    app = CuaApp(partial(FleetScreen, fleet=fleet), guard_clock=quick_clock)
    main = fleet_screen(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: main.selected is not None, "the request")
        await until(pilot, main.guard.passed, "the guard")
        assert main.desktop.on_screen and not main.panel.unseen
        before = main.guard.painted_at
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: main.panel.unseen, "the panel saying the screen is not shown")
        assert not main.desktop.on_screen and "screen  not shown at this size" in str(main.panel.render())
        await until(pilot, lambda: main.guard.painted_at not in (None, before), "the guard started again")
        await until(pilot, main.guard.passed, "the guard")
        await answer(pilot, "y")
        await until(pilot, lambda: not main.items, "the request answered")
        fleet.kill_all()
        await until(pilot, lambda: fleet.done, "the run to end")
    (row,) = fleet.rows()
    (decision,) = decisions(row.path)
    assert decision["decision"] == "approve" and decision["screen"] == ""
