"""Approvers that need no terminal: fixed rules, and the handshake the TUI answers from its own thread."""

from __future__ import annotations

import threading
from typing import Unpack

from .ports import Answer, AnswerDetails, DecisionRequest, Ruling

SAFETY_CHECKS_RULE = "headless rule: safety checks need a reviewer"
KILL_SWITCH = "kill switch"


class FixedApprover:
    """Answers every request the same way (headless ``--on-confirm reject|approve``), except that a
    blanket approve never acknowledges the model's safety checks."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        if request.kind == "safety_check" and self.answer is Answer.APPROVE:
            # The model's safety checks are acknowledged only after a person (or the user's own
            # approver program) has looked: a blanket rule must not acknowledge them on anyone's
            # behalf. The reject is that rule's, so it is named, not the "approve" rule that was
            # asked.
            return Ruling(Answer.REJECT, SAFETY_CHECKS_RULE, "a blanket approve never acknowledges safety checks")
        return Ruling(self.answer, f"headless rule: {self.answer.value}")


class HandshakeApprover:
    """A cancellable handshake between the run's thread and another thread (the TUI).

    ``decide`` holds the request as pending and waits until ``answer`` is called from elsewhere, or
    ``cancel`` is set. The UI learns of the request from its ``decision_requested`` event (which carries
    it), not from the approver: the event stream is the one channel from the run to the UI, and
    ``answer`` the one way back. An answer for a request that is no longer pending is ignored, so a late
    key press cannot approve the next action by accident.
    """

    def __init__(self, by: str = "human") -> None:
        self.by = by
        self._cond = threading.Condition()
        self._pending: DecisionRequest | None = None
        self._answer: Answer | None = None
        self._details: AnswerDetails = {}
        self._last: DecisionRequest | None = None  # the request decided last
        # An answer to a request whose event the UI has shown before the run's thread reached
        # ``decide`` (the event is written first): kept for exactly that request object, taken when
        # it is asked.
        self._early: tuple[DecisionRequest, Answer, AnswerDetails] | None = None

    @property
    def pending(self) -> DecisionRequest | None:
        return self._pending

    def wait_for_request(self, timeout: float) -> DecisionRequest | None:
        """The pending request, waiting up to ``timeout`` seconds for one (tests, scripted front ends)."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending is not None, timeout)
            return self._pending

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        with self._cond:
            self._pending, self._answer, self._details = request, None, {}
            if self._early is not None and self._early[0] is request:
                _request, self._answer, self._details = self._early
            self._early = None
            self._cond.notify_all()
        try:
            with self._cond:
                while self._answer is None and not cancel.is_set():
                    self._cond.wait(0.05)
                answer = self._answer
        finally:
            with self._cond:
                self._pending, self._last = None, request
        if answer is None:  # cancelled: the kill switch won, nobody answered
            return Ruling(Answer.KILL, KILL_SWITCH, "cancelled")
        details = self._details
        return Ruling(
            answer,
            self.by,
            details.get("note", ""),
            human=True,
            grant=details.get("grant", False) and answer is Answer.APPROVE,
            screen=details.get("screen", ""),
            shown_ms=details.get("shown_ms"),
            guard_ms=details.get("guard_ms"),
            edit=details.get("edit") if answer is Answer.APPROVE else None,
            takeover=details.get("takeover", False) and answer is Answer.REJECT,
            group=details.get("group"),
        )

    def answer(self, answer: Answer, request: DecisionRequest | None = None, **details: Unpack[AnswerDetails]) -> bool:
        """Answer the pending request (only if it is still ``request`` when given). True if taken.

        A ``request`` not yet asked (its event is out, ``decide`` not yet called) is answered as soon as it
        is asked; one already decided, or another than the one pending, is refused. The ``details`` (the
        reviewer's note, a grant, the screen shown and for how long, an edit) go into the ruling."""
        with self._cond:
            if self._pending is None and request is not None and request is not self._last:
                self._early = (request, answer, details)
                return True
            if self._pending is None or (request is not None and request is not self._pending):
                return False
            if self._answer is not None:
                return False
            self._answer, self._details = answer, details
            self._cond.notify_all()
            return True
