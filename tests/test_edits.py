"""Edit, then approve (issue 24, point 1), in the core: what an edit may change, the run's own check of what
a front end sends, the policy applied again, the record of both forms and what the model hears.

Runs are real supervisor runs on the sim desktop with a script agent; the reviewer answers as the TUI's
handshake does (``human=True``), with the action it changed."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core.actions import Action, ActionError, Kind, text_sha256
from cua_tui.core.approvers import HandshakeApprover
from cua_tui.core.audit import verify_run
from cua_tui.core.edits import Edited, apply_edit, check_edit, edit_note, editable
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.policy import Policy
from cua_tui.core.ports import (
    HEARD,
    Answer,
    DecisionRequest,
    OutcomeStatus,
    Ruling,
)
from cua_tui.core.run_view import RunView

SCREEN = Size(1024, 720)
OPERATOR = "alice@desk-7"
SEND = {"name": "send", "x": 40, "y": 400, "width": 160, "height": 44, "verdict": "confirm", "reason": "sends"}
WIPE = {"name": "wipe", "x": 600, "y": 400, "width": 100, "height": 40, "verdict": "block", "reason": "wipes"}
GUARDED = Policy.default().with_regions([SEND, WIPE])


class Editor:
    """Answers as a person at the TUI would, changing the action first: ``change(action) -> Action``."""

    def __init__(self, change: Any, *, human: bool = True) -> None:
        self.change = change
        self.human = human
        self.requests: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.requests.append(request)
        if len(self.requests) > 1 or request.action is None:
            return Ruling(Answer.REJECT, "human (TUI)", human=True)
        return Ruling(Answer.APPROVE, "human (TUI)", human=self.human, edit=self.change(request.action))


def run(tmp_path: Path, turns: list[dict[str, Any]], editor: Any, policy: Policy = GUARDED) -> Any:
    sup, events, agent = make_supervisor(tmp_path, turns, approver=editor, policy=policy, operator=OPERATOR)
    result = sup.run()
    return result, events, agent


def of(events: list[Any], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def audit(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.path / "audit.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------------------------------
# What an edit may change
# ---------------------------------------------------------------------------------------------------
def test_each_kind_edits_only_its_own_parts() -> None:
    click = Action(Kind.CLICK, point=(100, 200))
    assert apply_edit(click, SCREEN, point=(110, 205)).point == (110, 205)
    with pytest.raises(ActionError, match="no text"):
        apply_edit(click, SCREEN, text="x")
    with pytest.raises(ActionError, match="outside the 1024x720 screen"):
        apply_edit(click, SCREEN, point=(1024, 5))
    typed = Action(Kind.TYPE, text="helo")
    assert apply_edit(typed, SCREEN, text="hello\n").text == "hello\n"
    with pytest.raises(ActionError, match="empty"):
        apply_edit(typed, SCREEN, text="")
    with pytest.raises(ActionError, match="at most"):
        apply_edit(typed, SCREEN, text="x" * 10_001)
    key = Action(Kind.KEYPRESS, chord="Return")
    assert apply_edit(key, SCREEN, chord="CTRL+a").chord == "ctrl+a"
    with pytest.raises(ActionError, match="unknown key"):
        apply_edit(key, SCREEN, chord="ctrl+nokey")
    scroll = Action(Kind.SCROLL, point=(10, 10), scroll_y=5)
    assert (apply_edit(scroll, SCREEN, scroll=(0, -3)).scroll_y, apply_edit(scroll, SCREEN, point=(1, 2)).point) == (
        -3,
        (1, 2),
    )
    with pytest.raises(ActionError, match="no notches"):
        apply_edit(scroll, SCREEN, scroll=(0, 0))
    with pytest.raises(ActionError, match="at most 100"):
        apply_edit(scroll, SCREEN, scroll=(0, 101))
    drag = Action(Kind.DRAG, path=((10, 10), (50, 50), (90, 90)))
    assert apply_edit(drag, SCREEN, end=(95, 99)).path == ((10, 10), (50, 50), (95, 99))
    assert apply_edit(drag, SCREEN, start=(0, 0)).path[0] == (0, 0)
    for kind in (Kind.WAIT, Kind.SCREENSHOT):
        assert not editable(Action(kind))
        with pytest.raises(ActionError, match="nothing to edit"):
            apply_edit(Action(kind), SCREEN)


@pytest.mark.parametrize(
    ("proposed", "ran", "problem"),
    [
        (Action(Kind.CLICK, point=(1, 1)), Action(Kind.CLICK, point=(1, 1)), "changes nothing"),
        (Action(Kind.CLICK, point=(1, 1)), Action(Kind.TYPE, text="x"), "keeps the action's kind"),
        (Action(Kind.CLICK, point=(1, 1)), Action(Kind.CLICK, point=(2, 2), button="right"), "change its button"),
        (Action(Kind.CLICK, point=(1, 1)), Action(Kind.CLICK, point=(5000, 2)), "outside"),
        (Action(Kind.KEYPRESS, chord="Return"), Action(Kind.KEYPRESS, chord="Return", repeat=9), "its repeat"),
        (Action(Kind.KEYPRESS, chord="Return"), Action(Kind.KEYPRESS, chord="CTRL+A"), "more than the editor can"),
        (Action(Kind.WAIT, duration_ms=5), Action(Kind.WAIT, duration_ms=9), "nothing to edit"),
        (
            Action(Kind.DRAG, path=((1, 1), (5, 5), (9, 9))),
            Action(Kind.DRAG, path=((1, 1), (6, 6), (9, 9))),
            "more than the editor can",
        ),
    ],
)
def test_the_run_checks_what_a_front_end_sends_as_an_edit(proposed: Action, ran: Action, problem: str) -> None:
    found = check_edit(proposed, ran, SCREEN)
    assert found is not None and problem in found


def test_the_model_hears_what_ran_in_its_own_coordinates_and_typed_text_by_length() -> None:
    half = Scaling(SCREEN, Size(512, 360))
    moved = Edited(Action(Kind.CLICK, point=(100, 200)), Action(Kind.CLICK, point=(300, 400)))
    assert edit_note(moved, half) == (
        "The reviewer changed this action before it ran: click at (150, 200) ran, not click at (50, 100)."
    )
    typed = Edited(Action(Kind.TYPE, text="secret-1"), Action(Kind.TYPE, text="secret-22"))
    note = edit_note(typed, half)
    assert note == "The reviewer changed the text before it ran: 9 characters were typed (you proposed 8)."
    assert "secret" not in note


# ---------------------------------------------------------------------------------------------------
# In a run
# ---------------------------------------------------------------------------------------------------
def test_a_moved_click_runs_where_the_reviewer_put_it_and_both_forms_are_recorded(tmp_path: Path) -> None:
    # the model aims at the send button's edge; the reviewer moves it into the button
    turns = [{"actions": [{"type": "click", "button": "left", "x": 45, "y": 405}]}]
    editor = Editor(lambda a: dataclasses.replace(a, point=(120, 422)))
    result, events, agent = run(tmp_path, turns, editor)
    (decision,) = [d for d in of(events, ev.DecisionMade) if d.by != "policy"]
    assert (decision.decision, decision.operator) == (Answer.APPROVE, OPERATOR)
    assert decision.edited["proposed"] == {"kind": "click", "x": 45, "y": 405, "button": "left"}
    assert decision.edited["ran"] == {"kind": "click", "x": 120, "y": 422, "button": "left"}
    assert (decision.edited["verdict"], decision.edited["rule"]) == ("confirm", "regions.send")
    (executing,) = of(events, ev.Executing)
    assert executing.summary == "click at (120, 422)"
    (outcome,) = of(events, ev.Outcome)
    assert outcome.status == "executed"
    assert outcome.message == (
        "OK. The reviewer changed this action before it ran: click at (120, 422) ran, not click at (45, 405)."
    )
    # what the model heard is that exact message
    (heard,) = agent.received[0][0].results
    assert heard.message == outcome.message
    # on disk: the decision with both forms, and a chain that verifies
    (line,) = [r for r in audit(result) if r["kind"] == "decision" and r["by"] != "policy"]
    assert line["edited"]["summary"] == "click at (120, 422)" and "ran" not in line
    report = verify_run(result.path)
    assert report.finding is None and report.sealed
    # the run's state shows what ran, and keeps the proposal
    view = RunView()
    for stamped in _stamped(result.path):
        view.apply(stamped)
    row = view.actions[0]
    assert (row.params, row.proposed, row.state) == ("click at (120, 422)", "click at (45, 405)", "executed")


def test_corrected_text_is_typed_and_recorded_only_as_length_and_hash(tmp_path: Path) -> None:
    turns = [{"actions": [{"type": "click", "button": "left", "x": 250, "y": 182}, {"type": "type", "text": "helo"}]}]
    editor = Editor(lambda a: dataclasses.replace(a, text="hello world"))
    result, events, _agent = run(tmp_path, turns, editor)
    (decision,) = [d for d in of(events, ev.DecisionMade) if d.by != "policy"]
    assert decision.edited["ran"]["text_len"] == 11
    assert decision.edited["ran"]["text_sha256"] == text_sha256("hello world")
    assert decision.edited["proposed"]["text_sha256"] == text_sha256("helo")
    raw = (result.path / "audit.jsonl").read_text()
    assert "hello world" not in raw and "helo" not in raw
    outcome = of(events, ev.Outcome)[-1]
    assert outcome.message.endswith("11 characters were typed (you proposed 4).")


def test_an_edit_into_a_blocked_region_never_runs(tmp_path: Path) -> None:
    turns = [{"actions": [{"type": "click", "button": "left", "x": 60, "y": 410}]}]
    editor = Editor(lambda a: dataclasses.replace(a, point=(650, 420)))  # into "wipe"
    _result, events, _agent = run(tmp_path, turns, editor)
    assert of(events, ev.Executing) == []
    decision = [d for d in of(events, ev.DecisionMade) if d.subject == "action"][-1]
    assert (decision.decision, decision.by) == (Answer.REJECT, "policy")
    assert decision.edited["refused"] == "wipes" and decision.edited["verdict"] == "block"
    (outcome,) = of(events, ev.Outcome)
    assert (outcome.status, outcome.message) == ("declined", HEARD[OutcomeStatus.DECLINED])


def test_an_edit_that_changes_what_it_may_not_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    turns = [{"actions": [{"type": "click", "button": "left", "x": 60, "y": 410}]}]
    editor = Editor(lambda a: dataclasses.replace(a, point=(61, 411), button="right"))
    _result, events, _agent = run(tmp_path, turns, editor)
    assert of(events, ev.Executing) == []
    decision = [d for d in of(events, ev.DecisionMade) if d.subject == "action"][-1]
    assert decision.by == "edit check (fail closed)" and "button" in decision.edited["refused"]


def test_only_a_persons_answer_may_change_an_action(tmp_path: Path) -> None:
    turns = [{"actions": [{"type": "click", "button": "left", "x": 60, "y": 410}]}]
    editor = Editor(lambda a: dataclasses.replace(a, point=(61, 411)), human=False)
    _result, events, _agent = run(tmp_path, turns, editor)
    assert of(events, ev.Executing) == []


def test_the_handshake_carries_an_edit_with_an_approval_only(tmp_path: Path) -> None:
    approver = HandshakeApprover()
    turns = [{"actions": [{"type": "click", "button": "left", "x": 60, "y": 410}]}]
    sup, events, _agent = make_supervisor(tmp_path, turns, approver=approver, policy=GUARDED, operator=OPERATOR)
    thread = threading.Thread(target=sup.run)
    thread.start()
    request = approver.wait_for_request(10)
    assert request is not None and request.action is not None
    moved = dataclasses.replace(request.action, point=(100, 420))
    assert approver.answer(Answer.APPROVE, request, edit=moved, screen="ab" * 32)
    thread.join(20)
    (decision,) = [d for d in of(events, ev.DecisionMade) if d.by != "policy"]
    assert decision.edited["ran"]["x"] == 100 and decision.screen == "ab" * 32
    (outcome,) = of(events, ev.Outcome)
    assert "click at (100, 420) ran" in outcome.message


def _stamped(path: Path) -> list[ev.Stamped]:
    from cua_tui.core.runlog import RunReader

    with RunReader(path) as reader:
        return reader.poll()


# ---------------------------------------------------------------------------------------------------
# Replay, export and the detail view show both forms
# ---------------------------------------------------------------------------------------------------
def test_replay_and_the_html_export_show_what_was_proposed_and_what_ran(tmp_path: Path) -> None:
    from cua_tui.core import describe
    from cua_tui.core.timeline import build
    from cua_tui.export import html as html_export
    from cua_tui.export import open_run

    turns = [{"actions": [{"type": "click", "button": "left", "x": 45, "y": 405}]}]
    result, _events, _agent = run(tmp_path, turns, Editor(lambda a: dataclasses.replace(a, point=(120, 422))))
    (step,) = build(_stamped(result.path)).steps
    assert step.edit is not None and step.ran == {"kind": "click", "x": 120, "y": 422, "button": "left"}
    panel = "".join(text for text, _role in describe.step_panel(step, 1))
    ran = f"action   click at (120, 422) · EDITED by {OPERATOR} before it ran\n"
    assert ran + "proposed click at (45, 405) (the model's" in panel  # what ran first, the proposal under it
    assert "the model heard: OK. The reviewer changed this action" in panel
    with open_run(result.path) as opened:
        page = html_export.render(opened)
    assert f"<strong>edited</strong> by {OPERATOR} before it ran: click at (120, 422)</dd>" in page
    assert "<dt>proposed</dt><dd>the model's, not run: click at (45, 405)</dd>" in page


def test_a_refused_edit_is_shown_as_refused_and_the_step_as_proposed(tmp_path: Path) -> None:
    from cua_tui.core import describe
    from cua_tui.core.timeline import build

    turns = [{"actions": [{"type": "click", "button": "left", "x": 60, "y": 410}]}]
    result, _events, _agent = run(tmp_path, turns, Editor(lambda a: dataclasses.replace(a, point=(650, 420))))
    (step,) = build(_stamped(result.path)).steps
    assert step.edit is None and step.ran == step.proposal.action
    panel = "".join(text for text, _role in describe.step_panel(step, 1))
    assert "the reviewer's edit to click at (650, 420) was refused (wipes); the action did not run" in panel
    assert panel.count("click at (60, 410)") == 1 and "EDITED" not in panel  # the proposal, never run
    from cua_tui.export import html as html_export
    from cua_tui.export import open_run

    with open_run(result.path) as opened:
        page = html_export.render(opened)
    row = '<span class="ran">click at (60, 410)</span> <span class="badge edited">edit refused</span>'
    assert row in page and "proposed:" not in page  # what was to run, the edit marked refused
    assert "<dt>edit refused</dt>" in page and "was refused (wipes); the action did not run" in page


def test_the_escaped_form_of_typed_text_goes_back_exactly() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from cua_tui.core.edits import escape_text, unescape_text

    @given(st.text())
    def roundtrip(text: str) -> None:
        written = escape_text(text)
        assert "\n" not in written and "\t" not in written and "\x1b" not in written
        assert unescape_text(written) == text

    roundtrip()
    assert escape_text("a\tb\\n\u202e") == "a\\tb\\\\n\\u202e"
    with pytest.raises(ActionError, match=r"\\q is not an escape"):
        unescape_text("\\q")
    with pytest.raises(ActionError, match="a backslash at the end"):
        unescape_text("abc\\")


# ---------------------------------------------------------------------------------------------------
# What each vendor's adapter sends (the real SDKs, talking to the loopback model server)
# ---------------------------------------------------------------------------------------------------
def test_the_anthropic_adapter_sends_the_edit_in_the_calls_tool_result(tmp_path: Path) -> None:
    from model_server import ANTHROPIC_PATH, ModelServer, anthropic_message, text_block, tool_use

    from cua_tui.agents.anthropic_agent import AnthropicAgent
    from cua_tui.core.rundir import RunDir
    from cua_tui.core.supervisor import RunConfig, Supervisor
    from cua_tui.desktops.sim import SimDesktop

    with ModelServer() as server:
        server.script(
            ANTHROPIC_PATH,
            anthropic_message(tool_use("toolu_1", "left_click", coordinate=[45, 405])),
            anthropic_message(text_block("done"), stop_reason="end_turn"),
        )
        agent = AnthropicAgent("sk-ant-test-not-a-key", base_url=server.anthropic_base_url, timeout=5.0, max_retries=1)
        desktop = SimDesktop()
        config = RunConfig(
            task="t", backend="sim", agent=agent.name, model=agent.model, screen=desktop.size, policy=GUARDED,
            operator=OPERATOR,
        )  # fmt: skip
        editor = Editor(lambda a: dataclasses.replace(a, point=(120, 422)))
        Supervisor(config, desktop, agent, editor, RunDir.create(tmp_path / "runs")).run()
        bodies = server.bodies(ANTHROPIC_PATH)
    (result,) = [b for b in bodies[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert result["tool_use_id"] == "toolu_1" and not result.get("is_error")
    assert result["content"][0] == {
        "type": "text",
        "text": "OK. The reviewer changed this action before it ran: click at (120, 422) ran, not click at (45, 405).",
    }
    assert result["content"][1]["type"] == "image"
