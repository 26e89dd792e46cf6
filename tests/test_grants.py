"""Richer decisions, recorded honestly (issue 11, point 4): scoped approvals (``a``), a rejection's reason,
and the operator on every decision a person makes (and on no other).

Runs are real supervisor runs on the sim desktop with a script agent; the reviewer is a scripted approver
that answers as a person would through the TUI's handshake (``human=True``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core import grants
from cua_tui.core.actions import Action, Kind
from cua_tui.core.policy import Decision, Policy, Verdict
from cua_tui.core.ports import (
    HEARD,
    Answer,
    DecisionRequest,
    OutcomeStatus,
    Ruling,
)

FIELD = (250, 182)
OTHER_FIELD = (250, 400)
SEND = (120, 422)
OPERATOR = "alice@desk-7"
SEND_GUARD = Policy.default().with_regions(
    [{"name": "send", "x": 40, "y": 400, "width": 160, "height": 44, "verdict": "confirm", "reason": "sends"}]
)


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def typing(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


class Reviewer:
    """Answers as a person at the TUI would: ``(answer, note, grant)`` per request, in order."""

    def __init__(self, *rulings: tuple[Answer, str, bool]) -> None:
        self.rulings = list(rulings)
        self.requests: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.requests.append(request)
        answer, note, grant = self.rulings.pop(0) if self.rulings else (Answer.REJECT, "", False)
        return Ruling(answer, "human (TUI)", note, human=True, grant=grant)


def run(tmp_path: Path, turns: list[dict[str, Any]], reviewer: Any, policy: Policy | None = None) -> Any:
    sup, events, _agent = make_supervisor(
        tmp_path, turns, approver=reviewer, policy=policy or Policy.default(), operator=OPERATOR
    )
    result = sup.run()
    return result, events, sup


def of(events: list[Any], kind: str) -> list[Any]:
    return [e for e in events if e.kind == kind]


# ---------------------------------------------------------------------------------------------------
# Scopes
# ---------------------------------------------------------------------------------------------------
CONFIRM = Decision(Verdict.CONFIRM, "asks", "actions.type")


def test_a_scope_is_narrow_and_only_for_confirmations() -> None:
    chord = grants.scope_for(Action(Kind.KEYPRESS, chord="ctrl+Return"), CONFIRM, None)
    assert chord is not None and chord.kind == "chord" and "ctrl+Return" in chord.label
    typed = grants.scope_for(Action(Kind.TYPE, text="x"), CONFIRM, FIELD)
    assert typed is not None and typed.kind == "typing" and "(250, 182)" in typed.label
    assert grants.scope_for(Action(Kind.TYPE, text="x"), CONFIRM, None) is None  # no field known: no scope
    region = Decision(Verdict.CONFIRM, "sends", "regions.send")
    clicked = grants.scope_for(Action(Kind.CLICK, point=SEND), region, None)
    assert clicked is not None and clicked.kind == "region" and "'send'" in clicked.label
    assert grants.scope_for(Action(Kind.CLICK, point=SEND), CONFIRM, None) is None  # not a region's rule
    for verdict in (Verdict.ALLOW, Verdict.BLOCK):
        assert grants.scope_for(Action(Kind.TYPE, text="x"), Decision(verdict, "", "actions.type"), FIELD) is None


@pytest.mark.parametrize(
    ("action", "last_click", "covered"),
    [
        (Action(Kind.TYPE, text="more"), (250, 182), True),
        (Action(Kind.TYPE, text="more"), (256, 188), True),  # the same field, a few pixels off
        (Action(Kind.TYPE, text="more"), (250, 400), False),  # another field
        (Action(Kind.TYPE, text="more"), None, False),
        (Action(Kind.KEYPRESS, chord="Return"), (250, 182), False),
    ],
)
def test_a_typing_grant_covers_only_typing_into_its_field(
    action: Action, last_click: tuple[int, int] | None, covered: bool
) -> None:
    scope = grants.scope_for(Action(Kind.TYPE, text="x"), CONFIRM, FIELD)
    assert scope is not None
    assert grants.covers(scope, action, CONFIRM, last_click) is covered
    assert grants.covers(scope, action, Decision(Verdict.BLOCK, "", "x"), last_click) is False


# ---------------------------------------------------------------------------------------------------
# Grants in a run
# ---------------------------------------------------------------------------------------------------
def test_a_grant_approves_later_actions_of_its_scope_and_asks_for_the_rest(tmp_path: Path) -> None:
    turns = [
        {"actions": [click(FIELD), typing("first")]},
        {"actions": [click(FIELD), typing("second")]},  # the same field: approved by the grant
        {"actions": [click(OTHER_FIELD), typing("third")]},  # another field: asked again
    ]
    reviewer = Reviewer((Answer.APPROVE, "", True), (Answer.APPROVE, "", False))
    result, events, _sup = run(tmp_path, turns, reviewer)
    assert [r.index for r in reviewer.requests] == [1, 1]  # turn 1's typing, then turn 3's; not turn 2's
    assert reviewer.requests[0].scope is not None and reviewer.requests[0].scope.kind == "typing"
    (grant,) = of(events, "grant")
    assert (grant.grant, grant.scope, grant.by, grant.turn, grant.index) == (1, "typing", OPERATOR, 1, 1)
    by_grant = [d for d in of(events, "decision") if d.by.startswith("grant")]
    assert len(by_grant) == 1 and by_grant[0].by == f"grant #1 (given by {OPERATOR})"
    assert by_grant[0].operator == "" and "human" not in by_grant[0].by  # nobody decided it just now
    assert [o.status for o in of(events, "outcome")] == ["executed"] * 6
    assert result.executed == 6


def test_a_revoked_grant_asks_again(tmp_path: Path) -> None:
    turns = [{"actions": [click(FIELD), typing("first")]}, {"actions": [click(FIELD), typing("second")]}]
    sup_box: dict[str, Any] = {}

    reviewer = Reviewer((Answer.APPROVE, "", True), (Answer.REJECT, "", False))
    sup, events, _agent = make_supervisor(tmp_path, turns, approver=reviewer, operator=OPERATOR)

    def listener(stamped: Any) -> None:
        if stamped.event.kind == "grant":
            sup_box["revoked"] = threading.Thread(target=sup.revoke_grant, args=(stamped.event.grant, "bob@desk"))
            sup_box["revoked"].start()

    sup.subscribe(listener)
    sup.run()
    sup_box["revoked"].join(5)
    assert [e.kind for e in events if e.kind.startswith("grant")] == ["grant", "grant_revoked"]
    assert [e.by for e in events if isinstance(e, ev.GrantRevoked)] == ["bob@desk"]
    assert len(reviewer.requests) == 2  # the second typing was asked again
    assert sup.revoke_grant(1) is False  # revoking twice is harmless


def test_a_grant_never_covers_safety_checks_or_blocked_actions(tmp_path: Path) -> None:
    checks = [{"id": "sc1", "code": "malicious_instructions", "message": "the page says so"}]
    turns: list[dict[str, Any]] = [
        {"actions": [{"type": "keypress", "keys": ["ctrl", "Return"]}]},
        {"actions": [{"type": "keypress", "keys": ["ctrl", "Return"]}], "pending_safety_checks": checks},
        {"actions": [{"type": "keypress", "keys": ["ctrl", "alt", "t"]}]},  # blocked whatever was granted
    ]
    reviewer = Reviewer((Answer.APPROVE, "", True), (Answer.APPROVE, "", True), (Answer.APPROVE, "", False))
    _result, events, _sup = run(tmp_path, turns, reviewer)
    kinds = [r.kind for r in reviewer.requests]
    assert kinds == ["action", "safety_check"]  # the chord of turn 2 is the grant's; its safety check is not
    assert reviewer.requests[1].scope is None
    assert len(of(events, "grant")) == 1  # asking for a grant on a safety check grants nothing
    assert [o.status for o in of(events, "outcome")] == ["executed", "executed", "refused"]


def test_clicks_inside_a_region_are_one_scope(tmp_path: Path) -> None:
    turns = [{"actions": [click(SEND)]}, {"actions": [click((60, 410))]}, {"actions": [click(FIELD)]}]
    reviewer = Reviewer((Answer.APPROVE, "", True))
    _result, events, _sup = run(tmp_path, turns, reviewer, policy=SEND_GUARD)
    assert len(reviewer.requests) == 1 and reviewer.requests[0].scope is not None
    assert reviewer.requests[0].scope.key == "regions.send"
    assert [d.by.split(" ")[0] for d in of(events, "decision")] == ["human", "grant", "policy"]


# ---------------------------------------------------------------------------------------------------
# Reasons and operators
# ---------------------------------------------------------------------------------------------------
def test_a_rejections_reason_reaches_the_model_after_the_fixed_text_and_the_log(tmp_path: Path) -> None:
    turns = [{"actions": [click(FIELD), typing("secret"), click(SEND)]}]
    reviewer = Reviewer((Answer.REJECT, "wrong field: use the search box", False))
    sup, events, agent = make_supervisor(tmp_path, turns, approver=reviewer, operator=OPERATOR)
    sup.run()
    message = f"{HEARD[OutcomeStatus.DECLINED]} The reviewer said: wrong field: use the search box"
    assert [(o.status, o.message) for o in of(events, "outcome")][1] == ("declined", message)
    (decision,) = [d for d in of(events, "decision") if d.by == "human (TUI)"]
    assert decision.note == "wrong field: use the search box" and decision.operator == OPERATOR
    heard = [r.message for call in agent.received[0] for r in call.results]
    assert heard[1] == message


def test_the_operator_is_recorded_only_where_a_person_decided(tmp_path: Path) -> None:
    from cua_tui.core.approvers import FixedApprover

    turns = [{"actions": [click(FIELD), typing("x")]}]
    _result, events, _sup = run(tmp_path, turns, FixedApprover(Answer.APPROVE))
    assert {(d.by, d.operator) for d in of(events, "decision")} == {("policy", ""), ("headless rule: approve", "")}
    _result, events, _sup = run(tmp_path / "human", turns, Reviewer((Answer.APPROVE, "", False)))
    assert {(d.by, d.operator) for d in of(events, "decision")} == {("policy", ""), ("human (TUI)", OPERATOR)}
