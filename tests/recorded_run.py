"""A run recorded: a fixed list of events as they were written, fed to the App as its run source (the
App's tests and the screenshot scenes; the product feeds it live runs alone)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Unpack

from textual.worker import NoActiveWorker, get_current_worker

from cua_tui.core import events as ev
from cua_tui.core.actions import Action
from cua_tui.core.policy import Policy
from cua_tui.core.ports import Answer, AnswerDetails, DecisionRequest
from cua_tui.core.run_view import RunView
from cua_tui.core.takeover import Desk
from cua_tui.tui.status import RunInfo


@dataclass
class RecordedRun:
    """Feeds the App a fixed list of events as they were written (a real run's stream, recorded): for
    snapshots, screenshots and tests. ``answers`` collects what the reviewer pressed.

    A recording without a ``RunEnded`` event shows a run still going (its last ``decision_requested``
    still pending, say): ``run`` then holds on, as a live run waiting for the model or for the reviewer
    would, until the kill switch or until the App cancels its worker, so the App does not take the end
    of the recording for the end of the run."""

    info: RunInfo
    events: Sequence[ev.Stamped]
    policy_lines: list[str] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    killed: bool = False
    # a recording has none unless it names the directory it came from
    run_dir: Path | None = None
    # what edits are checked by (None: the recording offers none)
    policy: Policy | None = None
    # the edits the reviewer approved, beside ``answers``
    edits: list[Action] = field(default_factory=list)
    # a recording has no desktop to take over
    desk: Desk | None = None
    live = False
    owned = True
    run_name = ""
    label = ""
    no_desk = ""

    def __post_init__(self) -> None:
        self._on_event: Callable[[ev.Stamped], None] | None = None
        self._killed = threading.Event()

    @property
    def ends(self) -> bool:
        return any(isinstance(s.event, ev.RunEnded) for s in self.events)

    def attach(self, on_event: Callable[[ev.Stamped], None]) -> RunView:
        self._on_event = on_event
        return RunView()

    def detach(self) -> None:
        pass

    def run(self) -> None:
        assert self._on_event is not None
        for stamped in self.events:
            self._on_event(stamped)
        if self.ends:
            return
        try:
            worker = get_current_worker()
        except NoActiveWorker:
            # not driven by an App: nothing could ever release us
            return
        while not self._killed.wait(0.05) and not worker.is_cancelled:
            pass

    def kill(self, by: str = "human (TUI)") -> None:
        self.killed = True
        self._killed.set()

    def answer(self, answer: Answer, request: DecisionRequest, **details: Unpack[AnswerDetails]) -> str | None:
        self.answers.append(answer)
        if "edit" in details:
            self.edits.append(details["edit"])
        return None

    def revoke(self, grant_id: int) -> bool:
        return False  # a recording has no grants to revoke
