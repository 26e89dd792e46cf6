"""The analyst's own record (``cua-tui stats``): per operator, how many decisions, how fast, how often in a
row an approval, from the decisions the runs recorded. And the pace check the TUI makes as approvals come."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .decisions import Counted, DecisionCounts, counted_as

# a decision answered faster than this counts as "under a second"
QUICK_MS = 1000
# the longest a recorded on-screen time is believed (a week: longer than any run's deadline)
MAX_SHOWN_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Sample:
    """One decision a person made: who, what it counts as (a ``Counted``: an answer, or an action of their
    own in a takeover), how long it was on screen, and the input guard in force."""

    operator: str
    decision: str
    shown_ms: int | None
    guard_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RunSamples:
    """The person's decisions of one run, in the order made, and how long the run was supervised."""

    samples: tuple[Sample, ...]
    seconds: float | None


def samples_of(events: Iterable[ev.Event]) -> list[Sample]:
    """The decisions a person made, from a run's events, each as core/decisions.py counts it (a hostile run's
    odd values read as unknown)."""
    found = []
    for event in events:
        if not isinstance(event, ev.DecisionMade) or not event.operator:
            continue
        kind = counted_as(event.decision, event.by, event.note)
        if kind is None:
            continue
        # a takeover's own actions were on no screen as a request: no time of their own
        timed = kind is not Counted.TAKEOVER_ACTION
        shown, guard = (_ms(event.shown_ms), _ms(event.guard_ms)) if timed else (None, None)
        found.append(Sample(event.operator, kind.value, shown, guard))
    return found


def _ms(value: object) -> int | None:
    return value if type(value) is int and 0 <= value <= MAX_SHOWN_MS else None


@dataclass
class OperatorStats:
    """One operator's figures (``as_json``'s keys are documented in docs/commands/stats.md): their decisions
    counted as ``cua-tui runs`` counts a run's."""

    operator: str
    counts: DecisionCounts = field(default_factory=DecisionCounts)
    runs: int = 0
    supervised_seconds: float = 0.0
    median_ms: int | None = None
    p10_ms: int | None = None
    longest_approval_streak: int = 0
    under_a_second: float | None = None
    within_guard: int = 0
    timed: list[int] = field(default_factory=list, repr=False)

    @property
    def per_hour(self) -> float | None:
        """Decisions per hour of supervision (None: no supervised time recorded)."""
        return self.counts.decisions / (self.supervised_seconds / 3600) if self.supervised_seconds > 0 else None

    def as_json(self) -> dict[str, Any]:
        return {
            "operator": self.operator,
            "decisions": self.counts.decisions,
            "approvals": self.counts.approvals,
            "rejections": self.counts.rejections,
            "kills": self.counts.kills,
            "takeovers": self.counts.takeovers,
            "takeover_actions": self.counts.takeover_actions,
            "runs": self.runs,
            "supervised_seconds": round(self.supervised_seconds, 1),
            "decisions_per_hour": None if self.per_hour is None else round(self.per_hour, 1),
            "median_ms": self.median_ms,
            "p10_ms": self.p10_ms,
            "longest_approval_streak": self.longest_approval_streak,
            "under_a_second": None if self.under_a_second is None else round(self.under_a_second, 3),
            "within_guard": self.within_guard,
        }


def operator_stats(runs: Iterable[RunSamples]) -> list[OperatorStats]:
    """Per operator, over ``runs`` in the order given (oldest first): the streak of approvals runs on across
    runs, as the person's attention does."""
    found: dict[str, OperatorStats] = {}
    streak: dict[str, int] = {}
    for run in runs:
        seen: set[str] = set()
        for sample in run.samples:
            stats = found.setdefault(sample.operator, OperatorStats(sample.operator))
            if sample.operator not in seen:
                seen.add(sample.operator)
                stats.runs += 1
                stats.supervised_seconds += run.seconds or 0.0
            kind = Counted(sample.decision) if sample.decision in Counted else None
            stats.counts.add(kind)
            if kind is Counted.TAKEOVER_ACTION or kind is None:
                # their own doing, not an answer: neither an approval in a row nor a break of the row
                continue
            if kind is Counted.APPROVE:
                streak[sample.operator] = streak.get(sample.operator, 0) + 1
                stats.longest_approval_streak = max(stats.longest_approval_streak, streak[sample.operator])
            else:
                streak[sample.operator] = 0
            if sample.shown_ms is not None:
                stats.timed.append(sample.shown_ms)
                if sample.guard_ms is not None and sample.shown_ms < sample.guard_ms:
                    stats.within_guard += 1
    for stats in found.values():
        timed = sorted(stats.timed)
        if timed:
            stats.median_ms = round(statistics.median(timed))
            stats.p10_ms = timed[max(0, math.ceil(len(timed) * 0.1) - 1)]
            stats.under_a_second = sum(ms < QUICK_MS for ms in timed) / len(timed)
    return sorted(found.values(), key=lambda s: (-s.counts.decisions, s.operator))


# ------------------------------------------------------------------------------------------------
# The pace check: approvals each made faster than a person can read what they approve
# --------------------------------------------------------------------------------------------------
PACE_APPROVALS = 5
PACE_MS = 2000


class Pace:
    """Counts approvals made in a row, each within ``fast_ms`` of being shown; after ``count`` of them it
    says so once (a slower answer, or any reject, starts the count again)."""

    def __init__(self, count: int = PACE_APPROVALS, fast_ms: int = PACE_MS) -> None:
        self.count, self.fast_ms = count, fast_ms
        self._run = 0
        self._said = False

    def answered(self, decision: str, shown_ms: int | None) -> str | None:
        """Record one answer; the warning to show once, or None."""
        if decision != "approve" or shown_ms is None or shown_ms >= self.fast_ms:
            self._run, self._said = 0, False
            return None
        self._run += 1
        if self._run >= self.count and not self._said:
            self._said = True
            return (
                f"{self._run} approvals in a row, each within {self.fast_ms / 1000:g} s of being shown: "
                "take a moment to read what y approves (each decision records how long it was on screen)"
            )
        return None
