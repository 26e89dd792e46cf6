"""The single-run panes (batch, audit, status) kept up to date from a run's events: one place, for the live
App (app.py) and the fleet TUI's full view of one run (fleet.py). ``root`` is the App or Screen that holds
the panes; the RunView has already taken the event (``RunView.apply``) when these are called."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from textual.widget import Widget

from ..core import events as ev
from ..core.run_view import RunView
from ..core.text import visible
from .audit_pane import AuditPane
from .batch import BatchPane
from .status import StatusBar

W = TypeVar("W", bound=Widget)


class Panes(Protocol):
    def query_one(self, selector: type[W]) -> W: ...


def follow_event(
    root: Panes, view: RunView, stamped: ev.Stamped, clock: Callable[[], float], *, audit: bool = True
) -> None:
    """Show one event in the audit pane (unless ``audit`` is False: the caller records it later), the batch
    pane and the status bar."""
    event = stamped.event
    if audit:
        root.query_one(AuditPane).record(event, stamped.seq, stamped.head)
    status = root.query_one(StatusBar)
    batch = root.query_one(BatchPane)
    match event:
        case ev.ModelTurn():
            if event.actions:
                batch.start_turn(event.turn, event.text)
            else:  # the agent is done: keep the last batch in view, add its final words
                batch.final_text(event.text)
        case ev.ActionProposed():
            action = view.actions[event.index]
            row = batch.add(event.index, action.kind, action.params, error=action.error)
            if action.error:
                row.set_verdict(action.verdict, action.reason)
        case ev.PolicyVerdict() | ev.DecisionMade() | ev.Outcome():
            row = batch.rows.get(event.index)
            action = view.actions.get(event.index)
            if row is not None and action is not None:
                if isinstance(event, ev.PolicyVerdict):
                    row.set_verdict(action.verdict, action.reason)
                else:
                    row.set_state(action.state, action.decided_by)
        case ev.RunEnded():
            status.final = f"{event.status} · {visible(event.reason, limit=80)}"
            status.ended = status.ended or clock()
            root.query_one(AuditPane).set_state("sealed")
    status.show(view)


def fill_from_view(root: Panes, view: RunView, clock: Callable[[], float]) -> None:
    """Start the panes from a run's state so far (a view opened on a run that is already going): the shown
    turn's actions with their verdicts and states, the counters, the end if it came."""
    batch = root.query_one(BatchPane)
    if view.batch_turn:
        batch.start_turn(view.batch_turn, view.batch_text)
        for index in sorted(view.actions):
            action = view.actions[index]
            row = batch.add(index, action.kind, action.params, error=action.error)
            if action.verdict:
                row.set_verdict(action.verdict, action.reason)
            if action.state != "waiting" or action.decided_by:
                row.set_state(action.state, action.decided_by)
        if view.final_text is not None:
            batch.final_text(view.final_text)
    status = root.query_one(StatusBar)
    if view.ended is not None:
        status.final = f"{view.ended.status} · {visible(view.ended.reason, limit=80)}"
        status.ended = clock()
        root.query_one(AuditPane).set_state("sealed")
    status.show(view)
