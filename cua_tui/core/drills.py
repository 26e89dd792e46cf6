"""Drills (DESIGN.md, "Drills"): planted decisions that look like real ones, put before a real request of the
same run at a known rate, never acted on, and scored per analyst, as airport screening projects fictional
threats into real bags to measure each screener's vigilance.

A drill is its own type with no path to a desktop: what the reviewer is shown is built from it
(``Drill.shown``), their answer is compared with the drill's right answer, and the supervisor records that in
the chain (a ``drill`` event) and goes on to the real request it held back. The library is a folder of drills
(``drills.json`` and their screens as PNGs) read strictly: a colleague's or a download's folder is untrusted.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import events as ev
from . import safeio, strictjson
from .actions import Action, ActionError, Kind, action_of_record, text_sha256
from .imaging import png_size
from .text import one_line, visible
from .values import Answer, DecisionRequest, Frame, SafetyCheck

LIBRARY_FILE = "drills.json"
MAX_LIBRARY_BYTES = 1024 * 1024
MAX_DRILLS = 500
MiB = 1024 * 1024
MAX_SCREEN_BYTES = 4 * MiB
# all of a library's screens together (each run holds its library's in memory)
MAX_SCREENS_BYTES = 64 * MiB
ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
# the answer a reviewer gave a drill, as its record names it
ANSWERS = ("approve", "reject", "takeover", "kill", "none")
# what stops a threat: a rejection, taking the desktop, the kill switch
STOPS = ("reject", "takeover", "kill")


class DrillError(ValueError):
    """A library, a drill or a drill's settings that cannot be used: one line, naming what and where."""


@dataclass(frozen=True, slots=True)
class Drill:
    """One planted decision: what it shows (the kind of request, its screen, its action with any typed text,
    the policy's reason and rule, the model's words) and what is right (``answer``, ``why``; ``missed``: what
    would have happened had a threat been approved)."""

    id: str
    kind: Literal["action", "safety_check"]
    answer: Answer
    why: str
    reason: str
    rule: str
    words: str
    frame: Frame = field(repr=False)
    action: Action | None = field(default=None, repr=False)
    checks: tuple[SafetyCheck, ...] = ()
    missed: str = ""
    source: str = ""  # where it was made from (a lab, a run)
    # the field its typing goes to on its screen (its moment's focus), so that the reviewer reads that field
    focus: tuple[int, int] | None = None

    @property
    def benign(self) -> bool:
        """Its right answer is to approve (a reviewer who rejects everything scores badly on these)."""
        return self.answer is Answer.APPROVE

    def shown(self, real: DecisionRequest) -> DecisionRequest:
        """What the reviewer sees in front of ``real``: the drill in its place (the real request's run, turn,
        position, call and deadline), nothing of the real request's own."""
        return DecisionRequest(
            real.run_id, real.turn, real.index, real.call_id, self.kind, self.reason,
            action=self.action, safety_checks=self.checks, frame=self.frame, deadline_s=real.deadline_s,
            gated=real.gated if self.kind == "safety_check" else (),
        )  # fmt: skip

    def caught(self, answer: str) -> bool | None:
        """Whether ``answer`` caught this drill's threat (None for a benign drill: there was none to catch)."""
        if self.benign:
            return None
        return answer in STOPS

    def false_alarm(self, answer: str) -> bool | None:
        """Whether ``answer`` rejected a benign drill (None for a threat)."""
        if not self.benign:
            return None
        return answer in STOPS


@dataclass(frozen=True, slots=True)
class DrillPlan:
    """When a drill comes: before each real request with probability ``rate`` (``drill_every N``: 1/N), from
    ``library``, the random source seeded per run (a test's, or the system's)."""

    rate: float
    library: tuple[Drill, ...]
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def before(self, real: DecisionRequest, last: str = "") -> Drill | None:
        """The drill to show before ``real``, if one is due (never the one shown last, if there is another),
        of those that could stand where it is (``fits``)."""
        if not self.library or real.kind not in ("action", "safety_check") or self.rng.random() >= self.rate:
            return None
        fitting = [d for d in self.library if fits(d, real)]
        choices = [d for d in fitting if d.id != last] or fitting
        return self.rng.choice(choices) if choices else None


def fits(drill: Drill, real: DecisionRequest) -> bool:
    """Whether ``drill`` can stand in front of ``real`` as a request of that place would: an action's in front
    of an action of its kind (its row replaces that row of the batch, whose proposals the audit pane lists: a
    click for a click, typing for typing), the model's safety checks in front of its safety checks (the
    actions they gate are the batch's, as its pane shows them)."""
    if drill.kind != real.kind:
        return False
    if drill.action is None or real.action is None:
        return drill.action is None and real.action is None
    return drill.action.kind is real.action.kind


def rate_of(drill_rate: float | None, drill_every: float | None, where: str) -> float:
    """The chance of a drill before each real request, from one of the two settings (0: off)."""
    if drill_rate is not None and drill_every is not None:
        raise DrillError(f"{where}: give drill_rate or drill_every, not both")
    if drill_rate is not None:
        if not (isinstance(drill_rate, int | float) and math.isfinite(drill_rate) and 0 <= drill_rate <= 1):
            raise DrillError(f"{where}: drill_rate is a chance from 0 to 1")
        return float(drill_rate)
    if drill_every is not None:
        if not (isinstance(drill_every, int | float) and math.isfinite(drill_every) and 1 <= drill_every <= 10**6):
            raise DrillError(f"{where}: drill_every is a number of requests from 1 to 1,000,000")
        return 1.0 / float(drill_every)
    return 0.0


# ------------------------------------------------------------------------------------------------
# What a drill's answer records (the ``drill`` event)
# --------------------------------------------------------------------------------------------------
def answered(
    drill: Drill, real: DecisionRequest, answer: str, by: str, operator: str, shown_ms: int | None
) -> ev.DrillAnswered:
    """The chain's record of one drill: which, what was shown, the answer and whether it was right."""
    action = drill.action.to_record() if drill.action is not None else None
    return ev.DrillAnswered(
        real.turn, real.index, drill.id, drill.kind, answer, drill.answer.value,
        caught=drill.caught(answer), false_alarm=drill.false_alarm(answer), by=by, operator=operator,
        screen=drill.frame.sha256, action=action, shown_ms=shown_ms, why=drill.why, missed=drill.missed,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Scores: the catch rate with its 95 % interval (Wilson), false alarms on benign drills
# --------------------------------------------------------------------------------------------------
Z95 = 1.959963984540054


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None with no trials)."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # at 0 or all, the bound is exactly 0 or 1 (floating point leaves it a hair inside)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


@dataclass
class DrillScore:
    """One operator's drills: shown, caught and missed (threats), false alarms (benign), and their times."""

    operator: str
    shown: int = 0
    threats: int = 0
    caught: int = 0
    benign: int = 0
    false_alarms: int = 0
    drill_ms: list[int] = field(default_factory=list)

    @property
    def missed(self) -> int:
        return self.threats - self.caught

    @property
    def catch_rate(self) -> float | None:
        return self.caught / self.threats if self.threats else None

    @property
    def catch_interval(self) -> tuple[float, float] | None:
        return wilson(self.caught, self.threats)

    @property
    def false_alarm_rate(self) -> float | None:
        return self.false_alarms / self.benign if self.benign else None

    def add(self, event: ev.DrillAnswered) -> None:
        self.shown += 1
        if event.caught is not None:
            self.threats += 1
            self.caught += bool(event.caught)
        elif event.false_alarm is not None:
            self.benign += 1
            self.false_alarms += bool(event.false_alarm)
        if type(event.shown_ms) is int and 0 <= event.shown_ms <= 7 * 24 * 3600 * 1000:
            self.drill_ms.append(event.shown_ms)


def drill_scores(events: Iterable[ev.Event]) -> dict[str, DrillScore]:
    """Each operator's drill score from a run's (or many runs') events: a person's by their operator name,
    an approver's (a rule, a command) by its ``by``."""
    scores: dict[str, DrillScore] = {}
    for event in events:
        if isinstance(event, ev.DrillAnswered) and isinstance(event.by, str):
            who = event.operator if isinstance(event.operator, str) and event.operator else event.by
            scores.setdefault(who, DrillScore(who)).add(event)
    return scores


# ------------------------------------------------------------------------------------------------
# The library: drills.json beside the screens, read strictly
# --------------------------------------------------------------------------------------------------
def load_library(folder: Path) -> tuple[Drill, ...]:
    """The drills of ``folder`` (``drills.json`` and the PNGs it names); DrillError naming the first thing
    that cannot be used. A missing folder is an empty library."""
    manifest = folder / LIBRARY_FILE
    if not folder.exists():
        return ()
    try:
        raw = safeio.read_small_file(manifest, MAX_LIBRARY_BYTES, "a drill library")
        data = strictjson.loads(raw)
    except (safeio.FileProblem, ValueError) as exc:
        raise DrillError(f"drill library {visible(str(manifest), limit=200)}: {one_line(str(exc), 200)}") from None
    entries = data.get("drills") if isinstance(data, dict) else None
    if not isinstance(entries, list) or len(entries) > MAX_DRILLS:
        raise DrillError(f"drill library {visible(str(manifest), limit=200)}: drills is a list of at most {MAX_DRILLS}")
    held = 0

    def read_screen(name: str) -> bytes:
        # every screen is held in memory for the run: the library's are bounded together, not only each
        nonlocal held
        data = safeio.read_small_file(folder / name, MAX_SCREEN_BYTES, "a drill's screen")
        held += len(data)
        if held > MAX_SCREENS_BYTES:
            raise DrillError(
                f"drill library {visible(str(folder), limit=200)}: its screens pass {MAX_SCREENS_BYTES // MiB} MiB"
            )
        return data

    drills = [drill_of(entry, f"{manifest.name} drill {n + 1}", read_screen) for n, entry in enumerate(entries)]
    ids = [d.id for d in drills]
    if len(set(ids)) != len(ids):
        raise DrillError(f"drill library {visible(str(manifest), limit=200)}: a drill id is used twice")
    return tuple(drills)


_FIELDS = {"id", "kind", "answer", "why", "missed", "reason", "rule", "words", "screen", "action", "text",
           "checks", "source", "focus"}  # fmt: skip


def drill_of(entry: Any, where: str, read_screen: Callable[[str], bytes]) -> Drill:
    """One drill of a library, every field checked; ``read_screen`` gives the bytes of the PNG it names."""
    if not isinstance(entry, dict):
        raise DrillError(f"{where}: not an object")
    extra = set(entry) - _FIELDS
    if extra:
        raise DrillError(f"{where}: unknown field(s) {', '.join(sorted(visible(k, limit=20) for k in extra))}")
    drill_id = entry.get("id")
    if not isinstance(drill_id, str) or not ID.fullmatch(drill_id):
        raise DrillError(f"{where}: id is 1 to 64 lowercase letters, digits, '.', '_' or '-'")
    where = f"{where} ({drill_id})"
    kind = entry.get("kind", "action")
    if kind not in ("action", "safety_check"):
        raise DrillError(f"{where}: kind is action or safety_check")
    answer = Answer.APPROVE if entry.get("answer") == "approve" else Answer.REJECT
    if entry.get("answer") not in ("approve", "reject"):
        raise DrillError(f"{where}: answer is approve or reject")
    texts = {}
    for name, limit in (("why", 400), ("missed", 400), ("reason", 300), ("rule", 80), ("words", 2000), ("source", 200)):
        value = entry.get(name, "")
        if not isinstance(value, str) or len(value) > limit:
            raise DrillError(f"{where}: {name} is text of at most {limit} characters")
        texts[name] = value
    if not texts["why"].strip():
        raise DrillError(f"{where}: why says what is right and why")
    action = None
    if entry.get("action") is not None:
        text = entry.get("text", "")
        if not isinstance(text, str):
            raise DrillError(f"{where}: text is the typed text")
        try:
            action = action_of_record(entry["action"], text)
        except ActionError as exc:
            raise DrillError(f"{where}: {exc.reason}") from None
    elif kind == "action":
        raise DrillError(f"{where}: an action drill needs its action")
    checks = []
    for check in entry.get("checks") or []:
        if not isinstance(check, dict) or not all(isinstance(check.get(k), str) for k in ("id", "code", "message")):
            raise DrillError(f"{where}: each check is {{id, code, message}}")
        checks.append(SafetyCheck(check["id"][:80], check["code"][:80], check["message"][:500]))
    if kind == "safety_check" and not checks:
        raise DrillError(f"{where}: a safety-check drill needs its checks")
    frame = _screen(entry.get("screen"), where, read_screen)
    focus = entry.get("focus")
    if focus is not None:
        if not (isinstance(focus, list) and len(focus) == 2 and all(type(c) is int for c in focus)
                and 0 <= focus[0] < frame.width and 0 <= focus[1] < frame.height):  # fmt: skip
            raise DrillError(f"{where}: focus is [x, y] on its screen")
        focus = (focus[0], focus[1])
    return Drill(drill_id, kind, answer, texts["why"], texts["reason"], texts["rule"], texts["words"], frame,
                 action, tuple(checks), texts["missed"], texts["source"], focus)  # fmt: skip


def _screen(name: Any, where: str, read_screen: Callable[[str], bytes]) -> Frame:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}\.png", name):
        raise DrillError(f"{where}: screen names a PNG in the library's folder")
    try:
        data = read_screen(name)
        width, height = png_size(data)
    except (safeio.FileProblem, ValueError) as exc:
        raise DrillError(f"{where}: screen {name}: {one_line(str(exc), 160)}") from None
    return Frame(data, width, height, hashlib.sha256(data).hexdigest())


def entry_of(drill: Drill, screen: str, text: str = "") -> dict[str, Any]:
    """A drill as drills.json holds it (its screen's file name given); typed text only where it must be shown."""
    entry: dict[str, Any] = {"id": drill.id, "kind": drill.kind, "answer": drill.answer.value, "why": drill.why,
                             "missed": drill.missed, "reason": drill.reason, "rule": drill.rule, "words": drill.words,
                             "screen": screen, "source": drill.source}  # fmt: skip
    if drill.action is not None:
        entry["action"] = drill.action.to_record()
        if drill.action.kind is Kind.TYPE:
            entry["text"] = drill.action.text
    if drill.checks:
        entry["checks"] = [{"id": c.id, "code": c.code, "message": c.message} for c in drill.checks]
    if drill.focus is not None:
        entry["focus"] = list(drill.focus)
    return entry


def typed_matches(record: Mapping[str, Any], text: str) -> bool:
    """Whether ``text`` is the typed text a record's length and SHA-256 describe."""
    return record.get("text_len") == len(text) and record.get("text_sha256") == text_sha256(text)


# how every reveal begins (a fleet's front end knows a drill's row closed by it)
REVEALED = "That was a drill"


def revealed(event: ev.DrillAnswered) -> str:
    """What the reviewer is told right after answering a drill, from its record: it was a drill, what was
    right and why, and whether they caught it (a miss: what would have happened)."""
    if event.caught is True:
        verdict = "caught"
    elif event.caught is False:
        verdict = f"missed. Had it been real: {event.missed or 'it would have run'}"
    elif event.false_alarm:
        verdict = "a false alarm: it was safe"
    else:
        verdict = "right: nothing was wrong with it"
    said = f"{REVEALED}: the right answer was {event.right}, {event.why}. You: {event.answer}, {verdict}."
    return one_line(visible(said, limit=600), 600)


# ------------------------------------------------------------------------------------------------
# A team's drills: an analyst's answer travels to the run's worker as a row, read back strictly
# --------------------------------------------------------------------------------------------------
# a drill answer's record as an analyst sends it (the schema holds the row to this)
MAX_SENT_BYTES = 16 * 1024
_SENT = ("drill", "subject", "answer", "right", "screen", "action", "shown_ms", "why", "missed")


def sent(event: ev.DrillAnswered) -> dict[str, Any]:
    """What an analyst's front end sends of a drill it showed and scored: the record without its place, who
    and the verdicts (the worker takes the place from the request, who from the server, and works the verdicts
    out again)."""
    record = event.to_record()
    return {key: record.get(key) for key in _SENT}


def answered_of_row(record: Any, turn: int, index: int, by: str, operator: str) -> ev.DrillAnswered:
    """A drill answer another analyst's front end wrote (``sent``), as the chain records it: every field
    checked and bounded, the verdicts worked out from the answer and the right one, never taken as written;
    DrillError naming the first field that cannot be used."""
    if not isinstance(record, dict) or set(record) - set(_SENT):
        raise DrillError("a drill answer is an object of the fields a front end sends")
    drill_id, subject, answer, right = (record.get(k) for k in ("drill", "subject", "answer", "right"))
    if not isinstance(drill_id, str) or not ID.fullmatch(drill_id):
        raise DrillError("its drill id is not one a library may hold")
    if subject not in ("action", "safety_check") or answer not in ANSWERS or right not in ("approve", "reject"):
        raise DrillError("its subject, answer or right answer is not one a drill has")
    screen = record.get("screen") or ""
    if not isinstance(screen, str) or (screen and not re.fullmatch(r"[0-9a-f]{64}", screen)):
        raise DrillError("its screen is not a SHA-256")
    action = record.get("action")
    if action is not None and not _flat_record(action):
        raise DrillError("its action is not an action's record")
    shown_ms = record.get("shown_ms")
    if shown_ms is not None and not (type(shown_ms) is int and 0 <= shown_ms <= 7 * 24 * 3600 * 1000):
        raise DrillError("its time on screen is not a number of milliseconds")
    texts = [record.get(k) or "" for k in ("why", "missed")]
    if not all(isinstance(t, str) and len(t) <= 400 for t in texts):
        raise DrillError("its why and missed are text of at most 400 characters")
    threat = right == "reject"
    return ev.DrillAnswered(
        turn, index, drill_id, subject, answer, right,
        caught=(answer in STOPS) if threat else None, false_alarm=None if threat else answer in STOPS,
        by=by, operator=operator, screen=screen, action=action, shown_ms=shown_ms, why=texts[0], missed=texts[1],
    )  # fmt: skip


def _flat_record(action: Any) -> bool:
    """An action's record as the chain keeps one: a kind and a few plain fields, never typed text itself."""
    return (
        isinstance(action, dict)
        and isinstance(action.get("kind"), str)
        and len(action) <= 16
        and "text" not in action
        and all(
            isinstance(k, str) and len(k) <= 32 and (v is None or isinstance(v, bool | int | float)
                                                      or (isinstance(v, str) and len(v) <= 200)
                                                      or (isinstance(v, list) and len(v) <= 64
                                                          and all(_plain(x) for x in v)))
            for k, v in action.items()
        )
    )  # fmt: skip


def _plain(item: Any) -> bool:
    """A list entry of an action's record: a key's name, a number, or a point of a path."""
    return isinstance(item, int | str) or (
        isinstance(item, list) and len(item) == 2 and all(type(c) is int for c in item)
    )
