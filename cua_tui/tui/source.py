"""Event sources for the App: a live run (the supervisor in a worker thread) or recorded events (fixtures,
snapshots, screenshots). The App talks to both through the same small interface."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from textual.worker import NoActiveWorker, get_current_worker

from ..core import events as ev
from ..core.approvers import HandshakeApprover
from ..core.ports import Answer, DecisionRequest
from ..core.supervisor import RunResult, Supervisor
from .status import RunInfo

Post = Callable[[Any], None]


class RunSource(Protocol):
    info: RunInfo
    policy_lines: list[str]

    def attach(
        self, on_event: Callable[[ev.Event, int, str], None], on_request: Callable[[DecisionRequest], None]
    ) -> None: ...
    def run(self) -> RunResult | None: ...
    def kill(self, by: str = "human (TUI)") -> None: ...
    def answer(self, answer: Answer, request: DecisionRequest) -> bool: ...
    @property
    def live(self) -> bool: ...


class LiveRun:
    """A supervisor driven from the App's worker thread; decisions go through a cancellable handshake."""

    live = True

    def __init__(self, supervisor: Supervisor, approver: HandshakeApprover) -> None:
        self.supervisor = supervisor
        self.approver = approver
        cfg = supervisor.config
        lim = cfg.policy.limits
        self.info = RunInfo(
            supervisor.run_id, cfg.backend, cfg.agent, cfg.model, lim.max_turns, lim.max_steps, lim.deadline_seconds
        )
        self.policy_lines = cfg.policy.summary()

    def attach(
        self, on_event: Callable[[ev.Event, int, str], None], on_request: Callable[[DecisionRequest], None]
    ) -> None:
        audit = self.supervisor.audit

        def listener(event: ev.Event) -> None:
            # Called right after the record was appended, under the supervisor's emit lock.
            on_event(event, audit.seq - 1, audit.head)

        self.supervisor.subscribe(listener)
        self.approver.on_request = on_request

    def run(self) -> RunResult:
        return self.supervisor.run()

    def kill(self, by: str = "human (TUI)") -> None:
        self.supervisor.kill(by=by)

    def answer(self, answer: Answer, request: DecisionRequest) -> bool:
        return self.approver.answer(answer, request)


@dataclass
class RecordedRun:
    """Replays a fixed list of events (and optionally leaves a decision pending): for snapshots, screenshots
    and tests. ``answers`` collects what the reviewer pressed.

    A recording without a ``RunEnded`` event shows a run still going: ``run`` then holds on (as a live run
    waiting for the model or for the reviewer would) until the kill switch or until the App cancels its
    worker, so the App does not take the end of the replay for the end of the run."""

    info: RunInfo
    events: Sequence[ev.Event]
    pending: DecisionRequest | None = None
    policy_lines: list[str] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    killed: bool = False
    live = False

    def __post_init__(self) -> None:
        self._on_event: Callable[[ev.Event, int, str], None] | None = None
        self._on_request: Callable[[DecisionRequest], None] | None = None
        self._killed = threading.Event()

    def attach(
        self, on_event: Callable[[ev.Event, int, str], None], on_request: Callable[[DecisionRequest], None]
    ) -> None:
        self._on_event, self._on_request = on_event, on_request

    def run(self) -> None:
        import hashlib

        head = "0" * 64
        assert self._on_event is not None and self._on_request is not None
        for seq, event in enumerate(self.events):
            head = hashlib.sha256(f"{seq}:{event.kind}:{head}".encode()).hexdigest()
            self._on_event(event, seq, head)
        if self.pending is not None:
            self._on_request(self.pending)
        if any(isinstance(event, ev.RunEnded) for event in self.events):
            return
        try:
            worker = get_current_worker()
        except NoActiveWorker:
            return  # not driven by an App: nothing could ever release us
        while not self._killed.wait(0.05) and not worker.is_cancelled:
            pass

    def kill(self, by: str = "human (TUI)") -> None:
        self.killed = True
        self._killed.set()

    def answer(self, answer: Answer, request: DecisionRequest) -> bool:
        self.answers.append(answer)
        return True
