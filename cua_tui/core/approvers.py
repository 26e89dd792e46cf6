"""Approvers that need no terminal: fixed rules, and the handshake the TUI answers from its own thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .ports import Answer, DecisionRequest, Ruling

SAFETY_CHECKS_RULE = "headless rule: safety checks need a reviewer"
KILL_SWITCH = "kill switch"


class FixedApprover:
    """Answers every request the same way (headless ``--on-confirm reject|approve``), except that a
    blanket approve never acknowledges the model's safety checks."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        if request.kind == "safety_check" and self.answer is Answer.APPROVE:
            # The model's safety checks are acknowledged only after a person (or the user's own approver
            # program) has looked: a blanket rule must not acknowledge them on anyone's behalf. The reject
            # is that rule's, so it is named, not the "approve" rule that was asked.
            return Ruling(Answer.REJECT, SAFETY_CHECKS_RULE, "a blanket approve never acknowledges safety checks")
        return Ruling(self.answer, f"headless rule: {self.answer.value}")


class HandshakeApprover:
    """A cancellable handshake between the run's thread and another thread (the TUI).

    ``decide`` hands the request to ``on_request`` (called in the run's thread; it must not block, e.g.
    it posts a message to the UI) and waits until ``answer`` is called from elsewhere, or ``cancel`` is
    set. An answer for a request that is no longer pending is ignored, so a late key press cannot approve
    the next action by accident.
    """

    def __init__(self, on_request: Callable[[DecisionRequest], None] | None = None, by: str = "human") -> None:
        self.on_request = on_request
        self.by = by
        self._cond = threading.Condition()
        self._pending: DecisionRequest | None = None
        self._answer: Answer | None = None

    @property
    def pending(self) -> DecisionRequest | None:
        return self._pending

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        with self._cond:
            self._pending, self._answer = request, None
        try:
            if self.on_request is not None:
                self.on_request(request)
            with self._cond:
                while self._answer is None and not cancel.is_set():
                    self._cond.wait(0.05)
                answer = self._answer
        finally:
            with self._cond:
                self._pending = None
        if answer is None:  # cancelled: the kill switch won, nobody answered
            return Ruling(Answer.KILL, KILL_SWITCH, "cancelled")
        return Ruling(answer, self.by)

    def answer(self, answer: Answer, request: DecisionRequest | None = None) -> bool:
        """Answer the pending request (only if it is still ``request`` when given). True if taken."""
        with self._cond:
            if self._pending is None or (request is not None and request is not self._pending):
                return False
            if self._answer is not None:
                return False
            self._answer = answer
            self._cond.notify_all()
            return True
