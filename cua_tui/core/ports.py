"""Ports: the protocols every Desktop, Agent and Approver adapter implements, the values they trade, and
the defaults of the Desktop's hooks (``BaseDesktop``).

They are shaped for remote backends too: ``Desktop.perform`` executes one action *and* returns the
screenshot taken after it, so a remote sandbox spends one round trip per step.
"""

from __future__ import annotations

import hashlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, runtime_checkable

from .actions import Action
from .geometry import Scaling, Size

if TYPE_CHECKING:
    # For annotations only: events and stale import this module, so a runtime import would be a
    # cycle.
    from .events import Event
    from .stale import ScreenCheck


class DesktopError(RuntimeError):
    """An action or capture failed. ``fatal`` means the desktop is gone (the run cannot go on)."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class AgentError(RuntimeError):
    """The agent could not produce a turn (malformed reply, HTTP error after retries, ...)."""


class LimitExceeded(AgentError):
    """The agent stopped because a budget (tokens, cost) ran out."""


@dataclass(frozen=True, slots=True)
class Frame:
    """A screenshot: PNG bytes and their size. ``sha256`` names it in the audit log and screen store."""

    png: bytes = field(repr=False)
    width: int
    height: int
    sha256: str = ""

    def __post_init__(self) -> None:
        if not self.sha256:
            object.__setattr__(self, "sha256", hashlib.sha256(self.png).hexdigest())

    @property
    def size(self) -> Size:
        return Size(self.width, self.height)


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one executed action gives back: an optional output (text or image) and the screen after it."""

    frame: Frame
    output: str | None = None  # e.g. "X=10,Y=20" for cursor_position
    image: Frame | None = None  # e.g. the zoomed region for zoom
    # the action's area had changed: nothing ran, ``frame`` is the screen now
    stale: bool = False


class VerifierPlace(StrEnum):
    """Where a verdict's verifier ran: who vouches for it (DESIGN.md, "A verdict records where its verifier
    ran"). A verdict from inside the sandbox is the sandbox's own word, as untrusted as anything it sends."""

    # in the controller's process (a lab server it runs, the sim's app)
    CONTROLLER = "controller"
    # inside the sandbox (the helper's lab server, a command run there)
    SANDBOX = "sandbox"
    # not recorded: a run from before the field, or an adapter that does not say
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Verification:
    """The independent verdict on the task (a lab's server-side proof, a command run in the sandbox), and
    where its verifier ran, as which OS user. The defaults claim nothing: an adapter that does not say
    where its verdict came from gets a verdict that reads as unknown, never as the controller's."""

    passed: bool
    detail: str
    verifier: str
    where: VerifierPlace = VerifierPlace.UNKNOWN
    user: str = ""  # the OS user the verifier ran as; "" when not known

    def in_controller(self) -> Verification:
        """This verdict, as judged in this (the controller's) process, by the user it runs as."""
        return replace(self, where=VerifierPlace.CONTROLLER, user=process_user())


def process_user() -> str:
    """The OS user this process runs as: its passwd name (not $USER, which the environment can say
    anything in), else ``uid N`` (a container's uid without an entry)."""
    import os
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


class RunHandle(Protocol):
    """What a desktop is told of its run before it starts (``core.rundir.RunDir``): the id a remote sandbox
    is tagged with, and where its sandbox id is written before anything else, so that cleanup is possible."""

    @property
    def run_id(self) -> str: ...
    def write_sandbox_id(self, sandbox_id: str) -> None: ...


@runtime_checkable
class Desktop(Protocol):
    """A sandboxed desktop. ``release_all`` and ``stop`` must be safe from any thread at any moment,
    idempotent, and must make any input still in flight a no-op. The hooks after ``verify`` are for
    some backends only; ``BaseDesktop`` gives every other one their defaults."""

    name: str
    size: Size

    def start(self) -> None: ...
    def screenshot(self) -> Frame: ...
    def perform(self, action: Action) -> StepResult: ...
    def capture_region(self, region: tuple[int, int, int, int]) -> Frame: ...
    def release_all(self) -> None: ...
    def stop(self) -> None: ...
    def verify(self) -> Verification | None: ...

    def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
        """``action``, only if ``check`` finds its area unchanged; else nothing runs and the result is the
        screen as it is now, marked ``stale``."""
        ...

    def bind_run(self, run: RunHandle) -> None:
        """Called before ``start``: the run a remote sandbox is tagged with and records its id in."""
        ...

    def bind_events(self, sink: Callable[[Event], None]) -> None:
        """Called before ``start``: where the desktop's own events go (the egress proxy's records)."""
        ...

    def record(self) -> dict[str, Any]:
        """For run.json before the start: the sandbox's settings (no secret), ``{}`` when it has none."""
        ...

    @property
    def isolation(self) -> dict[str, Any]:
        """What isolation the started desktop obtained, for run.json and the log; ``{}`` to say nothing."""
        ...


class BaseDesktop(ABC):
    """The defaults of the Desktop port's hooks, for a backend that has none of its own."""

    @abstractmethod
    def screenshot(self) -> Frame: ...

    @abstractmethod
    def perform(self, action: Action) -> StepResult: ...

    def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
        # No way to check and act in one go: a screenshot first, then the action.
        if check is not None:
            fresh = self.screenshot()
            if check.changed_on(fresh):
                return StepResult(fresh, stale=True)
        return self.perform(action)

    def bind_run(self, run: RunHandle) -> None:
        return None

    def bind_events(self, sink: Callable[[Event], None]) -> None:
        return None

    def record(self) -> dict[str, Any]:
        return {}

    @property
    def isolation(self) -> dict[str, Any]:
        return {}


# ------------------------------------------------------------------------------------------------
# Agent
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SafetyCheck:
    id: str
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a turn: a batch of raw actions exactly as the model sent them.

    ``format`` says which parser reads them: "openai" (each raw is an action object) or "anthropic"
    (each raw is ``{"name": member, "input": {...}, "toolset_name": "computer"}``).
    """

    call_id: str
    format: Literal["openai", "anthropic"]
    actions: tuple[Any, ...]
    safety_checks: tuple[SafetyCheck, ...] = ()
    scaling: Scaling | None = None  # model image -> display; None means identity


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """What the agent proposes next. No calls means the agent is done (``text`` is its final answer)."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    response_id: str = ""
    usage: Usage | None = None

    @property
    def done(self) -> bool:
        return not self.calls


class OutcomeStatus(StrEnum):
    EXECUTED = "executed"
    DECLINED = "declined"
    REFUSED = "refused"
    FAILED = "failed"
    NOT_EXECUTED = "not_executed"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class ActionResult:
    index: int  # position in the call's batch
    status: OutcomeStatus
    message: str  # the exact text returned to the model
    image: Frame | None = None

    @property
    def ok(self) -> bool:
        return self.status is OutcomeStatus.EXECUTED


@dataclass(frozen=True, slots=True)
class CallResult:
    call_id: str
    results: tuple[ActionResult, ...]
    acknowledged_safety_checks: tuple[SafetyCheck, ...] = ()


class Agent(Protocol):
    """Turns (task, screenshot, results of the last batch) into the next turn, whatever the vendor."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str | None: ...

    def start(self, task: str, frame: Frame) -> Turn: ...
    # ``note``: what the model is told besides the results (after a takeover: what the person did)
    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn: ...
    def cancel(self) -> None: ...


# ------------------------------------------------------------------------------------------------
# Approver
# --------------------------------------------------------------------------------------------------
class Answer(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    KILL = "kill"


@dataclass(frozen=True, slots=True)
class Ruling:
    answer: Answer
    # "human", "headless rule: reject", "approver command", "no approver (fail closed)", ...
    by: str
    # a reviewer's reason (a rejection's goes to the model too)
    note: str = ""
    # a person decided (then the operator is recorded with the decision)
    human: bool = False
    # approve this and every later action of the request's scope (``a``)
    grant: bool = False
    # the SHA-256 of the screenshot the reviewer was shown with the request
    screen: str = ""
    # how long the request was on screen before this answer
    shown_ms: int | None = None
    # the input guard in force when it was shown
    guard_ms: int | None = None
    # the action as the reviewer changed it before approving it (``e``); checked again by the run
    edit: Action | None = None
    # the reviewer took control of the desktop instead of answering (``T``): the action does not run
    takeover: bool = False
    # the fleet queue's group it was answered in: (id, size)
    group: tuple[str, int] | None = None


class AnswerDetails(TypedDict, total=False):
    """What a person's answer carries beside the answer, as keywords of every ``answer`` on its way to the
    approver: ``note`` the reviewer's reason, ``grant`` extends an approval to the request's scope, ``screen``
    the SHA-256 of the screenshot shown with it, ``shown_ms`` how long it was on screen, ``edit`` the action
    as the reviewer changed it (an approval only)."""

    note: str
    grant: bool
    screen: str
    shown_ms: int | None
    guard_ms: int
    edit: Action
    takeover: bool
    # answered with the others of a group in the fleet queue (core/grouping.py): its id and size
    group: tuple[str, int]


@dataclass(frozen=True, slots=True)
class Scope:
    """What a scoped approval covers (core/grants.py): ``kind`` chord | typing | region, its ``key``, and a
    label for people. Here, not in grants, so the ports import nothing beyond actions and geometry."""

    kind: str
    key: str
    label: str


@dataclass(frozen=True, slots=True)
class Gated:
    """An action of a call whose safety checks are being decided: what it is and what the policy says of it
    (``verdict`` allow | confirm | block; ``covered``: a confirm that the same answer approves)."""

    index: int
    action: Action | None  # None: malformed (refused when its turn comes)
    verdict: str
    rule: str
    reason: str

    @property
    def covered(self) -> bool:
        return self.verdict == "confirm"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"index": self.index, "verdict": self.verdict, "rule": self.rule, "reason": self.reason}
        if self.action is not None:
            data["action"] = self.action.to_record()
            data["summary"] = self.action.describe()
            if self.action.text:
                data["action"]["text"] = self.action.text
        return data


@dataclass(frozen=True, slots=True)
class DecisionRequest:
    """What a reviewer decides on. ``action.text`` is the full typed text: shown, never stored."""

    run_id: str
    turn: int
    index: int
    call_id: str
    # a soft budget's question has no action of its own
    kind: Literal["action", "safety_check", "budget"]
    reason: str
    action: Action | None = None
    safety_checks: tuple[SafetyCheck, ...] = ()
    frame: Frame | None = None
    # what ``a`` would approve for the rest of the run (None: not offered)
    scope: Scope | None = None
    # a safety check's: the call's actions, which its approval covers if confirm
    gated: tuple[Gated, ...] = ()
    # seconds it waits for an answer before the run rejects it (None: it waits)
    deadline_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The request as sent to an ``approver:CMD`` process (the reviewer sees the text in full)."""
        data: dict[str, Any] = {
            "run": self.run_id,
            "turn": self.turn,
            "index": self.index,
            "call_id": self.call_id,
            "kind": self.kind,
            "reason": self.reason,
        }
        if self.action is not None:
            data["action"] = self.action.to_record()
            data["summary"] = self.action.describe()
            if self.action.text:
                data["action"]["text"] = self.action.text
        if self.safety_checks:
            data["safety_checks"] = [{"id": c.id, "code": c.code, "message": c.message} for c in self.safety_checks]
        if self.gated:
            data["gated"] = [g.to_json() for g in self.gated]
        if self.frame is not None:
            data["screenshot_sha256"] = self.frame.sha256
        return data


class Approver(Protocol):
    """Answers a decision request. May block for minutes; must return promptly once ``cancel`` is set."""

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling: ...
