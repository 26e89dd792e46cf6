"""Runs for the review tests (issue 22, points 4 and 5): real sim runs of the real supervisor in which a
typing is approved and the next typing rejected, decided by an approver that answers as a person would
(with the screen it was shown, when told to record one)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from export_runs import audit_records

from cua_tui.build import HANDSHAKE, Run, RunOptions, build_run
from cua_tui.core.ports import Answer, DecisionRequest, Ruling

FIELD, VERIFY = (250, 182), (550, 182)
SHOWN_MS = 2400


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


# Step 1 clicks the field, step 2 types into it (approved), step 3 types more (rejected), step 4 never runs.
TURNS = [
    {
        "text": "filling the form",
        "actions": [
            click(FIELD),
            {"type": "type", "text": "cua-tui verified"},
            {"type": "type", "text": " and more"},
            click(VERIFY),
        ],
    }
]


class Reviewer:
    """Approves the first request and rejects the second, as a person would. With ``record`` the rulings
    carry the screen shown and for how long; ``lagging`` makes the rejection name the screen shown at the
    first request (a review pane that was not refreshed), so that the recorded screen differs from the
    desktop's."""

    def __init__(self, *, record: bool = False, lagging: bool = False) -> None:
        self.record, self.lagging = record, lagging
        self.seen: list[str] = []  # the SHA-256 of the screen each request came with

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        assert request.frame is not None
        self.seen.append(request.frame.sha256)
        answer = Answer.APPROVE if len(self.seen) == 1 else Answer.REJECT
        note = "" if answer is Answer.APPROVE else "not that text"
        if not self.record:
            return Ruling(answer, "human", note, human=True)
        screen = self.seen[0] if self.lagging else self.seen[-1]
        return Ruling(answer, "human", note, human=True, screen=screen, shown_ms=SHOWN_MS)


@dataclass
class Reviewed:
    path: Path
    initial: str  # the turn's screenshot (the field empty)
    clicked: str  # after step 1 (the field focused, empty)
    typed: str  # after step 2 (the field with its text)
    reviewer: Reviewer


def reviewed_run(runs: Path, reviewer: Reviewer | None = None) -> Reviewed:
    """A sealed run of ``TURNS`` decided by ``reviewer``, and its screens by what they show."""
    reviewer = reviewer or Reviewer()
    run = build_run(
        RunOptions(backend="sim", agent=None, script={"turns": TURNS, "final_text": "done"}, runs_dir=runs, fsync=False)
    )
    run.supervisor.approver = reviewer
    run.run()
    screens = [r for r in audit_records(run.path) if r["kind"] == "screen"]
    initial = next(r["sha256"] for r in screens if r["purpose"] == "initial")
    after = {r["index"]: r["sha256"] for r in screens if r["purpose"] == "after_action"}
    assert sorted(after) == [0, 1], after  # steps 1 and 2 ran; 3 was rejected, 4 never ran
    assert len({initial, after[0], after[1]}) == 3
    return Reviewed(run.path, initial, after[0], after[1], reviewer)


def waiting_run(runs: Path) -> tuple[Run, threading.Thread]:
    """A run under way in a thread, waiting for a decision on step 2 (the typing), through the handshake
    a TUI answers (``run.handshake``); end it with ``run.supervisor.kill()`` and join the thread."""
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": TURNS, "final_text": "done"},
            runs_dir=runs,
            decisions=HANDSHAKE,
            fsync=False,
        )
    )
    thread = threading.Thread(target=run.run, daemon=True)
    thread.start()
    assert run.handshake is not None and run.handshake.wait_for_request(30) is not None
    return run, thread
