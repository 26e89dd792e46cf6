"""The scripted model scenarios in the TUI (issue 5, item 6): Pilot tests where the App supervises a live run
whose agent is the REAL OpenAI or Anthropic adapter, its official SDK talking HTTP to the scripted server on
127.0.0.1 (tests/model_server.py), on the in-process sim desktop.

Wired as ``cua-tui run --agent openai|anthropic`` wires the TUI: a Supervisor, decisions through the
HandshakeApprover, supervisor_app(LiveRun(...)). Each scenario checks both sides: what the reviewer sees and
presses, and what the model server RECEIVED as a consequence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from model_server import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    ModelServer,
    Reply,
    anthropic_message,
    computer_call,
    message,
    openai_response,
    reasoning,
    text_block,
    tool_use,
)
from pilot_helpers import SOON, answer, drawn, footer_actions, plain, quick_clock, run_screen, until, until_ended
from textual.pilot import Pilot
from textual.widgets import Static

from cua_tui.agents.anthropic_agent import AnthropicAgent
from cua_tui.agents.openai_agent import OpenAIAgent
from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core.policy import Policy
from cua_tui.core.ports import (
    HEARD,
    OutcomeStatus,
)
from cua_tui.core.supervisor import Supervisor
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.tui.app import CuaApp
from cua_tui.tui.batch import BatchPane
from cua_tui.tui.decision_panel import DecisionPanel
from cua_tui.tui.help import HelpScreen
from cua_tui.tui.run_screen import supervisor_app
from cua_tui.tui.source import LiveRun
from cua_tui.tui.status import StatusBar

pytestmark = pytest.mark.timeout(60)

SIZE = (160, 50)
KEY = "sk-test-CUA-TUI-SECRET-tui-0c1d2e3f4a5b"
HUMAN = "human (TUI)"
TASK = "type the phrase into the field and click Verify"
FIELD = (250, 182)  # centre of the sim form's phrase field (40, 160, 420x44)
VERIFY = (550, 182)  # centre of its Verify button (480, 160, 140x44)
CHECK = {"id": "sc_1", "code": "malicious_instructions", "message": "the page asks to ignore the user"}


def click(x: int, y: int) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": x, "y": y}


FILL_BATCH = (click(*FIELD), {"type": "type", "text": PHRASE}, click(*VERIFY))  # typing needs a confirmation


# ---------------------------------------------------------------------------------------------------
# Harness
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def openai_agent(server: ModelServer, **kwargs: Any) -> OpenAIAgent:
    return OpenAIAgent(KEY, base_url=server.openai_base_url, **{"timeout": 10.0, "max_retries": 0, **kwargs})


def anthropic_agent(server: ModelServer, **kwargs: Any) -> AnthropicAgent:
    options = {"timeout": 10.0, "max_retries": 0, "withheld": Policy.default().withheld, **kwargs}
    return AnthropicAgent(KEY, base_url=server.anthropic_base_url, **options)


@dataclass
class Live:
    app: CuaApp
    supervisor: Supervisor
    desktop: SimDesktop

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.supervisor.rundir.audit.read_text().splitlines()]

    def result_json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.supervisor.rundir.result_json.read_text())
        return data


def live(tmp_path: Path, agent: OpenAIAgent | AnthropicAgent) -> Live:
    """A live run of ``agent`` on the sim desktop, wired as the command line wires it for the TUI."""
    desktop = SimDesktop()
    run = build_run(
        RunOptions(
            task=TASK,
            backend="sim",
            agent_impl=agent,
            agent_label=agent.name,
            runs_dir=tmp_path / "runs",
            decisions=HANDSHAKE,
            fsync=False,
            desktop=desktop,
        )
    )
    handshake = run.handshake
    assert handshake is not None and handshake.by == HUMAN
    supervisor = track(run.supervisor)
    return Live(supervisor_app(LiveRun(supervisor, handshake), guard_clock=quick_clock), supervisor, desktop)


async def until_decision(pilot: Pilot[Any], app: CuaApp, index: int, kind: str = "action") -> None:
    main = run_screen(app)

    def pending() -> bool:
        return main.pending is not None and main.pending.index == index and main.pending.kind == kind

    await until(pilot, pending, f"a {kind} decision on #{index + 1}")
    await pilot.pause()


def status_text(app: CuaApp) -> str:
    return plain(app.query_one(StatusBar))


def model_texts(app: CuaApp) -> list[str]:
    return [plain(w) for w in app.query_one(BatchPane).query(".model-text").results(Static)]


def states(app: CuaApp) -> list[str]:
    rows = app.query_one(BatchPane).rows
    return [rows[i].state for i in sorted(rows)]


# ---------------------------------------------------------------------------------------------------
# (a) A normal multi-turn run: typing confirmed with y, text, tokens and cost on screen
# ---------------------------------------------------------------------------------------------------
def script_normal_run(server: ModelServer, vendor: str) -> None:
    if vendor == "openai":
        server.script(
            OPENAI_PATH,
            openai_response(reasoning(), message("I will fill the form."), computer_call("call_1", *FILL_BATCH)),
            openai_response(computer_call("call_2", {"type": "screenshot"}, single=True)),
            openai_response(message("The phrase is submitted.")),
        )
    else:
        server.script(
            ANTHROPIC_PATH,
            anthropic_message(
                text_block("I will fill the form."),
                tool_use("t1", "left_click", coordinate=list(FIELD)),
                tool_use("t2", "type", text=PHRASE),
                tool_use("t3", "left_click", coordinate=list(VERIFY)),
            ),
            anthropic_message(tool_use("t4", "screenshot")),
            anthropic_message(text_block("The phrase is submitted."), stop_reason="end_turn"),
        )


@pytest.mark.parametrize(
    ("vendor", "model", "cost_per_turn"),
    [
        ("openai", "gpt-5.6-sol", (1000 * 5 + 50 * 30) / 1e6),
        ("anthropic", "claude-sonnet-5", (1000 * 3 + 50 * 15) / 1e6),
        ("openai", "my-gateway-model", None),  # no known price: tokens, and no cost
    ],
    ids=["openai", "anthropic", "openai-unpriced"],
)
async def test_y_approves_the_typing_and_the_model_run_passes(
    tmp_path: Path, server: ModelServer, vendor: str, model: str, cost_per_turn: float | None
) -> None:
    script_normal_run(server, vendor)
    path = OPENAI_PATH if vendor == "openai" else ANTHROPIC_PATH
    agent = (openai_agent if vendor == "openai" else anthropic_agent)(server, model=model)
    run = live(tmp_path, agent)
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        panel = app.query_one(DecisionPanel)
        assert "DECISION NEEDED" in plain(panel) and PHRASE in plain(panel)
        assert PHRASE in drawn(panel)  # the typed text, in full, on screen
        assert model_texts(app) == ["model: I will fill the form."]
        assert "model: I will fill the form." in drawn(app.query_one(".model-text", Static))  # on screen
        assert states(app) == ["executed", "waiting", "waiting"]
        assert run.desktop.app.values == {}  # nothing typed before the decision
        status = status_text(app)
        assert f"({model})" in status and "AWAITING YOUR DECISION" in status
        assert "1050 tok" in status
        if cost_per_turn is None:
            assert "$" not in status
        else:
            assert f"${cost_per_turn:.4f}" in status
        assert len(server.bodies(path)) == 1

        await answer(pilot, "y")
        await until_ended(pilot, app)
        assert main.final_status == "passed", status_text(app)
        status = status_text(app)
        assert "status: passed" in status
        assert "3150 tok" in status
        assert (f"${3 * cost_per_turn:.4f}" in status) if cost_per_turn is not None else ("$" not in status)
        assert "3150 tok" in drawn(app.query_one(StatusBar))
        assert "final: The phrase is submitted." in model_texts(app)
    assert run.desktop.app.proofs == [PHRASE]
    assert len(server.bodies(path)) == 3
    assert run.result_json()["tokens"] == 3150
    decisions = [(r["index"], r["decision"], r["by"]) for r in run.audit() if r["kind"] == "decision"]
    assert (1, "approve", HUMAN) in decisions


# ---------------------------------------------------------------------------------------------------
# (b) A batch with a confirmation rejected with n: the model is told
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_n_declines_and_the_server_receives_the_declined_message(
    tmp_path: Path, server: ModelServer, vendor: str
) -> None:
    if vendor == "openai":
        server.script(
            OPENAI_PATH,
            openai_response(message("Filling."), computer_call("call_1", *FILL_BATCH)),
            openai_response(message("You declined typing; stopping.")),
        )
        agent: OpenAIAgent | AnthropicAgent = openai_agent(server)
    else:
        server.script(
            ANTHROPIC_PATH,
            anthropic_message(
                text_block("Filling."),
                tool_use("t1", "left_click", coordinate=list(FIELD)),
                tool_use("t2", "type", text=PHRASE),
                tool_use("t3", "left_click", coordinate=list(VERIFY)),
            ),
            anthropic_message(text_block("You declined typing; stopping."), stop_reason="end_turn"),
        )
        agent = anthropic_agent(server)
    run = live(tmp_path, agent)
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 1)
        await answer(pilot, "n", "escape")  # reject, without a reason
        await until_ended(pilot, app)
        assert main.final_status == "failed"  # the verifier found no proof
        assert states(app) == ["executed", "declined", "not_executed"]
        assert "final: You declined typing; stopping." in model_texts(app)
    assert run.desktop.app.values == {} and run.desktop.app.proofs == []
    if vendor == "openai":
        second = server.bodies(OPENAI_PATH)[1]
        output, report = second["input"]
        assert output["type"] == "computer_call_output" and output["call_id"] == "call_1"
        text = report["content"][0]["text"]
        assert (
            f"action 2: {HEARD[OutcomeStatus.DECLINED]}" in text
            and f"action 3: {HEARD[OutcomeStatus.NOT_EXECUTED]}" in text
        )
    else:
        results = server.bodies(ANTHROPIC_PATH)[1]["messages"][-1]["content"]
        ok, declined, skipped, _screen = results
        assert ok["tool_use_id"] == "t1" and "is_error" not in ok
        assert declined["tool_use_id"] == "t2" and declined["is_error"] is True
        assert declined["content"] == [{"type": "text", "text": HEARD[OutcomeStatus.DECLINED]}]
        assert skipped["content"] == [{"type": "text", "text": HEARD[OutcomeStatus.NOT_EXECUTED]}]
    decisions = [(r["index"], r["decision"], r["by"]) for r in run.audit() if r["kind"] == "decision"]
    assert (1, "reject", HUMAN) in decisions


# ---------------------------------------------------------------------------------------------------
# (c) Safety checks: shown, acknowledged only on y
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["y", "n"])
async def test_safety_checks_are_shown_and_acknowledged_only_on_y(
    tmp_path: Path, server: ModelServer, key: str
) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(computer_call("call_1", *FILL_BATCH, checks=[CHECK])),
        openai_response(message("done" if key == "y" else "understood")),
    )
    run = live(tmp_path, openai_agent(server))
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_decision(pilot, app, 0, kind="safety_check")
        panel = app.query_one(DecisionPanel)
        shown = drawn(panel)
        for text in ("safety checks", CHECK["code"], CHECK["message"], PHRASE, "approved by this answer"):
            assert text in plain(panel) and text in shown, text  # the typing it gates, shown before the answer
        assert {"approve", "reject", "kill"} <= footer_actions(app)
        assert run.desktop.executed == []  # decided before anything of the call runs
        assert len(server.bodies(OPENAI_PATH)) == 1

        await answer(pilot, *((key, "escape") if key == "n" else (key,)))  # n asks for a reason: none given
        await until_ended(pilot, app)  # y covered the typing it gated: no second decision
        assert main.final_status == ("passed" if key == "y" else "failed")
        expected = ["executed"] * 3 if key == "y" else ["declined", "not_executed", "not_executed"]
        assert states(app) == expected
    second = server.bodies(OPENAI_PATH)[1]
    output = second["input"][0]
    assert output["type"] == "computer_call_output" and output["call_id"] == "call_1"
    if key == "y":
        assert output["acknowledged_safety_checks"] == [CHECK]
        assert len(second["input"]) == 1  # everything ran: no report
    else:
        assert "acknowledged_safety_checks" not in output
        assert HEARD[OutcomeStatus.DECLINED] in second["input"][1]["content"][0]["text"]
        assert run.desktop.executed == []
    subjects = [(r["subject"], r["decision"], r["by"]) for r in run.audit() if r["kind"] == "decision"]
    assert subjects[0] == ("safety_check", "approve" if key == "y" else "reject", HUMAN)


# ---------------------------------------------------------------------------------------------------
# (d) A hung model request: the UI answers, k ends the run at once
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_k_kills_the_run_while_the_model_request_hangs(tmp_path: Path, server: ModelServer, vendor: str) -> None:
    # The reply (and the agent's own timeout) comes later than the wait for the kill below gives up: the kill
    # on screen is then proof that the run did not wait for the model, on a loaded worker as on an idle one.
    held = SOON + 10
    if vendor == "openai":
        server.script(OPENAI_PATH, Reply(openai_response(message("late")), delay=held))
        agent: OpenAIAgent | AnthropicAgent = openai_agent(server, timeout=held)
    else:
        server.script(ANTHROPIC_PATH, Reply(anthropic_message(text_block("late")), delay=held))
        agent = anthropic_agent(server, timeout=held)
    run = live(tmp_path, agent)
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(server.received) == 1, "the request to reach the server")
        status = app.query_one(StatusBar)
        await until(pilot, lambda: status.phase == "waiting_model", "phase waiting_model")
        assert "waiting for the model" in status_text(app)
        # Responsive while the request hangs: the help screen opens and closes, the footer offers k only.
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        assert "kill" in footer_actions(app) and not footer_actions(app) & {"approve", "reject"}

        await pilot.press("k")
        # Over once its end is on screen; sealing the log afterwards is disk-bound and waited for below.
        await until(pilot, lambda: not main.running and "status: killed" in status_text(app), "the kill", SOON)
        assert not server.closing.is_set() and len(server.received) == 1  # the request is still hanging
        await until_ended(pilot, app)
        assert main.final_status == "killed"
    assert agent._calls.cancelled  # the supervisor told the adapter to give up its request
    assert run.result_json()["status"] == "killed"
    assert [r["by"] for r in run.audit() if r["kind"] == "kill"] == [HUMAN]


# ---------------------------------------------------------------------------------------------------
# (e) A malformed reply: an error end, shown in the status bar, no traceback
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("vendor", "body"),
    [("openai", b'{"id": "resp_1", "output": ['), ("anthropic", b"<html>bad gateway</html>")],
    ids=["openai", "anthropic"],
)
async def test_a_malformed_reply_ends_the_run_with_an_error_on_screen(
    tmp_path: Path, server: ModelServer, vendor: str, body: bytes
) -> None:
    if vendor == "openai":
        server.script(OPENAI_PATH, Reply(body))
        agent: OpenAIAgent | AnthropicAgent = openai_agent(server)
    else:
        server.script(ANTHROPIC_PATH, Reply(body))
        agent = anthropic_agent(server)
    run = live(tmp_path, agent)
    app = run.app
    main = run_screen(app)
    async with app.run_test(size=SIZE) as pilot:
        await until_ended(pilot, app)
        assert main.final_status == "error"
        assert app.result is not None and app.result.status == "error"
        status = status_text(app)
        assert "status: error · agent: malformed reply from the model API: not JSON" in status
        assert "status: error" in drawn(app.query_one(StatusBar))
        shown = [status, *(str(n.message) for n in app._notifications)]
        assert not any("Traceback" in s or 'File "' in s for s in shown), shown
        assert not any(n.title == "run failed" for n in app._notifications)  # the run ended; nothing crashed
        assert "quit_when_done" in footer_actions(app)
    result = run.result_json()
    assert result["status"] == "error" and "not JSON" in result["reason"]
    assert "Traceback" not in run.supervisor.rundir.audit.read_text()
