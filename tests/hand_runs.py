"""Runs in which a person's hand shows (issue 35, point 1), each a real run of the real supervisor on the sim
desktop with a script agent: a typing the reviewer corrected before approving it, a run taken over (a typing
stretch and a click of the reviewer's own), the same decision answered in three runs of a fleet with one key,
and a soft budget and a deadline deciding a step."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from conftest import make_supervisor
from fleet_cases import FORM, opts

from cua_tui.agents.script import Script, ScriptAgent
from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core import fleet_queue as fq
from cua_tui.core.actions import Action, Kind
from cua_tui.core.policy import Policy
from cua_tui.core.ports import Answer, DecisionRequest, Ruling
from cua_tui.core.queue_rules import group_items
from cua_tui.core.rundir import RunDir
from cua_tui.core.supervisor import RunConfig, Supervisor
from cua_tui.desktops.sim import SimDesktop
from cua_tui.fleet_runner import Fleet, FleetTask

OPERATOR = "alice@desk-7"
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}
VERIFY_AT = (550, 182)
VERIFY = {"type": "click", "button": "left", "x": VERIFY_AT[0], "y": VERIFY_AT[1]}
PROPOSED, CORRECTED = "helo", "hello world"  # the model's text, and the reviewer's
PHRASE = "cua-tui verified"  # what the reviewer types in the takeover
WAIT_S = 30.0


class Correcting:
    """Answers as a person at the TUI would: the typing corrected to ``CORRECTED`` before approving it."""

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        action = request.action
        if action is None or action.kind is not Kind.TYPE:
            return Ruling(Answer.APPROVE, "human (TUI)", human=True)
        return Ruling(Answer.APPROVE, "human (TUI)", human=True, edit=dataclasses.replace(action, text=CORRECTED))


def edited_run(tmp_path: Path) -> Path:
    """Click the field, type ``PROPOSED`` (corrected to ``CORRECTED``), click Verify."""
    turns = [{"text": "filling the form", "actions": [FIELD, {"type": "type", "text": PROPOSED}, VERIFY]}]
    sup, _events, _agent = make_supervisor(tmp_path, turns, approver=Correcting(), operator=OPERATOR)
    sup.run()
    return sup.rundir.path


class TakingOver:
    """At the first decision, takes the desktop instead of answering (as ``T`` does)."""

    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        assert self.supervisor is not None and self.supervisor.take_over() is None
        return Ruling(Answer.REJECT, "human (TUI)", human=True, takeover=True)


def taken_over_run(tmp_path: Path) -> Path:
    """The model clicks the field and proposes a typing; the reviewer takes the desktop instead, types
    ``PHRASE`` a key at a time (one stretch: its ``typed`` records, then the whole text's), clicks Verify
    and hands back; the model's next turn waits."""
    turns: list[dict[str, Any]] = [
        {"actions": [FIELD, {"type": "type", "text": "wrong"}]},
        {"actions": [{"type": "wait"}]},
    ]
    desktop = SimDesktop()
    config = RunConfig(
        task="fill the form", backend="sim", agent="script", model=None, screen=desktop.size,
        policy=Policy.default(), operator=OPERATOR,
    )  # fmt: skip
    approver = TakingOver()
    agent = ScriptAgent(Script.from_data({"turns": turns, "final_text": "done"}))
    # The run's clock stands still: the stretch ends at the click (another input), never at a pause a
    # slow machine would make between two keys.
    sup = Supervisor(
        config, desktop, agent, approver, RunDir.create(tmp_path / "runs"), fsync=False, clock=lambda: 1000.0
    )
    approver.supervisor = sup
    started = threading.Event()
    sup.subscribe(lambda stamped: started.set() if isinstance(stamped.event, ev.TakeoverStarted) else None)
    thread = threading.Thread(target=sup.run, daemon=True)
    thread.start()
    assert started.wait(WAIT_S), "never taken over"
    for character in PHRASE:
        assert sup.takeover_input(Action(Kind.TYPE, text=character)) is None
    assert sup.takeover_input(Action(Kind.CLICK, point=VERIFY_AT)) is None
    sup.hand_back()
    thread.join(WAIT_S)
    assert sup.result is not None
    return sup.rundir.path


class _Queued:
    """A fleet listener that lets the test wait for the requests queued (no polling of the fleet)."""

    def __init__(self) -> None:
        self.items: list[fq.QueueItem] = []
        self.cond = threading.Condition()

    def __call__(self, event: fq.FleetEvent) -> None:
        if isinstance(event, fq.RequestQueued):
            with self.cond:
                self.items.append(event.item)
                self.cond.notify_all()

    def wait(self, n: int) -> list[fq.QueueItem]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.items) >= n, WAIT_S), self.items
            return list(self.items)


def grouped_runs(tmp_path: Path, size: int = 3) -> tuple[list[Path], str]:
    """``size`` runs of the form task in a fleet, waiting on the same typing: one group (core/grouping.py,
    as the fleet queue forms it), answered with one approval that each run records as its own. Returns
    the runs' directories and the group's id."""
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")})
    tasks = [FleetTask(f"form-{n}", opts(settings, FORM, operator=OPERATOR)) for n in range(size)]
    fleet = Fleet(tasks, runs_dir=tmp_path / "runs", concurrency=size)
    queued = _Queued()
    fleet.subscribe(queued)
    fleet.start()
    items = queued.wait(size)
    (group,) = group_items(items)  # the same decision: one group of them all
    assert group.size == size, [i.likeness for i in items]
    for member in group.members:
        assert fleet.answer(member, Answer.APPROVE, group=(group.id, group.size)) is None
    assert fleet.wait(WAIT_S), "the fleet never ended"
    return [Path(row.path) for row in fleet.rows() if row.path], group.id


class GoOnThenWait:
    """Says go on to a soft budget; leaves an action's decision to its deadline (as a reviewer away would)."""

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        if request.kind == "budget":
            return Ruling(Answer.APPROVE, "human (TUI)", human=True)
        cancel.wait(WAIT_S)  # the deadline sets it: what is answered after it is not taken
        return Ruling(Answer.APPROVE, "human (TUI)", human=True)


def budget_and_deadline_run(tmp_path: Path, deadline_s: float = 2.0) -> Path:
    """A soft budget of one step asked before the typing (go on), then the typing left to its deadline."""
    turns = [{"actions": [FIELD, {"type": "type", "text": "x"}]}]
    policy = Policy.default().with_limits(ask_at_steps=1, decision_timeout=deadline_s)
    sup, _events, _agent = make_supervisor(tmp_path, turns, approver=GoOnThenWait(), policy=policy, operator=OPERATOR)
    sup.run()
    return sup.rundir.path
