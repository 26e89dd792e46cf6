"""Ports: the protocols every Desktop, Agent, Approver and Lab adapter implements, the values they trade, and
the defaults of the Desktop's hooks (``BaseDesktop``).

They are shaped for remote backends too: ``Desktop.perform`` executes one action *and* returns the
screenshot taken after it, so a remote sandbox spends one round trip per step.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

from .actions import Action
from .geometry import Scaling, Size
from .values import Answer as Answer
from .values import DecisionRequest as DecisionRequest
from .values import Frame as Frame
from .values import Gated as Gated
from .values import OutcomeStatus as OutcomeStatus
from .values import SafetyCheck as SafetyCheck
from .values import Scope as Scope
from .values import VerifierPlace as VerifierPlace

if TYPE_CHECKING:
    # for annotations only: neither imports this module (their values are in ``values``), and stale
    # loads PIL, which a port's importer need not pay for
    from .events import Egress, Event
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
class StepResult:
    """What one executed action gives back: an optional output (text or image) and the screen after it."""

    frame: Frame
    output: str | None = None  # e.g. "X=10,Y=20" for cursor_position
    image: Frame | None = None  # e.g. the zoomed region for zoom
    # the action's area had changed: nothing ran, ``frame`` is the screen now
    stale: bool = False


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


class Lab(Protocol):
    """A lab as a desktop serves it (the labs are cua_tui/labs): a fixture web application this process runs
    on 127.0.0.1, opened at ``start_url``, reached through the egress allow-list's ``allow_entry``, and
    judged from what its server saw, the files the desktop downloaded and the egress events."""

    @property
    def name(self) -> str: ...
    @property
    def start_url(self) -> str: ...
    @property
    def allow_entry(self) -> str: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def verify(self, downloads: Path | None = None, egress: Iterable[Egress] = ()) -> Verification: ...


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
class Call:
    """One tool call of a turn: a batch of raw actions exactly as the model sent them.

    ``format`` names the parser that reads them, a key of ``core.actions.FORMATS`` ("openai": each raw is an
    action object; "anthropic": each raw is ``{"name": member, "input": {...}, "toolset_name": "computer"}``).
    """

    call_id: str
    format: str
    actions: tuple[Any, ...]
    safety_checks: tuple[SafetyCheck, ...] = ()
    scaling: Scaling | None = None  # model image -> display; None means identity


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Shown:
    """The screenshot a turn's model was shown: the size sent, the size the model's processor makes of it
    (what it saw: the same when the image was sent at a size the processor keeps) and the space its
    coordinates are in ("1036x728": that image's pixels; "0-1000": a relative grid)."""

    sent: Size
    seen: Size
    space: str

    def to_json(self) -> dict[str, str]:
        return {"sent": str(self.sent), "seen": str(self.seen), "space": self.space}


@dataclass(frozen=True, slots=True)
class Turn:
    """What the agent proposes next. No calls means the agent is done (``text`` is its final answer), unless
    the turn asks for the person, was refused, or goes on without an action (a text grammar's controls:
    agents/compat)."""

    calls: tuple[Call, ...] = ()
    text: str = ""
    response_id: str = ""
    usage: Usage | None = None
    # the model asks for the person (UI-TARS' call_user): put to the reviewer before the model's next turn;
    # what it said, possibly ""
    asks: str | None = None
    # the reply could not be read (why, in one line): one refusal on record, and the model hears why
    refused: str = ""
    # nothing to run, and the run goes on (a fact the model memorized)
    goes_on: bool = False
    shown: Shown | None = None

    @property
    def done(self) -> bool:
        return not self.calls and self.asks is None and not self.refused and not self.goes_on


# what the model hears of an action (an ActionResult's message) by how it ended, word for word; a failed
# action's words are the desktop's, and a few endings say more (a takeover, a stop, the reviewer's note)
HEARD: Mapping[OutcomeStatus, str] = MappingProxyType(
    {
        OutcomeStatus.EXECUTED: "OK",
        OutcomeStatus.DECLINED: "Declined by the user. Do not retry this action.",
        OutcomeStatus.REFUSED: "Refused by sandbox policy. Stop and report.",
        OutcomeStatus.NOT_EXECUTED: "Not executed: an earlier action in this turn did not run.",
        OutcomeStatus.STALE: "Not executed: the screen changed since the model's screenshot.",
    }
)


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
    # who answered, when the approver knows it better than the run (a team queue's session_user); "" for
    # the run's own operator
    operator: str = ""
    # answered through a team's queue: the decision's ``queue`` record (request, answer, role, committed)
    queue: dict[str, Any] | None = None


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


class Approver(Protocol):
    """Answers a decision request. May block for minutes; must return promptly once ``cancel`` is set."""

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling: ...
