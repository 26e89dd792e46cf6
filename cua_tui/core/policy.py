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
import re
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

from .actions import MODIFIERS, Action, ActionError, Kind, parse_chord_text


class Verdict(StrEnum):
    ALLOW = "allow"
    CONFIRM = "confirm"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's verdict on one action, with the rule that decided it and a reason for people."""

    verdict: Verdict
    reason: str
    rule: str


class PolicyError(ValueError):
    """A policy file that cannot be used. The message names the file and, where known, the line."""


# ---------------------------------------------------------------------------------------------------
# File schema (validated with msgspec; unknown keys are errors, so a typo never silently weakens policy)
# ---------------------------------------------------------------------------------------------------
class _Limits(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    max_turns: int = 30
    max_steps: int = 200
    deadline_seconds: int = 1800
    max_text_length: int = 500
    max_wait_seconds: float = 10.0
    max_scroll: int = 15
    max_drag_points: int = 64
    max_tokens: int = 0
    max_cost_usd: float = 0.0


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


class _Network(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    allow_domains: list[str] = msgspec.field(default_factory=list)


class _PolicyFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = 1
    name: str = "custom"
    description: str = ""
    limits: _Limits = msgspec.field(default_factory=_Limits)
    actions: _Actions | None = None
    keys: _Keys | None = None
    regions: list[_Region] = msgspec.field(default_factory=list)
    network: _Network = msgspec.field(default_factory=_Network)


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

    def contains(self, point: tuple[int, int]) -> bool:
        px, py = point
        return self.x <= px < self.x + self.width and self.y <= py < self.y + self.height


@dataclass(frozen=True, slots=True)
class Limits:
    max_turns: int = 30
    max_steps: int = 200
    deadline_seconds: int = 1800
    max_text_length: int = 500
    max_wait_seconds: float = 10.0
    max_scroll: int = 15
    max_drag_points: int = 64
    max_tokens: int = 0  # 0: no cap
    max_cost_usd: float = 0.0  # 0: no cap


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
    _key_cache: dict[str, Decision | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def withheld(self) -> frozenset[Kind]:
        """Kinds that are neither allowed nor confirmed: blocked, and disabled where a vendor allows it."""
        return frozenset(Kind) - self.allow - self.confirm

    # -----------------------------------------------------------------------------------------------
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
                    found.append(Decision(region.verdict, region.reason, f"regions.{region.name}"))
        if any(d.verdict is Verdict.BLOCK for d in found):
            return next(d for d in found if d.verdict is Verdict.BLOCK)
        if found:
            return found[0]
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
        ]
        lines += [f"region {r.name}: {r.verdict} at {r.x},{r.y} {r.width}x{r.height}" for r in self.regions]
        if self.allow_domains:
            lines.append("allowed domains: " + ", ".join(self.allow_domains))
        return lines

    # -----------------------------------------------------------------------------------------------
    @classmethod
    def default(cls) -> Policy:
        return cls.from_toml(DEFAULT_POLICY_TOML, source="built-in")

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"policy file {path}: cannot read it ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise PolicyError(f"policy file {path}: not UTF-8 text") from None
        return cls.from_toml(text, source=str(path))

    @classmethod
    def from_toml(cls, text: str, source: str = "<policy>") -> Policy:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            where = re.search(r" \(at line (\d+), column (\d+)\)$", message)
            if where:
                message = message[: where.start()]
                raise PolicyError(
                    f"policy file {source}, line {where.group(1)}, column {where.group(2)}: invalid TOML: {message}"
                ) from None
            raise PolicyError(f"policy file {source}: invalid TOML: {message}") from None
        try:
            parsed = msgspec.convert(data, _PolicyFile, strict=True)
        except msgspec.ValidationError as exc:
            raise PolicyError(_locate_error(source, text, str(exc))) from None
        if parsed.version != 1:
            raise PolicyError(_at(source, text, ("version",), f"unsupported version {parsed.version} (expected 1)"))
        lim = parsed.limits
        for name in ("max_turns", "max_steps", "deadline_seconds", "max_text_length", "max_scroll", "max_drag_points"):
            if getattr(lim, name) < 1:
                raise PolicyError(_at(source, text, ("limits", name), f"{name} must be at least 1"))
        if not 0 <= lim.max_wait_seconds <= 120:
            raise PolicyError(_at(source, text, ("limits", "max_wait_seconds"), "must be between 0 and 120"))
        if lim.max_tokens < 0 or lim.max_cost_usd < 0:
            raise PolicyError(_at(source, text, ("limits",), "max_tokens and max_cost_usd must be >= 0"))

        def kinds(section: str, names: list[str]) -> frozenset[Kind]:
            out = set()
            for name in names:
                try:
                    out.add(Kind(name))
                except ValueError:
                    raise PolicyError(
                        _at(
                            source,
                            text,
                            ("actions", section),
                            f"unknown action kind {name!r}; known: " + ", ".join(k.value for k in Kind),
                        )
                    ) from None
            return frozenset(out)

        acts = parsed.actions or _Actions(
            allow=[k.value for k in DEFAULT_ALLOWED], confirm=[k.value for k in DEFAULT_CONFIRMED]
        )
        allow, confirm, block = kinds("allow", acts.allow), kinds("confirm", acts.confirm), kinds("block", acts.block)
        both = (allow & confirm) | (allow & block) | (confirm & block)
        if both:
            raise PolicyError(
                _at(source, text, ("actions",), "an action kind is listed twice: " + ", ".join(sorted(both)))
            )
        keys = parsed.keys or _Keys(confirm=list(DEFAULT_CONFIRM_KEYS), block=list(DEFAULT_BLOCK_KEYS))

        def patterns(section: str, names: list[str]) -> tuple[str, ...]:
            out = []
            for name in names:
                try:
                    out.append(_pattern(name))
                except ActionError as exc:
                    raise PolicyError(_at(source, text, ("keys", section), f"{name!r}: {exc.reason}")) from None
            return tuple(out)

        regions = []
        for i, reg in enumerate(parsed.regions):
            if reg.verdict not in ("confirm", "block"):
                raise PolicyError(
                    _at(
                        source,
                        text,
                        ("regions", i, "verdict"),
                        f"region {reg.name!r}: verdict must be 'confirm' or 'block'",
                    )
                )
            if reg.width < 1 or reg.height < 1 or reg.x < 0 or reg.y < 0:
                raise PolicyError(
                    _at(
                        source,
                        text,
                        ("regions", i, "width"),
                        f"region {reg.name!r}: needs x, y >= 0 and width, height >= 1",
                    )
                )
            reason = reg.reason or f"the click lands in the '{reg.name}' region"
            regions.append(Region(reg.name, reg.x, reg.y, reg.width, reg.height, Verdict(reg.verdict), reason))
        for domain in parsed.network.allow_domains:
            if not _DOMAIN_RE.match(domain):
                raise PolicyError(
                    _at(source, text, ("network", "allow_domains"), f"{domain!r} is not a host name or IP address")
                )
        return cls(
            name=parsed.name if source != "built-in" else "default",
            source=source,
            text=text,
            limits=Limits(**{f: getattr(lim, f) for f in lim.__struct_fields__}),
            allow=allow | confirm,
            confirm=confirm,
            confirm_keys=patterns("confirm", keys.confirm),
            block_keys=patterns("block", keys.block),
            regions=tuple(regions),
            allow_domains=tuple(d.lower() for d in parsed.network.allow_domains),
            description=parsed.description,
        )

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


_DOMAIN_RE = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*$"  # host, *.host
    r"|^\[?[0-9a-fA-F:.]+\]?$"  # IPv4 / IPv6
)


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
    if action.hold:  # modifiers held during a click count as pressed keys (super+click opens menus)
        return ["+".join(action.hold)]
    return []


# ---------------------------------------------------------------------------------------------------
# Error location: msgspec reports "... - at `$.limits.max_turns`"; find that key's line in the text.
# ---------------------------------------------------------------------------------------------------
_PATH_RE = re.compile(r" - at `\$((?:\.[A-Za-z0-9_-]+|\[\d+\])*)`$")


def _locate_error(source: str, text: str, message: str) -> str:
    match = _PATH_RE.search(message)
    path: tuple[Any, ...] = ()
    if match:
        message = message[: match.start()]
        path = tuple(int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"\.[^.\[]+|\[\d+\]", match.group(1)))
        path = tuple(p[1:] if isinstance(p, str) else p for p in path)
    if message.startswith("Object contains unknown field"):
        unknown = re.search(r"`([^`]+)`", message)
        if unknown:
            path = (*path, unknown.group(1))
            message = f"unknown key {unknown.group(1)!r}"
    return _at(source, text, path, message)


def _at(source: str, text: str, path: tuple[Any, ...], message: str) -> str:
    line = _find_line(text, path)
    where = f"line {line}" if line else "at top level"
    dotted = ".".join(str(p) for p in path)
    return f"policy file {source}, {where}: {dotted + ': ' if dotted else ''}{message}"


_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\- \"']+?)\s*\]\]?\s*(#.*)?$")
_KEY_RE = re.compile(r"^\s*([A-Za-z0-9_.\-\"']+?)\s*=")


def _find_line(text: str, path: tuple[Any, ...]) -> int | None:
    """1-based line of ``path`` (e.g. ("regions", 0, "verdict")) in the TOML text, or of its deepest
    enclosing table or key found; None when nothing matches (best effort, for error messages)."""
    if not path:
        return None
    current: tuple[Any, ...] = ()
    counters: dict[tuple[str, ...], int] = {}
    best, best_len = None, 0
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER_RE.match(line)
        if header:
            names = tuple(part.strip().strip("\"'") for part in header.group(2).split("."))
            if header.group(1) == "[[":
                counters[names] = counters.get(names, -1) + 1
                current = (*names, counters[names])
            else:
                current = names
            here = current
        else:
            key = _KEY_RE.match(line)
            if not key:
                continue
            here = (*current, *(part.strip().strip("\"'") for part in key.group(1).split(".")))
        common = 0
        for a, b in zip(here, path, strict=False):
            if a != b:
                break
            common += 1
        if common == len(path) and len(here) == len(path):
            return number
        if common == len(here) and common > best_len:
            best, best_len = number, common
    return best


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
