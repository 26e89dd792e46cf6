"""``cua-tui drill add``: a drill made from a recorded decision of any run (core/drills.py). What the reviewer
was asked then is what the drill shows: the screen on record with the request, the action (a typing
decision's text given again, checked against the record's SHA-256: a real request shows its text, so a
drill must), the policy's reason and rule, the model's words of that turn, the safety checks raised. It is
added to a library folder: its screen as a PNG, its entry in drills.json, the library read back whole."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import events as ev
from ..core.actions import ActionError, Kind, action_of_record
from ..core.drills import LIBRARY_FILE, Drill, DrillError, drill_of, entry_of, load_library, typed_matches
from ..core.run_view import RunView
from ..core.safeio import FileProblem, read_small_file
from ..core.text import one_line, visible
from ..core.values import Answer
from . import write_atomic
from .source import Run


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision request of a run, numbered from 1 in chain order."""

    number: int
    request: ev.DecisionRequested
    proposal: ev.ActionProposed | None
    verdict: ev.PolicyVerdict | None
    words: str
    screen: str  # the SHA-256 of the screen shown with it ("" when none is on record)
    checks: tuple[dict[str, Any], ...]
    focused: tuple[int, int] | None = None  # the field typing went to then (core/focus.py)

    @property
    def line(self) -> str:
        what = self.proposal.summary if self.proposal is not None else self.request.subject
        return visible(
            f"{self.number:3}  turn {self.request.turn} #{self.request.index + 1}  {what} · {self.request.reason}",
            limit=160,
        )


def decisions(run: Run) -> list[Decision]:
    """The decision requests of ``run`` with what each showed: its proposal, its verdict, the turn's words, its
    screen (the one a person's answer names, else the latest before it), its safety checks."""
    found: list[Decision] = []
    words: dict[int, str] = {}
    proposals: dict[tuple[int, int], ev.ActionProposed] = {}
    verdicts: dict[tuple[int, int], ev.PolicyVerdict] = {}
    checks: dict[int, tuple[dict[str, Any], ...]] = {}
    answered: dict[tuple[int, int], str] = {}
    latest = ""
    pending: list[tuple[ev.DecisionRequested, str, tuple[int, int] | None]] = []
    view = RunView()  # the focus as the run had it (its clicks and what each did)
    for stamped in run.stamped:
        event = stamped.event
        with contextlib.suppress(Exception):  # a view is for people: a record it cannot fold changes no decision
            view.apply(stamped)
        match event:
            case ev.ModelTurn():
                words[event.turn] = event.text if isinstance(event.text, str) else ""
            case ev.ActionProposed():
                proposals[(event.turn, event.index)] = event
            case ev.PolicyVerdict():
                verdicts[(event.turn, event.index)] = event
            case ev.SafetyChecksRaised():
                checks[event.turn] = tuple(c for c in event.checks[:20] if isinstance(c, dict))
            case ev.ScreenCaptured():
                latest = event.sha256 if isinstance(event.sha256, str) else latest
            case ev.DecisionRequested():
                pending.append((event, latest, view.focused))
            case ev.DecisionMade() if isinstance(event.screen, str) and event.screen:
                answered[(event.turn, event.index)] = event.screen
    for number, (request, screen, focused) in enumerate(pending, 1):
        key = (request.turn, request.index)
        found.append(Decision(number, request, proposals.get(key), verdicts.get(key), words.get(request.turn, ""),
                              answered.get(key, screen), checks.get(request.turn, ()), focused))  # fmt: skip
    return found


def make_drill(
    run: Run, decision: Decision, *, answer: Answer, why: str, missed: str = "", text: str = "", drill_id: str = ""
) -> tuple[Drill, bytes]:
    """The drill ``decision`` makes, with its screen's PNG; DrillError saying why it cannot be made."""
    request = decision.request
    if request.subject not in ("action", "safety_check"):
        what = visible(str(request.subject), limit=20)
        raise DrillError(f"decision {decision.number} is a {what}: an action's or a safety check's makes a drill")
    action = None
    proposal = decision.proposal
    if request.subject == "action":
        if proposal is None or not isinstance(proposal.action, dict):
            raise DrillError(f"decision {decision.number}: its action is not on record")
        record = proposal.action
        if record.get("kind") == "type":
            if not text:
                raise DrillError(f"decision {decision.number} types text: give it with --text (a drill shows its text)")
            if not typed_matches(record, text):
                raise DrillError(
                    f"decision {decision.number}: --text is not the text on record (its length and SHA-256 differ)"
                )
        elif text:
            raise DrillError(f"decision {decision.number} types no text: --text is not for it")
        try:
            action = action_of_record(record, text)
        except ActionError as exc:
            raise DrillError(f"decision {decision.number}: {exc.reason}") from None
    if not decision.screen:
        raise DrillError(f"decision {decision.number}: no screen is on record with it")
    screen = run.screen(decision.screen)
    if screen.png is None:
        raise DrillError(f"decision {decision.number}: its screen cannot be used ({screen.refused})")
    verdict = decision.verdict
    name = drill_id or re.sub(r"[^a-z0-9_.-]", "-", f"{run.run_id}-{decision.number}".lower())[:64]
    entry: dict[str, Any] = {
        "id": name, "kind": request.subject, "answer": answer.value, "why": why, "missed": missed,
        "reason": request.reason if isinstance(request.reason, str) else "",
        "rule": verdict.rule if verdict is not None and isinstance(verdict.rule, str) else "",
        "words": decision.words[:2000], "screen": f"{name}.png",
        "source": f"run {run.run_id}, decision {decision.number}",
    }  # fmt: skip
    if action is not None:
        entry["action"], entry["text"] = action.to_record(), text
        if decision.focused is not None and action.kind is Kind.TYPE:
            entry["focus"] = list(decision.focused)  # where its typing goes on its screen
    if decision.checks:
        entry["checks"] = [{k: str(c.get(k, ""))[:500] for k in ("id", "code", "message")} for c in decision.checks]
    png = screen.png
    # read back as the library reads a drill, every field checked
    return drill_of(entry, "the new drill", lambda _name: png), png


def add_to_library(folder: Path, drill: Drill, png: bytes) -> Path:
    """``drill`` added to the library in ``folder`` (made if missing): its PNG, then drills.json rewritten
    whole; the library is read back to make sure it holds. Returns the manifest's path."""
    existing = load_library(folder)
    if any(d.id == drill.id for d in existing):
        raise DrillError(f"the library {visible(str(folder), limit=200)} already has a drill {drill.id}: give --id")
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / LIBRARY_FILE
    entries: list[Any] = []
    if manifest.exists():
        try:
            entries = json.loads(read_small_file(manifest, 1024 * 1024, "a drill library"))["drills"]
        except (FileProblem, ValueError, KeyError, TypeError) as exc:
            raise DrillError(f"drill library {visible(str(manifest), limit=200)}: {one_line(str(exc), 160)}") from None
    screen = f"{drill.id}.png"
    write_atomic(folder / screen, png)
    entries.append(entry_of(drill, screen, drill.action.text if drill.action is not None else ""))
    write_atomic(manifest, (json.dumps({"drills": entries}, indent=2, ensure_ascii=False) + "\n").encode())
    load_library(folder)
    return manifest


__all__ = ["Decision", "add_to_library", "decisions", "make_drill"]
