"""The run's own records in its directory, as the run directory contract (DESIGN.md) spells them: run.json at
the start (and its ``run_started`` event), a transcript line per turn, result.json at the end."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .actions import Action, ActionError
from .audit import AuditKey
from .closing import Tally
from .drills import DrillPlan
from .events import RunStatus
from .geometry import Size
from .policy import Policy
from .ports import Call, CallResult, Turn
from .stamps import iso_time
from .wire import raw_kind


@dataclass
class RunConfig:
    task: str
    backend: str
    agent: str
    model: str | None
    screen: Size
    policy: Policy
    audit_key: AuditKey | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # lab, url, ... for run.json
    versions: dict[str, str] = field(default_factory=dict)
    # how long kill waits for the desktop to stop before moving on
    stop_timeout: float = 15.0
    # who reviews (user@host or --operator): recorded with every decision a person makes
    operator: str = ""
    # asked before every action runs: None, or why nothing may run any more (a team worker's lapsed
    # lease); the run then ends ``interrupted``
    fence: Callable[[], str | None] | None = None
    # drills put before real requests (core/drills.py); None: none
    drills: DrillPlan | None = None


def run_record(cfg: RunConfig, run_id: str, started: float) -> tuple[dict[str, Any], ev.RunStarted]:
    """run.json as the run starts (``started``: epoch seconds), and the ``run_started`` event beside it."""
    policy = cfg.policy
    limits = _limits(policy)
    key = cfg.audit_key
    info = {
        "run_id": run_id,
        "task": cfg.task,
        "backend": cfg.backend,
        "agent": cfg.agent,
        "model": cfg.model,
        "screen": str(cfg.screen),
        "policy": {"name": policy.name, "source": policy.source, "sha256": policy.sha256, "text": policy.text},
        "limits": limits,
        "versions": cfg.versions,
        "started_at": started,
        "started_at_iso": iso_time(started),
        "audit_key_id": key.key_id if key else None,
        **cfg.extra,
    }
    signed = {"algorithm": key.algorithm, "key_id": key.key_id} if key else None
    event = ev.RunStarted(cfg.task, cfg.backend, cfg.agent, cfg.model, str(cfg.screen), policy.name, policy.sha256,
                          limits, signed)  # fmt: skip
    return info, event


def turn_record(
    turn_no: int,
    turn: Turn,
    parsed: Sequence[tuple[Call, Sequence[tuple[Any, Action | None, ActionError | None]]]],
    results: Sequence[CallResult],
) -> dict[str, Any]:
    """A turn's transcript line: each call's actions as parsed (raw, action or error) and what became of them."""
    calls = [
        {
            "call_id": call.call_id,
            "format": call.format,
            "actions": [
                a.to_record() if a else {"error": e.reason if e else "", "raw_kind": raw_kind(call.format, raw)}
                for raw, a, e in items
            ],
            "safety_checks": [c.code for c in call.safety_checks],
            "acknowledged": [c.id for c in result.acknowledged_safety_checks],
        }
        for (call, items), result in zip(parsed, results, strict=True)
    ]
    return {
        "turn": turn_no,
        "response_id": turn.response_id,
        "text": turn.text,
        "calls": calls,
        "results": [[r.status.value for r in cr.results] for cr in results],
    }


def result_record(
    run_id: str,
    ended: tuple[RunStatus, str, bool | None],
    verdict: ev.VerificationDone | None,
    cleanup: tuple[bool, str],
    seal: dict[str, Any],
    tally: Tally,
    ended_at: float,
) -> dict[str, Any]:
    """result.json: how the run ended (status, reason, verified), its counts and the seal (the run directory
    contract)."""
    status, reason, verified = ended
    return {
        "run_id": run_id,
        "status": status,
        "reason": reason,
        "verified": verified,
        "verifier": None
        if verdict is None
        else {"name": verdict.verifier, "where": verdict.where, "user": verdict.user},
        "cleanup": {"ok": cleanup[0], "detail": cleanup[1]},
        "counts": {"turns": tally.turn, "steps": tally.steps, "executed": tally.executed, "events": seal["events"]},
        "tokens": tally.tokens,
        "cost_usd": tally.cost,
        "final_text": tally.final_text,
        "ended_at": ended_at,
        "ended_at_iso": iso_time(ended_at),
        "seal": seal,
    }


def _limits(policy: Policy) -> dict[str, Any]:
    lim = policy.limits
    return {name: getattr(lim, name) for name in lim.__dataclass_fields__}
