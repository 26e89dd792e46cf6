"""Frozen events: the single vocabulary of the UI, the audit log and replay.

Every event serializes to an audit record with ``to_record()`` and comes back with ``from_record()``.
Fields marked ``memory_only`` (screenshot bytes, the full Action with its typed text) travel to live
listeners but never reach the audit log; replay rebuilds what it can from the record.
"""

from __future__ import annotations

import builtins
import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from .actions import Action
from .values import Answer, DecisionRequest, OutcomeStatus, Verdict, VerifierPlace

_MEMORY_ONLY = {"memory_only": True}


def memory_only(default: Any = None) -> Any:
    return field(default=default, metadata=_MEMORY_ONLY, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Event:
    kind: ClassVar[str] = "event"

    def to_record(self) -> dict[str, Any]:
        rec: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.metadata.get("memory_only"):
                continue
            rec[f.name] = getattr(self, f.name)
        return rec

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Event:
        """The event an audit record describes. Enum fields come back as their enum; a value this version
        does not know is left as recorded (a record is evidence, not input to validate here)."""
        names = _record_names(cls)
        values = {k: v for k, v in record.items() if k in names}
        for name, enum in _enum_fields(cls).items():
            if name in values:
                try:
                    values[name] = enum(values[name])
                except ValueError:
                    pass
        return cls(**values)


_ENUM_FIELDS: dict[type, dict[str, type[StrEnum]]] = {}
_RECORD_NAMES: dict[type, frozenset[str]] = {}


def _record_names(cls: type) -> frozenset[str]:
    """The fields of an event class that its record holds (worked out once per class: a long run's replay
    reads hundreds of thousands of records)."""
    names = _RECORD_NAMES.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)
        names = _RECORD_NAMES[cls] = frozenset(f.name for f in fields if not f.metadata.get("memory_only"))
    return names


def _enum_fields(cls: type) -> dict[str, type[StrEnum]]:
    """The fields of an event class whose type is an enum (worked out once per class)."""
    cached = _ENUM_FIELDS.get(cls)
    if cached is None:
        # Annotations are strings (postponed evaluation); an enum field's is the bare name of its
        # enum.
        found = {f.name: globals().get(f.type) if isinstance(f.type, str) else f.type for f in dataclasses.fields(cls)}
        cached = _ENUM_FIELDS[cls] = {n: t for n, t in found.items() if isinstance(t, type) and issubclass(t, StrEnum)}
    return cached


class RunStatus(StrEnum):
    """How a run ended (DESIGN.md, "Run directory contract")."""

    PASSED = "passed"
    FAILED = "failed"
    # the agent finished and no verifier exists for the task
    FINISHED = "finished"
    KILLED = "killed"
    LIMIT = "limit"
    ERROR = "error"
    # a team's run whose worker stopped renewing its lease (the database says so; its folder may hold more)
    LOST = "lost"
    # a team's run whose worker found its lease taken: it executed nothing more and sealed the run
    INTERRUPTED = "interrupted"


class RunPhase(StrEnum):
    """What a run is doing."""

    STARTING = "starting"
    WAITING_MODEL = "waiting_model"
    AWAITING_DECISION = "awaiting_decision"
    EXECUTING = "executing"
    # the reviewer has the desktop (a takeover): the model waits
    TAKEN_OVER = "taken_over"
    VERIFYING = "verifying"
    STOPPING = "stopping"


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    task: str
    backend: str
    agent: str
    model: str | None
    screen: str
    policy: str
    policy_sha256: str
    limits: dict[str, Any]
    # {"algorithm", "key_id"} when the run is signed: then a run without a valid signed seal fails
    # ``verify --key``, so deleting result.json and cutting the log short is no longer a clean
    # prefix.
    signed: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class DesktopReady(Event):
    """The desktop started; ``isolation`` is what its sandbox actually obtained (namespaces, uid, ...)."""

    kind: ClassVar[str] = "desktop_ready"
    backend: str
    isolation: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SandboxCreated(Event):
    """A remote sandbox exists for this run (recorded, with sandbox-id.txt, before anything is set up in
    it, so that it can be found and stopped whatever happens next)."""

    kind: ClassVar[str] = "sandbox_created"
    backend: str
    sandbox_id: str
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Phase(Event):
    """What the run is doing (a RunPhase), recorded when it changes."""

    kind: ClassVar[str] = "phase"
    phase: RunPhase
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ScreenCaptured(Event):
    kind: ClassVar[str] = "screen"
    sha256: str
    width: int
    height: int
    bytes: int
    turn: int
    step: int
    purpose: str = "after_action"  # initial, after_action, stale_check, zoom
    # The action (index in its turn) the screen belongs to: after it ran, or checked before it
    # (stale_check, zoom); None for a turn's screenshot. Runs recorded before this field existed
    # read as None.
    index: int | None = None
    png: builtins.bytes | None = memory_only()  # "bytes" alone would name the field above


@dataclass(frozen=True, slots=True)
class ModelTurn(Event):
    kind: ClassVar[str] = "model_turn"
    turn: int
    text: str
    calls: int
    actions: int
    response_id: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    total_tokens: int = 0
    total_cost_usd: float | None = None
    # the screenshot the model was shown: sizes sent and seen, its coordinates' space (ports.Shown); an agent
    # that sends the screen as it is says nothing, and its record has no such key (as before it existed)
    shown: dict[str, str] | None = None

    def to_record(self) -> dict[str, Any]:
        record = Event.to_record(self)
        if record["shown"] is None:
            del record["shown"]
        return record


@dataclass(frozen=True, slots=True)
class SafetyChecksRaised(Event):
    kind: ClassVar[str] = "safety_checks"
    turn: int
    call_id: str
    checks: list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class ActionProposed(Event):
    """A proposed action. ``action`` is the normalized action's record (typed text as length + hash);
    ``error`` is set instead when the proposal could not be parsed."""

    kind: ClassVar[str] = "proposal"
    turn: int
    index: int
    call_id: str
    action: dict[str, Any] | None
    summary: str = ""
    error: str = ""
    error_code: str = ""
    raw_kind: str = ""
    parsed: Action | None = memory_only()
    # who proposed it: "" the model; ``human (takeover)`` the reviewer at the desktop (core/takeover.py)
    by: str = ""


@dataclass(frozen=True, slots=True)
class PolicyVerdict(Event):
    kind: ClassVar[str] = "verdict"
    turn: int
    index: int
    verdict: Verdict
    reason: str
    rule: str


@dataclass(frozen=True, slots=True)
class DecisionRequested(Event):
    kind: ClassVar[str] = "decision_requested"
    turn: int
    index: int
    call_id: str
    subject: str  # action | safety_check
    reason: str
    # seconds it waits for an answer before it is rejected (None: no deadline)
    deadline_s: float | None = None
    # The request itself travels with its event (live runs only: it holds the parsed action with its
    # typed text), so a UI learns what is pending from the event stream alone, through no second
    # channel.
    request: DecisionRequest | None = memory_only()


@dataclass(frozen=True, slots=True)
class DrillShown(Event):
    """A drill put before the real request at ``turn``/``index`` (not yet asked): shown to the reviewer as a
    request is. A live view shows it as it shows a request (its line too); a replay shows it as a drill."""

    kind: ClassVar[str] = "drill_shown"
    turn: int
    index: int
    call_id: str
    subject: str
    reason: str
    drill: str
    deadline_s: float | None = None
    rule: str = ""  # the policy rule the drill shows (a queue sorts it as it would a request of that rule)
    words: str = ""  # the model's words the drill shows with its action (of the moment it was made from)
    # where its typing goes on its own screen (the field its moment had focused); None: the run's own focus
    focus: list[int] | None = None
    request: DecisionRequest | None = memory_only()


@dataclass(frozen=True, slots=True)
class DrillAnswered(Event):
    """A drill (core/drills.py) shown before the real request at ``turn``/``index`` and answered: which, what
    was shown (its screen's SHA-256, its action's record: typed text as length and SHA-256), the answer given
    and the right one, whether a threat was caught or a safe one rejected, by whom, how long it was on screen.
    Nothing of it ran. Kept apart from the run's own decisions: no count of decisions includes it."""

    kind: ClassVar[str] = "drill"
    turn: int
    index: int
    drill: str
    subject: str  # action | safety_check
    answer: str  # approve | reject | takeover | none (its deadline passed)
    right: str  # approve | reject
    caught: bool | None = None  # a threat: rejected (None: a benign drill)
    false_alarm: bool | None = None  # a benign drill: rejected (None: a threat)
    by: str = ""
    operator: str = ""
    screen: str = ""
    action: dict[str, Any] | None = None
    shown_ms: int | None = None
    why: str = ""
    missed: str = ""


@dataclass(frozen=True, slots=True)
class DecisionMade(Event):
    kind: ClassVar[str] = "decision"
    turn: int
    index: int
    decision: Answer
    # human, policy, headless rule: ..., approver command, grant #N, no approver (fail closed)
    by: str
    subject: str = "action"
    note: str = ""
    # who, when a person decided (user@host or --operator); never set otherwise
    operator: str = ""
    # the SHA-256 of the screenshot the reviewer was shown ("" when no screen was shown)
    screen: str = ""
    # how long the decision was on screen before the answer (a person's only)
    shown_ms: int | None = None
    # the input guard in force when it was shown (y / a / n ignored for so long; a person's only)
    guard_ms: int | None = None
    # an approval of an action the reviewer changed first (``e``): the action as proposed and as run
    # (typed text as length and SHA-256), and the policy's verdict on the changed one
    edited: dict[str, Any] | None = None
    # the changed action itself, with its typed text (live listeners only)
    ran: Action | None = memory_only()
    # answered with the others of a group in the fleet queue (one keypress, each run its own decision):
    # {"id": "g1a2b3c-17", "size": 12}
    group: dict[str, Any] | None = None
    # answered through a team's queue (PostgreSQL): the request's and the answer's ids, the database role
    # that answered (its session_user) and the answer's commit time; ``late``: committed, not applied
    queue: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class GrantAdded(Event):
    """A scoped approval (``a``): the action ``(turn, index)`` and every later one of the scope are approved
    for the rest of the run, until revoked. ``by`` is the operator who granted it."""

    kind: ClassVar[str] = "grant"
    grant: int
    scope: str  # chord | typing | region
    key: str
    label: str
    by: str
    turn: int
    index: int


@dataclass(frozen=True, slots=True)
class GrantRevoked(Event):
    kind: ClassVar[str] = "grant_revoked"
    grant: int
    by: str


@dataclass(frozen=True, slots=True)
class Executing(Event):
    """The intent to execute, written (and fsynced) right before the action is handed to the desktop.

    No action runs without it on disk first; an ``executing`` record without its ``outcome`` (a crash in
    between) reads as "outcome unknown (interrupted)"."""

    kind: ClassVar[str] = "executing"
    turn: int
    index: int
    call_id: str
    summary: str = ""  # the action, as the status line shows it


@dataclass(frozen=True, slots=True)
class TurnRefused(Event):
    """A whole turn refused before any of it was proposed (too many actions in one turn): one record,
    not one per action, so a hostile reply cannot flood the audit log."""

    kind: ClassVar[str] = "turn_refused"
    turn: int
    actions: int
    reason: str


@dataclass(frozen=True, slots=True)
class Outcome(Event):
    """Exactly one per proposed action: what happened to it and the exact text the model heard."""

    kind: ClassVar[str] = "outcome"
    turn: int
    index: int
    call_id: str
    status: OutcomeStatus
    message: str
    step: int = 0
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Typed(Event):
    """A takeover's typing stretch so far (core/takeover.py): written before each further character (or burst
    of characters already waiting) goes to the desktop, so the record always holds how much was typed, the
    last character possibly still in flight; ``text_sha256`` is empty there (a hash of each prefix would
    give the text away a character at a time). When the stretch ends, one more carries the whole text's
    length and SHA-256. The stretch is the action ``(turn, index)``, proposed at its first character."""

    kind: ClassVar[str] = "typed"
    turn: int
    index: int
    call_id: str
    text_len: int
    text_sha256: str


@dataclass(frozen=True, slots=True)
class TakeoverStarted(Event):
    """The reviewer took control of the desktop; the run paused ``where`` nothing was in flight. Until
    ``TakeoverEnded`` every action is the reviewer's (its proposal says ``by``)."""

    kind: ClassVar[str] = "takeover"
    turn: int
    by: str
    operator: str
    where: str


@dataclass(frozen=True, slots=True)
class TakeoverPrivate(Event):
    """A private stretch of a takeover begins (``private``) or ends: its screens are never sent to the
    model, and its actions are told to the model only as a count."""

    kind: ClassVar[str] = "takeover_private"
    turn: int
    private: bool


@dataclass(frozen=True, slots=True)
class TakeoverEnded(Event):
    """Control back to the model (``how``: handed back), with ``told``, exactly what the model's next
    input says of the takeover, and the screen it is given (``screen``, its SHA-256)."""

    kind: ClassVar[str] = "takeover_ended"
    turn: int
    actions: int
    told: str
    screen: str = ""
    how: str = "handed back"


@dataclass(frozen=True, slots=True)
class Killed(Event):
    kind: ClassVar[str] = "kill"
    by: str
    during: str = ""


@dataclass(frozen=True, slots=True)
class ErrorRaised(Event):
    kind: ClassVar[str] = "error"
    where: str
    message: str


@dataclass(frozen=True, slots=True)
class Note(Event):
    kind: ClassVar[str] = "note"
    message: str


@dataclass(frozen=True, slots=True)
class Egress(Event):
    """A network request from the sandbox seen by the egress proxy."""

    kind: ClassVar[str] = "egress"
    host: str
    port: int
    method: str
    allowed: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class VerificationDone(Event):
    """The independent verdict, and who vouched for it: where its verifier ran and as which OS user. Runs
    recorded before ``where`` and ``user`` existed read as unknown (never as the controller)."""

    kind: ClassVar[str] = "verification"
    verifier: str
    passed: bool
    detail: str
    where: VerifierPlace = VerifierPlace.UNKNOWN
    user: str = ""


@dataclass(frozen=True, slots=True)
class Cleanup(Event):
    kind: ClassVar[str] = "cleanup"
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class RunEnded(Event):
    kind: ClassVar[str] = "run_ended"
    status: RunStatus
    reason: str
    turns: int
    steps: int
    executed: int
    verified: bool | None = None
    final_text: str = ""


@dataclass(frozen=True, slots=True)
class Stamped:
    """An event as written: its place in the audit chain (``seq``, and ``head``, the SHA-256 of its own
    line). Listeners, the UI and replay all receive events in this envelope, so the chain position
    reaches them with the event and through no back channel."""

    seq: int
    head: str
    event: Event
    # the record's ``ts`` (seconds since the epoch, as written); 0.0 where the line had none
    ts: float = 0.0


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        SandboxCreated,
        DesktopReady,
        Phase,
        ScreenCaptured,
        ModelTurn,
        SafetyChecksRaised,
        ActionProposed,
        PolicyVerdict,
        DecisionRequested,
        DecisionMade,
        DrillShown,
        DrillAnswered,
        GrantAdded,
        GrantRevoked,
        Executing,
        TurnRefused,
        Outcome,
        Typed,
        TakeoverStarted,
        TakeoverPrivate,
        TakeoverEnded,
        Killed,
        ErrorRaised,
        Note,
        Egress,
        VerificationDone,
        Cleanup,
        RunEnded,
    )
}
ENVELOPE = ("seq", "ts", "run", "kind", "prev")
