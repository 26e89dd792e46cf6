"""The run loop: batches in order, policy verdicts, confirmation points, the kill switch, the audit trail.

Batch semantics (DESIGN.md, "The run loop"): actions run in order; the loop stops before an action that
needs confirmation and asks the Approver; a rejection, a policy block, a failure or a stale screen halts
the batch, and every later action of the turn is answered ``Not executed``. Every proposed action gets
exactly one ``outcome`` event carrying the exact text returned to the model.

Threads: ``run()`` drives the loop in the caller's thread. Every call into an adapter (agent, desktop,
approver) runs on a helper thread, and the loop waits for it *or* for an abort, so ``kill()`` from any
thread ends the run at once even while a model request or a desktop command hangs.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from . import drills, focus, grants
from . import events as ev
from .actions import Action, ActionError, Kind
from .asking import BY_DEADLINE, checked_edit, decision_record, gated_by, is_sha256, timed_ruling
from .asking import deadline_message as deadline_message
from .audit import AuditClosed, AuditWriteError, AuditWriter
from .budgets import SoftBudgets
from .closing import (
    Aborted,
    Halt,
    Owed,
    StorageFailure,
    Switch,
    Tally,
    seal_audit,
    stop_desktop,
    storage_reason,
)
from .closing import RunResult as RunResult
from .edits import Edited, edit_note
from .events import RunPhase, RunStatus
from .geometry import Scaling
from .policy import Decision, Policy, Verdict
from .ports import (
    HEARD,
    ActionResult,
    Agent,
    AgentError,
    Answer,
    Approver,
    Call,
    CallResult,
    DecisionRequest,
    Desktop,
    DesktopError,
    Frame,
    LimitExceeded,
    OutcomeStatus,
    Ruling,
    SafetyCheck,
    Turn,
)
from .records import RunConfig as RunConfig
from .records import result_record, run_record, turn_record
from .rundir import RunDir, TranscriptWriter
from .stale import ScreenCheck, StaleGuard
from .takeover import MSG_TAKEN_OVER, TAKEOVER_NOTE
from .takeover_loop import Takeover
from .text import failure, one_line, truncate
from .threads import Job, Worker
from .wire import parse_wire, raw_kind

T = TypeVar("T")

# A reply with more actions than this in one turn is refused whole, with one record (not one per
# action): no computer-use model batches anywhere near this many, and a flood must not flood the
# audit log.
MAX_ACTIONS_PER_TURN = 100
# What the model hears after a turn with nothing to run: its reply refused whole, or its call for the person
# answered "go on" (a takeover's own words follow a takeover)
REPLY_REFUSED = "Your last reply could not be read: {reason}. Nothing of it ran. Answer again in the documented format."
ASK_DECLINED = "The user did not step in. Go on with the task by yourself."
# Room kept free in the run directory so that the end of a run can still be recorded on a full disk.
RESERVE_BYTES = 512 * 1024

# told each event right after it was written, with its chain place
Listener = Callable[[ev.Stamped], None]


# One planned action of a turn: (index in the turn, position in its call, the raw action, parsed,
# error).
_Planned = tuple[int, int, Any, "Action | None", "ActionError | None"]


@dataclass(slots=True)
class _Records:
    """How events reach the log and the listeners: one lock for both, and the ending's flags."""

    listeners: list[Listener]
    lock: threading.RLock = field(default_factory=threading.RLock)
    final: bool = False  # the run is ending: only the finalizer may still write events
    lost: str | None = None  # a record of the ending could not be written: why


@dataclass(slots=True)
class _Seen:
    """What the run has seen of the desktop and the model."""

    latest: Frame | None = None  # the latest capture
    observed: Frame | None = None  # the screenshot the model acted on
    scaling: Scaling | None = None  # the last call's: a takeover is told in the model's coordinates
    call_ids: set[str] = field(default_factory=set)  # every call id used so far
    drill: str = ""  # the drill shown last (the next is another, where the library has one)


@dataclass(slots=True)
class _Consent:
    """What approves an action besides an answer of its own."""

    grants: grants.Grants = field(default_factory=grants.Grants)  # scoped approvals (``a``) in force
    focused: tuple[int, int] | None = None  # the focused field (core/focus.py), where typing goes
    # a safety-check approval (call id, ruling, indexes) that approves the call's confirm actions too
    covered: tuple[str, Ruling, frozenset[int]] | None = None


class Supervisor:
    """Drives one run. Construct, optionally ``subscribe``, then call ``run()`` (blocking)."""

    def __init__(
        self,
        config: RunConfig,
        desktop: Desktop,
        agent: Agent,
        approver: Approver | None,
        rundir: RunDir,
        *,
        listeners: tuple[Listener, ...] = (),
        fsync: bool = True,
        stale_guard: StaleGuard | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """The run's parts, then its state in small groups by what each is for."""
        self.config = config
        self.desktop = desktop
        self.agent = agent
        self.approver = approver
        self.rundir = rundir
        self._stale = stale_guard or StaleGuard()
        self._clock = clock  # durations, the deadline
        self._wall_clock = wall_clock  # timestamps on record (run.json, audit lines, result.json)
        self.audit = AuditWriter(rundir.audit, rundir.run_id, fsync=fsync, key=config.audit_key, clock=wall_clock)
        self.transcript = TranscriptWriter(rundir.transcript)
        rundir.reserve_space(RESERVE_BYTES)
        self._records = _Records(list(listeners))
        self._switch = Switch()  # how the run ends, settled once from any thread
        self._caller = Worker(f"cua-io-{rundir.run_id}")
        self.result: RunResult | None = None
        self.tally = Tally(began=clock())
        self.phase = RunPhase.STARTING
        self.owed = Owed()  # the proposals of the turn still owed an outcome
        self._seen = _Seen()
        self._consent = _Consent()
        self._takeover = Takeover(config.operator, clock)
        self._budgets = SoftBudgets(config.policy.limits)  # the soft budgets (ask_at)

    # ---------------------------------------------------------------------------------------------
    # Public API
    # ----------------------------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        self._records.listeners.append(listener)

    @property
    def finished(self) -> threading.Event:
        return self._switch.finished

    @property
    def ending(self) -> bool:
        """The run is ending (killed, or aborted by a failure): nothing more executes, no answer is taken."""
        return self._switch.aborted.is_set()

    def kill(self, by: str = "human") -> None:
        """The kill switch. Safe from any thread, at any moment, any number of times; returns at once."""
        self._abort(RunStatus.KILLED, f"killed by {by}", by=by)

    def interrupt(self, reason: str) -> None:
        """End the run ``interrupted`` from any thread, as the kill switch ends it: for a team's worker that
        found its lease taken, which must execute nothing more (``reason`` says so in the log)."""
        self._abort(RunStatus.INTERRUPTED, reason)

    def fail(self, reason: str) -> None:
        """End the run ``error`` from any thread, as the kill switch ends it (nothing further executes, the
        desktop stops, the log is sealed): for a caller whose thread driving ``run()`` failed past its loop."""
        self._abort(RunStatus.ERROR, reason, announce=ev.ErrorRaised("supervisor", reason))

    # ---------------------------------------------------------------------------------------------
    # A takeover, asked from another thread (the TUI)
    # ----------------------------------------------------------------------------------------------
    def take_over(self, by: str = "") -> str | None:
        """Ask for the desktop (any thread): the run pauses at the next point where nothing is in flight (a
        decision the caller answers with ``takeover``, between two actions, or before the model's next
        turn). None when asked; else why not."""
        return self._takeover.ask(by, self.ending or self._switch.finished.is_set())

    @property
    def taken_over(self) -> bool:
        """The reviewer has the desktop now (their inputs run); False while it is only asked for."""
        return self._takeover.taken

    def takeover_input(self, action: Action) -> str | None:
        """One input of the reviewer's (any thread), run in order on the run's thread, checked by the
        policy. None when queued; else why not."""
        if not self._takeover.taken or self.ending:
            return "the desktop is not taken over"
        self._takeover.put(action)
        return None

    def takeover_private(self, private: bool) -> None:
        """Start or end a private stretch of the takeover (any thread)."""
        if self._takeover.taken:
            self._takeover.put(private)

    def hand_back(self) -> None:
        """Give the desktop back to the model (any thread); before the takeover began, cancel the ask."""
        self._takeover.hand_back()

    @property
    def run_id(self) -> str:
        return self.rundir.run_id

    @property
    def policy(self) -> Policy:
        return self.config.policy

    def wait(self, timeout: float | None = None) -> RunResult | None:
        self._switch.finished.wait(timeout)
        return self.result

    def run(self) -> RunResult:
        """Drive the run to its end and return the result (also after a kill)."""
        try:
            self._run()
        except Aborted:
            pass
        except StorageFailure:
            pass  # already ending: see _storage_failed
        except AgentError as exc:
            status = RunStatus.LIMIT if isinstance(exc, LimitExceeded) else RunStatus.ERROR
            self._emit_safe(ev.ErrorRaised("agent", one_line(str(exc))))
            self._finish(status, f"agent: {one_line(str(exc))}")
        except DesktopError as exc:
            self._emit_safe(ev.ErrorRaised("desktop", one_line(str(exc))))
            self._finish(RunStatus.ERROR, f"desktop: {one_line(str(exc))}")
        except Exception as exc:
            # a bug must still end the run cleanly, sealed and stopped
            detail = "".join(traceback.format_exception_only(exc)).strip()
            self._emit_safe(ev.ErrorRaised("supervisor", one_line(detail)))
            self._finish(RunStatus.ERROR, f"internal error: {one_line(detail)}")
        self._switch.finished.wait()
        assert self.result is not None
        return self.result

    # ---------------------------------------------------------------------------------------------
    # The loop
    # ----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        run_info = self._record_start()
        self._start_desktop(run_info)
        frame = self.capture(purpose="initial")
        self.set_phase(RunPhase.WAITING_MODEL, "waiting for the model")
        self._seen.observed = frame
        turn = self._call(self.agent.start, self.config.task, frame)
        limits = self.policy.limits
        while True:
            self.check_abort()
            self.tally.turn += 1
            self._record_turn(turn)
            if turn.done:
                self.tally.final_text = turn.text
                break
            if turn.calls:
                results, said = self._execute_turn(turn), ""
            else:
                results, said = (), self._without_actions(turn)
            self.check_abort()
            if self._switch.pending is not None:
                self._finish(*self._switch.pending)
                return
            if self.tally.turn >= limits.max_turns:
                self._finish(RunStatus.LIMIT, f"turn limit of {limits.max_turns} reached")
                return
            note = self._take_over_here("before the model's next turn") if self._takeover.by is not None else ""
            note = " ".join(words for words in (said, note) if words)
            frame = self._seen.latest or self.capture()
            self.set_phase(RunPhase.WAITING_MODEL, "waiting for the model")
            self._seen.observed = frame
            turn = (
                self._call(self.agent.next_turn, results, frame, note)
                if note
                else self._call(self.agent.next_turn, results, frame)
            )
        self.check_abort()
        self._verify()

    def _record_start(self) -> dict[str, Any]:
        """run.json, the ``run_started`` record and the deadline: before anything else happens."""
        run_info, started = run_record(self.config, self.run_id, self._wall_clock())
        self._write_record("run.json", self.rundir.write_run_json, run_info)
        self.emit(started)
        deadline = self.policy.limits.deadline_seconds
        self._switch.timer = threading.Timer(
            deadline, self._abort, (RunStatus.LIMIT, f"deadline of {deadline} s reached")
        )
        self._switch.timer.daemon = True
        self._switch.timer.start()
        return run_info

    def _start_desktop(self, run_info: dict[str, Any]) -> None:
        """Start the desktop; what its sandbox obtained goes to run.json and the log."""
        backend = self.config.backend
        self.set_phase(RunPhase.STARTING, f"starting the {backend} desktop")
        # A desktop's own events (the egress proxy's) go to this run's log.
        self.desktop.bind_events(self._emit_safe)
        self._call(self.desktop.start)
        # What the sandbox actually obtained, on record.
        isolation = self.desktop.isolation
        if isolation:
            self._write_record("run.json", self.rundir.write_run_json, {**run_info, "isolation": isolation})
            self.emit(ev.DesktopReady(backend, isolation))

    def _verify(self) -> None:
        """The independent verdict (never the model's claim), then the end of the run."""
        self.set_phase(RunPhase.VERIFYING, "running the independent verifier")
        verification = self._call(self.desktop.verify)
        if verification is None:
            self._finish(RunStatus.FINISHED, "the agent finished; no independent verifier for this task")
        else:
            done = ev.VerificationDone(
                verification.verifier,
                verification.passed,
                verification.detail,
                verification.where,
                truncate(verification.user, 100),
            )
            self.emit(done)
            # for result.json: who vouched for the verdict it records
            self._switch.verdict = done
            status = RunStatus.PASSED if verification.passed else RunStatus.FAILED
            self._finish(status, verification.detail, verified=verification.passed)

    def _record_turn(self, turn: Turn) -> None:
        usage = turn.usage
        if usage is not None:
            self.tally.tokens += usage.input_tokens + usage.output_tokens
            if usage.cost_usd is not None:
                self.tally.cost = (self.tally.cost or 0.0) + usage.cost_usd
        n_actions = sum(len(c.actions) for c in turn.calls)
        self.emit(
            ev.ModelTurn(
                self.tally.turn,
                turn.text,
                len(turn.calls),
                n_actions,
                turn.response_id,
                usage.input_tokens if usage else 0,
                usage.output_tokens if usage else 0,
                usage.cost_usd if usage else None,
                self.tally.tokens,
                self.tally.cost,
                turn.shown.to_json() if turn.shown else None,
            )
        )
        lim = self.policy.limits
        if lim.max_tokens and self.tally.tokens > lim.max_tokens:
            raise LimitExceeded(f"token budget of {lim.max_tokens} exceeded ({self.tally.tokens} used)")
        if lim.max_cost_usd and (self.tally.cost or 0.0) > lim.max_cost_usd:
            raise LimitExceeded(f"cost budget of ${lim.max_cost_usd:g} exceeded (${self.tally.cost:.4f} used)")

    def _execute_turn(self, turn: Turn) -> tuple[CallResult, ...]:
        self.owed.performed.clear()
        self.owed.next_index = 0
        n_actions = sum(len(call.actions) for call in turn.calls)
        if n_actions > MAX_ACTIONS_PER_TURN:
            return self._refuse_turn(turn, n_actions)
        plan = self._plan(turn)
        # Run them in order; the first refusal, rejection, failure or stale screen halts the batch.
        results: list[CallResult] = []
        halted = False
        for call, items in plan:
            result, halted = self._run_call(call, items, halted)
            results.append(result)
        parsed = [(call, [(raw, a, e) for _, _, raw, a, e in items]) for call, items in plan]
        self._append_transcript(turn_record(self.tally.turn, turn, parsed, results))
        return tuple(results)

    def _without_actions(self, turn: Turn) -> str:
        """A turn with nothing to run that does not end the run (agents/compat's text grammars): a reply that
        could not be read is one refusal on record; a model that asks for the person is put to the reviewer
        (``T`` takes the desktop, any other answer lets the model go on); a memorized fact is in the turn's
        words. Returns what the model hears of it besides a takeover."""
        if turn.refused:
            reason = f"the model's reply could not be read: {one_line(turn.refused, 300)}"
            self.emit(ev.TurnRefused(self.tally.turn, 0, reason))
            self._append_transcript(
                {"turn": self.tally.turn, "response_id": turn.response_id, "text": turn.text, "refused": reason}
            )
            return REPLY_REFUSED.format(reason=one_line(turn.refused, 300))
        if turn.asks is None:
            return ""
        said = one_line(turn.asks, 300)
        request = DecisionRequest(
            self.run_id, self.tally.turn, 0, "", "ask",
            f"the model asks for you: {said}" if said else "the model asks for you", frame=self._seen.latest,
        )  # fmt: skip
        ruling = self._ask(request)
        self._append_transcript({"turn": self.tally.turn, "response_id": turn.response_id, "text": turn.text,
                                 "asked": said, "answer": "takeover" if ruling.takeover else "go on"})  # fmt: skip
        return "" if ruling.takeover else ASK_DECLINED

    def _plan(self, turn: Turn) -> list[tuple[Call, list[_Planned]]]:
        """Parse and propose every action of the turn first: the reviewer sees the whole batch, and each
        proposal is on record (and owed exactly one outcome) before anything of the turn runs."""
        plan: list[tuple[Call, list[_Planned]]] = []
        index = 0
        for call in turn.calls:
            scaling = call.scaling or Scaling.identity(self.desktop.size)
            items: list[_Planned] = []
            for position, raw in enumerate(call.actions):
                action, error = self._parse(call, raw, scaling)
                proposed = ev.ActionProposed(
                    self.tally.turn,
                    index,
                    call.call_id,
                    action.to_record() if action else None,
                    action.describe() if action else "",
                    error.reason if error else "",
                    error.code if error else "",
                    raw_kind(call.format, raw),
                    parsed=action,
                )
                self.propose(proposed)
                items.append((index, position, raw, action, error))
                index += 1
            plan.append((call, items))
            self._seen.scaling = scaling
        self.owed.next_index = index
        return plan

    def propose(self, proposed: ev.ActionProposed) -> None:
        """Write a proposal and, in the same hold of the lock, owe it its outcome: a kill between the two
        would otherwise close a proposal that was never written (or leave a written one unclosed)."""
        with self._records.lock:
            self.emit(proposed)
            self.owed.open[proposed.index] = proposed.call_id

    def _run_call(self, call: Call, items: list[_Planned], halted: bool) -> tuple[CallResult, bool]:
        """One call's actions in order (its safety checks decided first); returns its result and whether
        the batch is halted after it."""
        call_results: list[ActionResult] = []
        acknowledged: tuple[SafetyCheck, ...] = ()
        duplicate = call.call_id in self._seen.call_ids or not call.call_id
        self._seen.call_ids.add(call.call_id)
        safety_ok, safety_by = True, ""
        self._consent.covered = None  # a safety-check answer covers only its own call
        if call.safety_checks and items and not halted and not duplicate:
            # Safety checks are decided before anything of their call runs, with the actions they
            # gate shown; an approval also approves those of them that would need a decision of
            # their own.
            acknowledged, safety_by = self._decide_safety_checks(call, items)
            safety_ok = bool(acknowledged)
        for index, position, _raw, action, error in items:
            if halted:
                call_results.append(self.outcome(call, index, position, OutcomeStatus.NOT_EXECUTED))
                continue
            halted = True  # until the action proves otherwise
            if duplicate:
                reason = f"call id {call.call_id!r} was already used in this run"
                call_results.append(self.refuse(call, index, position, "duplicate_call_id", reason))
                continue
            if not safety_ok:
                # who rejected the call's safety checks decided this action's fate too
                self.emit(
                    ev.DecisionMade(
                        self.tally.turn,
                        index,
                        Answer.REJECT,
                        safety_by,
                        subject="safety_check",
                        note="safety check rejected",
                    )
                )
                call_results.append(self.outcome(call, index, position, OutcomeStatus.DECLINED))
                continue
            try:
                call_results.append(self._handle(call, index, position, action, error))
                halted = False
            except Halt as stop:
                call_results.append(stop.result)
        return CallResult(call.call_id, tuple(call_results), acknowledged), halted

    def _refuse_turn(self, turn: Turn, n_actions: int) -> tuple[CallResult, ...]:
        """Refuse a whole turn with one record: nothing of it is proposed, logged action by action or run."""
        reason = f"{n_actions} actions in one turn exceed the cap of {MAX_ACTIONS_PER_TURN}"
        self.emit(ev.TurnRefused(self.tally.turn, n_actions, reason))
        message = f"Refused by sandbox policy: {reason}; nothing of this turn ran. Stop and report."
        results = tuple(
            CallResult(
                call.call_id,
                tuple(ActionResult(position, OutcomeStatus.REFUSED, message) for position in range(len(call.actions))),
                (),
            )
            for call in turn.calls
        )
        self._append_transcript(
            {"turn": self.tally.turn, "response_id": turn.response_id, "text": turn.text, "refused": reason}
        )
        return results

    def _append_transcript(self, record: dict[str, Any]) -> None:
        try:
            self.transcript.append(record)
        except OSError as exc:
            self._storage_failed("transcript.jsonl", exc)

    def _write_record(self, name: str, write: Callable[[dict[str, Any]], None], data: dict[str, Any]) -> None:
        try:
            write(data)
        except OSError as exc:
            self._storage_failed(name, exc)

    def _decide_safety_checks(self, call: Call, items: list[_Planned]) -> tuple[tuple[SafetyCheck, ...], str]:
        """Put the call's safety checks to the reviewer with the actions they gate; return them if
        acknowledged (else ()) and who decided. An approval is kept to cover the call's confirm actions."""
        checks = call.safety_checks
        first_index = items[0][0]
        gated = tuple(gated_by(self.policy, index, action, error) for index, _position, _raw, action, error in items)
        self.emit(
            ev.SafetyChecksRaised(
                self.tally.turn, call.call_id, [{"id": c.id, "code": c.code, "message": c.message} for c in checks]
            )
        )
        reason = "; ".join(f"{c.code}: {c.message}" for c in checks)
        request = DecisionRequest(
            self.run_id,
            self.tally.turn,
            first_index,
            call.call_id,
            "safety_check",
            f"the model raised safety checks: {reason}",
            safety_checks=checks,
            frame=self._seen.latest,
            gated=gated,
        )
        ruling = self._ask(request)
        if ruling.answer is Answer.APPROVE and any(g.covered for g in gated):
            self._consent.covered = (call.call_id, ruling, frozenset(g.index for g in gated if g.covered))
        return (checks if ruling.answer is Answer.APPROVE else ()), ruling.by

    def _parse(self, call: Call, raw: Any, scaling: Scaling) -> tuple[Action | None, ActionError | None]:
        try:
            return parse_wire(call.format, raw, scaling), None
        except ActionError as exc:
            return None, exc

    def _handle(
        self, call: Call, index: int, position: int, action: Action | None, error: ActionError | None
    ) -> ActionResult:
        """One action from verdict to outcome. Raises Halt(result) when the batch must stop."""
        self.check_abort()
        if self._takeover.by is not None:
            # between two actions: the reviewer takes the desktop, the rest of the batch waits for none
            raise Halt(self.outcome(call, index, position, OutcomeStatus.NOT_EXECUTED, MSG_TAKEN_OVER))
        stop = self._soft_budgets(call, index)
        if stop is not None:
            self._request_end(RunStatus.LIMIT, stop)
            raise Halt(
                self.outcome(call, index, position, OutcomeStatus.NOT_EXECUTED, f"Not executed: the run {stop}.")
            )
        self.tally.steps += 1
        lim = self.policy.limits
        if self.tally.steps > lim.max_steps:
            # before parsing: a malformed proposal counts and must not skip the cap
            self._request_end(RunStatus.LIMIT, f"step limit of {lim.max_steps} reached")
            raise Halt(self.refuse(call, index, position, "limits.max_steps", f"step limit of {lim.max_steps} reached"))
        if action is None:
            assert error is not None
            raise Halt(self.refuse(call, index, position, f"parse:{error.code}", f"malformed action: {error.reason}"))
        decision = self.policy.classify(action)
        self.emit(ev.PolicyVerdict(self.tally.turn, index, decision.verdict, decision.reason, decision.rule))
        reviewed = False
        edited: Edited | None = None
        if decision.verdict is Verdict.BLOCK:
            self.emit(ev.DecisionMade(self.tally.turn, index, Answer.REJECT, "policy", note=decision.reason))
            raise Halt(self.outcome(call, index, position, OutcomeStatus.REFUSED))
        if decision.verdict is Verdict.CONFIRM:
            edited = self._review(call, index, position, action, decision)
            reviewed = True
            if edited is not None:
                # what runs from here on is the reviewer's action, checked and approved as such
                action = edited.ran
        else:
            self.emit(ev.DecisionMade(self.tally.turn, index, Answer.APPROVE, "policy", note=decision.reason))
        check = None
        if reviewed and action.target is not None and self._seen.observed is not None:
            # Performed only if the target's area still looks as the model saw it, in the same
            # request.
            check = self._stale.check(self._seen.observed, action.target)
        note = edit_note(edited, call.scaling or Scaling.identity(self.desktop.size)) if edited else ""
        return self.execute(call, index, position, action, check, note)

    def _review(self, call: Call, index: int, position: int, action: Action, decision: Decision) -> Edited | None:
        """A confirmation point: an active grant whose scope covers the action approves it (named as such,
        never as a person); otherwise the reviewer decides, and may grant the action's scope (``a``), give
        a reason with a rejection, which the model hears after the fixed text, or change the action before
        approving it (returned). Raises Halt when declined."""
        covered = self._consent.covered
        if covered is not None and covered[0] == call.call_id and index in covered[2]:
            # the reviewer saw this action listed under the call's safety checks
            ruling = covered[1]
            self.emit(
                ev.DecisionMade(
                    self.tally.turn,
                    index,
                    Answer.APPROVE,
                    ruling.by,
                    note="approved with the call's safety checks (one answer)",
                    operator=(ruling.operator or self.config.operator) if ruling.human else "",
                    screen=ruling.screen if is_sha256(ruling.screen) else "",
                )
            )
            return None
        grant = self._consent.grants.match(action, decision, self._consent.focused)
        if grant is not None:
            self.emit(
                ev.DecisionMade(
                    self.tally.turn,
                    index,
                    Answer.APPROVE,
                    f"grant #{grant.id} (given by {grant.by})",
                    note=grant.scope.label,
                )
            )
            return None
        scope = grants.scope_for(action, decision, self._consent.focused)
        request = DecisionRequest(
            self.run_id,
            self.tally.turn,
            index,
            call.call_id,
            "action",
            decision.reason,
            action=action,
            frame=self._seen.latest,
            scope=scope,
        )
        ruling = self._ask(request)
        if ruling.takeover and ruling.answer is Answer.REJECT:
            raise Halt(self.outcome(call, index, position, OutcomeStatus.DECLINED, MSG_TAKEN_OVER))
        if ruling.answer is not Answer.APPROVE:
            message = HEARD[OutcomeStatus.DECLINED]
            if ruling.by.startswith(BY_DEADLINE):
                message = ruling.note
            if ruling.human and ruling.note:
                message = f"{HEARD[OutcomeStatus.DECLINED]} The reviewer said: {one_line(ruling.note, 300)}"
            raise Halt(self.outcome(call, index, position, OutcomeStatus.DECLINED, message))
        if ruling.edit is not None:
            # an edit is a one-off: it grants nothing
            return Edited(action, ruling.edit)
        if ruling.grant and scope is not None:
            with self._records.lock:
                given = self._consent.grants.add(
                    scope, ruling.operator or self.config.operator or ruling.by, self.tally.turn, index
                )
                self.emit(ev.GrantAdded(given.id, scope.kind, scope.key, scope.label, given.by, self.tally.turn, index))
        return None

    def revoke_grant(self, grant_id: int, by: str = "") -> bool:
        """End a grant (from any thread): later actions of its scope are asked again. False if not active."""
        with self._records.lock:
            if self._consent.grants.revoke(grant_id) is None:
                return False
            self._emit_safe(ev.GrantRevoked(grant_id, by or self.config.operator or "reviewer"))
            return True

    def moved(self, action: Action | None) -> None:
        """The focused field after ``action`` ran (None: it failed, and where the focus is now is unknown); a
        typing grant ends with the field it named."""
        field = None if action is None else focus.after_action(self._consent.focused, action)
        self._consent.focused = field
        with self._records.lock:
            for grant in self._consent.grants.outlived(field):
                self._consent.grants.revoke(grant.id)
                self.emit(ev.GrantRevoked(grant.id, "the focus left the field"))

    def execute(
        self, call: Call, index: int, position: int, action: Action, check: ScreenCheck | None, note: str = ""
    ) -> ActionResult:
        """Run one approved action; ``note`` (a reviewer's edit) follows what the model hears of it."""
        self.set_phase(RunPhase.EXECUTING, action.describe())
        started = self._clock()
        fenced = self.config.fence() if self.config.fence is not None else None
        if fenced is not None:
            self.interrupt(fenced)
            raise Aborted()
        try:
            # The intent is on disk before the desktop gets the action: nothing runs unrecorded.
            self.emit(ev.Executing(self.tally.turn, index, call.call_id, action.describe()))
            if action.kind is Kind.SCREENSHOT:
                frame, output, image = self._capture_frame(), None, None
            else:
                self.owed.in_flight = index
                step = self._call(self.desktop.perform_checked, action, check)
                frame, output, image = step.frame, step.output, step.image
                self.owed.in_flight = None
                if step.stale:
                    self.check_abort()
                    # the model gets the screen as it is now
                    self._record_frame(frame, "stale_check", index=index)
                    raise Halt(self.outcome(call, index, position, OutcomeStatus.STALE))
                if image is not None and not _asked_for(action, image):
                    raise DesktopError(
                        f"the desktop answered a {action.kind.value} with a {image.width} x {image.height} "
                        "picture it did not ask for",
                        fatal=True,
                    )
        except DesktopError as exc:
            self.owed.in_flight = None
            self.check_abort()
            # it may have run part-way: where the focus is now is unknown
            self.moved(None)
            failed, message = OutcomeStatus.FAILED, f"Failed: {one_line(str(exc))}"
            result = self.outcome(call, index, position, failed, message, duration=self._clock() - started)
            if exc.fatal:
                raise
            raise Halt(result) from None
        self.tally.executed += 1
        said = output or HEARD[OutcomeStatus.EXECUTED]
        if note:
            said = f"{said}. {note}"
        # it ran: an ending from here on records it as executed
        self.owed.performed[index] = said
        self.moved(action)
        self.check_abort()
        self._record_frame(frame, "after_action", index=index)
        if image is not None:
            self._record_frame(image, "zoom", latest=False, index=index)
        took = self._clock() - started
        return self.outcome(call, index, position, OutcomeStatus.EXECUTED, said, duration=took, image=image)

    # ---------------------------------------------------------------------------------------------
    # Decisions
    # ----------------------------------------------------------------------------------------------
    def _ask(self, request: DecisionRequest) -> Ruling:
        """Put a request to the approver (core/asking.py) and record its ruling; a kill ends the run here."""
        timeout = self.policy.limits.decision_timeout or None
        if timeout is not None:
            request = replace(request, deadline_s=timeout)
        if self.config.drills is not None and self.approver is not None:
            # before the real request is on record: nothing of it shows while the drill is up, and its
            # deadline has not started
            self._drill_before(request, timeout)
        self.emit(
            ev.DecisionRequested(
                request.turn, request.index, request.call_id, request.kind, request.reason, timeout, request=request
            )
        )
        if self.approver is None:
            ruling = Ruling(Answer.REJECT, "no approver (fail closed)")
        else:
            self.set_phase(RunPhase.AWAITING_DECISION, request.reason)
            approver = self.approver
            ruling = timed_ruling(lambda stop: self._call(approver.decide, request, stop), timeout, self._switch)
        self.check_abort()
        ruling, edited = checked_edit(request, ruling, self.policy, self.desktop.size)
        if ruling.takeover:
            ruling = replace(ruling, note=TAKEOVER_NOTE)
        self.emit(decision_record(request, ruling, self.config.operator, edited))
        if ruling.answer is Answer.KILL:
            self.kill(by=ruling.by)
            raise Aborted()
        return ruling

    def _drill_before(self, real: DecisionRequest, timeout: float | None) -> None:
        """A drill, if one is due before ``real``: shown as a request is, answered, revealed and recorded. It
        has no path to the desktop: its answer is compared, never acted on (the kill switch alone is real)."""
        plan, approver = self.config.drills, self.approver
        assert plan is not None and approver is not None
        drill = plan.before(real, self._seen.drill)
        if drill is None:
            return
        self._seen.drill = drill.id
        shown = drill.shown(real)
        if drill.action is not None:  # offered the scope a real request of that action would offer
            verdict = self.policy.classify(drill.action)
            shown = replace(shown, scope=grants.scope_for(drill.action, verdict, drill.focus or self._consent.focused))
        focus = list(drill.focus) if drill.focus is not None else None
        self.emit(ev.DrillShown(real.turn, real.index, real.call_id, shown.kind, shown.reason, drill.id,
                                timeout, drill.rule, drill.words, focus, request=shown))  # fmt: skip
        self.set_phase(RunPhase.AWAITING_DECISION, shown.reason)
        ruling = timed_ruling(lambda stop: self._call(approver.decide, shown, stop), timeout, self._switch)
        self.check_abort()
        answer = "none" if ruling.by.startswith(BY_DEADLINE) else "takeover" if ruling.takeover else ruling.answer.value
        shown_ms = ruling.shown_ms if ruling.human and type(ruling.shown_ms) is int else None
        operator = (ruling.operator or self.config.operator) if ruling.human else ""
        self.emit(drills.answered(drill, real, answer, ruling.by, operator, shown_ms))
        if ruling.answer is Answer.KILL:
            self.kill(by=ruling.by)
            raise Aborted()

    def _soft_budgets(self, call: Call, index: int) -> str | None:
        """Before an action: each soft budget crossed is put to the reviewer (go on, or stop); the run's end
        reason when they stop it, else None."""
        while True:
            spent = self.tally.spent(self._clock())
            budget = self._budgets.crossed(spent)
            if budget is None:
                return None
            question = self._budgets.question(budget, spent[budget.name])
            ruling = self._ask(DecisionRequest(self.run_id, self.tally.turn, index, call.call_id, "budget", question))
            if ruling.answer is not Answer.APPROVE:
                return self._budgets.stopped(budget, spent[budget.name])
            self._budgets.go_on(budget)

    # ---------------------------------------------------------------------------------------------
    # The takeover, on the run's thread (core/takeover_loop.py), and what it does through the run
    # ----------------------------------------------------------------------------------------------
    def _take_over_here(self, where: str) -> str:
        """The reviewer has the desktop until they hand it back; returns what the model is told of it."""
        return self._takeover.run(self, where, self._seen.scaling or Scaling.identity(self.desktop.size))

    def send(self, action: Action) -> None:
        """An action to the desktop as it is (no stale check), waited for as every adapter call is."""
        self._call(self.desktop.perform_checked, action, None)

    # ---------------------------------------------------------------------------------------------
    # Outcomes, frames, phases
    # ----------------------------------------------------------------------------------------------
    def refuse(self, call: Call, index: int, position: int, rule: str, reason: str) -> ActionResult:
        self.emit(ev.PolicyVerdict(self.tally.turn, index, Verdict.BLOCK, reason, rule))
        self.emit(ev.DecisionMade(self.tally.turn, index, Answer.REJECT, "policy", note=reason))
        return self.outcome(call, index, position, OutcomeStatus.REFUSED)

    def outcome(
        self,
        call: Call,
        index: int,
        position: int,
        status: OutcomeStatus,
        message: str | None = None,
        *,
        duration: float = 0.0,
        image: Frame | None = None,
    ) -> ActionResult:
        """Record how action ``index`` ended; ``message`` (what the model hears) is by default the ending's
        words (``HEARD``)."""
        if message is None:
            message = HEARD[status]
        with self._records.lock:
            self.emit(
                ev.Outcome(
                    self.tally.turn, index, call.call_id, status, message, self.tally.steps, round(duration * 1000, 3)
                )
            )
            self.owed.open.pop(index, None)
            self.owed.performed.pop(index, None)
        return ActionResult(position, status, message, image)

    def capture(self, purpose: str = "after_action", index: int | None = None) -> Frame:
        frame = self._capture_frame()
        self._record_frame(frame, purpose, index=index)
        return frame

    def _capture_frame(self) -> Frame:
        return self._call(self.desktop.screenshot)

    def _record_frame(self, frame: Frame, purpose: str, *, latest: bool = True, index: int | None = None) -> None:
        try:
            self.rundir.screens.put(frame.sha256, frame.png)
        except OSError as exc:
            self._storage_failed(f"screens/{frame.sha256[:12]}….png", exc)
        if latest:
            self._seen.latest = frame
        self.emit(
            ev.ScreenCaptured(
                frame.sha256,
                frame.width,
                frame.height,
                len(frame.png),
                self.tally.turn,
                self.tally.steps,
                purpose,
                index,
                png=frame.png,
            )
        )

    def set_phase(self, phase: RunPhase, detail: str = "") -> None:
        # Each action's own ``executing`` record (the intent) says which action runs: the phase
        # record is written only when the phase changes.
        if phase != self.phase:
            self.phase = phase
            self.emit(ev.Phase(phase, detail))

    # ---------------------------------------------------------------------------------------------
    # Calling adapters so that an abort always wins
    # ----------------------------------------------------------------------------------------------
    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        self.check_abort()
        job = Job(fn, *args)
        # an abort sets the job's event too: the wait below ends at once
        with self._switch.waiting(job.done):
            self._caller.submit(job)
            job.done.wait()
        self.check_abort()
        return job.result()

    def check_abort(self) -> None:
        if self._switch.aborted.is_set():
            raise Aborted()

    def _request_end(self, status: RunStatus, reason: str) -> None:
        """End the run once the current batch has been answered (used by the step limit)."""
        if self._switch.pending is None:
            self._switch.pending = (status, reason)

    # ---------------------------------------------------------------------------------------------
    # Ending
    # ----------------------------------------------------------------------------------------------
    def _abort(self, status: RunStatus, reason: str, by: str = "", announce: ev.Event | None = None) -> None:
        """End the run from any thread (the kill switch, the deadline, a failure): nothing further executes;
        the ending is recorded and sealed on a thread of its own."""
        if not self._switch.trip(status, reason, wake=True):
            return
        during = self.phase
        with self._records.lock:
            # from here on the run's own thread can no longer record anything
            self._records.final = True
            if announce is None:
                announce = ev.Killed(by, during) if status is RunStatus.KILLED else ev.Note(f"run stopped: {reason}")
            self._emit_safe(announce, final=True)

        def finish() -> None:
            with contextlib.suppress(Exception):  # the agent's own cleanup must not prevent the kill
                self.agent.cancel()
            self._finalize(status, reason, None)

        threading.Thread(target=finish, name=f"cua-kill-{self.run_id}", daemon=True).start()

    def _finish(self, status: RunStatus, reason: str, verified: bool | None = None) -> None:
        """End the run on its own thread (its end, a limit, an error)."""
        if self._switch.trip(status, reason, wake=False):
            with self._records.lock:
                self._records.final = True
            self._finalize(status, reason, verified)

    def _finalize(self, status: RunStatus, reason: str, verified: bool | None) -> None:
        """Stop the clock and the desktop, give every open action its outcome, seal the log and write
        result.json (core/closing.py); the result says which of them held."""
        seal: dict[str, Any] = {}
        # Only the verifier's own ending has a verdict.
        verdict = self._switch.verdict if verified is not None else None
        tally = self.tally
        try:
            cleanup = self._wind_down(reason)
            ended = ev.RunEnded(status, reason, tally.turn, tally.steps, tally.executed, verified, tally.final_text)
            self._emit_safe(ended, final=True)
            with self._records.lock:
                seal, self._records.lost = seal_audit(self.audit, self.config.audit_key, self._records.lost)
            if self._records.lost is not None:
                status, reason = RunStatus.ERROR, storage_reason(reason, self._records.lost)
            with contextlib.suppress(OSError):
                self.transcript.close()
            self._caller.close()
            if seal:
                record = result_record(
                    self.run_id, (status, reason, verified), verdict, cleanup, seal, tally, self._wall_clock()
                )
                try:
                    self.rundir.write_result(record)
                # A full disk, a read-only folder, or a bug: not sealed either way.
                except Exception as exc:
                    seal = {}
                    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else failure(exc)
                    status, reason = RunStatus.ERROR, storage_reason(reason, f"could not write result.json: {why}")
        # A bug while ending: what is on disk is not sealed, and the result says so.
        except Exception as exc:
            seal = {}
            for close in (self.audit.close, self.transcript.close, self._caller.close):
                with contextlib.suppress(Exception):
                    close()
            status, reason = RunStatus.ERROR, f"internal error: not sealed: {failure(exc)} (while ending: {reason})"
        finally:
            self.rundir.release_reserve()
            self.result = RunResult(self.run_id, self.rundir.path, status, reason, verified, tally.turn, tally.steps,
                                    tally.executed, seal, verdict)  # fmt: skip
            self._switch.finished.set()

    def _wind_down(self, reason: str) -> tuple[bool, str]:
        """Stop the clock and the desktop, and give every open action its outcome: (stopped cleanly, detail)."""
        if self._switch.timer is not None:
            self._switch.timer.cancel()
        self._emit_safe(ev.Phase(RunPhase.STOPPING, "stopping the desktop"), final=True)
        ok, detail = stop_desktop(self.desktop, self.config.stop_timeout, self.run_id)
        self._emit_safe(ev.Cleanup(ok, detail), final=True)
        with self._records.lock:
            for record in self.owed.closing(self.tally.turn, self.tally.steps, reason):
                self._emit_safe(record, final=True)
        return ok, detail

    # ---------------------------------------------------------------------------------------------
    # Events
    # ----------------------------------------------------------------------------------------------
    def emit(self, event: ev.Event, *, final: bool = False) -> None:
        """Append to the audit log first, then tell the listeners. Raises Aborted once the run is ending
        (except for the finalizer's own events) or sealed."""
        with self._records.lock:
            if self._records.final and not final:
                raise Aborted()
            try:
                seq, head = self.audit.append(event.kind, event.to_record())
            except AuditClosed:
                raise Aborted() from None
            except AuditWriteError as exc:
                if final:
                    self._records.lost = self._records.lost or str(exc)
                    raise StorageFailure(str(exc)) from None
                self._storage_failed("audit.jsonl", exc)
            stamped = ev.Stamped(seq, head, event, self.audit.last_ts)
            for listener in self._records.listeners:
                try:
                    listener(stamped)
                except Exception:
                    # a broken listener (UI) must not break the run or its audit trail
                    pass

    def _emit_safe(self, event: ev.Event, *, final: bool = False) -> None:
        try:
            self.emit(event, final=final)
        except (Aborted, StorageFailure):
            pass

    def _storage_failed(self, what: str, exc: OSError) -> None:
        """A record could not be written: stop at once (nothing further executes) and end the run ``error``,
        recording what already ran wherever the log can still be written. Raises StorageFailure."""
        reason = f"could not write {what}: {exc.strerror or exc}"
        if isinstance(exc, AuditWriteError):
            reason = str(exc)
        self.rundir.release_reserve()  # room for the ending to be recorded
        self._abort(RunStatus.ERROR, f"storage: {reason}", announce=ev.ErrorRaised("storage", reason))
        raise StorageFailure(reason)


def _asked_for(action: Action, image: Frame) -> bool:
    """A picture comes only with a zoom, and no larger than its region (what a desktop sends back is
    checked here too: a remote one is untrusted, and no picture goes to the model or the log unasked)."""
    if action.kind is not Kind.ZOOM or action.region is None:
        return False
    x0, y0, x1, y1 = action.region
    return 0 < image.width <= x1 - x0 and 0 < image.height <= y1 - y0
