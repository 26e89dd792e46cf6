"""A run's timeline: its event stream grouped into the steps a reviewer walks through.

One step per proposed action (turn, index): the proposal, the policy's verdict and rule, every decision and
who made it, the outcome with the exact text the model heard and how long it took, and the screens before
and after it (``screens``: the one rule of which screen a review shows). Replay and export both read runs
through this one grouping, so they tell the same story; it is built in one pass over the events and keeps no
pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .takeover import typed_so_far

# outcomes of steps that never ran
NOT_RUN = frozenset({"refused", "declined", "stale", "not_executed"})
# screens the supervisor keeps as the desktop's latest
_LATEST = ("initial", "after_action", "stale_check", "takeover_end")

# What a reviewer jumps to (replay's keys, export's marks): the step's "flags".
# a person, an approver command or a headless rule decided
DECISION = "decision"
REFUSAL = "refusal"  # refused by the policy, declined, stale, malformed
ERROR = "error"  # failed, or an error record during the step
# the sandbox tried to reach a host the proxy refused
EGRESS = "egress"
# the reviewer's own action, in a takeover
TAKEOVER = "takeover"


@dataclass
class Step:
    """One proposed action and everything the run recorded about it."""

    number: int  # 0, 1, ... over the whole run
    turn: int
    index: int
    first_seq: int  # the proposal's place in the chain
    # the last event that belongs to the step (its outcome, or what came before the next)
    last_seq: int
    proposal: ev.ActionProposed
    verdict: ev.PolicyVerdict | None = None
    requests: list[ev.DecisionRequested] = field(default_factory=list)
    decisions: list[ev.DecisionMade] = field(default_factory=list)
    outcome: ev.Outcome | None = None
    # sha256 of the screen the model acted on (its turn's screenshot)
    observed: str | None = None
    # The screen on the desktop when the step was decided or run: the newest one when its first
    # event after the proposal came (after the batch's previous executed action, or the turn's
    # screenshot for the first).
    before: str | None = None
    after: str | None = None  # the screen taken after it ran
    # the last decision that names the screen its reviewer was shown
    reviewed: ev.DecisionMade | None = None
    waiting: bool = False  # a decision was requested and none is recorded yet
    executing: bool = False  # its intent to run was recorded
    refused_egress: list[ev.Egress] = field(default_factory=list)
    errors: list[ev.ErrorRaised] = field(default_factory=list)
    model_text: str = ""
    # the takeover this step belongs to (the reviewer's action) or that followed it (the model's action
    # it stopped), numbered from 1 over the run, with who had the desktop
    takeover: ev.TakeoverStarted | None = None
    takeover_number: int = 0
    # what the model was told after this step besides its outcome (a takeover's account at hand-back)
    told: str = ""

    @property
    def flags(self) -> frozenset[str]:
        flags = set()
        if any(d.by != "policy" for d in self.decisions):
            flags.add(DECISION)
        status = self.outcome.status if self.outcome is not None else ""
        if self.proposal.error or status in ("refused", "declined", "stale"):
            flags.add(REFUSAL)
        if status == "failed" or self.errors:
            flags.add(ERROR)
        if self.refused_egress:
            flags.add(EGRESS)
        if self.by_reviewer:
            flags.add(TAKEOVER)
        return frozenset(flags)

    @property
    def by_reviewer(self) -> bool:
        """The reviewer proposed it (a takeover), not the model."""
        return bool(self.proposal.by)

    @property
    def not_run(self) -> str:
        """The status of a step that never ran ("declined", "refused", ...), else ""."""
        status = str(self.outcome.status) if self.outcome is not None else ""
        return status if status in NOT_RUN else ""

    @property
    def edit(self) -> dict[str, Any] | None:
        """What the reviewer changed before approving (``edited`` of the approval: the action as proposed
        and as run), None when the action ran as proposed or the edit was refused."""
        for decision in self.decisions:
            edited = decision.edited
            approved = decision.decision == "approve" and isinstance(edited, dict) and "refused" not in edited
            if approved and isinstance(edited, dict) and isinstance(edited.get("ran"), dict):
                return edited
        return None

    @property
    def ran(self) -> dict[str, Any] | None:
        """The action's record as it ran (a reviewer's edit, or the proposal)."""
        edit = self.edit
        return edit["ran"] if edit is not None else self.proposal.action

    @property
    def kind(self) -> str:
        action = self.proposal.action
        return str(action.get("kind", "")) if action else (self.proposal.raw_kind or "?")


@dataclass
class Timeline:
    steps: list[Step]
    events: int  # how many events the run recorded
    ended: ev.RunEnded | None
    started: ev.RunStarted | None
    first_screen: str | None  # the initial screenshot
    verification: ev.VerificationDone | None = None  # the verdict and who vouched for it

    def turns(self) -> list[int]:
        """The number of the first step of each turn."""
        firsts: list[int] = []
        last_turn = None
        for step in self.steps:
            if step.turn != last_turn:
                firsts.append(step.number)
                last_turn = step.turn
        return firsts


def build(events: list[ev.Stamped]) -> Timeline:
    """Group a run's events into steps (one pass; events are in chain order)."""
    builder = Builder()
    builder.feed(events)
    return builder.timeline


@dataclass(frozen=True, slots=True)
class Context:
    """What the builder carries from one step to the next, besides the steps themselves: a builder
    started from it at a proposal (``Builder(context=...)``) groups the events from there exactly as one
    that read the whole run (core/runindex rebuilds a long run's steps this way, a turn at a time)."""

    number: int  # the next step's number
    observed: str | None
    latest: str | None
    text: str
    takeover: ev.TakeoverStarted | None
    takeovers: int


class Builder:
    """Builds a timeline event by event, so that following a run still being written costs only its new
    events (``feed`` them as they come; ``timeline`` is always up to date).

    ``recorded`` maps each screen to the line that first recorded it; a builder started from a ``context``
    is handed the whole run's (it only trusts a screen recorded before the decision naming it).
    ``outside`` says whether a (turn, index) is a step proposed before the context: its events then
    belong to that step, not to the step under way here."""

    def __init__(
        self,
        context: Context | None = None,
        recorded: dict[str, int] | None = None,
        outside: Callable[[tuple[int, int]], bool] | None = None,
    ) -> None:
        self.timeline = Timeline([], 0, None, None, None)
        self._by_key: dict[tuple[int, int], Step] = {}
        self._current: Step | None = None  # the step the latest events belong to
        self._recorded = recorded if recorded is not None else {}
        self._outside = outside
        context = context or Context(0, None, None, "", None, 0)
        self._base = context.number  # steps released from memory or before the context
        self._observed = context.observed  # the screen the model acted on this turn
        self._latest = context.latest  # the newest screen
        self._text = context.text
        # the takeover under way and how many the run had
        self._takeover = context.takeover
        self._takeovers = context.takeovers

    def context(self) -> Context:
        """Where the builder stands, for a builder to start from at the next proposal."""
        number = self._base + len(self.timeline.steps)
        return Context(number, self._observed, self._latest, self._text, self._takeover, self._takeovers)

    def release(self) -> list[Step]:
        """Hand over the steps built so far and forget them (a long run's index keeps a mark of each, not
        the step): a later event naming one of them then belongs to no step."""
        released, self.timeline.steps = self.timeline.steps, []
        self._base += len(released)
        for step in released:
            if self._by_key.get((step.turn, step.index)) is step:
                del self._by_key[(step.turn, step.index)]
        if any(step is self._current for step in released):
            self._current = None
        return released

    @property
    def current(self) -> Step | None:
        """The step the newest events belong to (a followed run's step under way)."""
        return self._current

    def feed(self, events: list[ev.Stamped]) -> list[Step]:
        """Take more events; return the steps they added or changed."""
        touched: dict[int, Step] = {}
        line = self.timeline
        for stamped in events:
            line.events += 1
            step = self._take(stamped)
            if step is not None:
                touched[step.number] = step
        return list(touched.values())

    def _take(self, stamped: ev.Stamped) -> Step | None:
        event, line = stamped.event, self.timeline
        match event:
            case ev.RunStarted():
                line.started = event
            case ev.ScreenCaptured():
                self._recorded.setdefault(event.sha256, stamped.seq)
                if event.purpose in _LATEST:
                    line.first_screen = line.first_screen or event.sha256
                    self._latest = event.sha256
                    # The action it follows is named by its index (runs recorded before that: the
                    # current one).
                    owner = self._current if event.index is None else self._by_key.get((event.turn, event.index))
                    if owner is not None and event.purpose == "after_action":
                        owner.after = event.sha256
                        return owner
            case ev.ModelTurn():
                self._observed, self._text = self._latest, event.text
            case ev.ActionProposed():
                step = Step(self._base + len(line.steps), event.turn, event.index, stamped.seq, stamped.seq, event)
                step.observed = self._observed
                step.model_text = self._text
                if self._takeover is not None and event.by:
                    step.takeover, step.takeover_number = self._takeover, self._takeovers
                line.steps.append(step)
                self._by_key[(event.turn, event.index)] = self._current = step
                return step
            case ev.PolicyVerdict() | ev.DecisionRequested() | ev.DecisionMade() | ev.Executing() | ev.Outcome():
                return self._keyed(event, stamped)
            case ev.Typed():
                # a takeover's typing stretch so far: the step shows the stretch, not its first key
                owner = self._by_key.get((event.turn, event.index))
                now = typed_so_far(owner.proposal, event) if owner is not None else None
                if owner is None or now is None:
                    return None
                owner.proposal, owner.last_seq = now, max(owner.last_seq, stamped.seq)
                return owner
            case ev.Phase() if self._current is not None and self._current.outcome is None:
                # What the run does about a step still open (awaiting its decision, running it)
                # belongs to it.
                self._current.last_seq = max(self._current.last_seq, stamped.seq)
                return self._current
            case ev.Egress() if not event.allowed and self._current is not None:
                self._current.refused_egress.append(event)
                return self._current
            case ev.ErrorRaised() if self._current is not None and self._current.outcome is None:
                self._current.errors.append(event)
                return self._current
            case ev.TakeoverStarted() | ev.TakeoverEnded():
                return self._takeover_event(event)
            case ev.VerificationDone():
                line.verification = event
            case ev.RunEnded():
                line.ended = event
        return None

    def _keyed(
        self,
        event: ev.PolicyVerdict | ev.DecisionRequested | ev.DecisionMade | ev.Executing | ev.Outcome,
        stamped: ev.Stamped,
    ) -> Step | None:
        """An event naming its step by (turn, index): the step's from now on."""
        owner = self._by_key.get((event.turn, event.index))
        if owner is None and self._outside is not None and self._outside((event.turn, event.index)):
            # a step proposed before this builder's context: the events after are its own
            self._current = None
        if owner is not None:
            if _untouched(owner):
                # its first event since the proposal: it is decided or run now
                owner.before = self._latest
            _attach(owner, event)
            if isinstance(event, ev.DecisionMade) and self._shown_before(event.screen, stamped):
                # only a screen of this run, recorded before it was shown
                owner.reviewed = event
            owner.last_seq = max(owner.last_seq, stamped.seq)
            self._current = owner
        return owner

    def _shown_before(self, screen: str, stamped: ev.Stamped) -> bool:
        return bool(screen) and self._recorded.get(screen, stamped.seq) < stamped.seq

    def _takeover_event(self, event: ev.TakeoverStarted | ev.TakeoverEnded) -> Step | None:
        """A takeover begins (its actions are numbered by it) or ends: the model hears its account after
        the last step before the hand-back."""
        if isinstance(event, ev.TakeoverStarted):
            self._takeover, self._takeovers = event, self._takeovers + 1
            return None
        self._takeover = None
        if self._current is not None:
            self._current.told = event.told
        return self._current


def _attach(step: Step, event: ev.Event) -> None:
    if isinstance(event, ev.PolicyVerdict):
        step.verdict = event
    elif isinstance(event, ev.DecisionRequested):
        step.requests.append(event)
        step.waiting = True
    elif isinstance(event, ev.DecisionMade):
        step.decisions.append(event)
        step.waiting = False
    elif isinstance(event, ev.Outcome):
        step.outcome = event
        step.waiting = False
    elif isinstance(event, ev.Executing):
        step.executing = True
        step.waiting = False


def _untouched(step: Step) -> bool:
    return (
        step.verdict is None
        and not step.requests
        and not step.decisions
        and step.outcome is None
        and not step.executing
    )


@dataclass(frozen=True)
class Screens:
    """Which screens a review shows for a step (replay, the HTML export and the film strip alike)."""

    # the screen the reviewer was shown at its decision when recorded, else ``Step.before``
    before: str | None
    after: str | None  # the screen after it ran; None when it never ran
    # the decision that recorded ``before`` as the screen its reviewer saw
    shown: ev.DecisionMade | None
    # the status of a step that never ran ("declined", ...), else ""
    not_run: str

    def pick(self, showing: str) -> str | None:
        """The screen to show for "after" (the one before when there is none after) or "before"."""
        return self.after if showing == "after" and self.after else self.before


def screens(step: Step) -> Screens:
    shown = step.reviewed
    before = shown.screen if shown is not None else step.before or step.observed
    return Screens(before, None if step.not_run else step.after, shown, step.not_run)
