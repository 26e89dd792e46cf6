"""The plain values the ports trade and the events record: a screenshot, where a verifier ran, an outcome's
status, a decision request and its answer. Below both ``ports`` and ``events`` (which re-export or record
them), so that neither imports the other back."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from .actions import Action
from .geometry import Size


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


class Verdict(StrEnum):
    """The policy's word on an action (``core/policy.py``). Here, not in the policy, so that the events that
    record it load no TOML or msgspec (the remote sandbox's helper ships the events without either)."""

    ALLOW = "allow"
    CONFIRM = "confirm"
    BLOCK = "block"


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
class SafetyCheck:
    id: str
    code: str
    message: str


class OutcomeStatus(StrEnum):
    EXECUTED = "executed"
    DECLINED = "declined"
    REFUSED = "refused"
    FAILED = "failed"
    NOT_EXECUTED = "not_executed"
    STALE = "stale"


class Answer(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    KILL = "kill"


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
    # a soft budget's question, and a model's call for the person ("ask"), have no action of their own
    kind: Literal["action", "safety_check", "budget", "ask"]
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
