"""One key table (issue 36, point 3): the bindings are made from tui/keys.toml (no widget or dialog writes its
own), and the help screen, the command palette, the decision panel's key line and the manual's key tables
(docs/tui.md, its editor's, docs/commands/fleet.md and replay.md) say the keys they have, no more and no fewer.
``?`` in a live run lists T, p, s; in a fleet's run esc; during a takeover, the takeover's keys; in the
editor, the editor's. Live runs on the sim desktop through the TUI's handshake."""

from __future__ import annotations

import ast
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fleet_cases import opts
from live_guard import no_run_outlives_its_test  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, fleet_screen, live_app, plain, quick_clock, run_screen, sim_run, until
from textual.widgets import Static

from cua_tui.config import Settings
from cua_tui.core.actions import Action, Kind
from cua_tui.core.describe import KEY, request_panel
from cua_tui.core.ports import DecisionRequest, Scope
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.tui.app import CuaApp
from cua_tui.tui.commands import COMMANDS
from cua_tui.tui.fleet_screen import FleetScreen
from cua_tui.tui.help import HelpScreen
from cua_tui.tui.keys import APP, EDITOR, KEYS, Key, help_keys, keys_of
from cua_tui.tui.replay import ReplayScreen
from cua_tui.tui.row_table import RowTable
from cua_tui.tui.run_screen import RunScreen

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SIZE = (160, 48)
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}


def table_keys(page: Path, heading: str) -> set[str]:
    """The keys the first column of the table under ``heading`` names (in backticks; "click" is the mouse)."""
    text = "\n" + page.read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, f"no key table under {heading} in {page.name}"
    return {key.replace("\\\\", "\\") for row in rows for key in re.findall(r"`([^`]+)`", row.split(" | ")[0])}


def said(keys: list[Key]) -> set[str]:
    """The keys the help lists (those with a sentence), each of a comma-joined binding on its own."""
    return {name for key in keys if key.help for name in key.names}


def view_keys(view: type[RunScreen] | type[FleetScreen] | type[ReplayScreen]) -> set[str]:
    return said(keys_of(view.HOMES, view.APP_ACTIONS))


@pytest.mark.parametrize(
    ("page", "heading", "view"),
    [
        ("tui.md", "## Keys", RunScreen),
        ("commands/fleet.md", "## The fleet TUI", FleetScreen),
        ("commands/replay.md", "# cua-tui replay", ReplayScreen),
        ("tui.md", "## Edit, then approve (`e`)", None),
    ],
)
def test_the_manuals_key_tables_name_the_keys_the_bindings_have(page: str, heading: str, view: Any) -> None:
    documented = table_keys(DOCS / page, heading)
    bound = view_keys(view) if view is not None else said(keys_of((EDITOR,)))
    assert documented - bound == set(), f"{page} names keys that are bound nowhere"
    assert bound - documented == set(), f"{page} misses keys that are bound"


def test_the_bindings_are_the_tables_and_the_palette_names_their_keys() -> None:
    by_key = {(b.key, b.action): b for b in CuaApp.BINDINGS if not isinstance(b, tuple)}
    ours = [key for key in KEYS if key.home == APP and not key.textual]
    assert set(by_key) == {(key.key, key.action) for key in ours}
    for key in ours:
        binding = by_key[(key.key, key.action)]
        assert (binding.description, binding.tooltip, binding.show, binding.priority) == (
            key.footer, key.help, key.show, key.priority,
        )  # fmt: skip
    actions = {key.action: key for key in KEYS}
    keyed = [(title, words, action) for title, words, action in COMMANDS if action in actions]
    assert {action for _, _, action in keyed} == {key.action for key in KEYS if key.palette}
    for title, words, action in keyed:
        assert title == actions[action].palette and words.endswith(f"({actions[action].shown})")
    assert [b.key for b in RowTable.BINDINGS if not isinstance(b, tuple)][:3] == ["up", "down", "enter"]


def test_no_widget_or_dialog_writes_its_own_bindings() -> None:
    """Every ``BINDINGS`` of the package is ``bindings(HOME)`` and no ``Binding(`` is written outside
    tui/keys.py: a key is a row of keys.toml, so the footer, the help and the manual all know it."""
    written, assigned = [], []
    for path in sorted((ROOT / "cua_tui").rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and called(node) == "Binding" and where != "cua_tui/tui/keys.py":
                written.append(f"{where}:{node.lineno}")
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(target, ast.Name) and target.id == "BINDINGS" for target in targets):
                    made = isinstance(node.value, ast.Call) and called(node.value) == "bindings"
                    assigned.append((f"{where}:{node.lineno}", made))
    assert written == [], f"bindings written by hand: {written}"
    # the App, the views, the widgets and the dialogs: each takes its keys from the table
    assert len(assigned) >= 15 and [at for at, made in assigned if not made] == []


def called(call: ast.Call) -> str:
    """The name a call calls (``Binding`` of ``Binding(...)`` and of ``binding.Binding(...)``)."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def test_a_comma_joined_key_is_each_of_its_keys_in_the_help() -> None:
    closing = next(key for key in KEYS if key.id == "help_close")
    assert closing.names == ("esc", "?", "q") and closing.shown == "esc, ?, q"
    arrows = [key for key in keys_of((EDITOR,)) if key.action.startswith("nudge") and "10" not in key.action]
    assert help_keys(arrows)[0][0] == "← → ↑ ↓"  # one sentence, one line


def test_the_decision_panels_key_line_names_only_bound_keys_for_their_actions() -> None:
    action = Action(Kind.TYPE, text="hello")
    scope = Scope("typing", "f", "typing into this field")
    request = DecisionRequest("run-1", 1, 0, "call-1", "action", "typing", action, scope=scope)
    words = {"y": "approve", "e": "edit", "n": "reject", "k": "kill", "a": "approve_scope", "z": "zoom"}
    words["t"] = "screen_text"
    bound = {key.shown: key.action for key in KEYS if key.home == APP}
    for compact in (False, True):
        parts = request_panel(request, 1, "the task", field=True, compact=compact, edit=True)
        shown = [text for text, role in parts if role == KEY]
        assert shown and all(bound.get(text) == words[text] for text in shown), shown


def help_keys_shown(app: CuaApp) -> dict[str, str]:
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    return dict(screen.keys)


async def test_question_mark_in_a_live_run_lists_its_keys_and_during_a_takeover_the_takeovers(tmp_path: Path) -> None:
    run = sim_run(tmp_path, [{"actions": [FIELD, {"type": "type", "text": "hello"}]}, {"actions": [{"type": "wait"}]}])
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the typing decision")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        listed = help_keys_shown(app)
        # every key of a lone run's view (esc is a fleet's run's, g a lone run's)
        assert set(listed) == view_keys(RunScreen) - {"esc"} | {"click"}
        assert {"T", "p", "s"} <= set(listed) and "take over" in listed["T"]
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help closed")
        await pilot.press("T")
        await until(pilot, lambda: screen.view.takeover is not None, "the desktop taken over")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help in the takeover")
        listed = help_keys_shown(app)
        assert {"T", "p", "s", "k", "ctrl+\\", "click"} <= set(listed)
        assert listed["T"].startswith("hand the desktop back") and "desktop pane" in listed["click"]
        # nothing answers a decision during a takeover: its keys are not listed
        assert not {"y", "a", "e", "n"} & set(listed)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help closed")
        app.exit()


async def test_question_mark_in_a_fleets_run_lists_esc_back_to_the_fleet(tmp_path: Path) -> None:
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    fleet = Fleet([FleetTask("one", opts(settings))], runs_dir=tmp_path / "runs", concurrency=1)
    app = CuaApp(partial(FleetScreen, fleet=fleet), guard_clock=quick_clock)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(main.items) == 1, "the run's request")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the fleet's help")
        listed = help_keys_shown(app)
        assert set(listed) == view_keys(FleetScreen) and listed["k"].startswith("kill the selected run")
        await pilot.press("escape")
        main.action_open_run("one")
        await until(pilot, lambda: isinstance(app.screen, RunScreen), "the run's view")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the run's help")
        listed = help_keys_shown(app)
        assert "esc" in listed and "back to the fleet" in listed["esc"] and "g" not in listed
        fleet.kill_all()
        await until(pilot, lambda: fleet.done, "every run to end")


async def test_question_mark_in_the_editor_lists_the_editors_keys(tmp_path: Path) -> None:
    # a click on a region the policy asks about: a decision the editor moves by pointing
    send = {"name": "send", "x": 40, "y": 400, "width": 160, "height": 44, "verdict": "confirm", "reason": "sends"}
    run = sim_run(tmp_path, [{"actions": [{"type": "click", "button": "left", "x": 45, "y": 405}]}], regions=(send,))
    app = live_app(run)
    async with app.run_test(size=SIZE) as pilot:
        screen = run_screen(app)
        await until(pilot, lambda: screen.pending is not None, "the click's decision")
        await answer(pilot, "e")
        await until(pilot, lambda: screen.editor is not None and screen.editor.has_focus, "the editor")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help over the editor")
        listed = help_keys_shown(app)
        assert {"← → ↑ ↓", "shift+← shift+→ shift+↑ shift+↓", "tab", "k", "click"} <= set(listed)
        assert listed["enter"].startswith("approve the action as edited") and "nothing is sent" in listed["esc"]
        assert not {"y", "a", "n", "e"} & set(listed)  # they wait while the edit is open
        assert "  shift+← shift+→ shift+↑ shift+↓ move it ten" in plain(app.screen.query_one(Static))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help closed")
        await pilot.press("right")
        assert screen.editor is not None and screen.editor.point == (46, 405)  # the editor's keys again
        await pilot.press("escape")
        await until(pilot, lambda: screen.editor is None, "the editor closed")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help at the decision")
        listed = help_keys_shown(app)
        assert {"y", "e", "esc"} - set(listed) == {"esc"} and "tab" not in listed  # a lone run's keys again
        app.exit()


async def test_the_footer_is_composed_again_only_when_its_keys_change(tmp_path: Path) -> None:
    """A refresh of the bindings that changes none of the footer's keys leaves its keys as they are (Textual's
    footer mounted and styled every key again at each); a decision answered changes them, and they change."""
    from textual.widgets._footer import FooterKey

    from cua_tui.tui.footer import KeysFooter

    run = sim_run(tmp_path, [{"text": "I will type.", "actions": [FIELD, {"type": "type", "text": "hello"}]}])
    app = live_app(run)
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision")
        footer = main.query_one(KeysFooter)

        def offered() -> set[str]:
            return {key.action for key in footer.query(FooterKey) if not key.has_class("-disabled")}

        await until(pilot, lambda: "approve" in offered(), "y offered in the footer")
        keys = list(footer.query(FooterKey))
        for _ in range(3):
            app.refresh_bindings()
            await pilot.pause()
        assert list(footer.query(FooterKey)) == keys  # the same widgets: nothing was composed again
        await answer(pilot, "y")
        await until(pilot, lambda: "approve" not in offered(), "y no longer offered once answered")
        assert list(footer.query(FooterKey)) != keys
        run.supervisor.kill(by="test")
