"""A takeover (``T``) as the run carries it out: asked for from any thread, taken on the run's thread at the
next point with nothing in flight, each input of the reviewer's an action of the turn (proposed by them,
checked by the policy, approved by being done, followed by its screen) until they hand the desktop back.
Its words and what the model is told of it are core/takeover.py's; the run it acts through is the
Supervisor (``Steps``)."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from . import events as ev
from .actions import MAX_TEXT, Action, Kind
from .closing import Halt, Owed, Tally, typed_fields
from .events import RunPhase
from .geometry import Scaling
from .policy import Policy, Verdict
from .ports import HEARD, ActionResult, Answer, Call, Desktop, DesktopError, Frame, OutcomeStatus
from .takeover import BY_TAKEOVER, TYPING, TYPING_PAUSE_S, TYPING_STOPPED, Done, Stretch, input_problem, takeover_note
from .text import one_line

if TYPE_CHECKING:
    # for annotations only: stale loads PIL
    from .stale import ScreenCheck

# what a reviewer's input is on its way to the run's thread: an action, private on or off, or the hand-back
Input = Action | bool | None


class Steps(Protocol):
    """What a takeover does through its run (the Supervisor), on the run's thread: its records, in order,
    and its desktop, each call of which an ending interrupts."""

    tally: Tally
    owed: Owed
    desktop: Desktop

    @property
    def policy(self) -> Policy: ...
    def emit(self, event: ev.Event) -> None: ...
    def check_abort(self) -> None: ...
    def set_phase(self, phase: RunPhase, detail: str = "") -> None: ...
    def capture(self, purpose: str = "after_action", index: int | None = None) -> Frame: ...
    def propose(self, proposed: ev.ActionProposed) -> None: ...
    def refuse(self, call: Call, index: int, position: int, rule: str, reason: str) -> ActionResult: ...
    # (the Supervisor's takes a zoom's picture too: no input of a takeover brings one)
    def outcome(
        self, call: Call, index: int, position: int, status: OutcomeStatus, message: str, *, duration: float = 0.0
    ) -> ActionResult: ...
    def execute(
        self, call: Call, index: int, position: int, action: Action, check: ScreenCheck | None, note: str = ""
    ) -> ActionResult: ...
    def send(self, action: Action) -> None: ...
    def moved(self, action: Action | None) -> None: ...


class Takeover:
    """A run's takeover, asked for and fed from any thread (the ``Desk`` of core/takeover.py), carried out
    by ``run`` on the run's thread."""

    def __init__(self, operator: str, clock: Callable[[], float]) -> None:
        self._operator = operator
        self._clock = clock
        self._lock = threading.Lock()
        self.by: str | None = None  # who asked for the desktop (or has it)
        self.taken = False  # the reviewer has it now (their inputs run)
        self._inputs: queue.Queue[Input] = queue.Queue()
        # an input taken from the queue while typing was gathered, first in line for the next round
        self._held: list[Input] = []
        self._count = 0

    # -- any thread ---------------------------------------------------------------------------------
    def ask(self, by: str, ending: bool) -> str | None:
        """Ask for the desktop; None when asked, else why not."""
        with self._lock:
            if ending:
                return "the run is ending"
            if self.by is not None:
                return "the desktop is already taken over (or asked for)"
            self.by = by or self._operator or "reviewer"
        return None

    def put(self, item: Input) -> None:
        """One input of the reviewer's, in order."""
        self._inputs.put(item)

    def hand_back(self) -> None:
        """Give the desktop back; before the takeover began, cancel the ask."""
        with self._lock:
            if not self.taken:
                self.by = None
                return
        self._inputs.put(None)

    # -- the run's thread ---------------------------------------------------------------------------
    def run(self, steps: Steps, where: str, scaling: Scaling) -> str:
        """The reviewer has the desktop until they hand it back; returns what the model is told of it."""
        operator = self._operator or self.by or ""
        self._count += 1
        turn = _Turn(steps, self._clock, Call(f"takeover_{self._count}", "openai", ()), operator)
        with self._lock:
            self.taken = True
        done: list[Done] = []
        private = False
        # the typing stretch under way: characters typed one after another are one action
        stretch: Stretch | None = None
        steps.emit(ev.TakeoverStarted(steps.tally.turn, BY_TAKEOVER, operator, where))
        steps.set_phase(RunPhase.TAKEN_OVER, f"the desktop is {operator}'s")
        try:
            while True:
                steps.check_abort()
                try:
                    item = self._held.pop() if self._held else self._inputs.get(timeout=0.05)
                except queue.Empty:
                    if stretch is not None and self._clock() - stretch.last >= TYPING_PAUSE_S:
                        done.append(turn.end_stretch(stretch))
                        stretch = None
                    continue
                if isinstance(item, Action) and item.kind is Kind.TYPE:
                    stretch = turn.typing(stretch, self._burst(item.text), private)
                    continue
                if stretch is not None:
                    # any other input ends the stretch first (its screen before a private stretch ends)
                    done.append(turn.end_stretch(stretch))
                    stretch = None
                if item is None:
                    break
                if isinstance(item, bool):
                    if item != private:
                        private = item
                        steps.emit(ev.TakeoverPrivate(steps.tally.turn, private))
                    continue
                done.append(Done(item, turn.human_action(item), private))
        finally:
            with self._lock:
                self.taken, self.by = False, None
            self._held.clear()
            with contextlib.suppress(queue.Empty):
                while True:
                    self._inputs.get_nowait()
        if private:
            steps.emit(ev.TakeoverPrivate(steps.tally.turn, False))
        # the model's screen: taken now, after any private stretch
        frame = steps.capture("takeover_end")
        told = takeover_note(done, scaling)
        steps.emit(ev.TakeoverEnded(steps.tally.turn, len(done), told, frame.sha256))
        return told

    def _burst(self, text: str) -> str:
        """``text`` and the characters already waiting behind it: sent in one go, with one record (a paste,
        or keys that came while the last one ran). The first other input waits for the next round."""
        parts = [text]
        size = len(text)
        while size < MAX_TEXT:
            try:
                item = self._inputs.get_nowait()
            except queue.Empty:
                break
            if not (isinstance(item, Action) and item.kind is Kind.TYPE):
                self._held.append(item)
                break
            parts.append(item.text)
            size += len(item.text)
        return "".join(parts)


class _Turn:
    """The reviewer's actions of one takeover, as actions of the run's turn on record."""

    def __init__(self, steps: Steps, clock: Callable[[], float], call: Call, operator: str) -> None:
        self.steps = steps
        self.clock = clock
        self.call = call
        self.operator = operator

    def _approved(self, index: int, verdict: Verdict, reason: str) -> None:
        how = "approved by being done" if verdict is Verdict.CONFIRM else reason
        self.steps.emit(
            ev.DecisionMade(self.steps.tally.turn, index, Answer.APPROVE, BY_TAKEOVER, note=how, operator=self.operator)
        )

    def human_action(self, action: Action) -> bool:
        """One input of the reviewer's as an action on record; True if it ran."""
        steps, call = self.steps, self.call
        steps.check_abort()
        turn, index = steps.tally.turn, steps.owed.take_index()
        steps.propose(ev.ActionProposed(turn, index, call.call_id, action.to_record(), action.describe(),
                                        parsed=action, by=BY_TAKEOVER))  # fmt: skip
        problem = input_problem(action, steps.desktop.size)
        if problem is not None:
            steps.refuse(call, index, index, "takeover.input", problem)
            return False
        decision = steps.policy.classify(action)
        steps.emit(ev.PolicyVerdict(turn, index, decision.verdict, decision.reason, decision.rule))
        if decision.verdict is Verdict.BLOCK:
            # a blocked action stays blocked for the reviewer too
            steps.emit(ev.DecisionMade(turn, index, Answer.REJECT, "policy", note=decision.reason))
            steps.outcome(call, index, index, OutcomeStatus.REFUSED, HEARD[OutcomeStatus.REFUSED])
            return False
        self._approved(index, decision.verdict, decision.reason)
        try:
            result = steps.execute(call, index, index, action, None)
        except Halt as stop:
            return stop.result.ok
        steps.set_phase(RunPhase.TAKEN_OVER, f"the desktop is {self.operator}'s")
        return result.ok

    def typing(self, stretch: Stretch | None, piece: str, private: bool) -> Stretch:
        """Characters the reviewer typed: the start of a stretch, or more of the one under way. Each goes to
        the desktop once the policy has checked the stretch with it (``max_text_length`` counts the whole
        stretch); the first refused ends the stretch, and what follows it in the stretch is not sent."""
        steps, call = self.steps, self.call
        now = self.clock()
        if stretch is not None:
            stretch.last = now
            if stretch.refused:
                return stretch
            allowed, problem = self._allowed(stretch.text, piece)
            if allowed:
                # its length only: a hash of each prefix would give the text away a character at a time
                so_far = stretch.text + allowed
                steps.emit(ev.Typed(steps.tally.turn, stretch.index, call.call_id, len(so_far), ""))
                # on record, the last piece maybe still in flight
                steps.owed.stretches[stretch.index] = (so_far, stretch.private)
                self._type_piece(stretch, allowed)
            if problem is not None and not stretch.closed:
                self._stop_typing(stretch, problem[1])
            return stretch
        index = steps.owed.take_index()
        allowed, problem = self._allowed("", piece)
        stretch = Stretch(index, private, now, now, proposed=allowed or piece[:1])
        action = Action(Kind.TYPE, text=stretch.proposed)
        # the stretch's text is hashed once, whole, when it ends: a hash of its first character would be
        # no secret at all
        record = {k: v for k, v in action.to_record().items() if k != "text_sha256"}
        steps.propose(ev.ActionProposed(steps.tally.turn, index, call.call_id, record, action.describe(),
                                        parsed=action, by=BY_TAKEOVER))  # fmt: skip
        if not allowed:
            assert problem is not None
            steps.refuse(call, index, index, *problem)
            stretch.closed, stretch.refused = True, problem[1]
            return stretch
        decision = steps.policy.classify(action)
        steps.emit(ev.PolicyVerdict(steps.tally.turn, index, decision.verdict, decision.reason, decision.rule))
        self._approved(index, decision.verdict, decision.reason)
        steps.set_phase(RunPhase.EXECUTING, TYPING)
        # the intent is on disk before the first character goes; each later one has its ``typed`` record
        steps.emit(ev.Executing(steps.tally.turn, index, call.call_id, TYPING))
        steps.owed.stretches[index] = (allowed, stretch.private)
        self._type_piece(stretch, allowed)
        if problem is not None and not stretch.closed:
            self._stop_typing(stretch, problem[1])
        return stretch

    def _allowed(self, before: str, piece: str) -> tuple[str, tuple[str, str] | None]:
        """How much of ``piece`` may follow ``before`` in a stretch, and the (rule, reason) that refuses the
        character after that (None: all of it may)."""
        problem = self._typing_problem(before + piece)
        if problem is None:
            return piece, None
        for n in range(len(piece)):
            # to the first character refused (only when the whole is)
            problem = self._typing_problem(before + piece[: n + 1])
            if problem is not None:
                return piece[:n], problem
        return piece, None

    def _typing_problem(self, text: str) -> tuple[str, str] | None:
        """Why a stretch of ``text`` may not be typed, as (rule, reason): as a takeover's input, then by
        the policy; None when it may."""
        action = Action(Kind.TYPE, text=text)
        problem = input_problem(action, self.steps.desktop.size)
        if problem is not None:
            return "takeover.input", problem
        decision = self.steps.policy.classify(action)
        return (decision.rule, decision.reason) if decision.verdict is Verdict.BLOCK else None

    def _type_piece(self, stretch: Stretch, piece: str) -> None:
        """Characters of a stretch to the desktop (their record is written). A failure ends the stretch."""
        steps, owed = self.steps, self.steps.owed
        first = not stretch.text
        started = self.clock()
        try:
            if first:
                owed.in_flight = stretch.index
            steps.send(Action(Kind.TYPE, text=piece))
            owed.in_flight = None
        except DesktopError as exc:
            owed.in_flight = None
            steps.check_abort()
            steps.moved(None)
            message = f"Failed: {one_line(str(exc))}"
            steps.outcome(self.call, stretch.index, stretch.index, OutcomeStatus.FAILED, message,
                          duration=self.clock() - started)  # fmt: skip
            stretch.closed, stretch.refused = True, message
            if exc.fatal:
                raise
            return
        stretch.text += piece
        if first:
            steps.tally.executed += 1
            # it ran: an ending from here on records it as executed
            owed.performed[stretch.index] = HEARD[OutcomeStatus.EXECUTED]
            steps.moved(Action(Kind.TYPE, text=piece))
        steps.check_abort()

    def _stop_typing(self, stretch: Stretch, reason: str) -> None:
        """The stretch's next character was refused: it ends here, saying why."""
        rest = f"the characters typed after it are not sent until a pause of {TYPING_PAUSE_S:g} s or another input"
        self.steps.emit(ev.Note(f"{TYPING_STOPPED} {len(stretch.text)} characters: {reason}; {rest}"))
        self._close_stretch(stretch)
        stretch.refused = reason

    def end_stretch(self, stretch: Stretch) -> Done:
        """The stretch ends (a pause, another input): its outcome and its one screen, unless on record."""
        if not stretch.closed:
            self._close_stretch(stretch)
        return stretch.done()

    def _close_stretch(self, stretch: Stretch) -> None:
        """The stretch's whole text on record (length and SHA-256), its one outcome, then its one screen."""
        steps = self.steps
        stretch.closed = True
        took = self.clock() - stretch.started
        steps.owed.stretches.pop(stretch.index, None)
        if stretch.text:
            # the one hash of what was typed, whole (each ``typed`` record before had its length only)
            fields = typed_fields(stretch.text, stretch.private)
            steps.emit(ev.Typed(steps.tally.turn, stretch.index, self.call.call_id, *fields))
        steps.outcome(
            self.call,
            stretch.index,
            stretch.index,
            OutcomeStatus.EXECUTED,
            HEARD[OutcomeStatus.EXECUTED],
            duration=took,
        )
        steps.capture("after_action", index=stretch.index)
        steps.set_phase(RunPhase.TAKEN_OVER, f"the desktop is {self.operator}'s")
