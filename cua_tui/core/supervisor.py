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
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from . import events as ev
from . import focus, grants
from .actions import MAX_TEXT, Action, ActionError, Kind, parse_anthropic, parse_openai, text_sha256
from .audit import AuditClosed, AuditKey, AuditWriteError, AuditWriter
from .budgets import SoftBudgets
from .edits import Edited, check_edit, edit_note
from .events import RunPhase, RunStatus
from .geometry import Scaling, Size
from .grouping import group_record
from .policy import Decision, Policy, Verdict
from .ports import (
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
    Gated,
    LimitExceeded,
    OutcomeStatus,
    Ruling,
    SafetyCheck,
    Turn,
)
from .rundir import RunDir, TranscriptWriter
from .stale import ScreenCheck, StaleGuard
from .takeover import (
    BY_TAKEOVER,
    MSG_TAKEN_OVER,
    TAKEOVER_NOTE,
    TYPING,
    TYPING_PAUSE_S,
    TYPING_STOPPED,
    Done,
    Stretch,
    input_problem,
    takeover_note,
)
from .text import failure, one_line, truncate
from .threads import Job, Worker, spawn

T = TypeVar("T")

MSG_OK = "OK"
MSG_DECLINED = "Declined by the user. Do not retry this action."
MSG_REFUSED = "Refused by sandbox policy. Stop and report."
MSG_NOT_EXECUTED = "Not executed: an earlier action in this turn did not run."
MSG_STALE = "Not executed: the screen changed since the model's screenshot."
# who rejected a decision nobody answered in time (its seconds follow)
BY_DEADLINE = "deadline"


def deadline_message(seconds: float) -> str:
    """What the model hears of an action its reviewer did not decide in time (and the decision's note)."""
    return f"Declined: no decision was made within the {seconds:g} s deadline. Do not retry this action."


# A reply with more actions than this in one turn is refused whole, with one record (not one per
# action): no computer-use model batches anywhere near this many, and a flood must not flood the
# audit log.
MAX_ACTIONS_PER_TURN = 100
# Room kept free in the run directory so that the end of a run can still be recorded on a full disk.
RESERVE_BYTES = 512 * 1024

# told each event right after it was written, with its chain place
Listener = Callable[[ev.Stamped], None]


# One planned action of a turn: (index in the turn, position in its call, the raw action, parsed,
# error).
_Planned = tuple[int, int, Any, "Action | None", "ActionError | None"]


class Aborted(Exception):
    """Raised inside the loop once the run was killed or hit a hard limit from another thread."""


class _Halt(Exception):
    pass


class StorageFailure(Exception):
    """A record of the run could not be written: nothing further may execute (fail closed)."""


@dataclass
class RunConfig:
    task: str
    backend: str
    agent: str
    model: str | None
    screen: Size
    policy: Policy
    audit_key: AuditKey | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # lab, url, ... for run.json
    versions: dict[str, str] = field(default_factory=dict)
    # how long kill waits for the desktop to stop before moving on
    stop_timeout: float = 15.0
    # who reviews (user@host or --operator): recorded with every decision a person makes
    operator: str = ""


@dataclass(frozen=True)
class RunResult:
    run_id: str
    path: Path
    status: RunStatus
    reason: str
    verified: bool | None
    turns: int
    steps: int
    executed: int
    # as written to result.json; empty when the run could not be sealed
    seal: dict[str, Any]
    # the verdict and who vouched for it, when there was one
    verification: ev.VerificationDone | None = None

    @property
    def sealed(self) -> bool:
        """result.json holds the seal, so ``verify`` can tell the run whole (else it reports it interrupted)."""
        return bool(self.seal)

    @property
    def exit_code(self) -> int:
        # A run whose seal is not on disk is no success, whatever it ended as.
        return 0 if self.sealed and self.status in (RunStatus.PASSED, RunStatus.FINISHED) else 1


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
        """Long on purpose: it declares the whole state of a run (its writers, locks and events, counters,
        the step in hand) in one place, each attribute with what it is for."""
        self.config = config
        self.policy = config.policy
        self.desktop = desktop
        self.agent = agent
        self.approver = approver
        self.rundir = rundir
        self.run_id = rundir.run_id
        self._listeners: list[Listener] = list(listeners)
        self._stale = stale_guard or StaleGuard()
        self._clock = clock  # durations, the deadline
        # timestamps on record (run.json, audit lines, result.json)
        self._wall_clock = wall_clock
        self.audit = AuditWriter(rundir.audit, self.run_id, fsync=fsync, key=config.audit_key, clock=wall_clock)
        self.transcript = TranscriptWriter(rundir.transcript)
        rundir.reserve_space(RESERVE_BYTES)
        self._emit_lock = threading.RLock()
        self._end_lock = threading.Lock()
        self._ending: tuple[RunStatus, str] | None = None
        self._aborted = threading.Event()
        self._cancel = threading.Event()  # handed to approvers
        self._finished = threading.Event()
        self._waiters: set[threading.Event] = set()
        self._waiters_lock = threading.Lock()
        self._caller = Worker(f"cua-io-{self.run_id}")
        self._deadline_timer: threading.Timer | None = None
        self._desktop_stopped = False
        self._stop_lock = threading.Lock()
        self.result: RunResult | None = None
        self._verdict: ev.VerificationDone | None = None
        # Counters
        self.turn = 0
        self.steps = 0
        self.executed = 0
        self.total_tokens = 0
        self.total_cost: float | None = None
        self.phase = RunPhase.STARTING
        self._seen_call_ids: set[str] = set()
        self._frame: Frame | None = None  # latest capture
        self._observed: Frame | None = None  # the screenshot the model acted on
        self._final_text = ""
        self._pending_end: tuple[RunStatus, str] | None = None
        # proposals of the current turn still owed an outcome -> call id
        self._open: dict[int, str] = {}
        self._in_flight: int | None = None  # index of the action whose desktop call is running
        # actions that ran but whose outcome is not yet recorded
        self._performed: dict[int, str] = {}
        # a takeover's typing stretch under way: its text on record so far, the last piece maybe still in
        # flight (memory only), hashed once should the run end before the stretch does
        self._stretch_text: dict[int, tuple[str, bool]] = {}  # and whether it is private
        # set when a record of the ending could not be written
        self._lost: str | None = None
        # set once the run is ending: only the finalizer may still write events
        self._final = False
        self._grants = grants.Grants()  # scoped approvals (``a``) in force
        # the focused field (core/focus.py), where typing goes
        self._field: tuple[int, int] | None = None
        # A safety-check approval (call id, ruling, indexes) that approves the call's confirm
        # actions too
        self._covered: tuple[str, Ruling, frozenset[int]] | None = None
        # A takeover (``T``): asked by (operator), taken at the next point with nothing in flight;
        # the reviewer's inputs reach the run's thread through the queue, in order
        self._takeover_lock = threading.Lock()
        self._takeover_by: str | None = None
        self._taken = False
        self._inputs: queue.Queue[Action | bool | None] = queue.Queue()
        # an input taken from the queue while typing was gathered, first in line for the next round
        self._held: list[Action | bool | None] = []
        self._takeovers = 0
        # the next index of the turn (a takeover's actions follow the batch's)
        self._next_index = 0
        # the last call's scaling: a takeover is told in the model's coordinates
        self._scaling: Scaling | None = None
        # the soft budgets (ask_at) and when the run began (the seconds one counts)
        self._budgets = SoftBudgets(config.policy.limits)
        self._began = clock()

    # ---------------------------------------------------------------------------------------------
    # Public API
    # ----------------------------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @property
    def finished(self) -> threading.Event:
        return self._finished

    @property
    def ending(self) -> bool:
        """The run is ending (killed, or aborted by a failure): nothing more executes, no answer is taken."""
        return self._aborted.is_set()

    def kill(self, by: str = "human") -> None:
        """The kill switch. Safe from any thread, at any moment, any number of times; returns at once."""
        self._abort(RunStatus.KILLED, f"killed by {by}", by=by)

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
        with self._takeover_lock:
            if self.ending or self._finished.is_set():
                return "the run is ending"
            if self._takeover_by is not None:
                return "the desktop is already taken over (or asked for)"
            self._takeover_by = by or self.config.operator or "reviewer"
        return None

    @property
    def taken_over(self) -> bool:
        """The reviewer has the desktop now (their inputs run); False while it is only asked for."""
        return self._taken

    def takeover_input(self, action: Action) -> str | None:
        """One input of the reviewer's (any thread), run in order on the run's thread, checked by the
        policy. None when queued; else why not."""
        if not self._taken or self.ending:
            return "the desktop is not taken over"
        self._inputs.put(action)
        return None

    def takeover_private(self, private: bool) -> None:
        """Start or end a private stretch of the takeover (any thread)."""
        if self._taken:
            self._inputs.put(private)

    def hand_back(self) -> None:
        """Give the desktop back to the model (any thread); before the takeover began, cancel the ask."""
        with self._takeover_lock:
            if not self._taken:
                self._takeover_by = None
                return
        self._inputs.put(None)

    def wait(self, timeout: float | None = None) -> RunResult | None:
        self._finished.wait(timeout)
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
        self._finished.wait()
        assert self.result is not None
        return self.result

    # ---------------------------------------------------------------------------------------------
    # The loop
    # ----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        run_info = self._record_start()
        self._start_desktop(run_info)
        frame = self._capture(purpose="initial")
        self._set_phase(RunPhase.WAITING_MODEL, "waiting for the model")
        self._observed = frame
        turn = self._call(self.agent.start, self.config.task, frame)
        limits = self.policy.limits
        while True:
            self._check_abort()
            self.turn += 1
            self._record_turn(turn)
            if turn.done:
                self._final_text = turn.text
                break
            results = self._execute_turn(turn)
            self._check_abort()
            if self._pending_end is not None:
                self._finish(*self._pending_end)
                return
            if self.turn >= limits.max_turns:
                self._finish(RunStatus.LIMIT, f"turn limit of {limits.max_turns} reached")
                return
            note = self._takeover("before the model's next turn") if self._takeover_by is not None else ""
            frame = self._frame or self._capture()
            self._set_phase(RunPhase.WAITING_MODEL, "waiting for the model")
            self._observed = frame
            turn = (
                self._call(self.agent.next_turn, results, frame, note)
                if note
                else self._call(self.agent.next_turn, results, frame)
            )
        self._check_abort()
        self._verify()

    def _record_start(self) -> dict[str, Any]:
        """run.json, the ``run_started`` record and the deadline: before anything else happens."""
        cfg = self.config
        policy = self.policy
        started = self._wall_clock()
        run_info = {
            "run_id": self.run_id,
            "task": cfg.task,
            "backend": cfg.backend,
            "agent": cfg.agent,
            "model": cfg.model,
            "screen": str(cfg.screen),
            "policy": {"name": policy.name, "source": policy.source, "sha256": policy.sha256, "text": policy.text},
            "limits": _limits(policy),
            "versions": cfg.versions,
            "started_at": started,
            "started_at_iso": iso_time(started),
            "audit_key_id": cfg.audit_key.key_id if cfg.audit_key else None,
            **cfg.extra,
        }
        self._write_record("run.json", self.rundir.write_run_json, run_info)
        self._emit(
            ev.RunStarted(
                cfg.task,
                cfg.backend,
                cfg.agent,
                cfg.model,
                str(cfg.screen),
                policy.name,
                policy.sha256,
                _limits(policy),
                {"algorithm": cfg.audit_key.algorithm, "key_id": cfg.audit_key.key_id} if cfg.audit_key else None,
            )
        )
        deadline = policy.limits.deadline_seconds
        self._deadline_timer = threading.Timer(
            deadline, self._abort, (RunStatus.LIMIT, f"deadline of {deadline} s reached")
        )
        self._deadline_timer.daemon = True
        self._deadline_timer.start()
        return run_info

    def _start_desktop(self, run_info: dict[str, Any]) -> None:
        """Start the desktop; what its sandbox obtained goes to run.json and the log."""
        backend = self.config.backend
        self._set_phase(RunPhase.STARTING, f"starting the {backend} desktop")
        # A desktop's own events (the egress proxy's) go to this run's log.
        self.desktop.bind_events(self._emit_safe)
        self._call(self.desktop.start)
        # What the sandbox actually obtained, on record.
        isolation = self.desktop.isolation
        if isolation:
            self._write_record("run.json", self.rundir.write_run_json, {**run_info, "isolation": isolation})
            self._emit(ev.DesktopReady(backend, isolation))

    def _verify(self) -> None:
        """The independent verdict (never the model's claim), then the end of the run."""
        self._set_phase(RunPhase.VERIFYING, "running the independent verifier")
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
            self._emit(done)
            # for result.json: who vouched for the verdict it records
            self._verdict = done
            status = RunStatus.PASSED if verification.passed else RunStatus.FAILED
            self._finish(status, verification.detail, verified=verification.passed)

    def _record_turn(self, turn: Turn) -> None:
        usage = turn.usage
        if usage is not None:
            self.total_tokens += usage.input_tokens + usage.output_tokens
            if usage.cost_usd is not None:
                self.total_cost = (self.total_cost or 0.0) + usage.cost_usd
        n_actions = sum(len(c.actions) for c in turn.calls)
        self._emit(
            ev.ModelTurn(
                self.turn,
                turn.text,
                len(turn.calls),
                n_actions,
                turn.response_id,
                usage.input_tokens if usage else 0,
                usage.output_tokens if usage else 0,
                usage.cost_usd if usage else None,
                self.total_tokens,
                self.total_cost,
            )
        )
        lim = self.policy.limits
        if lim.max_tokens and self.total_tokens > lim.max_tokens:
            raise LimitExceeded(f"token budget of {lim.max_tokens} exceeded ({self.total_tokens} used)")
        if lim.max_cost_usd and (self.total_cost or 0.0) > lim.max_cost_usd:
            raise LimitExceeded(f"cost budget of ${lim.max_cost_usd:g} exceeded (${self.total_cost:.4f} used)")

    def _execute_turn(self, turn: Turn) -> tuple[CallResult, ...]:
        self._performed.clear()
        self._next_index = 0
        n_actions = sum(len(call.actions) for call in turn.calls)
        if n_actions > MAX_ACTIONS_PER_TURN:
            return self._refuse_turn(turn, n_actions)
        plan = self._propose(turn)
        # Run them in order; the first refusal, rejection, failure or stale screen halts the batch.
        transcript_calls: list[dict[str, Any]] = []
        results: list[CallResult] = []
        halted = False
        for call, items in plan:
            result, halted = self._run_call(call, items, halted)
            results.append(result)
            transcript_calls.append(
                {
                    "call_id": call.call_id,
                    "format": call.format,
                    "actions": [
                        a.to_record() if a else {"error": e.reason if e else "", "raw_kind": _raw_kind(call, raw)}
                        for _, _, raw, a, e in items
                    ],
                    "safety_checks": [c.code for c in call.safety_checks],
                    "acknowledged": [c.id for c in result.acknowledged_safety_checks],
                }
            )
        self._append_transcript(
            {
                "turn": self.turn,
                "response_id": turn.response_id,
                "text": turn.text,
                "calls": transcript_calls,
                "results": [[r.status.value for r in cr.results] for cr in results],
            }
        )
        return tuple(results)

    def _propose(self, turn: Turn) -> list[tuple[Call, list[_Planned]]]:
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
                    self.turn,
                    index,
                    call.call_id,
                    action.to_record() if action else None,
                    action.describe() if action else "",
                    error.reason if error else "",
                    error.code if error else "",
                    _raw_kind(call, raw),
                    parsed=action,
                )
                self._propose_one(proposed)
                items.append((index, position, raw, action, error))
                index += 1
            plan.append((call, items))
            self._scaling = scaling
        self._next_index = index
        return plan

    def _propose_one(self, proposed: ev.ActionProposed) -> None:
        """Write a proposal and, in the same hold of the lock, owe it its outcome: a kill between the two
        would otherwise close a proposal that was never written (or leave a written one unclosed)."""
        with self._emit_lock:
            self._emit(proposed)
            self._open[proposed.index] = proposed.call_id

    def _run_call(self, call: Call, items: list[_Planned], halted: bool) -> tuple[CallResult, bool]:
        """One call's actions in order (its safety checks decided first); returns its result and whether
        the batch is halted after it."""
        call_results: list[ActionResult] = []
        acknowledged: tuple[SafetyCheck, ...] = ()
        duplicate = call.call_id in self._seen_call_ids or not call.call_id
        self._seen_call_ids.add(call.call_id)
        safety_ok, safety_by = True, ""
        self._covered = None  # a safety-check answer covers only its own call
        if call.safety_checks and items and not halted and not duplicate:
            # Safety checks are decided before anything of their call runs, with the actions they
            # gate shown; an approval also approves those of them that would need a decision of
            # their own.
            acknowledged, safety_by = self._decide_safety_checks(call, items)
            safety_ok = bool(acknowledged)
        for index, position, _raw, action, error in items:
            if halted:
                call_results.append(self._outcome(call, index, position, OutcomeStatus.NOT_EXECUTED, MSG_NOT_EXECUTED))
                continue
            halted = True  # until the action proves otherwise
            if duplicate:
                reason = f"call id {call.call_id!r} was already used in this run"
                call_results.append(self._refuse(call, index, position, "duplicate_call_id", reason))
                continue
            if not safety_ok:
                # who rejected the call's safety checks decided this action's fate too
                self._emit(
                    ev.DecisionMade(
                        self.turn, index, Answer.REJECT, safety_by, subject="safety_check", note="safety check rejected"
                    )
                )
                call_results.append(self._outcome(call, index, position, OutcomeStatus.DECLINED, MSG_DECLINED))
                continue
            try:
                call_results.append(self._handle(call, index, position, action, error))
                halted = False
            except _Halt as stop:
                call_results.append(stop.args[0])
        return CallResult(call.call_id, tuple(call_results), acknowledged), halted

    def _refuse_turn(self, turn: Turn, n_actions: int) -> tuple[CallResult, ...]:
        """Refuse a whole turn with one record: nothing of it is proposed, logged action by action or run."""
        reason = f"{n_actions} actions in one turn exceed the cap of {MAX_ACTIONS_PER_TURN}"
        self._emit(ev.TurnRefused(self.turn, n_actions, reason))
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
            {"turn": self.turn, "response_id": turn.response_id, "text": turn.text, "refused": reason}
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
        gated = tuple(self._gated(index, action, error) for index, _position, _raw, action, error in items)
        self._emit(
            ev.SafetyChecksRaised(
                self.turn, call.call_id, [{"id": c.id, "code": c.code, "message": c.message} for c in checks]
            )
        )
        reason = "; ".join(f"{c.code}: {c.message}" for c in checks)
        request = DecisionRequest(
            self.run_id,
            self.turn,
            first_index,
            call.call_id,
            "safety_check",
            f"the model raised safety checks: {reason}",
            safety_checks=checks,
            frame=self._frame,
            gated=gated,
        )
        ruling = self._ask(request)
        if ruling.answer is Answer.APPROVE and any(g.covered for g in gated):
            self._covered = (call.call_id, ruling, frozenset(g.index for g in gated if g.covered))
        return (checks if ruling.answer is Answer.APPROVE else ()), ruling.by

    def _gated(self, index: int, action: Action | None, error: ActionError | None) -> Gated:
        """What the policy says of an action of a call whose safety checks are asked (shown, then enforced
        again when the action's turn comes)."""
        if action is None:
            reason = f"malformed: {error.reason}" if error is not None else "malformed"
            return Gated(index, None, Verdict.BLOCK.value, "malformed", reason)
        decision = self.policy.classify(action)
        return Gated(index, action, decision.verdict.value, decision.rule, decision.reason)

    def _parse(self, call: Call, raw: Any, scaling: Scaling) -> tuple[Action | None, ActionError | None]:
        try:
            if call.format == "openai":
                return parse_openai(raw, scaling), None
            if call.format == "anthropic" and isinstance(raw, dict):
                return parse_anthropic(raw.get("name"), raw.get("input"), scaling, raw.get("toolset_name")), None
            return None, ActionError("bad_schema", f"cannot read a {call.format!r} action")
        except ActionError as exc:
            return None, exc

    def _handle(
        self, call: Call, index: int, position: int, action: Action | None, error: ActionError | None
    ) -> ActionResult:
        """One action from verdict to outcome. Raises _Halt(result) when the batch must stop."""
        self._check_abort()
        if self._takeover_by is not None:
            # between two actions: the reviewer takes the desktop, the rest of the batch waits for none
            raise _Halt(self._outcome(call, index, position, OutcomeStatus.NOT_EXECUTED, MSG_TAKEN_OVER))
        stop = self._soft_budgets(call, index)
        if stop is not None:
            self._request_end(RunStatus.LIMIT, stop)
            raise _Halt(
                self._outcome(call, index, position, OutcomeStatus.NOT_EXECUTED, f"Not executed: the run {stop}.")
            )
        self.steps += 1
        lim = self.policy.limits
        if self.steps > lim.max_steps:
            # before parsing: a malformed proposal counts and must not skip the cap
            self._request_end(RunStatus.LIMIT, f"step limit of {lim.max_steps} reached")
            raise _Halt(
                self._refuse(call, index, position, "limits.max_steps", f"step limit of {lim.max_steps} reached")
            )
        if action is None:
            assert error is not None
            raise _Halt(self._refuse(call, index, position, f"parse:{error.code}", f"malformed action: {error.reason}"))
        decision = self.policy.classify(action)
        self._emit(ev.PolicyVerdict(self.turn, index, decision.verdict, decision.reason, decision.rule))
        reviewed = False
        edited: Edited | None = None
        if decision.verdict is Verdict.BLOCK:
            self._emit(ev.DecisionMade(self.turn, index, Answer.REJECT, "policy", note=decision.reason))
            raise _Halt(self._outcome(call, index, position, OutcomeStatus.REFUSED, MSG_REFUSED))
        if decision.verdict is Verdict.CONFIRM:
            edited = self._review(call, index, position, action, decision)
            reviewed = True
            if edited is not None:
                # what runs from here on is the reviewer's action, checked and approved as such
                action = edited.ran
        else:
            self._emit(ev.DecisionMade(self.turn, index, Answer.APPROVE, "policy", note=decision.reason))
        check = None
        if reviewed and action.target is not None and self._observed is not None:
            # Performed only if the target's area still looks as the model saw it, in the same
            # request.
            check = self._stale.check(self._observed, action.target)
        note = edit_note(edited, call.scaling or Scaling.identity(self.desktop.size)) if edited else ""
        return self._execute(call, index, position, action, check, note)

    def _review(self, call: Call, index: int, position: int, action: Action, decision: Decision) -> Edited | None:
        """A confirmation point: an active grant whose scope covers the action approves it (named as such,
        never as a person); otherwise the reviewer decides, and may grant the action's scope (``a``), give
        a reason with a rejection, which the model hears after the fixed text, or change the action before
        approving it (returned). Raises _Halt when declined."""
        covered = self._covered
        if covered is not None and covered[0] == call.call_id and index in covered[2]:
            # the reviewer saw this action listed under the call's safety checks
            ruling = covered[1]
            self._emit(
                ev.DecisionMade(
                    self.turn,
                    index,
                    Answer.APPROVE,
                    ruling.by,
                    note="approved with the call's safety checks (one answer)",
                    operator=self.config.operator if ruling.human else "",
                    screen=ruling.screen if _is_sha256(ruling.screen) else "",
                )
            )
            return None
        grant = self._grants.match(action, decision, self._field)
        if grant is not None:
            self._emit(
                ev.DecisionMade(
                    self.turn, index, Answer.APPROVE, f"grant #{grant.id} (given by {grant.by})", note=grant.scope.label
                )
            )
            return None
        scope = grants.scope_for(action, decision, self._field)
        request = DecisionRequest(
            self.run_id,
            self.turn,
            index,
            call.call_id,
            "action",
            decision.reason,
            action=action,
            frame=self._frame,
            scope=scope,
        )
        ruling = self._ask(request)
        if ruling.takeover and ruling.answer is Answer.REJECT:
            raise _Halt(self._outcome(call, index, position, OutcomeStatus.DECLINED, MSG_TAKEN_OVER))
        if ruling.answer is not Answer.APPROVE:
            message = MSG_DECLINED
            if ruling.by.startswith(BY_DEADLINE):
                message = ruling.note
            if ruling.human and ruling.note:
                message = f"{MSG_DECLINED} The reviewer said: {one_line(ruling.note, 300)}"
            raise _Halt(self._outcome(call, index, position, OutcomeStatus.DECLINED, message))
        if ruling.edit is not None:
            # an edit is a one-off: it grants nothing
            return Edited(action, ruling.edit)
        if ruling.grant and scope is not None:
            with self._emit_lock:
                given = self._grants.add(scope, self.config.operator or ruling.by, self.turn, index)
                self._emit(ev.GrantAdded(given.id, scope.kind, scope.key, scope.label, given.by, self.turn, index))
        return None

    def revoke_grant(self, grant_id: int, by: str = "") -> bool:
        """End a grant (from any thread): later actions of its scope are asked again. False if not active."""
        with self._emit_lock:
            if self._grants.revoke(grant_id) is None:
                return False
            self._emit_safe(ev.GrantRevoked(grant_id, by or self.config.operator or "reviewer"))
            return True

    def _move_focus(self, field: tuple[int, int] | None) -> None:
        """The focused field after an action; a typing grant ends with the field it named."""
        self._field = field
        with self._emit_lock:
            for grant in self._grants.outlived(field):
                self._grants.revoke(grant.id)
                self._emit(ev.GrantRevoked(grant.id, "the focus left the field"))

    def _execute(
        self, call: Call, index: int, position: int, action: Action, check: ScreenCheck | None, note: str = ""
    ) -> ActionResult:
        """Run one approved action; ``note`` (a reviewer's edit) follows what the model hears of it."""
        self._set_phase(RunPhase.EXECUTING, action.describe())
        started = self._clock()
        try:
            # The intent is on disk before the desktop gets the action: nothing runs unrecorded.
            self._emit(ev.Executing(self.turn, index, call.call_id, action.describe()))
            if action.kind is Kind.SCREENSHOT:
                frame, output, image = self._capture_frame(), None, None
            else:
                self._in_flight = index
                step = self._call(self.desktop.perform_checked, action, check)
                frame, output, image = step.frame, step.output, step.image
                self._in_flight = None
                if step.stale:
                    self._check_abort()
                    # the model gets the screen as it is now
                    self._record_frame(frame, "stale_check", index=index)
                    raise _Halt(self._outcome(call, index, position, OutcomeStatus.STALE, MSG_STALE))
                if image is not None and not _asked_for(action, image):
                    raise DesktopError(
                        f"the desktop answered a {action.kind.value} with a {image.width} x {image.height} "
                        "picture it did not ask for",
                        fatal=True,
                    )
        except DesktopError as exc:
            self._in_flight = None
            self._check_abort()
            # it may have run part-way: where the focus is now is unknown
            self._move_focus(None)
            failed, message = OutcomeStatus.FAILED, f"Failed: {one_line(str(exc))}"
            result = self._outcome(call, index, position, failed, message, duration=self._clock() - started)
            if exc.fatal:
                raise
            raise _Halt(result) from None
        self.executed += 1
        said = f"{output or MSG_OK}. {note}" if note else output or MSG_OK
        # it ran: an ending from here on records it as executed
        self._performed[index] = said
        self._move_focus(focus.after_action(self._field, action))
        self._check_abort()
        self._record_frame(frame, "after_action", index=index)
        if image is not None:
            self._record_frame(image, "zoom", latest=False, index=index)
        took = self._clock() - started
        return self._outcome(call, index, position, OutcomeStatus.EXECUTED, said, duration=took, image=image)

    # ---------------------------------------------------------------------------------------------
    # Decisions
    # ----------------------------------------------------------------------------------------------
    def _ask(self, request: DecisionRequest) -> Ruling:
        timeout = self.policy.limits.decision_timeout or None
        if timeout is not None:
            request = replace(request, deadline_s=timeout)
        self._emit(
            ev.DecisionRequested(
                request.turn, request.index, request.call_id, request.kind, request.reason, timeout, request=request
            )
        )
        if self.approver is None:
            ruling = Ruling(Answer.REJECT, "no approver (fail closed)")
        else:
            self._set_phase(RunPhase.AWAITING_DECISION, request.reason)
            ruling = self._decide(self.approver, request, timeout)
        self._check_abort()
        ruling, edited = self._checked_edit(request, ruling)
        if ruling.takeover:
            ruling = replace(ruling, note=TAKEOVER_NOTE)
        self._emit(
            ev.DecisionMade(
                request.turn,
                request.index,
                ruling.answer,
                ruling.by,
                subject=request.kind,
                note=ruling.note,
                operator=self.config.operator if ruling.human else "",
                screen=ruling.screen if _is_sha256(ruling.screen) else "",
                shown_ms=ruling.shown_ms if ruling.human and type(ruling.shown_ms) is int else None,
                guard_ms=ruling.guard_ms if ruling.human and type(ruling.guard_ms) is int else None,
                edited=edited,
                ran=ruling.edit,
                group=group_record(ruling.group) if ruling.human else None,
            )
        )
        if ruling.answer is Answer.KILL:
            self.kill(by=ruling.by)
            raise Aborted()
        return ruling

    def _soft_budgets(self, call: Call, index: int) -> str | None:
        """Before an action: each soft budget crossed is put to the reviewer (go on, or stop); the run's end
        reason when they stop it, else None."""
        while True:
            spent = {
                "cost": self.total_cost or 0.0,
                "tokens": float(self.total_tokens),
                "steps": float(self.steps),
                "seconds": self._clock() - self._began,
            }
            budget = self._budgets.crossed(spent)
            if budget is None:
                return None
            question = self._budgets.question(budget, spent[budget.name])
            ruling = self._ask(DecisionRequest(self.run_id, self.turn, index, call.call_id, "budget", question))
            if ruling.answer is not Answer.APPROVE:
                return self._budgets.stopped(budget, spent[budget.name])
            self._budgets.go_on(budget)

    def _decide(self, approver: Approver, request: DecisionRequest, timeout: float | None) -> Ruling:
        """The approver's ruling, or, once ``timeout`` seconds pass without one, the deadline's reject: the
        approver is told to stop as the kill switch tells it, and whatever it answers then is not taken
        (a decision is never approved at or after its deadline)."""
        stop, expired = self._cancel, threading.Event()
        timer = None
        if timeout is not None:
            stop = threading.Event()
            with self._waiters_lock:
                # the kill switch wakes it too
                self._waiters.add(stop)
            if self._aborted.is_set():
                stop.set()

            def expire() -> None:
                expired.set()
                stop.set()

            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
        try:
            ruling = _valid_ruling(self._call(approver.decide, request, stop))
        except Aborted:
            raise
        except Exception as exc:  # a broken approver rejects: fail closed
            ruling = Ruling(Answer.REJECT, "approver error (fail closed)", failure(exc))
        finally:
            if timer is not None:
                timer.cancel()
                with self._waiters_lock:
                    self._waiters.discard(stop)
        if timeout is not None and expired.is_set() and not (ruling.answer is Answer.KILL and ruling.human):
            return Ruling(Answer.REJECT, f"{BY_DEADLINE} ({timeout:g} s)", deadline_message(timeout))
        return ruling

    def _checked_edit(self, request: DecisionRequest, ruling: Ruling) -> tuple[Ruling, dict[str, Any] | None]:
        """A ruling's edit, checked as a proposal is: the run's own check of what the front end sent, then
        the policy. An edit the policy blocks is never run (the answer becomes the policy's reject); one
        that needs a decision is approved by the person who made it, with the same answer. Returns the
        ruling to record and the decision's ``edited`` record (None: no edit)."""
        edit = ruling.edit
        if edit is None:
            return ruling, None
        proposed = request.action
        if ruling.answer is not Answer.APPROVE or request.kind != "action" or proposed is None:
            return replace(ruling, edit=None), None
        if not ruling.human:
            problem: str | None = "only a person's answer may change an action"
        else:
            problem = check_edit(proposed, edit, self.desktop.size)
        record = Edited(proposed, edit).to_record()
        if problem is not None:
            note = f"the edit was refused: {problem}"
            return Ruling(Answer.REJECT, "edit check (fail closed)", note), record | {"refused": problem}
        verdict = self.policy.classify(edit)
        record |= {"verdict": verdict.verdict.value, "rule": verdict.rule, "reason": verdict.reason}
        if verdict.verdict is Verdict.BLOCK:
            note = f"the reviewer's edit is blocked: {verdict.reason}"
            return Ruling(Answer.REJECT, "policy", note), record | {"refused": verdict.reason}
        return ruling, record

    # ---------------------------------------------------------------------------------------------
    # The takeover, on the run's thread
    # ----------------------------------------------------------------------------------------------
    def _takeover(self, where: str) -> str:
        """The reviewer has the desktop until they hand it back: each input is an action of the turn,
        proposed by them, checked by the policy, approved by being done, followed by its screen. Returns
        what the model is told of it."""
        operator = self.config.operator or self._takeover_by or ""
        self._takeovers += 1
        call = Call(f"takeover_{self._takeovers}", "openai", ())
        with self._takeover_lock:
            self._taken = True
        done: list[Done] = []
        private = False
        # the typing stretch under way: characters typed one after another are one action
        stretch: Stretch | None = None
        self._emit(ev.TakeoverStarted(self.turn, BY_TAKEOVER, operator, where))
        self._set_phase(RunPhase.TAKEN_OVER, f"the desktop is {operator}'s")
        try:
            while True:
                self._check_abort()
                try:
                    item = self._held.pop() if self._held else self._inputs.get(timeout=0.05)
                except queue.Empty:
                    if stretch is not None and self._clock() - stretch.last >= TYPING_PAUSE_S:
                        done.append(self._end_stretch(call, stretch, operator))
                        stretch = None
                    continue
                if isinstance(item, Action) and item.kind is Kind.TYPE:
                    stretch = self._typing(call, stretch, self._burst(item.text), operator, private)
                    continue
                if stretch is not None:
                    # any other input ends the stretch first (its screen before a private stretch ends)
                    done.append(self._end_stretch(call, stretch, operator))
                    stretch = None
                if item is None:
                    break
                if isinstance(item, bool):
                    if item != private:
                        private = item
                        self._emit(ev.TakeoverPrivate(self.turn, private))
                    continue
                done.append(Done(item, self._human_action(call, item, operator), private))
        finally:
            with self._takeover_lock:
                self._taken, self._takeover_by = False, None
            self._held.clear()
            self._drain_inputs()
        if private:
            self._emit(ev.TakeoverPrivate(self.turn, False))
        # the model's screen: taken now, after any private stretch
        frame = self._capture("takeover_end")
        told = takeover_note(done, self._scaling or Scaling.identity(self.desktop.size))
        self._emit(ev.TakeoverEnded(self.turn, len(done), told, frame.sha256))
        return told

    def _human_action(self, call: Call, action: Action, operator: str) -> bool:
        """One input of the reviewer's as an action on record; True if it ran."""
        self._check_abort()
        index = self._next_index
        self._next_index += 1
        summary = action.describe()
        self._propose_one(ev.ActionProposed(self.turn, index, call.call_id, action.to_record(), summary,
                                            parsed=action, by=BY_TAKEOVER))  # fmt: skip
        problem = input_problem(action, self.desktop.size)
        if problem is not None:
            self._refuse(call, index, index, "takeover.input", problem)
            return False
        decision = self.policy.classify(action)
        self._emit(ev.PolicyVerdict(self.turn, index, decision.verdict, decision.reason, decision.rule))
        if decision.verdict is Verdict.BLOCK:
            # a blocked action stays blocked for the reviewer too
            self._emit(ev.DecisionMade(self.turn, index, Answer.REJECT, "policy", note=decision.reason))
            self._outcome(call, index, index, OutcomeStatus.REFUSED, MSG_REFUSED)
            return False
        how = "approved by being done" if decision.verdict is Verdict.CONFIRM else decision.reason
        self._emit(ev.DecisionMade(self.turn, index, Answer.APPROVE, BY_TAKEOVER, note=how, operator=operator))
        try:
            result = self._execute(call, index, index, action, None)
        except _Halt as stop:
            return bool(stop.args[0].ok)
        self._set_phase(RunPhase.TAKEN_OVER, f"the desktop is {operator}'s")
        return result.ok

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

    def _typing(self, call: Call, stretch: Stretch | None, piece: str, operator: str, private: bool) -> Stretch:
        """Characters the reviewer typed: the start of a stretch, or more of the one under way. Each goes to
        the desktop once the policy has checked the stretch with it (``max_text_length`` counts the whole
        stretch); the first refused ends the stretch, and what follows it in the stretch is not sent."""
        now = self._clock()
        if stretch is not None:
            stretch.last = now
            if stretch.refused:
                return stretch
            allowed, problem = self._allowed(stretch.text, piece)
            if allowed:
                # its length only: a hash of each prefix would give the text away a character at a time
                self._emit(ev.Typed(self.turn, stretch.index, call.call_id, len(stretch.text + allowed), ""))
                # on record, the last piece maybe still in flight
                self._stretch_text[stretch.index] = (stretch.text + allowed, stretch.private)
                self._type_piece(call, stretch, allowed)
            if problem is not None and not stretch.closed:
                self._stop_typing(call, stretch, operator, problem[1])
            return stretch
        index = self._next_index
        self._next_index += 1
        allowed, problem = self._allowed("", piece)
        stretch = Stretch(index, private, now, now, proposed=allowed or piece[:1])
        action = Action(Kind.TYPE, text=stretch.proposed)
        # the stretch's text is hashed once, whole, when it ends: a hash of its first character would be
        # no secret at all
        record = {k: v for k, v in action.to_record().items() if k != "text_sha256"}
        self._propose_one(ev.ActionProposed(self.turn, index, call.call_id, record, action.describe(),
                                            parsed=action, by=BY_TAKEOVER))  # fmt: skip
        if not allowed:
            assert problem is not None
            self._refuse(call, index, index, *problem)
            stretch.closed, stretch.refused = True, problem[1]
            return stretch
        decision = self.policy.classify(action)
        self._emit(ev.PolicyVerdict(self.turn, index, decision.verdict, decision.reason, decision.rule))
        how = "approved by being done" if decision.verdict is Verdict.CONFIRM else decision.reason
        self._emit(ev.DecisionMade(self.turn, index, Answer.APPROVE, BY_TAKEOVER, note=how, operator=operator))
        self._set_phase(RunPhase.EXECUTING, TYPING)
        # the intent is on disk before the first character goes; each later one has its ``typed`` record
        self._emit(ev.Executing(self.turn, index, call.call_id, TYPING))
        self._stretch_text[index] = (allowed, stretch.private)
        self._type_piece(call, stretch, allowed)
        if problem is not None and not stretch.closed:
            self._stop_typing(call, stretch, operator, problem[1])
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
        problem = input_problem(action, self.desktop.size)
        if problem is not None:
            return "takeover.input", problem
        decision = self.policy.classify(action)
        return (decision.rule, decision.reason) if decision.verdict is Verdict.BLOCK else None

    def _type_piece(self, call: Call, stretch: Stretch, piece: str) -> None:
        """Characters of a stretch to the desktop (their record is written). A failure ends the stretch."""
        first = not stretch.text
        started = self._clock()
        try:
            if first:
                self._in_flight = stretch.index
            self._call(self.desktop.perform_checked, Action(Kind.TYPE, text=piece), None)
            self._in_flight = None
        except DesktopError as exc:
            self._in_flight = None
            self._check_abort()
            self._move_focus(None)
            message = f"Failed: {one_line(str(exc))}"
            self._outcome(call, stretch.index, stretch.index, OutcomeStatus.FAILED, message,
                          duration=self._clock() - started)  # fmt: skip
            stretch.closed, stretch.refused = True, message
            if exc.fatal:
                raise
            return
        stretch.text += piece
        if first:
            self.executed += 1
            # it ran: an ending from here on records it as executed
            self._performed[stretch.index] = MSG_OK
            self._move_focus(focus.after_action(self._field, Action(Kind.TYPE, text=piece)))
        self._check_abort()

    def _stop_typing(self, call: Call, stretch: Stretch, operator: str, reason: str) -> None:
        """The stretch's next character was refused: it ends here, saying why."""
        rest = f"the characters typed after it are not sent until a pause of {TYPING_PAUSE_S:g} s or another input"
        self._emit(ev.Note(f"{TYPING_STOPPED} {len(stretch.text)} characters: {reason}; {rest}"))
        self._close_stretch(call, stretch, operator)
        stretch.refused = reason

    def _end_stretch(self, call: Call, stretch: Stretch, operator: str) -> Done:
        """The stretch ends (a pause, another input): its outcome and its one screen, unless on record."""
        if not stretch.closed:
            self._close_stretch(call, stretch, operator)
        return stretch.done()

    def _close_stretch(self, call: Call, stretch: Stretch, operator: str) -> None:
        """The stretch's whole text on record (length and SHA-256), its one outcome, then its one screen."""
        stretch.closed = True
        took = self._clock() - stretch.started
        self._stretch_text.pop(stretch.index, None)
        if stretch.text:
            # the one hash of what was typed, whole (each ``typed`` record before had its length only)
            self._emit(ev.Typed(self.turn, stretch.index, call.call_id, *_typed(stretch.text, stretch.private)))
        self._outcome(call, stretch.index, stretch.index, OutcomeStatus.EXECUTED, MSG_OK, duration=took)
        self._capture("after_action", index=stretch.index)
        self._set_phase(RunPhase.TAKEN_OVER, f"the desktop is {operator}'s")

    def _drain_inputs(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                self._inputs.get_nowait()

    # ---------------------------------------------------------------------------------------------
    # Outcomes, frames, phases
    # ----------------------------------------------------------------------------------------------
    def _refuse(self, call: Call, index: int, position: int, rule: str, reason: str) -> ActionResult:
        self._emit(ev.PolicyVerdict(self.turn, index, Verdict.BLOCK, reason, rule))
        self._emit(ev.DecisionMade(self.turn, index, Answer.REJECT, "policy", note=reason))
        return self._outcome(call, index, position, OutcomeStatus.REFUSED, MSG_REFUSED)

    def _outcome(
        self,
        call: Call,
        index: int,
        position: int,
        status: OutcomeStatus,
        message: str,
        *,
        duration: float = 0.0,
        image: Frame | None = None,
    ) -> ActionResult:
        with self._emit_lock:
            self._emit(
                ev.Outcome(self.turn, index, call.call_id, status, message, self.steps, round(duration * 1000, 3))
            )
            self._open.pop(index, None)
            self._performed.pop(index, None)
        return ActionResult(position, status, message, image)

    def _capture(self, purpose: str = "after_action", index: int | None = None) -> Frame:
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
            self._frame = frame
        self._emit(
            ev.ScreenCaptured(
                frame.sha256,
                frame.width,
                frame.height,
                len(frame.png),
                self.turn,
                self.steps,
                purpose,
                index,
                png=frame.png,
            )
        )

    def _set_phase(self, phase: RunPhase, detail: str = "") -> None:
        # Each action's own ``executing`` record (the intent) says which action runs: the phase
        # record is written only when the phase changes.
        if phase != self.phase:
            self.phase = phase
            self._emit(ev.Phase(phase, detail))

    # ---------------------------------------------------------------------------------------------
    # Calling adapters so that an abort always wins
    # ----------------------------------------------------------------------------------------------
    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        self._check_abort()
        job = Job(fn, *args)
        with self._waiters_lock:
            # an abort sets every waiter's event: the wait below ends at once
            self._waiters.add(job.done)
        try:
            self._caller.submit(job)
            job.done.wait()
        finally:
            with self._waiters_lock:
                self._waiters.discard(job.done)
        self._check_abort()
        return job.result()

    def _check_abort(self) -> None:
        if self._aborted.is_set():
            raise Aborted()

    def _request_end(self, status: RunStatus, reason: str) -> None:
        """End the run once the current batch has been answered (used by the step limit)."""
        if self._pending_end is None:
            self._pending_end = (status, reason)

    # ---------------------------------------------------------------------------------------------
    # Ending
    # ----------------------------------------------------------------------------------------------
    def _abort(self, status: RunStatus, reason: str, by: str = "", announce: ev.Event | None = None) -> None:
        with self._end_lock:
            if self._ending is not None:
                return
            self._ending = (status, reason)
        self._aborted.set()
        self._cancel.set()
        with self._waiters_lock:
            for waiter in list(self._waiters):
                waiter.set()
        during = self.phase
        with self._emit_lock:
            # from here on the run's own thread can no longer record anything
            self._final = True
            if announce is None:
                announce = ev.Killed(by, during) if status is RunStatus.KILLED else ev.Note(f"run stopped: {reason}")
            self._emit_safe(announce, final=True)

        def finish() -> None:
            try:
                self.agent.cancel()
            except Exception:  # the agent's own cleanup must not prevent the kill
                pass
            self._finalize(status, reason, None)

        threading.Thread(target=finish, name=f"cua-kill-{self.run_id}", daemon=True).start()

    def _finish(self, status: RunStatus, reason: str, verified: bool | None = None) -> None:
        with self._end_lock:
            if self._ending is not None:
                return
            self._ending = (status, reason)
        self._aborted.set()  # nothing further may execute
        self._cancel.set()
        with self._emit_lock:
            self._final = True
        self._finalize(status, reason, verified)

    def _stop_desktop(self) -> tuple[bool, str]:
        """Release held input and stop the desktop, bounded in time even if the desktop hangs."""
        with self._stop_lock:
            if self._desktop_stopped:
                return True, "already stopped"
            self._desktop_stopped = True

        def stop() -> list[str]:
            problems = []
            for name, step in (("release_all", self.desktop.release_all), ("stop", self.desktop.stop)):
                try:
                    step()
                except BaseException as exc:
                    # on a thread of its own: whatever it raises, the run still seals
                    problems.append(f"{name}: {failure(exc)}")
            return problems

        job = Job(stop)
        spawn(job, f"cua-stop-{self.run_id}")
        if not job.wait(timeout=self.config.stop_timeout):
            return False, f"the desktop did not stop within {self.config.stop_timeout:g} s"
        problems = job.result()
        return not problems, "; ".join(problems) or "desktop stopped, input released"

    def _finalize(self, status: RunStatus, reason: str, verified: bool | None) -> None:
        seal: dict[str, Any] = {}
        # Only the verifier's own ending has a verdict.
        verdict = self._verdict if verified is not None else None
        try:
            ok, detail = self._wind_down(reason)
            self._emit_safe(
                ev.RunEnded(status, reason, self.turn, self.steps, self.executed, verified, self._final_text),
                final=True,
            )
            seal, lost = self._seal_audit()
            if lost is not None:
                status, reason = RunStatus.ERROR, _storage_reason(reason, lost)
            with contextlib.suppress(OSError):
                self.transcript.close()
            self._caller.close()
            if seal:
                record = self._result_record(status, reason, verified, verdict, (ok, detail), seal)
                try:
                    self.rundir.write_result(record)
                # A full disk, a read-only folder, or a bug: not sealed either way.
                except Exception as exc:
                    seal = {}
                    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else failure(exc)
                    status, reason = RunStatus.ERROR, _storage_reason(reason, f"could not write result.json: {why}")
        # A bug while ending: what is on disk is not sealed, and the result says so.
        except Exception as exc:
            seal = {}
            for close in (self.audit.close, self.transcript.close, self._caller.close):
                with contextlib.suppress(Exception):
                    close()
            status, reason = RunStatus.ERROR, f"internal error: not sealed: {failure(exc)} (while ending: {reason})"
        finally:
            self.rundir.release_reserve()
            self.result = RunResult(
                self.run_id,
                self.rundir.path,
                status,
                reason,
                verified,
                self.turn,
                self.steps,
                self.executed,
                seal,
                verdict,
            )
            self._finished.set()

    def _wind_down(self, reason: str) -> tuple[bool, str]:
        """Stop the clock and the desktop, and give every open action its outcome: (stopped cleanly, detail)."""
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._emit_safe(ev.Phase(RunPhase.STOPPING, "stopping the desktop"), final=True)
        ok, detail = self._stop_desktop()
        self._emit_safe(ev.Cleanup(ok, detail), final=True)
        self._close_open_actions(reason)
        return ok, detail

    def _seal_audit(self) -> tuple[dict[str, Any], str | None]:
        """The audit log's seal, or ({}, why) when the end of the run is not on disk whole."""
        with self._emit_lock:
            if self._lost is None:
                try:
                    return self.audit.seal(self.config.audit_key), None
                except OSError as exc:
                    self._lost = f"could not write audit.jsonl: {exc.strerror or exc}"
            # Leave the log unsealed (verify reports an interrupted prefix) rather than seal a
            # record that misses its ending.
            self.audit.close()
            return {}, self._lost

    def _result_record(
        self,
        status: RunStatus,
        reason: str,
        verified: bool | None,
        verdict: ev.VerificationDone | None,
        cleanup: tuple[bool, str],
        seal: dict[str, Any],
    ) -> dict[str, Any]:
        """result.json: how the run ended, its counts and the seal (the run directory contract)."""
        ended = self._wall_clock()
        return {
            "run_id": self.run_id,
            "status": status,
            "reason": reason,
            "verified": verified,
            "verifier": None
            if verdict is None
            else {"name": verdict.verifier, "where": verdict.where, "user": verdict.user},
            "cleanup": {"ok": cleanup[0], "detail": cleanup[1]},
            "counts": {
                "turns": self.turn,
                "steps": self.steps,
                "executed": self.executed,
                "events": seal["events"],
            },
            "tokens": self.total_tokens,
            "cost_usd": self.total_cost,
            "final_text": self._final_text,
            "ended_at": ended,
            "ended_at_iso": iso_time(ended),
            "seal": seal,
        }

    # ---------------------------------------------------------------------------------------------
    # Events
    # ----------------------------------------------------------------------------------------------
    def _close_open_actions(self, reason: str) -> None:
        """Give every proposal still owed an outcome its one outcome (the run ended before it ran)."""
        with self._emit_lock:
            for index, call_id in sorted(self._open.items()):
                text, private = self._stretch_text.pop(index, ("", False))
                if text and index in self._performed:
                    # a typing stretch cut by the ending: its whole text's one hash, as at any end
                    self._emit_safe(ev.Typed(self.turn, index, call_id, *_typed(text, private)), final=True)
                if index in self._performed:
                    # it ran; the run ended before its outcome was recorded
                    status, message = OutcomeStatus.EXECUTED, self._performed[index]
                elif index == self._in_flight:
                    status, message = OutcomeStatus.FAILED, f"Failed: interrupted before it completed ({reason})"
                else:
                    status, message = OutcomeStatus.NOT_EXECUTED, f"Not executed: the run ended ({reason})."
                self._emit_safe(ev.Outcome(self.turn, index, call_id, status, message, self.steps), final=True)
            self._open.clear()

    def _emit(self, event: ev.Event, *, final: bool = False) -> None:
        """Append to the audit log first, then tell the listeners. Raises Aborted once the run is ending
        (except for the finalizer's own events) or sealed."""
        with self._emit_lock:
            if self._final and not final:
                raise Aborted()
            try:
                seq, head = self.audit.append(event.kind, event.to_record())
            except AuditClosed:
                raise Aborted() from None
            except AuditWriteError as exc:
                if final:
                    self._lost = self._lost or str(exc)
                    raise StorageFailure(str(exc)) from None
                self._storage_failed("audit.jsonl", exc)
            stamped = ev.Stamped(seq, head, event, self.audit.last_ts)
            for listener in self._listeners:
                try:
                    listener(stamped)
                except Exception:
                    # a broken listener (UI) must not break the run or its audit trail
                    pass

    def _emit_safe(self, event: ev.Event, *, final: bool = False) -> None:
        try:
            self._emit(event, final=final)
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


def _typed(text: str, private: bool) -> tuple[int, str]:
    """A typing stretch's text as it is recorded: its length and SHA-256; in a private stretch its length
    only (a one-time code's hash is the code: a million guesses find six digits)."""
    return len(text), "" if private else text_sha256(text)


def _valid_ruling(ruling: object) -> Ruling:
    """An approver's answer as a Ruling; anything malformed is a reject (fail closed)."""
    if isinstance(ruling, Ruling):
        if isinstance(ruling.answer, Answer):
            return ruling
        try:
            # A plain "approve" is understood; what else the Ruling claims is not trusted.
            return Ruling(Answer(ruling.answer), str(ruling.by), str(ruling.note))
        except (ValueError, TypeError):
            pass
    return Ruling(Answer.REJECT, "approver error (fail closed)", "malformed ruling")


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def iso_time(epoch: float) -> str:
    """A timestamp on record as ISO 8601 in UTC, beside its epoch seconds (run.json, result.json)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def _limits(policy: Policy) -> dict[str, Any]:
    lim = policy.limits
    return {name: getattr(lim, name) for name in lim.__dataclass_fields__}


def _raw_kind(call: Call, raw: Any) -> str:
    if isinstance(raw, dict):
        value = raw.get("name") if call.format == "anthropic" else raw.get("type")
        if isinstance(value, str):
            return value[:40]
    return ""


def _storage_reason(reason: str, failure: str) -> str:
    """The reason of a run whose ending could not be recorded whole: the failed write comes first."""
    if reason.startswith("storage:"):
        return reason
    return f"storage: {failure} (while ending: {reason})"


def _asked_for(action: Action, image: Frame) -> bool:
    """A picture comes only with a zoom, and no larger than its region (what a desktop sends back is
    checked here too: a remote one is untrusted, and no picture goes to the model or the log unasked)."""
    if action.kind is not Kind.ZOOM or action.region is None:
        return False
    x0, y0, x1, y1 = action.region
    return 0 < image.width <= x1 - x0 and 0 < image.height <= y1 - y0
