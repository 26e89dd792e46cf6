"""RunView: the state of a run at event N, derived from the event stream alone.

One reducer serves every front end that shows a run: the live TUI (events from the supervisor), and the
front ends to come that read a run directory back (replay, ``--follow``) or watch many runs (the fleet).
Nothing else decides what is pending, which turn is shown or how far the chain has got: each widget
renders what this state says. It holds no Textual objects, so it is tested as plain data.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from . import events as ev
from . import focus
from .actions import Action
from .attention import Alert, Attention
from .events import RunPhase
from .policy import Verdict
from .ports import DecisionRequest, OutcomeStatus
from .takeover import typed_record, typed_summary

ZERO_HEAD = "0" * 64
# actions of one turn the view holds: a supervisor proposes at most 100, so only an edited log has more,
# and each copy of the view (replay's checkpoints) would hold them all
MAX_ROWS = 1000


class ActionState(StrEnum):
    """Where a proposed action stands: waiting, approved, or its outcome (``OutcomeStatus``)."""

    WAITING = "waiting"
    APPROVED = "approved"
    EXECUTED = OutcomeStatus.EXECUTED.value
    DECLINED = OutcomeStatus.DECLINED.value
    REFUSED = OutcomeStatus.REFUSED.value
    FAILED = OutcomeStatus.FAILED.value
    NOT_EXECUTED = OutcomeStatus.NOT_EXECUTED.value
    STALE = OutcomeStatus.STALE.value


def _enum[E: StrEnum](kind: type[E], value: object, fallback: E) -> E:
    """A recorded value as its enum; one this version does not know (a hostile or newer run) as ``fallback``."""
    if not isinstance(value, str):
        return fallback
    try:
        return kind(value)
    except ValueError:
        return fallback


@dataclass
class ActionView:
    """One proposed action of the shown turn, as far as the stream has told."""

    index: int
    kind: str
    params: str
    error: str = ""
    parsed: Action | None = None
    # the action as recorded (what a run read back from disk has)
    record: dict[str, Any] | None = None
    verdict: Verdict | None = None  # None: not classified yet
    reason: str = ""
    state: ActionState = ActionState.WAITING
    decided_by: str = ""
    # the reviewer changed it before approving it: what the model proposed (``params`` says what ran)
    proposed: str = ""
    edited: dict[str, Any] | None = None
    # who proposed it: "" the model, ``human (takeover)`` the reviewer at the desktop
    by: str = ""


@dataclass
class RunView:
    """The state of one run after the events applied so far. ``apply`` is the only way it changes, and each
    call bumps ``version`` (a front end redraws what depends on the view when it moves on)."""

    version: int = 0
    seq: int = -1  # the last event's place in the chain
    head: str = ZERO_HEAD  # the SHA-256 of its line
    turn: int = 0
    steps: int = 0
    tokens: int = 0
    cost: float | None = None
    phase: RunPhase = RunPhase.STARTING
    detail: str = ""
    batch_turn: int = 0  # the turn whose actions are shown
    batch_text: str = ""
    batch_size: int = 0
    actions: dict[int, ActionView] = field(default_factory=dict)
    final_text: str | None = None
    # the request the run waits on, from its decision_requested event
    pending: DecisionRequest | None = None
    screen: ev.ScreenCaptured | None = None  # the newest screenshot with pixels
    ended: ev.RunEnded | None = None
    verification: ev.VerificationDone | None = None  # the verdict and who vouched for it
    killed: bool = False
    grants: dict[int, ev.GrantAdded] = field(default_factory=dict)  # scoped approvals in force
    # what the desktop's sandbox obtained (desktop_ready)
    isolation: dict[str, Any] | None = None
    # alerts not yet seen, routine noise folded
    attention: Attention = field(default_factory=Attention)
    alert: Alert | None = None  # the alert the last event raised, if any
    # the focused field (core/focus.py): where typing goes
    focused: tuple[int, int] | None = None
    # the run's task, agent, limits and policy, as it started
    started: ev.RunStarted | None = None
    # the reviewer has the desktop (until it is handed back), and whether a private stretch is on
    takeover: ev.TakeoverStarted | None = None
    private: bool = False
    # The one thing a front end notes here itself: the pending request it has answered (or may no longer
    # answer: the run was killed, or ended), until the stream records the decision; ``open_request`` is then
    # None, so that the panel hides it and no second key goes to it.
    answered: DecisionRequest | None = None
    # a drill up (core/drills.py): the real row and screen it stands in front of, put back once it is
    # answered; ``revealed``: the last drill answered, which a live view tells its reviewer
    held: (
        tuple[
            int, ActionView | None, ev.ScreenCaptured | None, str, DecisionRequest | None, str, tuple[int, int] | None
        ]
        | None
    ) = None
    revealed: ev.DrillAnswered | None = None

    @property
    def open_request(self) -> DecisionRequest | None:
        """The request awaiting this front end: the run's pending one, unless answered here already."""
        return None if self.pending is self.answered else self.pending

    @property
    def events(self) -> int:
        return self.seq + 1

    def snapshot(self) -> RunView:
        """A copy that ``apply`` on this view leaves as it is (replay's checkpoints, one every 512 lines): what
        ``apply`` changes in place (the rows, the grants, the alerts) copied, the events it holds (frozen,
        their records never changed) shared. A deep copy held about 5 KB a checkpoint, twice the time."""
        rows = {index: dataclasses.replace(row) for index, row in self.actions.items()}
        return dataclasses.replace(self, actions=rows, grants=dict(self.grants), attention=self.attention.copy())

    @property
    def running(self) -> bool:
        return self.ended is None

    def apply(self, stamped: ev.Stamped) -> None:
        """Fold one event (as written, with its chain place) into the state."""
        self.version += 1
        self.seq, self.head = stamped.seq, stamped.head
        self.alert = self.attention.apply(stamped)
        event = stamped.event
        match event:
            case ev.RunStarted():
                self.started = event
            case ev.Phase():
                self.phase, self.detail = _enum(RunPhase, event.phase, self.phase), event.detail
            case ev.DesktopReady():
                self.isolation = event.isolation
            case ev.Executing():
                self.phase, self.detail = RunPhase.EXECUTING, event.summary
            case ev.ScreenCaptured() if event.png is not None:
                self.screen = event
            case ev.ModelTurn():
                self._model_turn(event)
            case ev.ActionProposed() if len(self.actions) < MAX_ROWS or event.index in self.actions:
                kind = (event.action or {}).get("kind", "") if event.action else (event.raw_kind or "?")
                view = ActionView(
                    event.index, kind, event.summary or event.error, event.error, event.parsed, event.action,
                    by=event.by,
                )  # fmt: skip
                if event.error:
                    view.verdict, view.reason = Verdict.BLOCK, f"malformed: {event.error}"
                self.actions[event.index] = view
            case ev.PolicyVerdict():
                if (row := self.actions.get(event.index)) is not None:
                    # else: not a verdict this version knows
                    known = event.verdict in Verdict.__members__.values()
                    row.verdict, row.reason = (Verdict(event.verdict) if known else None), event.reason
            case ev.DecisionRequested():
                if self.ended is None and not self.killed:
                    self.pending = event.request
            case ev.DecisionMade():
                self._decision(event)
            case ev.DrillShown():
                self._drill_shown(event)
            case ev.DrillAnswered():
                self._drill_answered(event)
            case ev.Outcome():
                if (row := self.actions.get(event.index)) is not None:
                    # an unknown status claims nothing
                    row.state = _enum(ActionState, event.status, row.state)
                    self.focused = focus.after_outcome(self.focused, event.status, row.parsed, row.record)
                self.steps = event.step
            case ev.Typed():
                # a takeover's typing stretch so far: the row shows the stretch, not its first key
                row = self.actions.get(event.index)
                record = typed_record(row.record, event) if row is not None else None
                if row is not None and record is not None:
                    row.record, row.parsed, row.params = record, None, typed_summary(event)
            case ev.TakeoverStarted():
                self.takeover, self.private = event, False
            case ev.TakeoverPrivate():
                self.private = event.private is True
            case ev.TakeoverEnded():
                self.takeover, self.private = None, False
            case ev.GrantAdded():
                self.grants[event.grant] = event
            case ev.GrantRevoked():
                self.grants.pop(event.grant, None)
            case ev.Killed():
                self.killed, self.pending, self.takeover = True, None, None
            case ev.VerificationDone():
                self.verification = event
            case ev.RunEnded():
                self.ended, self.pending, self.takeover = event, None, None

    def _model_turn(self, event: ev.ModelTurn) -> None:
        self.turn = event.turn
        self.tokens = event.total_tokens
        self.cost = event.total_cost_usd
        if event.actions:
            self.batch_turn, self.batch_text, self.batch_size = event.turn, event.text, event.actions
            self.actions = {}
            self.final_text = None
        else:
            # the agent is done: the last batch stays in view with its final words
            self.final_text = event.text

    def _drill_shown(self, event: ev.DrillShown) -> None:
        """A drill is pending as a request is: its action the batch's pending row, its screen on the pane,
        until it is answered (a recorded run's drill has no request in memory: nothing is pending)."""
        request = event.request
        if request is None or self.ended is not None or self.killed:
            return
        # what was pending then comes back with it: nothing in a run (its real request is asked after the drill),
        # the real request on a team's queue (asked before, held back on this analyst's screen only)
        self.held = (
            event.index,
            self.actions.get(event.index),
            self.screen,
            self.batch_text,
            self.pending,
            event.drill,
            self.focused,
        )
        if isinstance(event.focus, list) and len(event.focus) == 2 and all(type(c) is int for c in event.focus):
            self.focused = (event.focus[0], event.focus[1])  # where its typing goes, on its own screen
        self.batch_text = event.words if isinstance(event.words, str) else ""
        action = request.action
        if action is not None:
            row = ActionView(event.index, action.kind.value, action.describe(), "", action, action.to_record())
            row.verdict, row.reason = Verdict.CONFIRM, request.reason
            self.actions[event.index] = row
        frame = request.frame
        if frame is not None:
            self.screen = ev.ScreenCaptured(frame.sha256, frame.width, frame.height, len(frame.png), event.turn,
                                            self.steps, index=event.index, png=frame.png)  # fmt: skip
        self.pending = request

    def _drill_answered(self, event: ev.DrillAnswered) -> None:
        if self.held is None or self.held[5] != event.drill:
            return  # not the drill up in this view (a recorded one, another analyst's on a team's queue)
        self.pending = self._put_back()
        self.revealed = event

    def drill_withdrawn(self) -> None:
        """The drill up is taken down unanswered (a team analyst's, whose request another answered): the real
        row, screen and words of its place back, nothing pending."""
        self._put_back()
        self.pending = None

    def _put_back(self) -> DecisionRequest | None:
        """The place a drill stood in, as it was; what was pending then."""
        if self.held is None:
            return None
        index, row, screen, self.batch_text, pending, _drill, self.focused = self.held
        if row is not None:
            self.actions[index] = row
        else:
            self.actions.pop(index, None)
        self.screen = screen or self.screen
        self.held = None
        return pending

    def _decision(self, event: ev.DecisionMade) -> None:
        row = self.actions.get(event.index)
        if row is not None and event.subject == "action" and event.by != "policy":
            if event.decision == "approve":
                row.state = ActionState.APPROVED
                if isinstance(event.edited, dict) and isinstance(ran := event.edited.get("ran"), dict):
                    self._edited(row, event.edited, ran, event.ran)
            row.decided_by = event.by
        if self.pending is not None and event.index == self.pending.index and event.turn == self.pending.turn:
            self.pending = None

    @staticmethod
    def _edited(row: ActionView, edited: dict[str, Any], ran: dict[str, Any], action: Action | None) -> None:
        """What runs is the reviewer's action: the row says it (and keeps the proposal), and the focus
        follows what ran."""
        row.edited = edited
        row.proposed = row.params
        row.parsed, row.record = action, ran
        summary = edited.get("summary")
        row.params = action.describe() if action is not None else summary if isinstance(summary, str) else "(edited)"
