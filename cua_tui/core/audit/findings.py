"""What the verifier finds, typed: a :class:`Finding` names its kind and the line it points at; its text
(the one ``cua-tui verify`` prints) is rendered from it. :class:`VerifyExit` names the exit codes."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class VerifyExit(enum.IntEnum):
    """``cua-tui verify``'s exit status (DESIGN.md, "Command line contract")."""

    INTACT = 0
    TAMPERED = 1  # or, with a key, not vouched for by a signed seal
    # not a run directory, unreadable, or too large to check
    UNUSABLE = 2


class FindingKind(enum.Enum):
    """Why a run is not intact. Every kind but the last two is evidence of tampering (exit 1, "TAMPERED")."""

    EDITED = "edited"  # a line, the seal or a signed field changed
    DELETED = "deleted"  # lines missing in the middle of the chain
    INSERTED = "inserted"  # a line that the chain links past
    REORDERED = "reordered"  # lines whose links or seqs are out of order
    # fewer lines than the seal records, or a last line cut short
    TRUNCATED = "truncated"
    APPENDED_AFTER_SEAL = "appended_after_seal"
    MALFORMED_RECORD = "malformed_record"  # a line that is not a JSON record with the envelope
    # a sealed run with an action that never got its outcome
    OUTCOME_MISSING = "outcome_missing"
    # result.json unreadable as JSON, or without a usable seal
    SEAL_MALFORMED = "seal_malformed"
    # a link, FIFO, device or socket in the run directory
    NOT_REGULAR_FILE = "not_regular_file"
    SCREENSHOT_MISSING = "screenshot_missing"
    SCREENSHOT_ALTERED = "screenshot_altered"
    # not a PNG of the recorded size (a bomb, a renamed file)
    SCREENSHOT_INVALID = "screenshot_invalid"
    SIGNATURE_MISSING = "signature_missing"  # a key was given, the seal is not signed
    # the seal's or a checkpoint's signature does not hold
    SIGNATURE_MISMATCH = "signature_mismatch"
    WRONG_KEY = "wrong_key"  # the key given is not the one the run names
    # checked with a key, but no signed seal vouches for the run's end (exit 1)
    UNVOUCHED = "unvouched"
    # the run directory cannot be checked at all (exit 2)
    UNUSABLE_INPUT = "unusable_input"

    @property
    def tampered(self) -> bool:
        """Evidence of tampering, as opposed to a verdict on what could not be vouched for or checked."""
        return self not in (FindingKind.UNVOUCHED, FindingKind.UNUSABLE_INPUT)

    @property
    def exit(self) -> VerifyExit:
        """The exit status a report with this finding first gets."""
        return VerifyExit.UNUSABLE if self is FindingKind.UNUSABLE_INPUT else VerifyExit.TAMPERED


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the verifier established. ``line``: the 1-based line of audit.jsonl it points at, when it
    points at one; ``detail``: what is wrong there, in words."""

    kind: FindingKind
    detail: str
    line: int | None = None

    def __str__(self) -> str:
        return self.detail if self.line is None else f"line {self.line}: {self.detail}"

    @property
    def summary(self) -> str:
        """The report's one-line summary when this finding decides the verdict."""
        if self.kind is FindingKind.UNUSABLE_INPUT:
            return str(self)
        if self.kind is FindingKind.UNVOUCHED:
            return f"NOT VOUCHED FOR: {self}"
        return f"TAMPERED: {self}"


def edited(line: int | None, why: str) -> Finding:
    """The most common finding: ``line N: edited (why)``."""
    return Finding(FindingKind.EDITED, f"edited ({why})", line)


def unusable(text: str) -> Finding:
    """The run directory cannot be checked; ``text`` names it and says why."""
    return Finding(FindingKind.UNUSABLE_INPUT, text)
