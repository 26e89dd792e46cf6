"""Hostile model replies against the REAL SDKs on the loopback server: nesting, numbers JSON does not
have, lone surrogates, and huge batches. Each either ends the run `error` with one clear line (never a
traceback or "internal error"), or reaches the supervisor as data, and every call id / tool_use of a reply
is answered whatever the supervisor returned for it."""

from __future__ import annotations

import json
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
    text_block,
    tool_use,
)
from test_model_agents import anthropic_agent, openai_agent, supervise

from cua_tui.agents.vendor_agent import NO_RESULT
from cua_tui.core import events as ev
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.audit import verify_run
from cua_tui.core.ports import ActionResult, AgentError, Answer, CallResult, OutcomeStatus
from cua_tui.desktops.sim import SimDesktop

pytestmark = pytest.mark.timeout(120)

LONE = json.loads('"\\ud800"')
MALFORMED = "agent: malformed reply from the model API: "


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def openai_body(levels: int, where: str) -> bytes:
    """An OpenAI reply with ``levels`` nested lists in one place of it."""
    body = json.dumps(openai_response(message("hi"), computer_call("call_1", {"type": "click", "x": 1, "y": 2})))
    marker = {
        "action argument": ('"x": 1', '"x": @'),
        "unknown field of an action": ('"x": 1', '"x": 1, "extra": @'),
        "unknown output item": ('"output": [', '"output": [{"type": "mystery", "data": @}, '),
        "usage": ('"total_tokens"', '"deep": @, "total_tokens"'),
    }[where]
    assert marker[0] in body
    return body.replace(marker[0], marker[1], 1).encode().replace(b"@", deep(levels))


def anthropic_body(levels: int, where: str) -> bytes:
    body = json.dumps(anthropic_message(text_block("hi"), tool_use("toolu_1", "left_click", coordinate=[1, 2])))
    marker = {
        "action argument": ('"coordinate": [1, 2]', '"coordinate": @'),
        "unknown field of an action": ('"coordinate": [1, 2]', '"coordinate": [1, 2], "extra": @'),
        "unknown output item": ('"content": [', '"content": [{"type": "mystery", "data": @}, '),
        "usage": ('"output_tokens"', '"deep": @, "output_tokens"'),
    }[where]
    assert marker[0] in body
    return body.replace(marker[0], marker[1], 1).encode().replace(b"@", deep(levels))


PLACES = ["action argument", "unknown field of an action", "unknown output item", "usage"]


def start(server: ModelServer, vendor: str, body: bytes | dict[str, Any], *more: dict[str, Any]) -> Any:
    path, make = (OPENAI_PATH, openai_agent) if vendor == "openai" else (ANTHROPIC_PATH, anthropic_agent)
    server.script(path, Reply(body) if isinstance(body, bytes) else body, *more)
    return make(server)


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
@pytest.mark.parametrize("where", PLACES)
@pytest.mark.parametrize("levels", [70, 5_000, 200_000])
def test_deep_nesting_in_a_reply_ends_the_run_error_in_one_line(
    tmp_path: Path, server: ModelServer, vendor: str, where: str, levels: int
) -> None:
    body = (openai_body if vendor == "openai" else anthropic_body)(levels, where)
    run = supervise(tmp_path, start(server, vendor, body))
    assert run.status == "error"
    assert run.result.reason.startswith(MALFORMED + "nesting deeper than 64 (line 1, column "), run.result.reason
    assert "RecursionError" not in run.result.reason and "internal error" not in run.result.reason
    (error,) = run.of(ev.ErrorRaised)
    assert error.where == "agent"
    assert run.of(ev.ActionProposed) == []  # nothing of the reply reached the parser, nothing ran
    assert verify_run(run.result.path).code == 0


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_nesting_within_the_cap_reaches_the_parser_which_refuses_it(
    tmp_path: Path, server: ModelServer, vendor: str
) -> None:
    # OpenAI: response, output, item, actions, action = 5 levels; Anthropic: message, content, block,
    # input = 4. The rest of the 64 are lists in the action's argument.
    if vendor == "openai":
        body = openai_body(59, "action argument")
        done = openai_response(message("done"))
    else:
        body = anthropic_body(60, "action argument")
        done = anthropic_message(text_block("done"), stop_reason="end_turn")
    run = supervise(tmp_path, start(server, vendor, body, done))
    assert run.status == "failed", run.result.reason  # the run went on; the sim form saw no submission
    (proposal,) = run.of(ev.ActionProposed)
    assert proposal.error_code == "bad_schema" and "nests deeper than 8 levels" in proposal.error
    assert [o[2] for o in run.outcomes()] == ["refused"]
    assert len(server.received) == 2  # the refusal was answered


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("literal", "detail"),
    [
        (b"NaN", "not JSON (NaN is not a JSON number)"),
        (b"-Infinity", "not JSON (-Infinity is not a JSON number)"),
        (b"1e999", "not JSON (the number 1e999 is too large for a double)"),
        (b"1" * 5000, "not JSON (an integer of more than 4300 digits)"),
    ],
)
def test_numbers_json_does_not_have_end_the_run_error(
    tmp_path: Path, server: ModelServer, vendor: str, literal: bytes, detail: str
) -> None:
    body = (openai_body if vendor == "openai" else anthropic_body)(1, "action argument").replace(b"[]", literal, 1)
    run = supervise(tmp_path, start(server, vendor, body))
    assert (run.status, run.result.reason) == ("error", MALFORMED + detail)


# ---------------------------------------------------------------------------------------------------
# Lone surrogates
# ---------------------------------------------------------------------------------------------------
def frame() -> Any:
    desktop = SimDesktop()
    desktop.start()
    return desktop.screenshot()


def test_openai_model_text_with_a_lone_surrogate_reaches_the_supervisor_as_text(server: ModelServer) -> None:
    agent = start(
        server,
        "openai",
        openai_response(message(f"I see {LONE} here"), computer_call("call_1", {"type": "type", "text": f"a{LONE}"})),
        openai_response(message(f"done {LONE}")),
    )
    turn = agent.start("task", frame())
    assert turn.text == f"I see {LONE} here"
    assert turn.calls[0].actions == ({"type": "type", "text": f"a{LONE}"},)  # as sent, for the parser
    result = CallResult("call_1", (ActionResult(0, OutcomeStatus.FAILED, f"Failed: cannot type {LONE}"),))
    assert agent.next_turn((result,), frame()).text == f"done {LONE}"
    report = server.bodies(OPENAI_PATH)[1]["input"][1]["content"][0]["text"]
    assert "Failed: cannot type \\ud800" in report  # what it sends back is encodable


def test_anthropic_history_with_lone_surrogates_is_sent_back_encodable(server: ModelServer) -> None:
    agent = start(
        server,
        "anthropic",
        anthropic_message(
            text_block(f"I see {LONE}"),
            tool_use("toolu_1", "type", text=f"x{LONE}"),
            tool_use("toolu_2", "wait", toolset_name=f"computer{LONE}", duration=1),
        ),
        anthropic_message(text_block("done"), stop_reason="end_turn"),
    )
    turn = agent.start("task", frame())
    assert turn.text == f"I see {LONE}"
    assert turn.calls[0].actions[0]["input"] == {"text": f"x{LONE}"}  # as sent, for the parser
    assert turn.calls[1].actions[0]["toolset_name"] == f"computer{LONE}"
    agent.next_turn((), frame())
    history, results = server.bodies(ANTHROPIC_PATH)[1]["messages"][1:]
    assert history["role"] == "assistant"
    assert history["content"][0]["text"] == "I see \\ud800"
    assert history["content"][1]["input"] == {"text": "x\\ud800"}
    assert [r.get("toolset_name") for r in results["content"][:2]] == ["computer", "computer\\ud800"]


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_an_id_that_cannot_be_echoed_ends_the_run_error(tmp_path: Path, server: ModelServer, vendor: str) -> None:
    if vendor == "openai":
        reply = openai_response(computer_call(f"call{LONE}", {"type": "wait"}))
        expected = "the call_id of a computer_call is not encodable text"
    else:
        reply = anthropic_message(tool_use(f"toolu{LONE}", "wait", duration=1))
        expected = "the id of a tool_use block is not encodable text"
    run = supervise(tmp_path, start(server, vendor, json.dumps(reply).encode()))
    assert (run.status, run.result.reason) == ("error", MALFORMED + expected)


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_a_run_whose_model_text_has_a_lone_surrogate_is_recorded(
    tmp_path: Path, server: ModelServer, vendor: str
) -> None:
    if vendor == "openai":
        replies = [openai_response(message(f"done {LONE}"))]
    else:
        replies = [anthropic_message(text_block(f"done {LONE}"), stop_reason="end_turn")]
    run = supervise(tmp_path, start(server, vendor, *replies), approver=FixedApprover(Answer.APPROVE))
    assert run.status == "failed", run.result.reason  # the sim form's verifier, not an internal error
    assert verify_run(run.result.path).code == 0


# ---------------------------------------------------------------------------------------------------
# Huge batches: every call answered, whatever the supervisor returned
# ---------------------------------------------------------------------------------------------------
REFUSAL = "Refused by sandbox policy. Stop and report."


def test_openai_answers_a_100000_action_call_refused_whole_in_two_lines(server: ModelServer) -> None:
    n = 100_000
    agent = start(
        server,
        "openai",
        openai_response(computer_call("call_big", *[{"type": "wait"}] * n), computer_call("call_2", {"type": "wait"})),
        openai_response(message("ok")),
        openai_response(message("ok")),
    )
    turn = agent.start("task", frame())
    assert [len(c.actions) for c in turn.calls] == [n, 1]
    refused = tuple(ActionResult(i, OutcomeStatus.REFUSED, REFUSAL) for i in range(n))
    agent.next_turn((CallResult("call_big", refused),), frame())  # nothing at all for call_2
    body = server.bodies(OPENAI_PATH)[1]
    outputs = [i for i in body["input"] if i.get("type") == "computer_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_big", "call_2"]
    report = body["input"][-1]["content"][0]["text"]
    assert report.splitlines() == [
        "What happened to your last computer actions:",
        "Call call_big:",
        f"  actions 1-{n}: {REFUSAL}",
        "Call call_2: Not executed: no result was recorded for this call.",
    ]
    assert len(server.received[1].raw) < 200_000  # the screenshot and a few lines, not 100,000 of them


def test_openai_reports_a_call_whose_results_are_empty_or_short_as_not_executed(server: ModelServer) -> None:
    agent = start(
        server,
        "openai",
        openai_response(computer_call("call_a", {"type": "wait"}), computer_call("call_b", *[{"type": "wait"}] * 3)),
        openai_response(message("ok")),
    )
    agent.start("task", frame())
    ok = ActionResult(0, OutcomeStatus.EXECUTED, "OK")
    agent.next_turn((CallResult("call_a", ()), CallResult("call_b", (ok,))), frame())
    report = server.bodies(OPENAI_PATH)[1]["input"][-1]["content"][0]["text"]
    assert report.splitlines()[1:] == [
        "Call call_a: Not executed: no result was recorded for this call.",
        "Call call_b:",
        "  action 1: OK",
        "  actions 2-3: Not executed: no result was recorded for this action.",
    ]


def test_anthropic_answers_every_tool_use_of_a_huge_turn(server: ModelServer) -> None:
    n = 5_000
    blocks = [tool_use(f"toolu_{i}", "wait", duration=1) for i in range(n)]
    agent = start(
        server,
        "anthropic",
        anthropic_message(*blocks),
        anthropic_message(*blocks[:3]),
        anthropic_message(text_block("done"), stop_reason="end_turn"),
    )
    assert len(agent.start("task", frame()).calls) == n
    refused = tuple(
        CallResult(f"toolu_{i}", (ActionResult(0, OutcomeStatus.REFUSED, REFUSAL),)) for i in range(0, n, 2)
    )
    agent.next_turn(refused, frame())  # the odd ones: no result at all
    results = server.bodies(ANTHROPIC_PATH)[1]["messages"][-1]["content"]
    assert [r["tool_use_id"] for r in results[:-1]] == [f"toolu_{i}" for i in range(n)]
    assert all(r["is_error"] and r["toolset_name"] == "computer" for r in results[:-1])
    assert {r["content"][0]["text"] for r in results[0:-1:2]} == {REFUSAL}
    assert {r["content"][0]["text"] for r in results[1:-1:2]} == {NO_RESULT}
    assert results[-1]["type"] == "image"
    agent.next_turn((), frame())  # a turn refused whole with no results: still one answer per tool_use
    results = server.bodies(ANTHROPIC_PATH)[2]["messages"][-1]["content"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results[:-1]] == [(f"toolu_{i}", True) for i in range(3)]


def test_agent_error_messages_are_encodable(tmp_path: Path, server: ModelServer) -> None:
    reply = {"id": "r", "status": "failed", "output": [], "error": {"message": f"bad {LONE} thing"}}
    with pytest.raises(AgentError) as info:
        start(server, "openai", reply).start("task", frame())
    str(info.value).encode("utf-8")
    assert "bad \\ud800 thing" in str(info.value)


@pytest.mark.parametrize("sdk_name", ["openai", "anthropic"])
def test_a_recursion_error_below_our_cap_is_still_a_malformed_reply(sdk_name: str) -> None:
    import importlib

    from cua_tui.agents.errors import describe_sdk_error

    sdk = importlib.import_module(sdk_name)
    message = describe_sdk_error(RecursionError("deep"), sdk, timeout=5, retries=1, base_url=None)
    assert message == "malformed reply from the model API: nested too deeply to read"
