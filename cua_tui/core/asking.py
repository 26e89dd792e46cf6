"""Asking the approver: a decision request to the ruling the run records, whatever the approver does. An
answer not given by the request's deadline is the deadline's reject, a broken or malformed answer is a
reject (fail closed), and a reviewer's edit is checked as a proposal is before anything runs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from . import events as ev
from .actions import Action, ActionError
from .closing import Aborted, Switch
from .edits import Edited, check_edit
from .geometry import Size
from .grouping import group_record
from .policy import Policy, Verdict
from .ports import Answer, DecisionRequest, Gated, Ruling
from .text import failure

# who rejected a decision nobody answered in time (its seconds follow)
BY_DEADLINE = "deadline"


def deadline_message(seconds: float) -> str:
    """What the model hears of an action its reviewer did not decide in time (and the decision's note)."""
    return f"Declined: no decision was made within the {seconds:g} s deadline. Do not retry this action."


def timed_ruling(decide: Callable[[threading.Event], object], timeout: float | None, switch: Switch) -> Ruling:
    """The ruling ``decide`` (the approver, called with the event that tells it to stop) gives, or, once
    ``timeout`` seconds pass without one, the deadline's reject: the approver is told to stop as the kill
    switch tells it, and whatever it answers then is not taken (a decision is never approved at or after its
    deadline)."""
    stop, expired = switch.cancel, threading.Event()
    timer = None
    if timeout is not None:
        stop = threading.Event()

        def expire() -> None:
            expired.set()
            stop.set()

        timer = threading.Timer(timeout, expire)
        timer.daemon = True
    # the kill switch wakes it too
    with switch.waiting(stop):
        if switch.aborted.is_set():
            stop.set()
        if timer is not None:
            timer.start()
        try:
            ruling = valid_ruling(decide(stop))
        except Aborted:
            raise
        except Exception as exc:  # a broken approver rejects: fail closed
            ruling = Ruling(Answer.REJECT, "approver error (fail closed)", failure(exc))
        finally:
            if timer is not None:
                timer.cancel()
    if timeout is not None and expired.is_set() and not (ruling.answer is Answer.KILL and ruling.human):
        # an answer a team's queue committed too late is recorded as such: it was not taken
        queue = ruling.queue
        late = {**queue, "late": True} if queue and "answer" in queue else queue
        return Ruling(Answer.REJECT, f"{BY_DEADLINE} ({timeout:g} s)", deadline_message(timeout), queue=late)
    return ruling


def checked_edit(
    request: DecisionRequest, ruling: Ruling, policy: Policy, screen: Size
) -> tuple[Ruling, dict[str, Any] | None]:
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
        problem = check_edit(proposed, edit, screen)
    record = Edited(proposed, edit).to_record()
    if problem is not None:
        note = f"the edit was refused: {problem}"
        return Ruling(Answer.REJECT, "edit check (fail closed)", note), record | {"refused": problem}
    verdict = policy.classify(edit)
    record |= {"verdict": verdict.verdict.value, "rule": verdict.rule, "reason": verdict.reason}
    if verdict.verdict is Verdict.BLOCK:
        note = f"the reviewer's edit is blocked: {verdict.reason}"
        return Ruling(Answer.REJECT, "policy", note), record | {"refused": verdict.reason}
    return ruling, record


def decision_record(
    request: DecisionRequest, ruling: Ruling, operator: str, edited: dict[str, Any] | None
) -> ev.DecisionMade:
    """The ``decision`` record of a ruling: what a person's answer carries is kept only when a person gave it
    and only in the shape it must have (a SHA-256, whole milliseconds)."""
    return ev.DecisionMade(
        request.turn,
        request.index,
        ruling.answer,
        ruling.by,
        subject=request.kind,
        note=ruling.note,
        operator=(ruling.operator or operator) if ruling.human else "",
        screen=ruling.screen if is_sha256(ruling.screen) else "",
        shown_ms=ruling.shown_ms if ruling.human and type(ruling.shown_ms) is int else None,
        guard_ms=ruling.guard_ms if ruling.human and type(ruling.guard_ms) is int else None,
        edited=edited,
        ran=ruling.edit,
        group=group_record(ruling.group) if ruling.human else None,
        queue=ruling.queue,
    )


def gated_by(policy: Policy, index: int, action: Action | None, error: ActionError | None) -> Gated:
    """What the policy says of an action of a call whose safety checks are asked (shown, then enforced
    again when the action's turn comes)."""
    if action is None:
        reason = f"malformed: {error.reason}" if error is not None else "malformed"
        return Gated(index, None, Verdict.BLOCK.value, "malformed", reason)
    decision = policy.classify(action)
    return Gated(index, action, decision.verdict.value, decision.rule, decision.reason)


def valid_ruling(ruling: object) -> Ruling:
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


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
