"""Deadlines that fail closed (issue 25, point 2): a decision with a deadline that nobody answers in time
is rejected, never approved, recorded as decided by the deadline with what the model then hears; the
deadline comes from the policy, the settings or a task of a tasks file. Real supervisor runs on the sim
desktop; the approvers are the TUI's handshake and the headless prompt."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core.approvers import HandshakeApprover
from cua_tui.core.policy import DEFAULT_POLICY_TOML, Policy, PolicyError
from cua_tui.core.ports import Answer
from cua_tui.core.supervisor import deadline_message
from cua_tui.headless_approvers import TerminalApprover

TYPING = [{"actions": [{"type": "click", "button": "left", "x": 250, "y": 182}, {"type": "type", "text": "x"}]}]


def with_deadline(seconds: float) -> Policy:
    return Policy.default().with_limits(decision_timeout=seconds)


def of(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_an_unanswered_decision_is_rejected_at_its_deadline(tmp_path: Path) -> None:
    approver = HandshakeApprover()
    sup, events, agent = make_supervisor(tmp_path, TYPING, approver=approver, policy=with_deadline(2))
    started = time.monotonic()
    result = sup.run()
    took = time.monotonic() - started
    (asked,) = of(events, ev.DecisionRequested)
    assert asked.deadline_s == 2 and asked.request is not None and asked.request.deadline_s == 2
    (decided,) = [d for d in of(events, ev.DecisionMade) if d.by != "policy"]
    assert (decided.decision, decided.by, decided.operator) == (Answer.REJECT, "deadline (2 s)", "")
    assert decided.note == deadline_message(2)
    outcome = of(events, ev.Outcome)[-1]
    assert (outcome.status, outcome.message) == ("declined", deadline_message(2))
    assert agent.received[0][0].results[-1].message == deadline_message(2)  # what the model heard
    assert took >= 2 and result.status == "failed"  # nothing typed: the sim form's verifier fails it


def test_an_answer_before_the_deadline_is_taken_and_one_after_it_is_not(tmp_path: Path) -> None:
    approver = HandshakeApprover()
    sup, events, _agent = make_supervisor(tmp_path, TYPING * 2, approver=approver, policy=with_deadline(2))
    thread = threading.Thread(target=sup.run)
    thread.start()
    first = approver.wait_for_request(10)
    assert first is not None and approver.answer(Answer.APPROVE, first)
    # the second is left to its deadline; an approval after it reaches nothing
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(d.by.startswith("deadline") for d in of(events, ev.DecisionMade)):
        time.sleep(0.05)
    second = next(r for r in of(events, ev.DecisionRequested) if r.turn == 2).request
    assert not approver.answer(Answer.APPROVE, second)
    thread.join(20)
    decided = [(d.turn, d.decision, d.by) for d in of(events, ev.DecisionMade) if d.by != "policy"]
    assert decided == [(1, Answer.APPROVE, "human"), (2, Answer.REJECT, "deadline (2 s)")]


def test_the_headless_prompt_keeps_the_same_rule(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "r", encoding="utf-8")
    out = io.StringIO()
    try:
        approver = TerminalApprover(stdin, out)
        sup, events, _agent = make_supervisor(tmp_path, TYPING, approver=approver, policy=with_deadline(2))
        sup.run()
    finally:
        os.close(write_fd)
        stdin.close()
    (decided,) = [d for d in of(events, ev.DecisionMade) if d.by != "policy"]
    assert (decided.decision, decided.by) == (Answer.REJECT, "deadline (2 s)")
    assert "Approve?" in out.getvalue()


def test_the_kill_switch_still_wins_during_a_deadline(tmp_path: Path) -> None:
    approver = HandshakeApprover()
    sup, _events, _agent = make_supervisor(tmp_path, TYPING, approver=approver, policy=with_deadline(60))
    thread = threading.Thread(target=sup.run)
    thread.start()
    assert approver.wait_for_request(10) is not None
    sup.kill(by="human (TUI)")
    thread.join(20)
    assert not thread.is_alive() and sup.result is not None and sup.result.status == "killed"


@pytest.mark.parametrize("value", ["1", "-5", "90000", "nan"])
def test_a_deadline_no_person_could_meet_is_a_clear_policy_error(value: str) -> None:
    text = DEFAULT_POLICY_TOML.replace("decision_timeout = 0 ", f"decision_timeout = {value} ")
    assert text != DEFAULT_POLICY_TOML
    with pytest.raises(PolicyError, match="decision_timeout"):
        Policy.from_toml(text)


# ---------------------------------------------------------------------------------------------------
# Where the deadline comes from: a task of a tasks file, else the policy, else the settings
# ---------------------------------------------------------------------------------------------------
def settings_with(tmp_path: Path, text: str) -> Any:
    from cua_tui.config import Settings

    path = tmp_path / "config.toml"
    path.write_text(text)
    return Settings.load({"CUA_TUI_CONFIG": str(path)})


def built_timeout(tmp_path: Path, **options: Any) -> float:
    from cua_tui.build import RunOptions, build_run
    from cua_tui.desktops.sim import SimDesktop

    run = build_run(
        RunOptions(backend="sim", agent=None, script={"turns": [], "final_text": "done"},
                   runs_dir=tmp_path / "runs", fsync=False, desktop=SimDesktop(), **options)
    )  # fmt: skip
    return run.supervisor.policy.limits.decision_timeout


def test_the_task_wins_then_the_policy_then_the_settings(tmp_path: Path) -> None:
    from cua_tui.config import ConfigError

    settings = settings_with(tmp_path, "decision_timeout = 30\n")
    assert built_timeout(tmp_path, settings=settings) == 30
    policy = tmp_path / "policy.toml"
    policy.write_text(DEFAULT_POLICY_TOML.replace("decision_timeout = 0 ", "decision_timeout = 45 "))
    assert built_timeout(tmp_path, settings=settings, policy_path=policy) == 45
    assert built_timeout(tmp_path, settings=settings, policy_path=policy, decision_timeout=5) == 5
    assert built_timeout(tmp_path, settings=settings_with(tmp_path, "")) == 0
    with pytest.raises(ConfigError, match="decision_timeout"):
        settings_with(tmp_path, "decision_timeout = 0.5\n")


def test_a_tasks_file_sets_a_deadline_per_task(tmp_path: Path) -> None:
    from cua_tui.build import RunOptions
    from cua_tui.core.tasks import TasksError, parse_tasks
    from cua_tui.fleet_runner import task_options

    text = '[[tasks]]\nname = "a"\ntask = "t"\ndecision_timeout = 4\n\n[[tasks]]\nname = "b"\ntask = "t"\n'
    tasks = parse_tasks(text)
    options = [task_options(spec, tasks, RunOptions(decision_timeout=None)) for spec in tasks.tasks]
    assert [o.decision_timeout for o in options] == [4, None]
    with pytest.raises(TasksError, match=r"line 4.*decision_timeout"):
        parse_tasks('[[tasks]]\nname = "a"\ntask = "t"\ndecision_timeout = 1\n')
