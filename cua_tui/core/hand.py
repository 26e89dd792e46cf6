"""The human's hand in a recorded step, worked out once for every review (replay, the HTML report, the ATIF
trajectory): what ran and whether a reviewer changed it first (the model's proposal beside it), how each
decision was made (a person's key, one key for a fleet group, a deadline, a soft budget, a grant, a rule,
a takeover) and the takeover a reviewer's own action belongs to. Plain data from the records, untrusted
strings as recorded: the callers make them visible (``core.describe`` words them for people).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import events as ev
from .decisions import BY_GRANT, BY_POLICY, BY_TAKEOVER, TAKEOVER_NOTE
from .grouping import group_record
from .timeline import Step

# The decider a DecisionMade's ``by`` names, by the words the supervisor and the approvers write
# (the OpenTelemetry spans' ``cua_tui.decision.how``); the words are core/decisions.py's, which counts them.
_DECIDERS = (
    (BY_POLICY, "policy"),
    (BY_GRANT, "grant"),
    ("headless rule", "rule"),
    ("approver command", "approver"),
    ("deadline", "deadline"),
    (BY_TAKEOVER, "takeover"),
    ("kill switch", "kill switch"),
    ("no approver", "fail closed"),
    ("fail closed", "fail closed"),
    ("no answer", "no answer"),
)


def decider(by: str, operator: str) -> str:
    """Which kind of decider ``by`` names: ``policy``, ``person``, ``rule`` (headless), ``approver``,
    ``grant``, ``deadline``, ``takeover``, ``kill switch``, ``fail closed``, ``no answer`` or ``other``."""
    by = by if isinstance(by, str) else ""
    for prefix, how in _DECIDERS:
        if by.startswith(prefix):
            return how
    return "person" if operator or by.startswith("human") else "other"


@dataclass(frozen=True, slots=True)
class Decided:
    """One decision on a step and how it was made. ``how`` is what a review names it by: ``budget`` (a
    soft budget asked whether to go on), ``group`` (one key answered the same decision in many runs of a
    fleet), ``takeover`` (answered by taking the desktop, or the reviewer's own action), else the decider
    (``decider``)."""

    decision: ev.DecisionMade
    how: str
    # the fleet group it was answered in, {"id", "size"} (only one a fleet could have written)
    group: dict[str, Any] | None

    @property
    def who(self) -> str:
        """The person when one decided, else what decided (the record's ``by``)."""
        operator, by = self.decision.operator, self.decision.by
        return operator if isinstance(operator, str) and operator else by if isinstance(by, str) else ""


def decided(decision: ev.DecisionMade) -> Decided:
    group = group_record(decision.group)
    if decision.subject == "budget":
        how = "budget"
    elif group is not None:
        how = "group"
    elif decision.note == TAKEOVER_NOTE:
        how = "takeover"
    else:
        how = decider(decision.by, decision.operator)
    return Decided(decision, how, group)


@dataclass(frozen=True, slots=True)
class RefusedEdit:
    """A reviewer's edit the run refused (the policy blocked it, or it changed what an edit may not): the
    action did not run at all."""

    summary: str
    action: dict[str, Any] | None
    why: str


@dataclass(frozen=True, slots=True)
class Hand:
    """Whose hand a step shows: what ran (or was to run) and, when a reviewer changed it before it ran,
    what the model proposed; an edit that was refused; every decision and how it was made; the takeover
    the step is the reviewer's own action in (0: the model's)."""

    summary: str  # what ran, in words (never typed text)
    action: dict[str, Any] | None  # its record
    proposed: str  # the model's proposal in words when an edit ran, else ""
    proposed_action: dict[str, Any] | None
    refused: RefusedEdit | None  # a reviewer's edit that never ran
    decisions: tuple[Decided, ...]
    takeover: int

    @property
    def edited(self) -> bool:
        return self.proposed_action is not None or bool(self.proposed)

    @property
    def chosen(self) -> tuple[Decided, ...]:
        """The decisions a person, a rule, a deadline... made: every one but the policy's own."""
        return tuple(d for d in self.decisions if d.how != "policy")

    @property
    def editor(self) -> str:
        """Who changed it (the person whose approval carried the edit), or ""."""
        if not self.edited:
            return ""
        return next((d.who for d in self.decisions if isinstance(d.decision.edited, dict)), "")


def hand(step: Step) -> Hand:
    proposal = step.proposal
    said = proposal_words(step)
    decisions = tuple(decided(d) for d in step.decisions)
    takeover = step.takeover_number if step.by_reviewer else 0
    edit = step.edit
    if edit is None:
        refused = next((d.edited for d in step.decisions if isinstance(d.edited, dict) and "refused" in d.edited), None)
        gone = None
        if refused is not None:
            ran = refused.get("ran") if isinstance(refused.get("ran"), dict) else None
            gone = RefusedEdit(_summary(refused.get("summary"), ran), ran, str(refused.get("refused")))
        return Hand(said, proposal.action, "", None, gone, decisions, takeover)
    ran = edit["ran"]
    return Hand(_summary(edit.get("summary"), ran), ran, said, proposal.action, None, decisions, takeover)


def proposal_words(step: Step) -> str:
    """The model's (or the reviewer's own) proposal in words; a malformed one by its error."""
    proposal = step.proposal
    if proposal.error:
        return f"malformed {proposal.raw_kind or 'action'}: {proposal.error}"
    return _summary(proposal.summary, proposal.action) or step.kind


def typed(record: object) -> tuple[int, str] | None:
    """A typing's (length, SHA-256) as its record keeps them (the hash "" while a takeover's stretch is
    under way), or None for a record of another kind or of no usable length."""
    if not isinstance(record, dict) or record.get("kind") != "type":
        return None
    length, sha = record.get("text_len"), record.get("text_sha256", "")
    if type(length) is not int:
        return None
    return length, sha if isinstance(sha, str) else ""


def _summary(summary: object, record: object) -> str:
    if isinstance(summary, str) and summary:
        return summary
    kind = record.get("kind") if isinstance(record, dict) else None
    return str(kind) if isinstance(kind, str) else ""
