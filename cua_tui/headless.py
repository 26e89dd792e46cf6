"""Headless rendering of run events as plain lines (stderr), for ``--headless`` runs and CI logs.

Untrusted text goes through ``visible`` so escape sequences in model output never reach the terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from .core import events as ev
from .core.text import visible


def line_for(event: ev.Event) -> str | None:
    match event:
        case ev.RunStarted():
            return (
                f"run started · backend {event.backend} · agent {visible(event.agent)} · policy "
                f"{visible(event.policy)} · screen {event.screen}"
            )
        case ev.ModelTurn():
            text = f" · says: {visible(event.text, limit=200)}" if event.text else ""
            tokens = f" · {event.input_tokens}+{event.output_tokens} tokens" if event.input_tokens else ""
            if event.total_cost_usd is not None:
                tokens += f" · ${event.total_cost_usd:.4f} so far (estimate)"
            return f"turn {event.turn}: {event.actions} action(s){tokens}{text}"
        case ev.SafetyChecksRaised():
            codes = ", ".join(visible(c.get("code", "")) for c in event.checks)
            return f"  safety checks raised: {codes}"
        case ev.TurnRefused():
            return f"  turn {event.turn} REFUSED whole: {visible(event.reason)}"
        case ev.ActionProposed() if event.error:
            return f"  #{event.index + 1} malformed {visible(event.raw_kind) or 'action'}: {visible(event.error)}"
        case ev.PolicyVerdict() if event.verdict != "allow":
            return f"  #{event.index + 1} {event.verdict.upper()}: {visible(event.reason)}"
        case ev.DecisionMade() if event.by != "policy":
            return f"  #{event.index + 1} decision: {event.decision} (by {visible(event.by)})"
        case ev.Outcome():
            return f"  #{event.index + 1} {event.status}: {visible(event.message, limit=200)}"
        case ev.Killed():
            return f"KILL SWITCH pressed by {visible(event.by)} while {event.during}"
        case ev.ErrorRaised():
            return f"error in {event.where}: {visible(event.message)}"
        case ev.Note():
            return visible(event.message)
        case ev.Egress() if not event.allowed:
            return f"  egress refused: {visible(event.method)} {visible(event.host)}:{event.port}"
        case ev.VerificationDone():
            return (
                f"verification by {visible(event.verifier)}: {'PASSED' if event.passed else 'FAILED'} · "
                f"{visible(event.detail)}"
            )
        case ev.Cleanup() if not event.ok:
            return f"cleanup problem: {visible(event.detail)}"
        case ev.RunEnded():
            return (
                f"run ended: {event.status} · {visible(event.reason)} · {event.turns} turn(s), "
                f"{event.steps} step(s), {event.executed} executed"
            )
    return None


def printer(stream: TextIO) -> Callable[[ev.Stamped], None]:
    """A run's listener that prints its events as lines; a refused egress host is printed once (browsers
    retry in the background)."""
    refused: set[tuple[str, int]] = set()

    def listen(stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.Egress) and not event.allowed:
            if (event.host, event.port) in refused:
                return
            refused.add((event.host, event.port))
        line = line_for(event)
        if line is not None:
            stream.write(line + "\n")
            stream.flush()

    return listen
