"""Policy: a TOML file (or the built-in default) that classifies every action as allow, confirm or block.

The default follows the seeds: typing counts as transmission (confirm); Return, KP_Enter and ctrl+Return
confirm; system combinations (ctrl+alt+Delete, super, ctrl+alt+t, alt+F2, ...) are blocked; turns,
steps, wall clock, text length, waits and scrolls are capped; clicks inside marked regions confirm;
action kinds the policy does not list are withheld (blocked).

A broken file raises ``PolicyError`` whose message names the file and the line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from . import tomlfile
from .actions import MODIFIERS, Action, ActionError, Kind, parse_chord_text
from .allowlist import AllowListError, parse_entry
from .tomlfile import TomlDoc, TomlFileError
from .values import Verdict as Verdict


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's verdict on one action, with the rule that decided it and a reason for people."""

    verdict: Verdict
    reason: str
    rule: str
    # a click in a region marked as sending data out of the sandbox: never granted
    sends_out: bool = False


class PolicyError(TomlFileError):
    """A policy file that cannot be used. The message names the file and, where known, the line (and is
    made visible: core.tomlfile)."""


# a real policy is a few kilobytes; this bounds what a hostile file costs
MAX_POLICY_BYTES = 1024 * 1024
# any cap in [limits]: 31 years of seconds, a billion steps or dollars
MAX_LIMIT = 10**9


# ------------------------------------------------------------------------------------------------
# File schema (validated with msgspec; unknown keys are errors, so a typo never silently weakens
# policy)
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Limits:
    """The caps of a run. These defaults are the one source of the built-in policy's ``[limits]`` and of a
    file's missing keys (a test pins DEFAULT_POLICY_TOML to them)."""

    max_turns: int = 30
    max_steps: int = 200
    deadline_seconds: int = 1800
    max_text_length: int = 500
    max_wait_seconds: float = 10.0
    max_scroll: int = 15
    max_drag_points: int = 64
    max_tokens: int = 0  # 0: no cap
    max_cost_usd: float = 0.0  # 0: no cap
    # seconds a decision may wait for its answer before it is rejected (fails closed); 0: no deadline
    decision_timeout: float = 0.0
    # soft budgets (core/budgets.py): crossing one asks whether to go on; 0: none
    ask_at_cost_usd: float = 0.0
    ask_at_tokens: int = 0
    ask_at_steps: int = 0
    ask_at_seconds: int = 0


_DEFAULT_LIMITS = Limits()


class _Limits(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    max_turns: int = _DEFAULT_LIMITS.max_turns
    max_steps: int = _DEFAULT_LIMITS.max_steps
    deadline_seconds: int = _DEFAULT_LIMITS.deadline_seconds
    max_text_length: int = _DEFAULT_LIMITS.max_text_length
    max_wait_seconds: float = _DEFAULT_LIMITS.max_wait_seconds
    max_scroll: int = _DEFAULT_LIMITS.max_scroll
    max_drag_points: int = _DEFAULT_LIMITS.max_drag_points
    max_tokens: int = _DEFAULT_LIMITS.max_tokens
    max_cost_usd: float = _DEFAULT_LIMITS.max_cost_usd
    decision_timeout: float = _DEFAULT_LIMITS.decision_timeout
    ask_at_cost_usd: float = _DEFAULT_LIMITS.ask_at_cost_usd
    ask_at_tokens: int = _DEFAULT_LIMITS.ask_at_tokens
    ask_at_steps: int = _DEFAULT_LIMITS.ask_at_steps
    ask_at_seconds: int = _DEFAULT_LIMITS.ask_at_seconds


class _Actions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    allow: list[str] = msgspec.field(default_factory=list)
    confirm: list[str] = msgspec.field(default_factory=list)
    block: list[str] = msgspec.field(default_factory=list)


class _Keys(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    confirm: list[str] = msgspec.field(default_factory=list)
    block: list[str] = msgspec.field(default_factory=list)


class _Region(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    x: int
    y: int
    width: int
    height: int
    verdict: str = "confirm"
    reason: str = ""
    sends_out: bool = False


class _Network(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    allow_domains: list[str] = msgspec.field(default_factory=list)


class _Approvers(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    rule: str
    roles: list[str] | None = None
    quorum: int = 1


class _PolicyFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = 1
    name: str = "custom"
    description: str = ""
    limits: _Limits = msgspec.field(default_factory=_Limits)
    actions: _Actions | None = None
    keys: _Keys | None = None
    regions: list[_Region] = msgspec.field(default_factory=list)
    network: _Network = msgspec.field(default_factory=_Network)
    approvers: list[_Approvers] = msgspec.field(default_factory=list)


DEFAULT_ALLOWED = (
    Kind.CLICK,
    Kind.DOUBLE_CLICK,
    Kind.TRIPLE_CLICK,
    Kind.DRAG,
    Kind.MOVE,
    Kind.SCROLL,
    Kind.KEYPRESS,
    Kind.WAIT,
    Kind.SCREENSHOT,
    Kind.CURSOR_POSITION,
    Kind.ZOOM,
)
DEFAULT_CONFIRMED = (Kind.TYPE,)
# Raw button presses and long key holds can leave input stuck down and make a drag unseen: withheld.
DEFAULT_CONFIRM_KEYS = ("Return", "KP_Enter", "ctrl+Return")
DEFAULT_BLOCK_KEYS = (
    "ctrl+alt+Delete",
    "ctrl+alt+BackSpace",
    "super",
    "ctrl+alt+t",
    "alt+F2",
    "alt+F4",
    "ctrl+alt+F1",
    "ctrl+alt+F2",
    "ctrl+alt+F3",
    "ctrl+alt+F4",
    "ctrl+alt+F5",
    "ctrl+alt+F6",
    "ctrl+alt+F7",
    "ctrl+shift+Escape",
    "ctrl+shift+i",
    "ctrl+shift+j",
    "F12",
)

KIND_REASONS = {
    Kind.TYPE: "typing counts as transmission: the text can leave the sandbox",
}
KEY_REASONS = {
    "Return": "Return usually submits a form or sends a message",
    "KP_Enter": "Enter usually submits a form or sends a message",
    "ctrl+Return": "ctrl+Return usually sends a message",
    "super": "the super key opens the system menu or launcher",
    "ctrl+alt+Delete": "a system key combination (log out / restart)",
    "ctrl+alt+t": "opens a terminal outside the browser",
    "alt+F2": "opens a run-command dialog",
    "alt+F4": "closes the window",
    "ctrl+shift+i": "opens the browser's developer tools",
    "ctrl+shift+j": "opens the browser's developer tools",
    "F12": "opens the browser's developer tools",
}


@dataclass(frozen=True, slots=True)
class Region:
    name: str
    x: int
    y: int
    width: int
    height: int
    verdict: Verdict
    reason: str
    # the control sends data out of the sandbox: asked every time, never grouped
    sends_out: bool = False

    def contains(self, point: tuple[int, int]) -> bool:
        px, py = point
        return self.x <= px < self.x + self.width and self.y <= py < self.y + self.height


# A team's queue (schema version 4) sets who may answer what per policy rule or per tier; a task's policy
# may only narrow that (fewer roles, a higher quorum): ``[[approvers]]``, docs/team/rules.md
APPROVER_TIERS = ("safety_check", "region", "transmission", "budget", "other")
APPROVER_KEY_RE = re.compile(rf"^(tier:({'|'.join(APPROVER_TIERS)})|(?!tier:)[A-Za-z0-9_.:+-]{{1,200}})$")
APPROVER_ROLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$-]{0,62}$")
MAX_QUORUM = 5


@dataclass(frozen=True, slots=True)
class Approvers:
    """A task's narrowing of a team's rule for one policy rule or tier (``tier:transmission``): the roles
    (None: as the team's rule says) and the quorum (at least the rule's). On one machine it does nothing."""

    rule: str
    roles: tuple[str, ...] | None = None
    quorum: int = 1


def approvers_key(rule: str, tier_label: str) -> tuple[str, str]:
    """The keys a request's rule is found by: its policy rule, then its tier (the queue's label)."""
    return rule, f"tier:{tier_label.replace(' ', '_')}"


@dataclass(frozen=True)
class Policy:
    """An immutable, validated policy. Build with ``Policy.default()``, ``load`` or ``from_toml``."""

    name: str
    source: str  # "built-in" or the file path
    text: str  # the TOML it came from (hashed into run.json)
    limits: Limits
    allow: frozenset[Kind]
    confirm: frozenset[Kind]
    confirm_keys: tuple[str, ...]
    block_keys: tuple[str, ...]
    regions: tuple[Region, ...] = ()
    allow_domains: tuple[str, ...] = ()
    description: str = ""
    approvers: tuple[Approvers, ...] = ()
    _key_cache: dict[str, Decision | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def withheld(self) -> frozenset[Kind]:
        """Kinds that are neither allowed nor confirmed: blocked, and disabled where a vendor allows it."""
        return frozenset(Kind) - self.allow - self.confirm

    # ---------------------------------------------------------------------------------------------
    def classify(self, action: Action) -> Decision:
        """Verdict for one action. Block wins over confirm, confirm over allow."""
        kind = action.kind
        lim = self.limits
        if kind not in self.allow and kind not in self.confirm:
            return Decision(Verdict.BLOCK, f"{kind.value} actions are withheld by the policy", f"actions.{kind}")
        if kind is Kind.TYPE and len(action.text) > lim.max_text_length:
            return Decision(
                Verdict.BLOCK,
                f"typed text of {len(action.text)} characters exceeds the cap of {lim.max_text_length}",
                "limits.max_text_length",
            )
        if kind in (Kind.WAIT, Kind.HOLD_KEY) and action.duration_ms > lim.max_wait_seconds * 1000:
            return Decision(
                Verdict.BLOCK,
                f"{action.duration_ms / 1000:g} s exceeds the cap of {lim.max_wait_seconds:g} s",
                "limits.max_wait_seconds",
            )
        if kind is Kind.SCROLL and max(abs(action.scroll_x), abs(action.scroll_y)) > lim.max_scroll:
            return Decision(
                Verdict.BLOCK,
                f"scrolling {max(abs(action.scroll_x), abs(action.scroll_y))} notches "
                f"exceeds the cap of {lim.max_scroll}",
                "limits.max_scroll",
            )
        if kind is Kind.DRAG and len(action.path) > lim.max_drag_points:
            return Decision(
                Verdict.BLOCK,
                f"a drag of {len(action.path)} points exceeds the cap of {lim.max_drag_points}",
                "limits.max_drag_points",
            )
        found: list[Decision] = []
        chords = _chords_of(action)
        for chord in chords:
            hit = self._classify_chord(chord)
            if hit is not None:
                found.append(hit)
        if any(d.verdict is Verdict.BLOCK for d in found):
            return next(d for d in found if d.verdict is Verdict.BLOCK)
        for points in action.path or ((action.target,) if action.target else ()):
            for region in self.regions:
                if region.contains(points):
                    found.append(
                        Decision(region.verdict, region.reason, f"regions.{region.name}", sends_out=region.sends_out)
                    )
        if any(d.verdict is Verdict.BLOCK for d in found):
            return next(d for d in found if d.verdict is Verdict.BLOCK)
        if found:
            # the first names the rule; a region that sends data out marks the decision whatever
            # names it
            return dataclasses.replace(found[0], sends_out=any(d.sends_out for d in found))
        if kind in self.confirm:
            reason = KIND_REASONS.get(kind, f"{kind.value} actions need a decision under this policy")
            return Decision(Verdict.CONFIRM, reason, f"actions.{kind}")
        return Decision(Verdict.ALLOW, f"{kind.value} is allowed", f"actions.{kind}")

    def _classify_chord(self, chord: str) -> Decision | None:
        """Block patterns win over confirm patterns; among matches the most specific one names the rule."""
        if chord in self._key_cache:
            return self._key_cache[chord]
        result = None
        for verdict, patterns, fallback in (
            (Verdict.BLOCK, self.block_keys, "is blocked by the policy"),
            (Verdict.CONFIRM, self.confirm_keys, "needs a decision under this policy"),
        ):
            matches = [p for p in patterns if chord_matches(p, chord)]
            if matches:
                pattern = max(matches, key=lambda p: (p == chord, p.count("+")))
                reason = KEY_REASONS.get(pattern, f"{pattern} {fallback}")
                result = Decision(verdict, reason, f"keys.{verdict.value}:{pattern}")
                break
        self._key_cache[chord] = result
        return result

    def summary(self) -> list[str]:
        """Short lines describing the policy, for the help screen and `--help`."""
        lim = self.limits
        lines = [
            f"policy {self.name} ({self.source})",
            "allowed: " + ", ".join(sorted(self.allow - self.confirm)),
            "confirm: " + (", ".join(sorted(self.confirm)) or "-"),
            "withheld: " + (", ".join(sorted(self.withheld)) or "-"),
            "keys needing a decision: " + (", ".join(self.confirm_keys) or "-"),
            "blocked keys: " + (", ".join(self.block_keys) or "-"),
            f"limits: {lim.max_turns} turns, {lim.max_steps} steps, {lim.deadline_seconds} s, "
            f"text <= {lim.max_text_length}, wait <= {lim.max_wait_seconds:g} s, scroll <= {lim.max_scroll}",
            "decision deadline: "
            + (f"{lim.decision_timeout:g} s, then rejected" if lim.decision_timeout else "none (a decision waits)"),
        ]
        lines += [
            f"region {r.name}: {r.verdict} at {r.x},{r.y} {r.width}x{r.height}"
            + (" (sends data out)" if r.sends_out else "")
            for r in self.regions
        ]
        if self.allow_domains:
            lines.append("allowed domains: " + ", ".join(self.allow_domains))
        return lines

    # ---------------------------------------------------------------------------------------------
    @classmethod
    def default(cls) -> Policy:
        return cls.from_toml(DEFAULT_POLICY_TOML, source="built-in")

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        path = Path(path)
        text = tomlfile.read_text(
            path, f"policy file {path}", cap=MAX_POLICY_BYTES, what="a policy file", error=PolicyError
        )
        return cls.from_toml(text, source=str(path))

    @classmethod
    def from_toml(cls, text: str, source: str = "<policy>") -> Policy:
        parsed, doc = _read_policy_text(text, source)
        _check_limits(doc, parsed.limits)
        acts = parsed.actions or _Actions(
            allow=[k.value for k in DEFAULT_ALLOWED], confirm=[k.value for k in DEFAULT_CONFIRMED]
        )
        allow, confirm, block = (
            _kinds(doc, section, names)
            for section, names in (("allow", acts.allow), ("confirm", acts.confirm), ("block", acts.block))
        )
        both = (allow & confirm) | (allow & block) | (confirm & block)
        if both:
            raise doc.error(("actions",), "an action kind is listed twice: " + ", ".join(sorted(both)))
        keys = parsed.keys or _Keys(confirm=list(DEFAULT_CONFIRM_KEYS), block=list(DEFAULT_BLOCK_KEYS))
        # Checked before the keys: errors come in that order.
        regions = _regions(doc, parsed.regions)
        domains = _domains(doc, parsed.network.allow_domains)
        approvers = _approvers(doc, parsed.approvers)
        lim = parsed.limits
        return cls(
            name=parsed.name if source != "built-in" else "default",
            source=source,
            text=text,
            limits=Limits(**{f: getattr(lim, f) for f in lim.__struct_fields__}),
            allow=allow | confirm,
            confirm=confirm,
            confirm_keys=_patterns(doc, "confirm", keys.confirm),
            block_keys=_patterns(doc, "block", keys.block),
            regions=regions,
            allow_domains=domains,
            description=parsed.description,
            approvers=approvers,
        )

    def approvers_for(self, rule: str, tier_label: str) -> Approvers | None:
        """This policy's narrowing for a request of ``rule`` in the tier ``tier_label`` (None: none)."""
        by_rule, by_tier = approvers_key(rule, tier_label)
        found = {a.rule: a for a in self.approvers}
        return found.get(by_rule) or found.get(by_tier)

    def with_limits(self, **changes: Any) -> Policy:
        """A copy with some limits overridden (command-line flags)."""
        values = {f: getattr(self.limits, f) for f in Limits.__dataclass_fields__}
        values.update({k: v for k, v in changes.items() if v is not None})
        return dataclasses.replace(self, limits=Limits(**values), _key_cache={})

    def with_regions(self, regions: list[dict[str, Any]]) -> Policy:
        """A copy with extra marked regions (a lab's risky buttons), validated like a file's."""
        if not regions:
            return self
        # JSON strings and integers are valid TOML values: build the same text a file would hold.
        text = "".join(
            "[[regions]]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in region.items())
            for region in regions
        )
        extra = Policy.from_toml(text, source=f"{self.source} (regions)")
        return dataclasses.replace(self, regions=self.regions + extra.regions, _key_cache={})


# ------------------------------------------------------------------------------------------------
# Reading and validating a policy file, section by section (each error names the file and the line)
# --------------------------------------------------------------------------------------------------
def _read_policy_text(text: str, source: str) -> tuple[_PolicyFile, TomlDoc]:
    """The TOML text checked against the schema (sizes and nesting bounded first)."""
    doc = tomlfile.parse(text, f"policy file {source}", cap=MAX_POLICY_BYTES, error=PolicyError)
    parsed = doc.convert(_PolicyFile)
    if parsed.version != 1:
        raise doc.error(("version",), f"unsupported version {parsed.version} (expected 1)")
    return parsed, doc


# a deadline shorter than this could not be met by a person (the input guard alone takes a second)
MIN_DECISION_TIMEOUT = 2.0
MAX_DECISION_TIMEOUT = 86_400.0


def check_decision_timeout(seconds: float) -> str | None:
    """Why ``seconds`` is not a decision deadline (None: it is one, or 0: none)."""
    if seconds == 0:
        return None
    if not MIN_DECISION_TIMEOUT <= seconds <= MAX_DECISION_TIMEOUT:
        return f"decision_timeout must be 0 (none) or {MIN_DECISION_TIMEOUT:g} to {MAX_DECISION_TIMEOUT:g} seconds"
    return None


def _check_limits(doc: TomlDoc, lim: _Limits) -> None:
    for name in lim.__struct_fields__:
        value = getattr(lim, name)
        if isinstance(value, float) and not math.isfinite(value):
            # nan compares false with everything: a cap of nan would never fire.
            raise doc.error(("limits", name), f"{name} must be a finite number")
        if value > MAX_LIMIT:
            # beyond what a timer or a counter can use (a wait overflows past ~2**33 s)
            raise doc.error(("limits", name), f"{name} must be at most {MAX_LIMIT}")
    for name in ("max_turns", "max_steps", "deadline_seconds", "max_text_length", "max_scroll", "max_drag_points"):
        if getattr(lim, name) < 1:
            raise doc.error(("limits", name), f"{name} must be at least 1")
    if not 0 <= lim.max_wait_seconds <= 120:
        raise doc.error(("limits", "max_wait_seconds"), "must be between 0 and 120")
    if lim.max_tokens < 0 or lim.max_cost_usd < 0:
        raise doc.error(("limits",), "max_tokens and max_cost_usd must be >= 0")
    if (why := check_decision_timeout(lim.decision_timeout)) is not None:
        raise doc.error(("limits", "decision_timeout"), why)
    for ask, cap in (
        ("ask_at_cost_usd", "max_cost_usd"), ("ask_at_tokens", "max_tokens"), ("ask_at_steps", "max_steps"),
        ("ask_at_seconds", "deadline_seconds"),
    ):  # fmt: skip
        value, hard = getattr(lim, ask), getattr(lim, cap)
        if value < 0:
            raise doc.error(("limits", ask), f"{ask} must be >= 0 (0: no soft budget)")
        if value and hard and value >= hard:
            raise doc.error(("limits", ask), f"{ask} must be below {cap} ({hard:g}): the hard cap ends the run unasked")


def _kinds(doc: TomlDoc, section: str, names: list[str]) -> frozenset[Kind]:
    out = set()
    for i, name in enumerate(names):
        try:
            out.add(Kind(name))
        except ValueError:
            known = ", ".join(k.value for k in Kind)
            raise doc.error(("actions", section), f"unknown action kind {name!r}; known: {known}", item=i) from None
    return frozenset(out)


def _patterns(doc: TomlDoc, section: str, names: list[str]) -> tuple[str, ...]:
    out = []
    for i, name in enumerate(names):
        try:
            out.append(_pattern(name))
        except ActionError as exc:
            raise doc.error(("keys", section), f"{name!r}: {exc.reason}", item=i) from None
    return tuple(out)


def _regions(doc: TomlDoc, regions: list[_Region]) -> tuple[Region, ...]:
    out = []
    for i, reg in enumerate(regions):
        if reg.verdict not in ("confirm", "block"):
            problem = f"region {reg.name!r}: verdict must be 'confirm' or 'block'"
            raise doc.error(("regions", i, "verdict"), problem)
        if reg.width < 1 or reg.height < 1 or reg.x < 0 or reg.y < 0:
            problem = f"region {reg.name!r}: needs x, y >= 0 and width, height >= 1"
            raise doc.error(("regions", i, "width"), problem)
        reason = reg.reason or f"the click lands in the '{reg.name}' region"
        out.append(
            Region(reg.name, reg.x, reg.y, reg.width, reg.height, Verdict(reg.verdict), reason, sends_out=reg.sends_out)
        )
    return tuple(out)


def _approvers(doc: TomlDoc, entries: list[_Approvers]) -> tuple[Approvers, ...]:
    out: dict[str, Approvers] = {}
    for i, entry in enumerate(entries):
        if not APPROVER_KEY_RE.fullmatch(entry.rule):
            tiers = ", ".join(f"tier:{t}" for t in APPROVER_TIERS)
            problem = f"approvers: {entry.rule[:80]!r} is neither a policy rule (actions.type) nor a tier ({tiers})"
            raise doc.error(("approvers", i, "rule"), problem)
        if entry.rule in out:
            raise doc.error(("approvers", i, "rule"), f"approvers: {entry.rule!r} is listed twice")
        if entry.roles is not None:
            bad = [r for r in entry.roles if not APPROVER_ROLE_RE.fullmatch(r)]
            if bad or not entry.roles or len(entry.roles) > 50:
                problem = (
                    f"approvers: roles are 1 to 50 role names ({bad[0][:80]!r} is not one)"
                    if bad
                    else ("approvers: roles are 1 to 50 role names")
                )
                raise doc.error(("approvers", i, "roles"), problem)
        if not 1 <= entry.quorum <= MAX_QUORUM:
            raise doc.error(("approvers", i, "quorum"), f"approvers: quorum is 1 to {MAX_QUORUM}")
        roles = tuple(dict.fromkeys(entry.roles)) if entry.roles is not None else None
        out[entry.rule] = Approvers(entry.rule, roles, entry.quorum)
    return tuple(out.values())


def _domains(doc: TomlDoc, names: list[str]) -> tuple[str, ...]:
    # the proxy's own grammar: what passes here is what a run accepts
    domains: dict[str, None] = {}
    for i, domain in enumerate(names):
        try:
            domains.setdefault(parse_entry(domain).text)
        except AllowListError as exc:
            raise doc.error(("network", "allow_domains"), f"{domain!r} {exc.problem}", item=i) from None
    return tuple(domains)


def _pattern(text: str) -> str:
    """A key pattern: a chord, or a lone modifier meaning 'any chord with this modifier'."""
    return parse_chord_text(text)


def chord_matches(pattern: str, chord: str) -> bool:
    """True when ``chord`` presses ``pattern``: the same key with at least the pattern's modifiers
    (so shift+Return is still Return, ctrl+alt+shift+t still ctrl+alt+t), or, for a lone modifier
    pattern ("super"), any chord that uses it. Letters match regardless of case."""
    if pattern == chord:
        return True
    chord_parts = chord.split("+")
    if pattern in MODIFIERS:
        return pattern in chord_parts
    *pattern_mods, pattern_key = pattern.split("+")
    *chord_mods, chord_key = chord_parts
    if len(pattern_key) == 1 and len(chord_key) == 1:
        same_key = pattern_key.lower() == chord_key.lower()
    else:
        same_key = pattern_key == chord_key
    return same_key and set(pattern_mods) <= set(chord_mods)


def _chords_of(action: Action) -> list[str]:
    if action.chord:
        return [action.chord]
    if action.hold:
        # modifiers held during a click count as pressed keys (super+click opens menus)
        return ["+".join(action.hold)]
    return []


DEFAULT_POLICY_TOML = """\
# cua-tui built-in policy. Copy it with `cua-tui policy --print > policy.toml` and edit.
version = 1
name = "default"
description = "Typing and submitting need a decision; system keys are blocked; raw button presses are withheld."

[limits]
max_turns = 30            # model turns per run
max_steps = 200           # proposed actions per run
deadline_seconds = 1800   # wall clock for the whole run
max_text_length = 500     # characters per type action
max_wait_seconds = 10     # longest wait or key hold
max_scroll = 15           # wheel notches per scroll action
max_drag_points = 64      # points in one drag path
max_tokens = 0            # model tokens per run (0: no cap)
max_cost_usd = 0          # estimated model cost per run (0: no cap)
decision_timeout = 0      # seconds a decision waits before it is rejected (0: no deadline)
ask_at_cost_usd = 0       # soft budgets: crossing one asks whether to go on (0: none)
ask_at_tokens = 0
ask_at_steps = 0
ask_at_seconds = 0

[actions]
# Kinds not listed in any of the three lists are withheld (blocked).
allow = ["click", "double_click", "triple_click", "drag", "move", "scroll", "keypress", "wait",
         "screenshot", "cursor_position", "zoom"]
confirm = ["type"]        # typing counts as transmission
block = ["mouse_down", "mouse_up", "hold_key"]

[keys]
# Chords as "ctrl+alt+t"; a lone modifier ("super") matches any chord that uses it.
confirm = ["Return", "KP_Enter", "ctrl+Return"]
block = ["ctrl+alt+Delete", "ctrl+alt+BackSpace", "super", "ctrl+alt+t", "alt+F2", "alt+F4",
         "ctrl+alt+F1", "ctrl+alt+F2", "ctrl+alt+F3", "ctrl+alt+F4", "ctrl+alt+F5", "ctrl+alt+F6",
         "ctrl+alt+F7", "ctrl+shift+Escape", "ctrl+shift+i", "ctrl+shift+j", "F12"]

[network]
allow_domains = []        # the lab's own origin is always allowed; add more here or with --allow-domain
"""
