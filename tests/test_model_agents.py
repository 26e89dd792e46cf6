"""The OpenAI and Anthropic adapters, with the REAL SDKs talking HTTP to a scripted server on 127.0.0.1.

Every scenario runs the real supervisor on the in-process sim desktop and asserts on both sides: what
the run recorded (status, outcomes, audit) and what the server RECEIVED (one computer_call_output per
call_id with a PNG data URL and detail original, acknowledged safety checks only after a person's
approval; one tool_result per tool_use with toolset_name and is_error, images where they belong).
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
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
from PIL import Image

from cua_tui.agents.anthropic_agent import OMITTED_IMAGE, AnthropicAgent, toolset
from cua_tui.agents.images import ANTHROPIC_NEW, ANTHROPIC_OLD, OPENAI_ORIGINAL, image_limits
from cua_tui.agents.openai_agent import OpenAIAgent
from cua_tui.agents.prices import price_for
from cua_tui.agents.vendors import VENDORS
from cua_tui.core import events as ev
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.audit import verify_run
from cua_tui.core.geometry import Size
from cua_tui.core.policy import Policy
from cua_tui.core.ports import (
    HEARD,
    AgentError,
    Answer,
    DecisionRequest,
    Frame,
    OutcomeStatus,
    Ruling,
)
from cua_tui.core.rundir import RunDir
from cua_tui.core.supervisor import (
    RunConfig,
    RunResult,
    Supervisor,
)
from cua_tui.desktops.sim import PHRASE, SimDesktop

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-CUA-TUI-SECRET-7f3a9c21e8b4d605"
FIELD = (250, 182)  # centre of the phrase field (40, 160, 420x44)
VERIFY = (550, 182)  # centre of the Verify button (480, 160, 140x44)
CHECK = {"id": "sc_1", "code": "malicious_instructions", "message": "the page asks to ignore the user"}


# ---------------------------------------------------------------------------------------------------
# Harness
# ---------------------------------------------------------------------------------------------------
class Approver:
    """Answers from a list (then ``default``) as a person would, safety checks included; records requests."""

    def __init__(self, *answers: Answer, default: Answer = Answer.APPROVE) -> None:
        self.answers = list(answers)
        self.default = default
        self.requests: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.requests.append(request)
        return Ruling(self.answers.pop(0) if self.answers else self.default, "human")


class Run:
    def __init__(self, result: RunResult, events: list[ev.Event], desktop: SimDesktop, seconds: float) -> None:
        self.result = result
        self.events = events
        self.desktop = desktop
        self.seconds = seconds

    @property
    def status(self) -> str:
        return self.result.status

    def outcomes(self) -> list[tuple[int, int, str, str]]:
        return [(e.turn, e.index, e.status, e.message) for e in self.events if isinstance(e, ev.Outcome)]

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


def supervise(
    tmp_path: Path,
    agent: Any,
    *,
    approver: Any = None,
    desktop: SimDesktop | None = None,
    policy: Policy | None = None,
    background: bool = False,
) -> Any:
    desktop = desktop or SimDesktop()
    cfg = RunConfig(
        task="type the phrase into the field and click Verify",
        backend="sim",
        agent=agent.name,
        model=agent.model,
        screen=desktop.size,
        policy=policy or Policy.default(),
    )
    events: list[ev.Event] = []
    sup = Supervisor(
        cfg, desktop, agent, approver, RunDir.create(tmp_path / "runs"), listeners=(lambda s: events.append(s.event),)
    )
    if background:
        return sup, events
    started = time.monotonic()
    result = sup.run()
    return Run(result, events, desktop, time.monotonic() - started)


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def openai_agent(server: ModelServer, **kwargs: Any) -> OpenAIAgent:
    options = {"timeout": 5.0, "max_retries": 1, **kwargs}
    return OpenAIAgent(KEY, base_url=server.openai_base_url, **options)


def anthropic_agent(server: ModelServer, **kwargs: Any) -> AnthropicAgent:
    options = {"timeout": 5.0, "max_retries": 1, "withheld": Policy.default().withheld, **kwargs}
    return AnthropicAgent(KEY, base_url=server.anthropic_base_url, **options)


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(data)) as img:
        return img.size


def data_url_png(url: str) -> tuple[int, int]:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    return png_size(base64.b64decode(url[len(prefix) :]))


def click(x: int, y: int) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": x, "y": y}


FILL_BATCH = (click(*FIELD), {"type": "type", "text": PHRASE}, click(*VERIFY))


# ---------------------------------------------------------------------------------------------------
# OpenAI Responses
# ---------------------------------------------------------------------------------------------------
def test_openai_multi_turn_run_passes_and_sends_the_wire_format(tmp_path: Path, server: ModelServer) -> None:
    replies = [
        openai_response(reasoning(), message("I will fill the form."), computer_call("call_1", *FILL_BATCH)),
        openai_response(computer_call("call_2", {"type": "screenshot"}, single=True)),  # the older single action
        openai_response(message("The phrase is submitted.")),
    ]
    server.script(OPENAI_PATH, *replies)
    run = supervise(tmp_path, openai_agent(server), approver=FixedApprover(Answer.APPROVE))
    assert run.status == "passed", run.result.reason
    assert run.desktop.app.proofs == [PHRASE]
    assert [o[2] for o in run.outcomes()] == ["executed"] * 4
    turns = run.of(ev.ModelTurn)
    assert [t.text for t in turns] == ["I will fill the form.", "", "The phrase is submitted."]
    assert turns[0].input_tokens == 1000 and turns[0].output_tokens == 50
    assert turns[0].cost_usd == pytest.approx((1000 * 5 + 50 * 30) / 1e6)  # gpt-5.6-sol list price
    result = json.loads((run.result.path / "result.json").read_text())
    assert result["tokens"] == 3 * 1050
    assert result["cost_usd"] == pytest.approx(3 * 0.0065)

    first, second, third = server.bodies(OPENAI_PATH)
    assert first["model"] == "gpt-5.6-sol"
    assert first["tools"] == [{"type": "computer"}]
    assert first["truncation"] == "auto"
    assert "previous_response_id" not in first
    (user,) = first["input"]
    assert user["role"] == "user"
    assert user["content"][0] == {"type": "input_text", "text": "type the phrase into the field and click Verify"}
    image = user["content"][1]
    assert image["type"] == "input_image" and image["detail"] == "original"
    assert data_url_png(image["image_url"]) == (1024, 720)  # within the limits: sent unscaled
    assert second["previous_response_id"] == replies[0]["id"]
    assert third["previous_response_id"] == replies[1]["id"]
    for body, call_id in ((second, "call_1"), (third, "call_2")):
        (output,) = body["input"]  # every action ran: no report message
        assert output["type"] == "computer_call_output" and output["call_id"] == call_id
        assert output["output"]["type"] == "computer_screenshot"
        assert output["output"]["detail"] == "original"
        assert data_url_png(output["output"]["image_url"]) == (1024, 720)
        assert "acknowledged_safety_checks" not in output
        assert body["instructions"] == first["instructions"]


def test_openai_batch_with_a_rejected_confirmation_reports_what_ran(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(computer_call("call_1", *FILL_BATCH)),
        openai_response(message("You declined typing; stopping.")),
    )
    approver = Approver(Answer.REJECT)
    run = supervise(tmp_path, openai_agent(server), approver=approver)
    assert run.status == "failed"
    assert [o[2:] for o in run.outcomes()] == [
        ("executed", "OK"),
        ("declined", HEARD[OutcomeStatus.DECLINED]),
        ("not_executed", HEARD[OutcomeStatus.NOT_EXECUTED]),
    ]
    assert run.desktop.app.values == {} and run.desktop.app.proofs == []
    assert [r.kind for r in approver.requests] == ["action"]
    second = server.bodies(OPENAI_PATH)[1]
    output, report = second["input"]
    assert output["type"] == "computer_call_output" and output["call_id"] == "call_1"
    assert report["role"] == "user"
    text = report["content"][0]["text"]
    assert "action 1: OK" in text
    assert f"action 2: {HEARD[OutcomeStatus.DECLINED]}" in text
    assert f"action 3: {HEARD[OutcomeStatus.NOT_EXECUTED]}" in text


def test_openai_several_calls_in_one_turn_get_one_output_each(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(
            computer_call("call_a", click(*FIELD)),
            computer_call("call_b", {"type": "type", "text": PHRASE}, click(*VERIFY)),
        ),
        openai_response(message("done")),
    )
    run = supervise(tmp_path, openai_agent(server), approver=FixedApprover(Answer.APPROVE))
    assert run.status == "passed"
    outputs = server.bodies(OPENAI_PATH)[1]["input"]
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("computer_call_output", "call_a"),
        ("computer_call_output", "call_b"),
    ]


def test_openai_safety_check_approved_is_acknowledged_in_the_next_request(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(computer_call("call_1", *FILL_BATCH, checks=[CHECK])),
        openai_response(message("done")),
    )
    approver = Approver(Answer.APPROVE)  # the safety check, which covers the typing it lists
    run = supervise(tmp_path, openai_agent(server), approver=approver)
    assert run.status == "passed"
    assert [r.kind for r in approver.requests] == ["safety_check"]
    assert [g.verdict for g in approver.requests[0].gated].count("confirm") == 1
    assert approver.requests[0].safety_checks[0].id == "sc_1"
    (output,) = server.bodies(OPENAI_PATH)[1]["input"]
    assert output["acknowledged_safety_checks"] == [CHECK]


def test_openai_safety_check_rejected_runs_nothing_and_acknowledges_nothing(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(computer_call("call_1", *FILL_BATCH, checks=[CHECK])),
        openai_response(message("understood")),
    )
    # A blanket headless approve never acknowledges safety checks on anyone's behalf.
    run = supervise(tmp_path, openai_agent(server), approver=FixedApprover(Answer.APPROVE))
    assert run.status == "failed"
    assert run.desktop.executed == []
    assert {o[2] for o in run.outcomes()} == {"declined", "not_executed"}
    output, report = server.bodies(OPENAI_PATH)[1]["input"]
    assert output["call_id"] == "call_1"
    assert "acknowledged_safety_checks" not in output
    assert HEARD[OutcomeStatus.DECLINED] in report["content"][0]["text"]


def test_openai_actions_reach_the_parser_exactly_as_sent(tmp_path: Path, server: ModelServer) -> None:
    """The SDK's lenient models would turn ``"x": true`` into 1: the adapter hands over the reply JSON."""
    server.script(
        OPENAI_PATH,
        openai_response(computer_call("call_1", {"type": "click", "button": "left", "x": True, "y": 182})),
        openai_response(computer_call("call_2", {**click(*FIELD), "approved": True})),
        # a string where an action must be an object: what a model may send
        openai_response(computer_call("call_3", "not an action")),  # type: ignore[arg-type]
        openai_response(message("giving up")),
    )
    run = supervise(tmp_path, openai_agent(server))
    assert run.status == "failed"
    assert run.desktop.executed == []
    errors = [e.error for e in run.of(ev.ActionProposed)]
    assert "must be an integer, not bool" in errors[0]
    assert "does not take field(s): approved" in errors[1]
    assert "must be a JSON object" in errors[2]
    assert [o[2:] for o in run.outcomes()] == [("refused", HEARD[OutcomeStatus.REFUSED])] * 3


def test_openai_unknown_output_items_are_ignored(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(
            {"type": "holographic_call", "id": "x1", "payload": [1, 2]},
            # a bare string where an output item must be an object: what a model may send
            "a bare string",  # type: ignore[arg-type]
            message("filling"),
            computer_call("call_1", *FILL_BATCH),
        ),
        openai_response({"type": "future_item"}, message("done")),
    )
    agent = openai_agent(server)
    run = supervise(tmp_path, agent, approver=FixedApprover(Answer.APPROVE))
    assert run.status == "passed"
    assert [t.text for t in run.of(ev.ModelTurn)] == ["filling", "done"]
    assert len(agent.notes) == 2
    assert "holographic_call" in agent.notes[0] and "2 output item(s)" in agent.notes[0]


def test_openai_429_then_success(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        Reply({"error": {"message": "Rate limit reached"}}, status=429, headers={"retry-after": "0"}),
        openai_response(message("nothing to do")),
    )
    run = supervise(tmp_path, openai_agent(server), desktop=SimDesktop(verifier=False))
    assert run.status == "finished", run.result.reason
    assert len(server.bodies(OPENAI_PATH)) == 2
    assert server.received[1].headers.get("x-stainless-retry-count") == "1"


def test_openai_500_after_retries_ends_the_run_with_a_clear_error(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        Reply({"error": {"message": "upstream exploded"}}, status=500),
        Reply({"error": {"message": "upstream exploded"}}, status=500),
    )
    run = supervise(tmp_path, openai_agent(server, max_retries=1))
    assert run.status == "error"
    assert run.result.reason == "agent: the model API answered HTTP 500 after 1 retry: upstream exploded"
    assert len(server.received) == 2
    assert "Traceback" not in (run.result.path / "audit.jsonl").read_text()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"id": "resp_1", "output": [', "malformed reply from the model API: not JSON"),
        (b"[1, 2, 3]", "malformed reply from the model API: a JSON list, not an object"),
        (b'{"id": "resp_1", "output": "nope"}', "'output' is not a list"),
        (b'{"output": []}', "no response id"),
        (b'{"id": "r", "output": [{"type": "computer_call", "actions": []}]}', "a computer_call has no call_id"),
        (b'{"id": "r", "status": "failed", "output": [], "error": {"message": "bad"}}', "response failed: bad"),
    ],
)
def test_openai_malformed_reply_is_a_clear_error_end(
    tmp_path: Path, server: ModelServer, body: bytes, expected: str
) -> None:
    server.script(OPENAI_PATH, Reply(body))
    run = supervise(tmp_path, openai_agent(server))
    assert run.status == "error"
    assert expected in run.result.reason
    assert "Traceback" not in run.result.reason and "File " not in run.result.reason
    errors = run.of(ev.ErrorRaised)
    assert errors and errors[0].where == "agent"


def test_openai_hung_request_times_out_promptly(tmp_path: Path, server: ModelServer) -> None:
    server.script(OPENAI_PATH, Reply(openai_response(message("late")), delay=30))
    run = supervise(tmp_path, openai_agent(server, timeout=0.5, max_retries=0))
    assert run.status == "error"
    assert "did not answer within 0.5 s" in run.result.reason
    assert run.seconds < 5


def test_kill_during_a_hung_request_ends_the_run_at_once(tmp_path: Path, server: ModelServer) -> None:
    server.script(OPENAI_PATH, Reply(openai_response(message("late")), delay=30))
    agent = openai_agent(server, timeout=30)
    sup, _events = supervise(tmp_path, agent, background=True)
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", sup.run()), daemon=True)
    worker.start()
    deadline = time.monotonic() + 10
    while not server.received and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.received, "the request never reached the server"
    pressed = time.monotonic()
    sup.kill()
    worker.join(5)
    assert not worker.is_alive()
    assert box["result"].status == "killed"
    assert time.monotonic() - pressed < 3
    assert agent._calls.cancelled  # the supervisor told the agent to give up its request


def test_cancel_makes_a_hung_call_return(server: ModelServer) -> None:
    server.script(OPENAI_PATH, Reply(openai_response(message("late")), delay=30))
    agent = openai_agent(server, timeout=30, max_retries=0)
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            agent.start("task", Frame(SimDesktop().screenshot().png, 1024, 720))
        except AgentError as exc:
            box["error"] = exc

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    while not server.received:
        time.sleep(0.01)
    agent.cancel()
    agent.cancel()  # harmless twice
    worker.join(10)
    assert not worker.is_alive(), "the call did not return at the cancel (its reply is 30 s away)"
    assert "cancelled" in str(box["error"])


# ---------------------------------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------------------------------
def test_token_cap_ends_the_run_with_status_limit(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        OPENAI_PATH,
        openai_response(computer_call("call_1", click(*FIELD)), usage=(1000, 50)),
        openai_response(computer_call("call_2", click(*FIELD)), usage=(1000, 50)),
        openai_response(message("never asked for")),
    )
    policy = Policy.default().with_limits(max_tokens=1500)
    run = supervise(tmp_path, openai_agent(server), policy=policy)
    assert run.status == "limit"
    assert run.result.reason == "agent: token budget of 1500 exceeded (2100 used)"
    assert len(server.received) == 2
    assert verify_run(run.result.path).code == 0


def test_cost_cap_ends_the_run_with_status_limit(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_message(tool_use("t1", "left_click", coordinate=list(FIELD)), usage=(2000, 100)),
        anthropic_message(tool_use("t2", "left_click", coordinate=list(FIELD)), usage=(2000, 100)),
    )
    policy = Policy.default().with_limits(max_cost_usd=0.01)  # claude-sonnet-5: $0.0075 a turn here
    run = supervise(tmp_path, anthropic_agent(server), policy=policy)
    assert run.status == "limit"
    assert "cost budget of $0.01 exceeded ($0.0150 used)" in run.result.reason


# ---------------------------------------------------------------------------------------------------
# Anthropic Messages, computer toolset
# ---------------------------------------------------------------------------------------------------
def test_anthropic_multi_turn_run_passes_and_sends_the_wire_format(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_message(
            {"type": "thinking", "thinking": "the field first", "signature": "sig"},
            text_block("Filling the form."),
            tool_use("toolu_1", "left_click", coordinate=list(FIELD)),
            tool_use("toolu_2", "type", text=PHRASE),
        ),
        anthropic_message(tool_use("toolu_3", "left_click", coordinate=list(VERIFY))),
        anthropic_message(text_block("Submitted."), stop_reason="end_turn"),
    )
    run = supervise(tmp_path, anthropic_agent(server), approver=FixedApprover(Answer.APPROVE))
    assert run.status == "passed", run.result.reason
    assert [t.text for t in run.of(ev.ModelTurn)] == ["Filling the form.", "", "Submitted."]
    assert run.of(ev.ModelTurn)[0].cost_usd == pytest.approx((1000 * 3 + 50 * 15) / 1e6)

    first, second, third = server.bodies(ANTHROPIC_PATH)
    assert first["model"] == "claude-sonnet-5"
    assert first["tools"] == [
        {
            "type": "computer_toolset_20260801",
            "configs": {m: {"enabled": False} for m in ("hold_key", "left_mouse_down", "left_mouse_up")},
        }
    ]
    assert isinstance(first["system"], str) and first["max_tokens"] > 0
    image, task = first["messages"][0]["content"]
    assert image["source"]["media_type"] == "image/png"
    assert png_size(base64.b64decode(image["source"]["data"])) == (1024, 720)
    assert task == {"type": "text", "text": "type the phrase into the field and click Verify"}
    # The assistant turn is echoed as received (thinking included), then one tool_result per tool_use.
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"][0]["type"] == "thinking"
    results = second["messages"][2]["content"]
    assert [(r["type"], r["tool_use_id"], r["toolset_name"]) for r in results] == [
        ("tool_result", "toolu_1", "computer"),
        ("tool_result", "toolu_2", "computer"),
    ]
    assert not any(r.get("is_error") for r in results)
    assert results[0]["content"] == [{"type": "text", "text": "OK"}]
    assert [b["type"] for b in results[1]["content"]] == ["text", "image"]  # the screen after the batch
    assert len(third["messages"]) == 5


def test_anthropic_rejection_marks_later_results_not_executed(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_message(
            tool_use("t1", "left_click", coordinate=list(FIELD)),
            tool_use("t2", "type", text=PHRASE),
            tool_use("t3", "left_click", coordinate=list(VERIFY)),
        ),
        anthropic_message(text_block("Stopped as you declined."), stop_reason="end_turn"),
    )
    run = supervise(tmp_path, anthropic_agent(server), approver=Approver(Answer.REJECT))
    assert run.status == "failed"
    assert run.desktop.app.proofs == []
    blocks = server.bodies(ANTHROPIC_PATH)[1]["messages"][2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "tool_result", "tool_result", "image"]
    ok, declined, skipped, _screen = blocks
    assert "is_error" not in ok and ok["content"][0]["text"] == "OK"
    assert declined["is_error"] is True and declined["content"] == [
        {"type": "text", "text": HEARD[OutcomeStatus.DECLINED]}
    ]
    assert skipped["is_error"] is True and skipped["content"] == [
        {"type": "text", "text": HEARD[OutcomeStatus.NOT_EXECUTED]}
    ]
    assert all(b["toolset_name"] == "computer" for b in blocks[:3])


def test_anthropic_other_tools_and_withheld_members_are_refused_and_answered(
    tmp_path: Path, server: ModelServer
) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_message(tool_use("t1", "bash", toolset_name=None, command="cat ~/.ssh/id_rsa")),
        anthropic_message(tool_use("t2", "left_mouse_down", coordinate=[10, 10])),  # disabled, called anyway
        anthropic_message(tool_use("t3", "left_click", toolset_name="browser", coordinate=[10, 10])),
        anthropic_message(text_block("I cannot do this."), stop_reason="end_turn"),
    )
    run = supervise(tmp_path, anthropic_agent(server))
    assert run.status == "failed"
    assert run.desktop.executed == []
    assert [o[2:] for o in run.outcomes()] == [("refused", HEARD[OutcomeStatus.REFUSED])] * 3
    bodies = server.bodies(ANTHROPIC_PATH)
    bash_result = bodies[1]["messages"][-1]["content"][0]
    assert bash_result["tool_use_id"] == "t1" and bash_result["is_error"] is True
    assert "toolset_name" not in bash_result  # not a toolset member: nothing to echo
    assert bodies[2]["messages"][-1]["content"][0]["toolset_name"] == "computer"
    assert bodies[3]["messages"][-1]["content"][0]["toolset_name"] == "browser"
    verdicts = [e.reason for e in run.of(ev.PolicyVerdict)]
    assert any("mouse_down actions are withheld" in v for v in verdicts)


def test_anthropic_scaled_screen_maps_back_exactly_and_refuses_outside(tmp_path: Path, server: ModelServer) -> None:
    """A 2048x1440 display for an earlier-tier model (1568 px, 1.15 MP): screenshots go out at 1278x899,
    clicks come back to the display pixel the model meant, cursor_position and zoom answer in kind."""
    display = Size(2048, 1440)
    model_size = ANTHROPIC_OLD.scaling(display).model
    assert model_size == Size(1278, 899) and model_size.pixels <= 1_150_000

    def to_model(x: int, y: int) -> list[int]:
        return [x * model_size.width // display.width, y * model_size.height // display.height]

    server.script(
        ANTHROPIC_PATH,
        anthropic_message(
            tool_use("t1", "left_click", coordinate=to_model(*FIELD)),
            tool_use("t2", "type", text=PHRASE),
            tool_use("t3", "cursor_position"),
            tool_use("t4", "zoom", region=[0, 0, 640, 360]),
        ),
        anthropic_message(tool_use("t5", "left_click", coordinate=[model_size.width, 10])),  # one past the edge
        anthropic_message(tool_use("t6", "left_click", coordinate=to_model(*VERIFY))),
        anthropic_message(text_block("done"), stop_reason="end_turn"),
    )
    desktop = SimDesktop(display)
    agent = anthropic_agent(server, model="claude-sonnet-4-6")
    run = supervise(tmp_path, agent, approver=FixedApprover(Answer.APPROVE), desktop=desktop)
    assert run.status == "passed", run.result.reason
    (clicked_field, _, _), *_ = desktop.app.clicks
    assert clicked_field == "phrase"
    assert desktop.app.clicks[-1][0] == "verify"
    bodies = server.bodies(ANTHROPIC_PATH)
    first_image = bodies[0]["messages"][0]["content"][0]
    assert png_size(base64.b64decode(first_image["source"]["data"])) == tuple(model_size)
    results = bodies[1]["messages"][2]["content"]
    pointer = desktop.app.clicks[0][1:]
    assert agent._scaling is not None
    assert results[2]["content"][0]["text"] == "X={},Y={}".format(*agent._scaling.to_model(*pointer))
    zoom_text, zoom_image, screen = results[3]["content"]
    assert zoom_text == {"type": "text", "text": "OK"}
    zoom_size = png_size(base64.b64decode(zoom_image["source"]["data"]))
    # The region at display resolution: every display pixel of model pixels [0, 640) x [0, 360).
    assert zoom_size == (math.ceil(640 * 2048 / 1278), math.ceil(360 * 1440 / 899)) == (1026, 577)
    assert png_size(base64.b64decode(screen["source"]["data"])) == tuple(model_size)
    outside = [e for e in run.of(ev.ActionProposed) if e.error]
    assert len(outside) == 1 and "outside the 1278x899 screenshot" in outside[0].error


def test_anthropic_keeps_only_the_recent_screenshots(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        ANTHROPIC_PATH,
        *[anthropic_message(tool_use(f"t{i}", "screenshot")) for i in range(5)],
        anthropic_message(text_block("done"), stop_reason="end_turn"),
    )
    run = supervise(tmp_path, anthropic_agent(server, keep_images=3), desktop=SimDesktop(verifier=False))
    assert run.status == "finished"
    last = server.bodies(ANTHROPIC_PATH)[-1]
    images = json.dumps(last["messages"]).count('"type": "image"')
    assert images == 3
    assert last["messages"][0]["content"][0] == {"type": "text", "text": OMITTED_IMAGE}


def test_anthropic_529_and_malformed_replies_end_with_a_clear_error(tmp_path: Path, server: ModelServer) -> None:
    overloaded = Reply({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529)
    server.script(ANTHROPIC_PATH, overloaded, overloaded)
    run = supervise(tmp_path, anthropic_agent(server, max_retries=1))
    assert run.status == "error"
    assert run.result.reason == "agent: the model API answered HTTP 529 after 1 retry: Overloaded"

    server.script(ANTHROPIC_PATH, Reply(b"<html>bad gateway</html>"))
    run = supervise(tmp_path, anthropic_agent(server))
    assert run.status == "error" and "not JSON" in run.result.reason

    server.script(ANTHROPIC_PATH, Reply({"content": [{"type": "tool_use", "name": "left_click", "input": {}}]}))
    run = supervise(tmp_path, anthropic_agent(server))
    assert run.status == "error" and "a tool_use block has no id" in run.result.reason


def test_anthropic_unknown_blocks_are_ignored(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_message({"type": "hologram", "data": 1}, text_block("nothing to do"), stop_reason="end_turn"),
    )
    agent = anthropic_agent(server)
    run = supervise(tmp_path, agent, desktop=SimDesktop(verifier=False))
    assert run.status == "finished"
    assert "hologram" in agent.notes[0]


def test_anthropic_hung_request_times_out(tmp_path: Path, server: ModelServer) -> None:
    server.script(ANTHROPIC_PATH, Reply(anthropic_message(text_block("late")), delay=30))
    run = supervise(tmp_path, anthropic_agent(server, timeout=0.5, max_retries=0))
    assert run.status == "error" and "did not answer within 0.5 s" in run.result.reason
    assert run.seconds < 5


def test_toolset_disables_the_members_of_withheld_kinds() -> None:
    assert toolset(frozenset()) == {"type": "computer_toolset_20260801"}
    everything_but_clicks = Policy.from_toml('[actions]\nallow = ["click", "screenshot"]\n', source="t")
    configs = toolset(everything_but_clicks.withheld)["configs"]
    assert "left_click" not in configs and "right_click" not in configs and "screenshot" not in configs
    assert configs["type"] == {"enabled": False} and configs["zoom"] == {"enabled": False}
    assert len(configs) == 17 - 4  # left, right, middle click and screenshot stay on


# ---------------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------------
def test_image_limits_and_prices_tables() -> None:
    assert image_limits("anthropic", "claude-sonnet-5") is ANTHROPIC_NEW
    assert image_limits("anthropic", "claude-opus-4-7") is ANTHROPIC_NEW
    assert image_limits("anthropic", "claude-sonnet-4-6") is ANTHROPIC_OLD
    assert image_limits("anthropic", "some-proxy-model") is ANTHROPIC_OLD  # unknown: the safe tier
    assert image_limits("openai", "gpt-5.6-sol") is OPENAI_ORIGINAL
    assert OPENAI_ORIGINAL.scaling(Size(1024, 720)).is_identity
    listed = VENDORS["anthropic"].prices
    assert price_for("claude-haiku-4-5-20251001", None, listed) == (1.0, 5.0)
    assert price_for("claude-haiku-4-5", None, VENDORS["openai"].prices) is None  # each vendor its own table
    assert price_for("no-such-model", None, listed) is None
    assert price_for("no-such-model", {"no-such-model": (1.0, 2.0)}, listed) == (1.0, 2.0)


# ---------------------------------------------------------------------------------------------------
# Secrets and the command line
# ---------------------------------------------------------------------------------------------------
def _cli(
    tmp_path: Path, server: ModelServer, agent: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "config.toml"
    config.write_text("model_retries = 0\nmodel_timeout = 5\n")
    base = server.openai_base_url if agent == "openai" else server.anthropic_base_url
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))} | {
        "CUA_TUI_CONFIG": str(config),
        "PYTHONUNBUFFERED": "1",
    }
    variables |= env or {}
    command = [sys.executable, "-m", "cua_tui.cli", "run", "--headless", "--backend", "sim", "--agent", agent]
    command += ["--base-url", base, "--runs-dir", str(tmp_path / "runs"), "--task", "fill the form", *extra]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=variables,
        timeout=60,
    )


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_the_key_never_reaches_the_run_directory_or_stderr(tmp_path: Path, server: ModelServer, vendor: str) -> None:
    """A normal turn, then an error reply that echoes the key back (a hostile proxy): the key must appear
    nowhere in the run directory (every file, screens included) nor in what the command printed."""
    echo = {"error": {"type": "api_error", "message": f"bad key {KEY} (Bearer {KEY})"}}
    if vendor == "openai":
        first = openai_response(message(f"I see {KEY}"), computer_call("call_1", *FILL_BATCH))
        server.script(OPENAI_PATH, first, Reply(echo, status=500))
    else:
        first = anthropic_message(
            text_block(f"I see {KEY}"),
            tool_use("t1", "left_click", coordinate=list(FIELD)),
            tool_use("t2", "type", text=PHRASE),
        )
        server.script(ANTHROPIC_PATH, first, Reply(echo, status=500))
    variable = "OPENAI_API_KEY" if vendor == "openai" else "ANTHROPIC_API_KEY"
    proc = _cli(tmp_path, server, vendor, "--on-confirm", "approve", env={variable: KEY})
    assert proc.returncode == 1, proc.stderr
    assert "status: error" in proc.stderr and "HTTP 500" in proc.stderr
    assert "[redacted]" in proc.stderr
    assert "Traceback" not in proc.stderr
    # The key was used (the server saw it), and went nowhere else.
    assert any(KEY in " ".join(r.headers.values()) for r in server.received)
    needle = KEY.encode()
    (run_dir,) = (tmp_path / "runs").iterdir()
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"audit.jsonl", "transcript.jsonl", "run.json", "result.json"}
    assert any(p.parent.name == "screens" for p in files)
    for path in files:
        assert needle not in path.read_bytes(), f"the key leaked into {path.relative_to(run_dir)}"
    assert KEY not in proc.stderr and KEY not in proc.stdout
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["agent"] == vendor and run_json["model_base_url"].startswith("http://127.0.0.1:")


def test_cli_runs_a_model_agent_to_a_pass(tmp_path: Path, server: ModelServer) -> None:
    server.script(
        ANTHROPIC_PATH,
        anthropic_message(
            tool_use("t1", "left_click", coordinate=list(FIELD)),
            tool_use("t2", "type", text=PHRASE),
            tool_use("t3", "left_click", coordinate=list(VERIFY)),
        ),
        anthropic_message(text_block("done"), stop_reason="end_turn"),
    )
    proc = _cli(
        tmp_path,
        server,
        "anthropic",
        "--model",
        "claude-opus-4-8",
        "--on-confirm",
        "approve",
        env={"ANTHROPIC_API_KEY": KEY},
    )
    assert proc.returncode == 0, proc.stderr
    assert "status: passed" in proc.stderr
    assert server.bodies(ANTHROPIC_PATH)[0]["model"] == "claude-opus-4-8"
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["model"] == "claude-opus-4-8"


@pytest.mark.parametrize(("vendor", "variable"), [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")])
def test_cli_missing_key_is_a_usage_error_naming_the_variable(
    tmp_path: Path, server: ModelServer, vendor: str, variable: str
) -> None:
    proc = _cli(tmp_path, server, vendor)
    assert proc.returncode == 2
    assert variable in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()
    assert server.received == []


def test_cli_key_from_the_settings_file_and_cost_cap_without_price(tmp_path: Path, server: ModelServer) -> None:
    server.script(OPENAI_PATH, openai_response(message("nothing to do")))
    config = tmp_path / "settings.toml"
    config.write_text(f'openai_api_key = "{KEY}"\nmodel_retries = 0\n')
    proc = _cli(tmp_path, server, "openai", env={"CUA_TUI_CONFIG": str(config)})
    assert proc.returncode == 1 and "status: failed" in proc.stderr  # ran (the verifier found no proof)
    assert server.received[0].headers["authorization"] == f"Bearer {KEY}"

    policy = tmp_path / "policy.toml"
    policy.write_text("[limits]\nmax_cost_usd = 1\n")
    proc = _cli(
        tmp_path, server, "openai", "--model", "mystery-model", "--policy", str(policy), env={"OPENAI_API_KEY": KEY}
    )
    assert proc.returncode == 2
    assert "no price is known for model 'mystery-model'" in proc.stderr


def test_cli_model_flags_are_refused_for_script_agents(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('{"turns": []}')
    command = [sys.executable, "-m", "cua_tui.cli", "run", "--headless", "--backend", "sim"]
    command += ["--agent", f"script:{script}", "--model", "x", "--runs-dir", str(tmp_path / "runs")]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "only for the openai, anthropic and openai-compatible agents" in proc.stderr


def test_importing_the_cli_does_not_import_the_sdks() -> None:
    code = "import sys, cua_tui.cli, cua_tui.factory\n"
    code += "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------------
def test_settings_hold_keys_and_model_options_without_showing_the_keys(tmp_path: Path) -> None:
    from cua_tui.config import ConfigError, Settings

    path = tmp_path / "config.toml"
    path.write_text(
        f'openai_api_key = "{KEY}"\nanthropic_api_key = "file-key-1234"\nmodel_timeout = 30\nmodel_retries = 0\n'
        '[model_prices]\n"my-gateway-model" = [2.0, 8]\n'
    )
    settings = Settings.load({"CUA_TUI_CONFIG": str(path)})
    assert KEY not in repr(settings) and "file-key-1234" not in repr(settings)
    assert settings.api_key("openai", {}) == KEY
    assert settings.api_key("anthropic", {"ANTHROPIC_API_KEY": "env-key-5678"}) == "env-key-5678"  # env wins
    assert (settings.model_timeout, settings.model_retries) == (30, 0)
    assert settings.model_prices == {"my-gateway-model": (2.0, 8.0)}
    for bad in ("model_timeout = 0", "model_retries = 99", '[model_prices]\n"m" = [1.0]', "model_timeout = nan"):
        path.write_text(bad + "\n")
        with pytest.raises(ConfigError) as info:
            Settings.load({"CUA_TUI_CONFIG": str(path)})
        assert str(path) in str(info.value)
    path.write_text("openai_api_key = 12345678\n")  # a wrong type: the message names the field, not the value
    with pytest.raises(ConfigError) as info:
        Settings.load({"CUA_TUI_CONFIG": str(path)})
    assert "openai_api_key" in str(info.value) and "12345678" not in str(info.value)
