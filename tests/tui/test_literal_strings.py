"""No run string reaches Rich as markup, anywhere (issue #20, point 8).

Markup and terminal escapes are fed into every run-derived string - the task, the model's text and its
safety checks, typed text, error texts and the end reason, egress hosts, the policy's name, fleet task
names - and each view is driven with Pilot: the live run (the real OpenAI adapter against the scripted
model server on 127.0.0.1, the sim desktop), the command palette and the audit search, replay, replay
``--follow`` of a run still being written, the fleet TUI and a fleet run's live view, and the
notifications each of them gives. Every place shows the string literally (markup as its brackets, control
characters as visible symbols), no escape byte reaches what is drawn, and no App crashes: ``[/]`` parsed as
markup raises, and ``[@click=app.quit]`` would become a link that quits.
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from literal_runs import FIELD, HOSTILE, IN_JSON, MARKUP, SHOWN, click, finish, forged, recorded
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from model_server import OPENAI_PATH, ModelServer, Reply, computer_call, message, openai_response
from pilot_helpers import answer, fleet_screen, quick_clock, replay_screen, run_screen, until, until_ended
from textual import events
from textual.app import App
from textual.command import CommandPalette
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input
from textual.widgets._toast import Toast

from cua_tui.agents.openai_agent import OpenAIAgent
from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.config import Settings
from cua_tui.core.runlog import RunReader
from cua_tui.core.text import hidden, visible
from cua_tui.fleet_runner import Fleet, FleetTask
from cua_tui.tui.audit_list import AuditList
from cua_tui.tui.audit_pane import AuditPane
from cua_tui.tui.batch import BatchPane
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.desktop_view import DesktopView
from cua_tui.tui.detail import COPIED_SHOWN, DetailScreen
from cua_tui.tui.fleet_screen import fleet_app
from cua_tui.tui.goal import GoalBar
from cua_tui.tui.help import HelpScreen
from cua_tui.tui.replay import ChainState, chain_state, replay_app
from cua_tui.tui.row_table import RowTable
from cua_tui.tui.run_screen import RunScreen, supervisor_app
from cua_tui.tui.source import LiveRun
from cua_tui.tui.status import StatusBar
from cua_tui.tui.text_lines import TextLines

pytestmark = pytest.mark.timeout(90)

SIZE = (220, 60)
KEY = "sk-test-CUA-TUI-SECRET-literal-7e1f"


# ---------------------------------------------------------------------------------------------------
# What is on screen
# ---------------------------------------------------------------------------------------------------
def squeezed(text: str) -> str:
    """``text`` without white space and box-drawing characters: a string a pane wrapped or framed reads whole."""
    return "".join(c for c in text if not c.isspace() and not "\u2500" <= c <= "\u259f")


def drawn(widget: Widget) -> str:
    """What the widget draws, its border and border titles included, line by line."""
    width, height = widget.outer_size
    lines = widget.render_lines(Region(0, 0, width, height))
    return "\n".join("".join(segment.text for segment in line) for line in lines)


def shows(widget: Widget, literal: str = SHOWN) -> bool:
    """The widget draws ``literal`` (wrapped or not), and no escape or bell byte."""
    text = drawn(widget)
    assert "\x1b" not in text and "\x07" not in text, text
    assert not any(hidden(c) for c in text if c not in " \n"), text  # nothing drawn that draws as nothing
    return squeezed(literal) in squeezed(text)


def screen_text(app: App[Any]) -> str:
    """Everything the terminal shows now (the top screen, its notifications included), line by line."""
    return "\n".join("".join(segment.text for segment in strip) for strip in app.screen._compositor.render_strips())


def check_screen(app: App[Any]) -> None:
    """Nothing on screen carries an escape or a bell, and no link on it quits the App."""
    text = screen_text(app)
    assert "\x1b" not in text and "\x07" not in text
    assert not any(hidden(c) for c in text if c not in " \n"), text
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            meta = segment.style.meta if segment.style is not None else {}
            assert "app.quit" not in str(meta.get("@click", "")), meta


def toasts(app: App[Any]) -> list[Toast]:
    return list(app.screen.query(Toast))


def toast_shows(app: App[Any], literal: str = SHOWN) -> bool:
    return any(shows(toast, literal) for toast in toasts(app))


def alive(app: App[Any]) -> None:
    assert app.is_running and app.return_code is None, "the App crashed"


# ---------------------------------------------------------------------------------------------------
# The live run: the real OpenAI adapter against the scripted model server on loopback
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def agent(server: ModelServer) -> OpenAIAgent:
    return OpenAIAgent(KEY, base_url=server.openai_base_url, timeout=10.0, max_retries=0)


def hostile_model(server: ModelServer) -> None:
    """The model's words, a safety check and typed text carry the string; then its API answers 500 with it."""
    check = {"id": "sc_1", "code": "malicious_instructions", "message": HOSTILE}
    batch = (click(FIELD), {"type": "type", "text": HOSTILE})
    server.script(
        OPENAI_PATH,
        openai_response(message(HOSTILE), computer_call("call_1", *batch, checks=[check])),
        Reply({"error": {"message": HOSTILE, "type": "server_error"}}, status=500),
    )


async def test_the_live_run_the_palette_and_its_notifications_show_run_strings_literally(
    tmp_path: Path, server: ModelServer
) -> None:
    hostile_model(server)
    model = agent(server)
    run = build_run(
        RunOptions(
            task=HOSTILE,
            backend="sim",
            agent_impl=model,
            agent_label=model.name,
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
        )
    )
    assert run.handshake is not None
    app = supervisor_app(LiveRun(track(run.supervisor), run.handshake), guard_clock=quick_clock)
    main = run_screen(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        # the safety check: its message, the task line, the model's words
        await until(pilot, lambda: main.pending is not None and main.pending.kind == "safety_check", "the safety check")
        await pilot.pause()
        panel = app.query_one(DecisionPanel)
        assert shows(panel) and shows(panel, f"task{SHOWN}")
        assert shows(app.query_one(GoalBar), f"TASK{SHOWN}")
        assert shows(app.query_one(".model-text"), f"model:{SHOWN}")
        check_screen(app)
        await answer(pilot, "y")  # it covers the typing it gates (shown, in full, in the same panel)
        # the model API's error text is the end reason
        await until_ended(pilot, app)
        assert main.final_status == "error"
        assert shows(app.query_one(StatusBar), f"HTTP 500: {MARKUP}")  # the reason is cut at 80 characters
        check_screen(app)

        # the palette: search the audit log, with the string pasted into the search box
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the command palette")
        await pilot.press(*"search audit")
        await until(pilot, lambda: "Search audit log" in screen_text(app), "the palette's entry")
        check_screen(app)
        await pilot.press("enter")
        await until(pilot, lambda: bool(app.query("#audit-search")), "the audit search box")
        search = app.query_one("#audit-search", Input)
        search.post_message(events.Paste(f"{HOSTILE} kind:{HOSTILE}\nsecond line"))  # pasted from the page
        await until(pilot, lambda: bool(search.value), "the paste taken")
        assert search.value == visible(f"{HOSTILE} kind:{HOSTILE}")  # its first line, made visible
        pane = app.query_one(AuditPane)
        unknown = visible(", ".join(pane.audit_list.search.unknown), limit=80)  # the kinds as typed, lowercased
        assert "[/]" in unknown
        assert shows(pane, f"filter:{visible(search.value, limit=40)}")  # the unknown kinds after it: cut here
        check_screen(app)
        await pilot.press("enter")  # an unknown kind is said in a notification
        await until(pilot, lambda: toast_shows(app, f"no event kind {unknown}; kinds:"), "the unknown kind said")
        alive(app)

        # an event in full, its JSON copied (the notification says what was copied)
        search = app.query_one("#audit-search", Input)
        search.value = "kind:model_turn"
        await pilot.press("enter", "enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the event in full")
        assert shows(app.screen.query_one("#detail-text"), f'"text":"{IN_JSON}"')
        await pilot.press("j")
        record = next(e for e in app.query_one(AuditList).entries if e.kind == "model_turn").record()
        copied = json.dumps(record, ensure_ascii=False, default=str)
        shown = visible(copied, limit=COPIED_SHOWN)
        await until(pilot, lambda: toast_shows(app, f"copied event JSON: {shown}"), "copied")
        check_screen(app)
        alive(app)


# ---------------------------------------------------------------------------------------------------
# Replay and --follow: a real run, and what a hostile sandbox adds to its record
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(tmp_path_factory.mktemp("real"))


async def test_replay_shows_every_recorded_string_literally(real_run: Path, tmp_path: Path) -> None:
    path, tail, writer = forged(real_run, tmp_path / "forged")
    finish(path, writer, tail)
    app = replay_app(RunReader(path), chain_state(path))
    main = replay_screen(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: bool(main.steps), "the steps")
        await pilot.pause()
        goal = app.query_one(GoalBar)
        assert shows(goal, f"TASK{SHOWN}") and shows(goal, f"mayreach{SHOWN}·policy{SHOWN}")
        assert shows(app.query_one(".model-text"), f"model:{SHOWN}")
        check_screen(app)
        await pilot.press("g")  # the step of the refused egress: the malformed action, its host and reason
        await until(pilot, lambda: main.selected == len(main.steps) - 1, "the egress step")
        await pilot.pause()
        step = app.query_one("#step")
        assert shows(step, f"egressrefusedCONNECT{SHOWN}:443·{SHOWN}")
        assert shows(step, f"malformed{MARKUP}")
        assert any(shows(row, f"{MARKUP}") for row in app.query_one(BatchPane).rows.values())
        check_screen(app)
        await pilot.press("question_mark")  # the policy's name in the help
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        assert shows(app.screen.query_one("Static"), f"policy{SHOWN}")
        check_screen(app)
        await pilot.press("escape")
        # the first step's audit events: run_started and the model's turn in full
        await pilot.press("home")
        await pilot.pause()
        audit = app.query_one("#audit-log", AuditList)
        assert shows(audit, f"says:{SHOWN[:48]}")  # as wide as the pane: the rest scrolls into view
        turn = next(e for e in audit.entries if e.kind == "model_turn")
        at = turn.line.index(SHOWN)
        # the model's words whole, and their stand-ins (only those) drawn reversed
        assert [turn.line[a:b] for a, b in turn.marks if a >= at] == [visible(c) for c in HOSTILE if hidden(c)]
        app.query_one(AuditPane).action_search()
        app.query_one("#audit-search", Input).value = "kind:run_started"
        await pilot.press("enter", "enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "run_started in full")
        assert shows(app.screen.query_one("#detail-text"), f'"task":"{IN_JSON}"')
        check_screen(app)
        alive(app)


async def test_follow_shows_the_end_reason_of_a_hostile_run_literally(real_run: Path, tmp_path: Path) -> None:
    """The run ends while the replay follows it: the end reason (a sandbox's error text) is a notification,
    once; as markup, ``[/]`` killed the App with a traceback and exit status 0."""
    path, tail, writer = forged(real_run, tmp_path / "forged")

    def verdict() -> ChainState:
        return chain_state(path, follow=True)

    app = replay_app(RunReader(path), verdict(), follow=True, reverify=verdict)
    main = replay_screen(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: bool(main.steps), "the steps")
        finish(path, writer, tail)
        await until(pilot, lambda: main.ended_seen, "the end read")
        await until(pilot, lambda: toast_shows(app, f"the run ended: error · {SHOWN}"), "the end said")
        await until(pilot, lambda: main.sealed_seen, "the seal read")
        await pilot.pause()
        assert shows(app.query_one("#banner"), "the run has ended")
        assert shows(app.query_one("#step"), f"egressrefusedCONNECT{SHOWN}:443·{SHOWN}")
        check_screen(app)
        alive(app)


# ---------------------------------------------------------------------------------------------------
# The fleet TUI and a fleet run's live view
# ---------------------------------------------------------------------------------------------------
async def test_the_fleet_shows_task_names_texts_and_reasons_literally(tmp_path: Path, server: ModelServer) -> None:
    server.script(OPENAI_PATH, Reply({"error": {"message": HOSTILE, "type": "server_error"}}, status=500))
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    script = {"turns": [{"text": HOSTILE, "actions": [click(FIELD), {"type": "type", "text": HOSTILE}]}]}
    base = RunOptions(backend="sim", task=HOSTILE, decisions=HANDSHAKE, fsync=False, settings=settings)
    model = agent(server)
    failing = f"{HOSTILE}-model"
    tasks = [
        FleetTask(HOSTILE, dataclasses.replace(base, agent=None, script=script)),
        FleetTask(failing, dataclasses.replace(base, agent_impl=model, agent_label=model.name)),
    ]
    fleet = Fleet(tasks, runs_dir=tmp_path / "runs", concurrency=2, tasks_sha256="ab" * 32)
    app = fleet_app(fleet)
    main = fleet_screen(app)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: any(i.task == HOSTILE for i in main.items), "the typing request queued")
        queue = app.query_one("#queue", RowTable)
        queue.move_cursor(row=next(i for i, item in enumerate(main.items) if item.task == HOSTILE))
        await until(pilot, lambda: main.selected is not None and main.selected.task == HOSTILE, "it selected")
        await pilot.pause()
        assert shows(queue, "[/][@click=")  # the task column is narrow: the name cut short, literally
        assert shows(app.query_one("#runs", RowTable), SHOWN[:40])
        assert shows(app.query_one("#queue-why", TextLines), f"TRANSMISSION{SHOWN}·")
        assert shows(app.query_one(DecisionPanel)) and shows(app.query_one(DecisionPanel), f"task{SHOWN}")
        assert shows(app.query_one(DesktopView), f"Desktop·{SHOWN}·turn1")
        check_screen(app)

        # its full live view: the pane's title, the goal, the model's words
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen), "the run's live view")
        await pilot.pause()
        screen = app.screen
        goal = screen.query_one(GoalBar)
        assert shows(goal, f"TASK{SHOWN}") and shows(goal, f"fleettask{SHOWN})")
        assert shows(screen.query_one(".model-text"), f"model:{SHOWN}")
        assert shows(screen.query_one(DesktopView), f"Desktop·{SHOWN}(live)")
        check_screen(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RunScreen), "back to the fleet")

        # the model's run ends on its API's error text: the table's row and the reason under it
        await until(pilot, lambda: fleet.row(failing).ended, "the model's run to end")
        runs = app.query_one("#runs", RowTable)
        runs.focus()
        runs.move_cursor(row=runs.keys.index(failing))
        await until(pilot, lambda: shows(app.query_one("#run-why", TextLines), f"HTTP500:{SHOWN}"), "its reason")
        assert shows(app.query_one("#run-detail", TextLines), visible(failing, limit=64))

        # k kills the selected run (the table's row now the hostile one): said literally
        runs.move_cursor(row=runs.keys.index(HOSTILE))
        await pilot.pause()
        await pilot.press("k")
        await until(
            pilot, lambda: toast_shows(app, f"kill switch: {visible(HOSTILE, limit=64)} stops"), "the kill said"
        )
        await until(pilot, lambda: fleet.done and main.finished, "every run to end")
        check_screen(app)
        alive(app)


# ---------------------------------------------------------------------------------------------------
# The sources: the ways a str becomes markup in Textual, none of them taken
# ---------------------------------------------------------------------------------------------------
TUI = Path(__file__).parents[2] / "cua_tui" / "tui"


def built_str(node: ast.expr) -> bool:
    """An expression that builds a str at run time (an f-string, a concatenation, a format): what would
    carry run text into a markup parser."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(part, ast.FormattedValue) for part in node.values)
    if isinstance(node, ast.BinOp):
        return built_str(node.left) or built_str(node.right) or isinstance(node.left, ast.Constant)
    if isinstance(node, ast.IfExp):
        return built_str(node.body) or built_str(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("visible", "str"):
        return True  # visible() makes control characters visible, not markup literal
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"


def test_no_tui_source_hands_textual_a_built_str_as_markup() -> None:
    """Textual parses a str as markup in ``notify`` (unless ``markup=False``), border titles, ``Static`` and
    its ``update``, labels, buttons, options and the palette's hits: every notification says
    ``markup=False``, and a title or content built at run time is a ``rich.text.Text``, never a str."""
    found: list[str] = []
    for source in sorted(TUI.glob("*.py")):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            where = f"{source.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "notify":
                markup = next((k.value for k in node.keywords if k.arg == "markup"), None)
                if not (isinstance(markup, ast.Constant) and markup.value is False):
                    found.append(f"{where}: notify without markup=False")
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    title_attrs = ("border_title", "border_subtitle")
                    if isinstance(target, ast.Attribute) and target.attr in title_attrs and built_str(node.value):
                        found.append(f"{where}: {target.attr} given a built str (parsed as markup)")
            if isinstance(node, ast.Call) and node.args and built_str(node.args[0]):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in ("Static", "Label", "Button", "Option", "Hit", "DiscoveryHit", "update"):
                    found.append(f"{where}: {name}() given a built str (parsed as markup)")
    assert found == []
