"""Budgets that ask before they stop (issue 25, point 3): crossing a soft budget (``ask_at_*``) is a decision
with the spend shown; go on raises it by its own amount, no ends the run ``limit``; the hard cap still ends
the run unasked. Real supervisor runs on the sim desktop; the cost comes from the agent's usage figures."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core.policy import DEFAULT_POLICY_TOML, Policy, PolicyError
from cua_tui.core.ports import Answer, CallResult, DecisionRequest, Frame, Ruling, Turn, Usage

WAITS = [{"actions": [{"type": "screenshot"}] * 3}, {"actions": [{"type": "screenshot"}] * 3}]


class Reviewer:
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.asked.append(request)
        return Ruling(self.answers.pop(0) if self.answers else Answer.REJECT, "human (TUI)", human=True)


class Costly:
    """The script agent, each turn costing ``cost`` dollars (as a vendor's usage figures would)."""

    def __init__(self, agent: Any, cost: float) -> None:
        self.agent, self.cost = agent, cost
        self.name, self.model = agent.name, agent.model

    def start(self, task: str, frame: Frame) -> Turn:
        turn: Turn = self.agent.start(task, frame)
        return dataclasses.replace(turn, usage=Usage(100, 10, self.cost))

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        turn: Turn = self.agent.next_turn(results, frame, note)
        return dataclasses.replace(turn, usage=Usage(100, 10, self.cost))

    def cancel(self) -> None:
        self.agent.cancel()


def of(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_a_step_budget_asks_and_go_on_raises_it_by_its_own_amount(tmp_path: Path) -> None:
    reviewer = Reviewer(Answer.APPROVE, Answer.APPROVE)
    policy = Policy.default().with_limits(ask_at_steps=2)
    sup, events, _agent = make_supervisor(tmp_path, WAITS, approver=reviewer, policy=policy)
    result = sup.run()
    assert result.status != "limit", result.reason
    assert [r.kind for r in reviewer.asked] == ["budget", "budget"]
    assert [(r.turn, r.index) for r in reviewer.asked] == [(1, 2), (2, 1)]  # after 2 steps, then after 4
    assert reviewer.asked[0].reason == (
        "this run has spent 2 steps of its 200 steps cap (its soft budget is 2 steps): go on? "
        "y raises the soft budget to 4 steps; n ends the run (limit)"
    )
    decided = [d for d in of(events, ev.DecisionMade) if d.subject == "budget"]
    assert [(d.decision, d.by) for d in decided] == [(Answer.APPROVE, "human (TUI)")] * 2
    assert all(o.status == "executed" for o in of(events, ev.Outcome))


def test_no_ends_the_run_limit_and_nothing_more_runs(tmp_path: Path) -> None:
    reviewer = Reviewer(Answer.REJECT)
    policy = Policy.default().with_limits(ask_at_steps=2)
    sup, events, _agent = make_supervisor(tmp_path, WAITS, approver=reviewer, policy=policy)
    result = sup.run()
    assert result.status == "limit" and result.reason == "stopped at its soft steps budget: 2 steps spent"
    statuses = [(o.index, o.status) for o in of(events, ev.Outcome)]
    assert statuses == [(0, "executed"), (1, "executed"), (2, "not_executed")]
    said = "Not executed: the run stopped at its soft steps budget: 2 steps spent."
    assert of(events, ev.Outcome)[-1].message == said


def test_a_cost_budget_asks_with_the_spend_from_the_usage_figures(tmp_path: Path) -> None:
    reviewer = Reviewer(Answer.APPROVE, Answer.REJECT)
    policy = Policy.default().with_limits(ask_at_cost_usd=2.0, max_cost_usd=5.0)
    sup, _events, agent = make_supervisor(tmp_path, WAITS * 3, approver=reviewer, policy=policy)
    sup.agent = Costly(agent, 1.5)
    result = sup.run()
    first, second = reviewer.asked
    assert first.reason.startswith("this run has spent $3.00 of its $5.00 cap (its soft budget is $2.00): go on?")
    assert "raises the soft budget to $4.00" in first.reason
    assert second.reason.startswith("this run has spent $4.50 of its $5.00 cap (its soft budget is $4.00)")
    assert (result.status, result.reason) == ("limit", "stopped at its soft cost budget: $4.50 spent")


def test_the_hard_cap_ends_the_run_without_asking(tmp_path: Path) -> None:
    reviewer = Reviewer(Answer.APPROVE, Answer.APPROVE)
    policy = Policy.default().with_limits(ask_at_cost_usd=2.0, max_cost_usd=3.0)
    sup, _events, agent = make_supervisor(tmp_path, WAITS * 3, approver=reviewer, policy=policy)
    sup.agent = Costly(agent, 2.5)
    result = sup.run()
    assert len(reviewer.asked) == 1  # at $2.50; at $5.00 the hard cap ends it unasked
    assert result.status == "limit" and "cost budget of $3 exceeded" in result.reason


@pytest.mark.parametrize(
    ("line", "problem"),
    [("ask_at_steps = 300", "must be below max_steps"), ("ask_at_cost_usd = -1", "must be >= 0")],
)
def test_a_soft_budget_past_its_hard_cap_is_a_clear_policy_error(line: str, problem: str) -> None:
    name = line.split(" = ")[0]
    text = DEFAULT_POLICY_TOML.replace(f"{name} = 0", line, 1)
    assert text != DEFAULT_POLICY_TOML
    with pytest.raises(PolicyError, match=problem):
        Policy.from_toml(text)
