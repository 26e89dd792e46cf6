"""What a recorded decision counts as: the one rule by which ``cua-tui runs`` (its DECISIONS, from the chain
walk) and ``cua-tui stats`` (per operator) count, so that the two agree (docs/commands/stats.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# who proposed, approved and ran an action of a takeover (the operator is named beside it)
BY_TAKEOVER = "human (takeover)"
# the note of the decision a takeover answered
TAKEOVER_NOTE = "the reviewer took control of the desktop instead (T)"
# the policy's own rulings (allow, block) and a grant's approvals ("grant #3 (given by ...)") answer no request:
# nobody was asked
BY_POLICY = "policy"
BY_GRANT = "grant #"


class Counted(StrEnum):
    """A decision as counted: an answer to a request (approve, reject, kill, or the reviewer taking the
    desktop instead), or an action the reviewer did themselves during a takeover (it answers no request)."""

    APPROVE = "approve"
    REJECT = "reject"
    KILL = "kill"
    TAKEOVER = "takeover"
    TAKEOVER_ACTION = "takeover_action"


# the kinds that answer a request: what DECISIONS counts
ANSWERS = frozenset((Counted.APPROVE, Counted.REJECT, Counted.KILL, Counted.TAKEOVER))


def counted_as(decision: object, by: object, note: object) -> Counted | None:
    """What a decision record (its ``decision``, ``by`` and ``note`` as written, untrusted) counts as; None
    for one that nobody was asked for (the policy's, a grant's) or that this version cannot read."""
    if by == BY_TAKEOVER:
        return Counted.TAKEOVER_ACTION
    if not isinstance(by, str) or by == BY_POLICY or by.startswith(BY_GRANT):
        return None
    if decision == "reject" and note == TAKEOVER_NOTE:
        # the reviewer took the desktop instead of answering: not a rejection of the action
        return Counted.TAKEOVER
    return Counted(decision) if isinstance(decision, str) and decision in ("approve", "reject", "kill") else None


@dataclass
class DecisionCounts:
    """The decisions of a run (or of one operator), counted by ``counted_as``."""

    approvals: int = 0
    rejections: int = 0
    kills: int = 0
    takeovers: int = 0
    takeover_actions: int = 0

    @property
    def decisions(self) -> int:
        """Requests answered (a takeover's own actions are not: they answer none)."""
        return self.approvals + self.rejections + self.kills + self.takeovers

    def add(self, kind: Counted | None) -> None:
        if kind is Counted.APPROVE:
            self.approvals += 1
        elif kind is Counted.REJECT:
            self.rejections += 1
        elif kind is Counted.KILL:
            self.kills += 1
        elif kind is Counted.TAKEOVER:
            self.takeovers += 1
        elif kind is Counted.TAKEOVER_ACTION:
            self.takeover_actions += 1
