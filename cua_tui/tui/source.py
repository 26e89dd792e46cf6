"""Event sources for a run's screen: a live run (the supervisor in a worker thread) or recorded events (fixtures,
snapshots, screenshots). The App talks to both through the same small interface."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, Unpack

from ..core import events as ev
from ..core.approvers import HandshakeApprover
from ..core.policy import Policy
from ..core.ports import Answer, AnswerDetails, DecisionRequest
from ..core.run_view import RunView
from ..core.supervisor import RunConfig, RunResult, Supervisor
from ..core.takeover import Desk
from .status import RunInfo


class RunSource(Protocol):
    """What a run's screen needs of a run: its events (the one channel from the run), and the few commands
    that go the other way (answer the pending request, the kill switch). ``owned``: the screen is the run's
    one front end (it drives the run, signals its decisions, and leaving it kills the run); a fleet's run
    is the fleet's. ``run_name`` names the run in the decision panel ("" for a lone run)."""

    info: RunInfo
    policy_lines: list[str]
    owned: bool
    run_name: str
    label: str  # the fleet task's name ("" for a lone run)
    # why ``T`` cannot take this run's desktop, said when pressed ("" where the run has one, or none is asked)
    no_desk: str

    @property
    def policy(self) -> Policy | None:
        """What an edit is classified by before it is sent (the run classifies it again); None: no edits."""
        ...

    @property
    def desk(self) -> Desk | None:
        """The run's desktop, to take over (``T``); None: this source has none to give."""
        ...

    @property
    def run_dir(self) -> Path | None:
        """The run directory being written (copied and verified from the TUI), None for a recording."""
        ...

    def attach(self, on_event: Callable[[ev.Stamped], None]) -> RunView:
        """Start telling ``on_event`` every later event; the run's state so far (empty for a new run)."""
        ...

    def detach(self) -> None: ...
    def run(self) -> RunResult | None: ...
    def kill(self, by: str = "human (TUI)") -> None: ...
    def answer(self, answer: Answer, request: DecisionRequest, **details: Unpack[AnswerDetails]) -> str | None:
        """None when the answer reached ``request``; else why not (it is no longer pending)."""
        ...

    def revoke(self, grant_id: int) -> bool: ...
    @property
    def live(self) -> bool: ...


def run_info(config: RunConfig, run_id: str) -> RunInfo:
    lim = config.policy.limits
    extra = config.extra
    lab, url = extra.get("lab"), extra.get("url")
    target = f"lab {lab}" if lab else str(url) if url else f"the {config.backend} desktop"
    allowed = (*config.policy.allow_domains, *(extra.get("allow_domains") or ()))
    return RunInfo(
        run_id,
        config.backend,
        config.agent,
        config.model,
        lim.max_turns,
        lim.max_steps,
        lim.deadline_seconds,
        task=config.task,
        target=target,
        allowed=tuple(str(a) for a in allowed),
        policy=f"{config.policy.name} ({config.policy.sha256[:12]})",
        drills=config.drills is not None,
    )


class LiveRun:
    """A supervisor driven from the App's worker thread; decisions go through a cancellable handshake."""

    live = True
    owned = True
    no_desk = ""
    run_name = ""
    label = ""

    def __init__(self, supervisor: Supervisor, approver: HandshakeApprover) -> None:
        self.supervisor = supervisor
        self.approver = approver
        self.info = run_info(supervisor.config, supervisor.run_id)
        self.policy_lines = supervisor.config.policy.summary()
        self.policy: Policy | None = supervisor.config.policy
        self.desk: Desk | None = supervisor

    def attach(self, on_event: Callable[[ev.Stamped], None]) -> RunView:
        # Called right after each record was appended, under the supervisor's emit lock, with its
        # chain place.
        self.supervisor.subscribe(on_event)
        return RunView()

    def detach(self) -> None:
        pass

    def run(self) -> RunResult:
        return self.supervisor.run()

    def kill(self, by: str = "human (TUI)") -> None:
        self.supervisor.kill(by=by)

    def answer(self, answer: Answer, request: DecisionRequest, **details: Unpack[AnswerDetails]) -> str | None:
        if self.approver.answer(answer, request, **details):
            return None
        return "it is no longer pending"

    def revoke(self, grant_id: int) -> bool:
        return self.supervisor.revoke_grant(grant_id)

    @property
    def run_dir(self) -> Path:
        """The run directory being written (copied and verified from the TUI)."""
        return self.supervisor.rundir.path
