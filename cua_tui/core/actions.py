"""The one normalized, immutable Action type and strict parsers from the vendors' formats.

Both parsers accept whatever a model (or a hostile script) sends and either return an Action in display
coordinates or raise ``ActionError`` with a reason a person understands. They never raise anything else,
whatever the input: the supervisor turns an ActionError into a refusal and the run goes on.

Strictness is deliberate: a bool is not an int, a float or a string is not a coordinate, unknown fields
are refused (an injected ``"approved": true`` must not ride along unnoticed), key names follow an explicit
grammar, and every quantity is bounded.
"""

from __future__ import annotations

import hashlib
import math
import reprlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .geometry import OutOfRange, Scaling
from .text import encodable, truncate

# Hard bounds of the parser. The policy has its own, usually lower, caps; these exist so that
# nothing unbounded ever reaches the policy, the audit log or the desktop.
MAX_TEXT = 10_000
MAX_PATH_POINTS = 256
MAX_SCROLL_NOTCHES = 100
MAX_SCROLL_PIXELS = 10_000
MAX_WAIT_MS = 120_000
MAX_KEYS_PER_CHORD = 6
MAX_REPEAT = 100
# lists and objects inside a raw action; the deepest real one (a drag path point) is 3
MAX_NESTING = 8
# values in a raw action, all levels; a drag path at its bound has under 800
MAX_VALUES = 4096
# OpenAI scrolls in pixels; the desktop scrolls in wheel notches.
PIXELS_PER_NOTCH = 100
DEFAULT_WAIT_MS = 1000


class ActionError(ValueError):
    """A proposed action that cannot be accepted. ``code`` is stable, ``reason`` is for people."""

    def __init__(self, code: str, reason: str) -> None:
        # it quotes untrusted input and is recorded in the audit log
        reason = encodable(reason)
        super().__init__(reason)
        self.code = code
        self.reason = reason


class Kind(StrEnum):
    """Normalized action kinds. Policy files name these."""

    CLICK = "click"
    DOUBLE_CLICK = "double_click"
    TRIPLE_CLICK = "triple_click"
    DRAG = "drag"
    MOVE = "move"
    SCROLL = "scroll"
    KEYPRESS = "keypress"
    HOLD_KEY = "hold_key"
    TYPE = "type"
    WAIT = "wait"
    SCREENSHOT = "screenshot"
    MOUSE_DOWN = "mouse_down"
    MOUSE_UP = "mouse_up"
    CURSOR_POSITION = "cursor_position"
    ZOOM = "zoom"


BUTTONS = ("left", "right", "middle", "back", "forward")

# -------------------------------------------------------------------------------------------------
# Key grammar. A chord is modifiers (in canonical order) + one key, written "ctrl+alt+Delete". Keys
# are X keysym names (what xdotool and XTEST speak) or one printable ASCII character.
# --------------------------------------------------------------------------------------------------
MODIFIERS = ("ctrl", "alt", "shift", "super")
_MODIFIER_ALIASES = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "control_l": "ctrl",
    "control_r": "ctrl",
    "ctl": "ctrl",
    "alt": "alt",
    "alt_l": "alt",
    "alt_r": "alt",
    "option": "alt",
    "opt": "alt",
    "shift": "shift",
    "shift_l": "shift",
    "shift_r": "shift",
    "super": "super",
    "super_l": "super",
    "super_r": "super",
    "meta": "super",
    "meta_l": "super",
    "cmd": "super",
    "command": "super",
    "win": "super",
    "windows": "super",
    "os": "super",
}
_NAMED_KEYS = [
    "Return",
    "KP_Enter",
    "Tab",
    "ISO_Left_Tab",
    "Escape",
    "BackSpace",
    "Delete",
    "Insert",
    "Home",
    "End",
    "Page_Up",
    "Page_Down",
    "Left",
    "Right",
    "Up",
    "Down",
    "space",
    "Menu",
    "Print",
    "Pause",
    "Scroll_Lock",
    "Caps_Lock",
    "Num_Lock",
    "KP_Add",
    "KP_Subtract",
    "KP_Multiply",
    "KP_Divide",
    "KP_Decimal",
    "minus",
    "plus",
    "equal",
    "comma",
    "period",
    "slash",
    "backslash",
    "semicolon",
    "apostrophe",
    "grave",
    "bracketleft",
    "bracketright",
    "XF86AudioMute",
    "XF86AudioRaiseVolume",
    "XF86AudioLowerVolume",
    "XF86Back",
    "XF86Forward",
    *(f"F{n}" for n in range(1, 25)),
    *(f"KP_{n}" for n in range(10)),
]
_KEY_ALIASES = {name.lower(): name for name in _NAMED_KEYS}
_KEY_ALIASES.update(
    {
        "enter": "Return",
        "return": "Return",
        "ret": "Return",
        "kp_enter": "KP_Enter",
        "esc": "Escape",
        "escape": "Escape",
        "backspace": "BackSpace",
        "bksp": "BackSpace",
        "del": "Delete",
        "delete": "Delete",
        "ins": "Insert",
        "pageup": "Page_Up",
        "page_up": "Page_Up",
        "pgup": "Page_Up",
        "prior": "Page_Up",
        "pagedown": "Page_Down",
        "page_down": "Page_Down",
        "pgdn": "Page_Down",
        "next": "Page_Down",
        "arrowleft": "Left",
        "arrow_left": "Left",
        "left": "Left",
        "arrowright": "Right",
        "arrow_right": "Right",
        "right": "Right",
        "arrowup": "Up",
        "arrow_up": "Up",
        "up": "Up",
        "arrowdown": "Down",
        "arrow_down": "Down",
        "down": "Down",
        "space": "space",
        "spacebar": "space",
        "tab": "Tab",
        "home": "Home",
        "end": "End",
        "printscreen": "Print",
        "print": "Print",
        "capslock": "Caps_Lock",
        "numlock": "Num_Lock",
        "scrolllock": "Scroll_Lock",
        "contextmenu": "Menu",
        "apps": "Menu",
    }
)
_CHAR_NAMES = {
    " ": "space",
    "+": "plus",
    "-": "minus",
    "=": "equal",
    ",": "comma",
    ".": "period",
    "/": "slash",
    "\\": "backslash",
    ";": "semicolon",
    "'": "apostrophe",
    "`": "grave",
    "[": "bracketleft",
    "]": "bracketright",
}


def normalize_key(token: Any) -> str:
    """One key name to canonical form; a modifier comes back as its canonical modifier name."""
    if type(token) is not str:
        raise ActionError("bad_key", f"a key must be a string, not {_type_name(token)}")
    if token in _CHAR_NAMES:
        return _CHAR_NAMES[token]
    if not token or len(token) > 32:
        raise ActionError("bad_key", f"key name {_clip(token)!r} is empty or too long")
    low = token.lower()
    if low in _MODIFIER_ALIASES:
        return _MODIFIER_ALIASES[low]
    if low in _KEY_ALIASES:
        return _KEY_ALIASES[low]
    if len(token) == 1 and token.isascii() and token.isprintable():
        return token.lower() if token.isalpha() else token
    raise ActionError("bad_key", f"unknown key name {_clip(token)!r}")


def make_chord(tokens: list[str]) -> str:
    """Canonical chord string from key tokens, e.g. ["CTRL", "A"] -> "ctrl+a"."""
    if not tokens:
        raise ActionError("bad_key", "a key combination needs at least one key")
    if len(tokens) > MAX_KEYS_PER_CHORD:
        raise ActionError("bad_key", f"a key combination has at most {MAX_KEYS_PER_CHORD} keys")
    names = [normalize_key(t) for t in tokens]
    mods = {n for n in names if n in MODIFIERS}
    keys = [n for n in names if n not in MODIFIERS]
    if len(keys) > 1:
        raise ActionError("bad_key", f"a key combination has one non-modifier key, got {', '.join(keys)}")
    ordered = [m for m in MODIFIERS if m in mods]
    if len(ordered) != len([n for n in names if n in MODIFIERS]):
        raise ActionError("bad_key", "a modifier is repeated in the key combination")
    return "+".join([*ordered, *keys])


def chord_tokens(text: str) -> list[str]:
    """The keys of a chord written with "+" between them. The "+" key itself may stand alone ("+") or
    last ("ctrl++", the same as "ctrl+plus"); anywhere else an empty name between "+" signs is refused."""
    if text == "+":
        return ["+"]
    head, tail = (text[:-2], ["+"]) if text.endswith("++") else (text, [])
    parts = head.split("+")
    for i, part in enumerate(parts):
        if part:
            continue
        if i == len(parts) - 1 and not tail and len(parts) > 1:
            normalize_key(part)  # "ctrl+": the key after the last "+" is missing
        raise ActionError(
            "bad_key",
            f"key text {_clip(text)!r} has an empty key name between '+' signs"
            " (the plus key goes last, as in 'ctrl++', or by name, as in 'ctrl+plus')",
        )
    return parts + tail


def parse_chord_text(text: Any) -> str:
    """Anthropic's xdotool-style key text ("ctrl+shift+t", "Return", "ctrl++") to a canonical chord."""
    if type(text) is not str or not text.strip():
        raise ActionError("bad_key", "key text must be a non-empty string")
    if len(text) > 80:
        raise ActionError("bad_key", "key text is too long")
    if " " in text.strip():
        raise ActionError("bad_key", "one key combination per action (no spaces)")
    return make_chord(chord_tokens(text.strip()))


def _held(value: Any, *, field_name: str) -> tuple[str, ...]:
    """Modifiers held during a pointer action: only ctrl, alt, shift, super."""
    if value is None:
        return ()
    if isinstance(value, str):
        tokens = chord_tokens(value) if value else []
    elif type(value) is list:
        tokens = value
    else:
        raise ActionError("bad_field", f"{field_name} must be a list of modifier keys")
    if len(tokens) > len(MODIFIERS):
        raise ActionError("bad_key", f"{field_name} holds at most {len(MODIFIERS)} modifiers")
    names = [normalize_key(t) for t in tokens]
    for name in names:
        if name not in MODIFIERS:
            raise ActionError("bad_key", f"only modifier keys can be held during a pointer action, not {name!r}")
    if len(set(names)) != len(names):
        raise ActionError("bad_key", f"a modifier is repeated in {field_name}")
    return tuple(m for m in MODIFIERS if m in names)


# ------------------------------------------------------------------------------------------------
# The Action type
# --------------------------------------------------------------------------------------------------
Point = tuple[int, int]


# typed text with one of these moves the focus (xdotool types a Tab as Tab)
FOCUS_TEXT = ("\t", "\n", "\r")


def text_sha256(text: str) -> str:
    """The SHA-256 hex by which typed text is recorded (lone surrogates hashed as they are, not dropped)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Action:
    """One normalized action, in display coordinates. Immutable; safe to share between threads.

    ``text`` (typed text) is held in memory only for execution and for the reviewer; every serialized
    form (``to_record``) carries its length and SHA-256 instead.
    """

    kind: Kind
    point: Point | None = None
    button: str = "left"
    path: tuple[Point, ...] = ()
    scroll_x: int = 0  # wheel notches, positive = right
    scroll_y: int = 0  # wheel notches, positive = down
    chord: str = ""  # keypress / hold_key: canonical chord
    hold: tuple[str, ...] = ()  # modifiers held during a pointer action
    text: str = field(default="", repr=False)
    duration_ms: int = 0  # wait, hold_key
    repeat: int = 1  # keypress repeat
    region: tuple[int, int, int, int] | None = None  # zoom: x0, y0, x1, y1 (display)

    @property
    def target(self) -> Point | None:
        """Where the action lands on screen (the marker, the stale-screen guard)."""
        if self.point is not None:
            return self.point
        if self.path:
            return self.path[0]
        if self.region is not None:
            x0, y0, x1, y1 = self.region
            return (x0 + x1) // 2, (y0 + y1) // 2
        return None

    @property
    def text_sha256(self) -> str:
        return text_sha256(self.text)

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready description with typed text replaced by its length and SHA-256."""
        rec: dict[str, Any] = {"kind": self.kind.value}
        if self.point is not None:
            rec["x"], rec["y"] = self.point
        if self.kind in (Kind.CLICK, Kind.MOUSE_DOWN, Kind.MOUSE_UP) or self.button != "left":
            rec["button"] = self.button
        if self.path:
            rec["path"] = [list(p) for p in self.path]
        if self.kind is Kind.SCROLL:
            rec["scroll_x"], rec["scroll_y"] = self.scroll_x, self.scroll_y
        if self.chord:
            rec["keys"] = self.chord
        if self.repeat != 1:
            rec["repeat"] = self.repeat
        if self.hold:
            rec["hold"] = list(self.hold)
        if self.kind is Kind.TYPE:
            rec["text_len"] = len(self.text)
            rec["text_sha256"] = self.text_sha256
            if any(c in self.text for c in FOCUS_TEXT):
                # the text leaves its field (core/focus.py), the one fact told of it
                rec["moves_focus"] = True
        if self.duration_ms:
            rec["duration_ms"] = self.duration_ms
        if self.region is not None:
            rec["region"] = list(self.region)
        return rec

    def describe(self) -> str:
        """A one-line summary for people (never the typed text itself)."""
        held = "+".join(self.hold) + "+" if self.hold else ""
        match self.kind:
            case Kind.CLICK | Kind.DOUBLE_CLICK | Kind.TRIPLE_CLICK:
                assert self.point is not None
                button = "" if self.button == "left" else f" {self.button}"
                return f"{held}{self.kind.value}{button} at ({self.point[0]}, {self.point[1]})"
            case Kind.MOVE:
                assert self.point is not None
                return f"move to ({self.point[0]}, {self.point[1]})"
            case Kind.DRAG:
                (x0, y0), (x1, y1) = self.path[0], self.path[-1]
                return f"{held}drag ({x0}, {y0}) → ({x1}, {y1}) via {len(self.path)} points"
            case Kind.SCROLL:
                where = f" at ({self.point[0]}, {self.point[1]})" if self.point else ""
                return f"{held}scroll x={self.scroll_x} y={self.scroll_y} notches{where}"
            case Kind.KEYPRESS:
                times = f" ×{self.repeat}" if self.repeat != 1 else ""
                return f"press {self.chord}{times}"
            case Kind.HOLD_KEY:
                return f"hold {self.chord} for {self.duration_ms} ms"
            case Kind.TYPE:
                return f"type {len(self.text)} characters"
            case Kind.WAIT:
                return f"wait {self.duration_ms} ms"
            case Kind.ZOOM:
                assert self.region is not None
                return "zoom on ({}, {})-({}, {})".format(*self.region)
            case Kind.MOUSE_DOWN | Kind.MOUSE_UP:
                where = f" at ({self.point[0]}, {self.point[1]})" if self.point else ""
                return f"{self.kind.value.replace('_', ' ')} {self.button}{where}"
            case _:
                return self.kind.value.replace("_", " ")


# ------------------------------------------------------------------------------------------------
# Field helpers: strict types, clear reasons
# --------------------------------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class _ShortRepr(reprlib.Repr):
    """repr() in bounded time and space, whatever the value (deep, long, or an integer too long to print)."""

    def __init__(self) -> None:
        # set as attributes: Debian's python 3.11 in the sandbox image takes no keywords
        super().__init__()
        self.maxlevel, self.maxlist, self.maxdict = 3, 4, 4
        self.maxstring = self.maxother = self.maxlong = 48

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 512:
            # str() of a long int costs quadratic time, and fails past 4300 digits
            return f"<{x.bit_length()}-bit integer>"
        return super().repr_int(x, level)


_short_repr = _ShortRepr().repr


def _clip(value: Any, limit: int = 40) -> str:
    """Untrusted input quoted in a reason: short, and bounded in cost whatever the value."""
    # Sliced first: a huge string is never copied whole.
    return truncate(value[: limit + 1] if isinstance(value, str) else _short_repr(value), limit)


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if type(value) is not int:  # rejects bool (a subclass of int), float, str, None
        raise ActionError("bad_type", f"{name} must be an integer, not {_type_name(value)} {_clip(value)}")
    if not lo <= value <= hi:
        raise ActionError("out_of_range", f"{name}={_clip(value, 24)} is outside [{lo}, {hi}]")
    return value


def _number(value: Any, name: str, lo: float, hi: float) -> float:
    # isfinite() only for floats: on an int too large for a float it would raise OverflowError.
    if type(value) not in (int, float) or (type(value) is float and not math.isfinite(value)):
        raise ActionError("bad_type", f"{name} must be a finite number, not {_type_name(value)} {_clip(value)}")
    if not lo <= value <= hi:
        raise ActionError("out_of_range", f"{name}={_clip(value, 24)} is outside [{lo}, {hi}]")
    return float(value)


def _text(value: Any, name: str = "text") -> str:
    if type(value) is not str:
        raise ActionError("bad_type", f"{name} must be a string, not {_type_name(value)}")
    if len(value) > MAX_TEXT:
        raise ActionError("too_long", f"{name} has {len(value)} characters; at most {MAX_TEXT} are accepted")
    if not value:
        raise ActionError("bad_field", f"{name} is empty")
    return value


def _point(x: Any, y: Any, scaling: Scaling, name: str = "point") -> Point:
    xi = _int(x, f"{name}.x", -(2**31), 2**31)
    yi = _int(y, f"{name}.y", -(2**31), 2**31)
    try:
        return scaling.to_display(xi, yi)
    except OutOfRange as exc:
        raise ActionError("outside_screen", str(exc)) from None


def _fields(raw: dict[str, Any], allowed: set[str], what: str) -> None:
    extra = sorted(set(raw) - allowed)
    if extra:
        names = ", ".join(_clip(k, 24) for k in extra[:5])
        raise ActionError("unknown_field", f"{what} does not take field(s): {names}")


def _require(raw: dict[str, Any], name: str, what: str) -> Any:
    if raw.get(name) is None:
        raise ActionError("missing_field", f"{what} needs {name!r}")
    return raw[name]


def _optional(raw: dict[str, Any], name: str, default: Any) -> Any:
    """A field the vendor's schema marks optional: null means absent, as it does in the vendors' SDKs."""
    value = raw.get(name)
    return default if value is None else value


_CONTAINERS = (dict, list, tuple)


def _bounded(raw: dict[str, Any], what: str) -> None:
    """Refuse a raw action nested deeper than MAX_NESTING or holding more than MAX_VALUES values, walking
    it without recursion, before anything else looks inside (a repr, a reason, the parser itself)."""
    budget = MAX_VALUES - len(raw)
    for key, value in raw.items() if budget >= 0 else ():
        if type(value) not in _CONTAINERS:
            continue
        stack: list[tuple[Any, int]] = [(value, 2)]
        while stack:
            item, depth = stack.pop()
            if depth > MAX_NESTING:
                raise ActionError(
                    "bad_schema", f"{what}: field {_clip(key, 24)!r} nests deeper than {MAX_NESTING} levels"
                )
            budget -= len(item)
            if budget < 0:
                break
            for child in item.values() if type(item) is dict else item:
                if type(child) in _CONTAINERS:
                    stack.append((child, depth + 1))
        if budget < 0:
            break
    if budget < 0:
        raise ActionError("bad_schema", f"{what} is too large (more than {MAX_VALUES} values)")


def _notches_from_pixels(px: int) -> int:
    if px == 0:
        return 0
    notches = max(1, round(abs(px) / PIXELS_PER_NOTCH))
    return notches if px > 0 else -notches


# ------------------------------------------------------------------------------------------------
# OpenAI Responses `computer` tool actions
# --------------------------------------------------------------------------------------------------
_OPENAI_FIELDS = {
    "click": {"type", "button", "x", "y", "keys"},
    "double_click": {"type", "x", "y", "keys"},
    "drag": {"type", "path", "keys"},
    "move": {"type", "x", "y", "keys"},
    "scroll": {"type", "x", "y", "scroll_x", "scroll_y", "keys"},
    "keypress": {"type", "keys"},
    "type": {"type", "text"},
    "wait": {"type"},
    "screenshot": {"type"},
}
_OPENAI_BUTTONS = {
    "left": "left",
    "right": "right",
    "wheel": "middle",
    "middle": "middle",
    "back": "back",
    "forward": "forward",
}


def parse_openai(raw: Any, scaling: Scaling) -> Action:
    """Parse one action of an OpenAI ``computer_call`` (batched ``actions`` or single ``action``)."""
    try:
        return _parse_openai(raw, scaling)
    except ActionError:
        raise
    except Exception as exc:
        # a parser bug must not end the run either; it is still a refusal
        raise ActionError("malformed", f"could not read the action ({type(exc).__name__})") from None


def _parse_openai(raw: Any, scaling: Scaling) -> Action:
    """One OpenAI action, strictly. Long because it is one dispatch over the vendor's action kinds: the whole
    grammar reads in one place, each kind next to the checks that keep it honest."""
    if type(raw) is not dict:
        raise ActionError("bad_schema", f"an action must be a JSON object, not {_type_name(raw)}")
    kind = raw.get("type")
    if type(kind) is not str:
        raise ActionError("bad_schema", "the action has no string 'type'")
    if kind not in _OPENAI_FIELDS:
        raise ActionError("unknown_kind", f"unknown action kind {_clip(kind)!r}")
    what = f"{kind} action"
    _bounded(raw, what)
    _fields(raw, _OPENAI_FIELDS[kind], what)
    hold = _held(raw.get("keys"), field_name="keys") if kind not in ("keypress", "type") else ()
    match kind:
        case "click":
            button = raw.get("button", "left")
            if type(button) is not str or button not in _OPENAI_BUTTONS:
                raise ActionError("bad_field", f"unknown mouse button {_clip(button)!r}")
            pt = _point(_require(raw, "x", what), _require(raw, "y", what), scaling)
            return Action(Kind.CLICK, point=pt, button=_OPENAI_BUTTONS[button], hold=hold)
        case "double_click":
            pt = _point(_require(raw, "x", what), _require(raw, "y", what), scaling)
            return Action(Kind.DOUBLE_CLICK, point=pt, hold=hold)
        case "move":
            pt = _point(_require(raw, "x", what), _require(raw, "y", what), scaling)
            return Action(Kind.MOVE, point=pt, hold=hold)
        case "drag":
            return Action(Kind.DRAG, path=_openai_path(_require(raw, "path", what), scaling), hold=hold)
        case "scroll":
            pt = _point(_require(raw, "x", what), _require(raw, "y", what), scaling)
            sx = _int(raw.get("scroll_x", 0), "scroll_x", -MAX_SCROLL_PIXELS, MAX_SCROLL_PIXELS)
            sy = _int(raw.get("scroll_y", 0), "scroll_y", -MAX_SCROLL_PIXELS, MAX_SCROLL_PIXELS)
            if sx == 0 and sy == 0:
                raise ActionError("bad_field", "scroll needs a non-zero scroll_x or scroll_y")
            return Action(
                Kind.SCROLL, point=pt, scroll_x=_notches_from_pixels(sx), scroll_y=_notches_from_pixels(sy), hold=hold
            )
        case "keypress":
            keys = _require(raw, "keys", what)
            if type(keys) is not list:
                raise ActionError("bad_type", "keypress keys must be a list of key names")
            # OpenAI sends one chord per keypress; a single "ctrl+a" string element is accepted too.
            tokens = chord_tokens(keys[0]) if len(keys) == 1 and type(keys[0]) is str and len(keys[0]) > 1 else keys
            return Action(Kind.KEYPRESS, chord=make_chord(tokens))
        case "type":
            return Action(Kind.TYPE, text=_text(_require(raw, "text", what)))
        case "wait":
            return Action(Kind.WAIT, duration_ms=DEFAULT_WAIT_MS)
        case _:
            return Action(Kind.SCREENSHOT)


def _openai_path(path: Any, scaling: Scaling) -> tuple[Point, ...]:
    """A drag's ``path``: 2 to MAX_PATH_POINTS objects with exactly x and y, each on the screen."""
    if type(path) is not list:
        raise ActionError("bad_type", "drag path must be a list of points")
    if not 2 <= len(path) <= MAX_PATH_POINTS:
        raise ActionError("out_of_range", f"drag path needs 2 to {MAX_PATH_POINTS} points, got {len(path)}")
    points = []
    for i, p in enumerate(path):
        if type(p) is not dict:
            raise ActionError("bad_type", f"drag path point {i} must be an object with x and y")
        _fields(p, {"x", "y"}, f"drag path point {i}")
        points.append(_point(_require(p, "x", "drag point"), _require(p, "y", "drag point"), scaling, f"path[{i}]"))
    return tuple(points)


# ------------------------------------------------------------------------------------------------
# Anthropic computer toolset members (computer_toolset_20260801)
# --------------------------------------------------------------------------------------------------
_CLICKS = {
    "left_click": ("left", Kind.CLICK),
    "right_click": ("right", Kind.CLICK),
    "middle_click": ("middle", Kind.CLICK),
    "double_click": ("left", Kind.DOUBLE_CLICK),
    "triple_click": ("left", Kind.TRIPLE_CLICK),
}
ANTHROPIC_MEMBERS = (
    "key",
    "hold_key",
    "type",
    "cursor_position",
    "mouse_move",
    "left_mouse_down",
    "left_mouse_up",
    "left_click",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "left_click_drag",
    "scroll",
    "wait",
    "screenshot",
    "zoom",
)
_ANTHROPIC_FIELDS: dict[str, set[str]] = {
    "key": {"text", "repeat"},
    "hold_key": {"text", "duration"},
    "type": {"text"},
    "cursor_position": set(),
    "mouse_move": {"coordinate", "text"},
    "left_mouse_down": {"coordinate"},
    "left_mouse_up": {"coordinate"},
    **{name: {"coordinate", "text"} for name in _CLICKS},
    "left_click_drag": {"start_coordinate", "coordinate", "text"},
    "scroll": {"scroll_direction", "scroll_amount", "coordinate", "text"},
    "wait": {"duration"},
    "screenshot": set(),
    "zoom": {"region"},
}
ANTHROPIC_TO_KIND = {
    "key": Kind.KEYPRESS,
    "hold_key": Kind.HOLD_KEY,
    "type": Kind.TYPE,
    "cursor_position": Kind.CURSOR_POSITION,
    "mouse_move": Kind.MOVE,
    "left_mouse_down": Kind.MOUSE_DOWN,
    "left_mouse_up": Kind.MOUSE_UP,
    **{name: kind for name, (_, kind) in _CLICKS.items()},
    "left_click_drag": Kind.DRAG,
    "scroll": Kind.SCROLL,
    "wait": Kind.WAIT,
    "screenshot": Kind.SCREENSHOT,
    "zoom": Kind.ZOOM,
}


def parse_anthropic(name: Any, raw: Any, scaling: Scaling, toolset_name: Any = "computer") -> Action:
    """Parse one ``tool_use`` block of the computer toolset: its member ``name`` and ``input``."""
    try:
        return _parse_anthropic(name, raw, scaling, toolset_name)
    except ActionError:
        raise
    except Exception as exc:
        raise ActionError("malformed", f"could not read the action ({type(exc).__name__})") from None


def _display_span(v0: int, v1: int, model_side: int, display_side: int) -> tuple[int, int]:
    """Display pixels [start, end) covered by model pixels [v0, v1), as ``Scaling.to_model`` assigns them."""
    start = min(-(-v0 * display_side // model_side), display_side - 1)
    end = max(-(-v1 * display_side // model_side), start + 1)
    return start, min(end, display_side)


def _coordinate(value: Any, scaling: Scaling, name: str = "coordinate") -> Point:
    if type(value) is not list or len(value) != 2:
        raise ActionError("bad_type", f"{name} must be a list [x, y]")
    return _point(value[0], value[1], scaling, name)


def _parse_anthropic(name: Any, raw: Any, scaling: Scaling, toolset_name: Any) -> Action:
    """One Anthropic toolset call, strictly. Long because it is one dispatch over the toolset's members: the
    whole grammar reads in one place, each member next to the checks that keep it honest."""
    if toolset_name != "computer":
        raise ActionError("unknown_kind", f"unknown toolset {_clip(toolset_name)!r}")
    if type(name) is not str or name not in _ANTHROPIC_FIELDS:
        raise ActionError("unknown_kind", f"unknown computer toolset member {_clip(name)!r}")
    if raw is None:
        raw = {}
    if type(raw) is not dict:
        raise ActionError("bad_schema", f"tool input must be a JSON object, not {_type_name(raw)}")
    what = f"{name} action"
    _bounded(raw, what)
    _fields(raw, _ANTHROPIC_FIELDS[name], what)
    coord = _optional(raw, "coordinate", None)
    pt = _coordinate(coord, scaling) if coord is not None else None
    hold = (
        _held(_optional(raw, "text", None), field_name="text")
        if name in (*_CLICKS, "mouse_move", "left_click_drag", "scroll")
        else ()
    )
    match name:
        case "key":
            repeat = _int(_optional(raw, "repeat", 1), "repeat", 1, MAX_REPEAT)
            return Action(Kind.KEYPRESS, chord=parse_chord_text(_require(raw, "text", what)), repeat=repeat)
        case "hold_key":
            seconds = _number(_require(raw, "duration", what), "duration", 0, MAX_WAIT_MS / 1000)
            return Action(
                Kind.HOLD_KEY, chord=parse_chord_text(_require(raw, "text", what)), duration_ms=round(seconds * 1000)
            )
        case "type":
            return Action(Kind.TYPE, text=_text(_require(raw, "text", what)))
        case "cursor_position":
            return Action(Kind.CURSOR_POSITION)
        case "mouse_move":
            return Action(Kind.MOVE, point=_coordinate(_require(raw, "coordinate", what), scaling), hold=hold)
        case "left_mouse_down" | "left_mouse_up":
            return Action(ANTHROPIC_TO_KIND[name], point=pt, button="left")
        case "left_click_drag":
            start = _coordinate(_require(raw, "start_coordinate", what), scaling, "start_coordinate")
            end = _coordinate(_require(raw, "coordinate", what), scaling)
            return Action(Kind.DRAG, path=(start, end), hold=hold)
        case "scroll":
            sx, sy = _anthropic_scroll(raw, what)
            return Action(Kind.SCROLL, point=pt, scroll_x=sx, scroll_y=sy, hold=hold)
        case "wait":
            seconds = _number(_require(raw, "duration", what), "duration", 0, MAX_WAIT_MS / 1000)
            return Action(Kind.WAIT, duration_ms=round(seconds * 1000))
        case "screenshot":
            return Action(Kind.SCREENSHOT)
        case "zoom":
            return Action(Kind.ZOOM, region=_anthropic_zoom(_require(raw, "region", what), scaling))
        case _:  # click family
            button, kind = _CLICKS[name]
            if pt is None:
                raise ActionError(
                    "missing_field",
                    f"{what} needs 'coordinate' (clicking wherever the pointer happens to be is not accepted)",
                )
            return Action(kind, point=pt, button=button, hold=hold)


def _anthropic_scroll(raw: dict[str, Any], what: str) -> tuple[int, int]:
    """``scroll_direction`` and ``scroll_amount`` as (notches right, notches down)."""
    direction = _require(raw, "scroll_direction", what)
    if direction not in ("up", "down", "left", "right"):
        raise ActionError("bad_field", f"scroll_direction must be up, down, left or right, not {_clip(direction)!r}")
    amount = _int(_require(raw, "scroll_amount", what), "scroll_amount", 1, MAX_SCROLL_NOTCHES)
    sx = amount if direction == "right" else -amount if direction == "left" else 0
    sy = amount if direction == "down" else -amount if direction == "up" else 0
    return sx, sy


def _anthropic_zoom(region: Any, scaling: Scaling) -> tuple[int, int, int, int]:
    """A zoom ``region`` [x0, y0, x1, y1] (end exclusive) in model pixels, as the display pixels it covers."""
    if type(region) is not list or len(region) != 4:
        raise ActionError("bad_type", "zoom region must be a list [x0, y0, x1, y1]")
    x0, y0 = _point(region[0], region[1], scaling, "region start")
    # The end corner is exclusive: map the last included pixel, then step past it.
    x1, y1 = _point(
        _int(region[2], "region.x1", 1, 2**31) - 1,
        _int(region[3], "region.y1", 1, 2**31) - 1,
        scaling,
        "region end",
    )
    if x1 < x0 or y1 < y0:
        raise ActionError("bad_field", "zoom region must run from its top-left to its bottom-right corner")
    # Zoom is captured at display resolution: cover every display pixel of the model's region, not
    # just the centres of its corner pixels (which would drop up to half a model pixel per side).
    dx0, dx1 = _display_span(region[0], region[2], scaling.model.width, scaling.display.width)
    dy0, dy1 = _display_span(region[1], region[3], scaling.model.height, scaling.display.height)
    return dx0, dy0, dx1, dy1


# ------------------------------------------------------------------------------------------------
# A record read back (a team queue's request row): to_record's inverse, as strict as a parser
# --------------------------------------------------------------------------------------------------
_RECORD_FIELDS = frozenset(
    {"kind", "x", "y", "button", "path", "scroll_x", "scroll_y", "keys", "repeat", "hold", "text_len",
     "text_sha256", "moves_focus", "duration_ms", "region"}
)  # fmt: skip
# display coordinates a record may hold (a display is at most this wide or tall)
_MAX_DISPLAY = 1 << 16


def action_of_record(record: Any, text: str = "") -> Action:
    """The Action that ``to_record`` described, typed text given beside it (a record holds only its length
    and SHA-256, and the text must match both). ActionError for anything ``to_record`` would not have
    written: someone else wrote the record."""
    if not isinstance(record, dict):
        raise ActionError("bad_type", f"an action record must be an object, not {_type_name(record)}")
    _fields(record, set(_RECORD_FIELDS), "an action record")
    try:
        kind = Kind(str(record.get("kind")))
    except ValueError:
        raise ActionError("unknown_kind", f"unknown action kind {_clip(record.get('kind'))}") from None

    def coord(value: Any, name: str) -> int:
        return _int(value, name, 0, _MAX_DISPLAY)

    point = None
    if "x" in record or "y" in record:
        point = (coord(record.get("x"), "x"), coord(record.get("y"), "y"))
    button = record.get("button", "left")
    if button not in BUTTONS:
        raise ActionError("bad_button", f"unknown button {_clip(button)}")
    path: tuple[Point, ...] = ()
    if "path" in record:
        raw_path = record["path"]
        if not isinstance(raw_path, list) or not 2 <= len(raw_path) <= MAX_PATH_POINTS:
            raise ActionError("bad_path", f"path must be a list of 2 to {MAX_PATH_POINTS} points")
        for p in raw_path:
            if not isinstance(p, list) or len(p) != 2:
                raise ActionError("bad_path", "each point of a path is [x, y]")
        path = tuple((coord(p[0], "path.x"), coord(p[1], "path.y")) for p in raw_path)
    hold = record.get("hold", [])
    if not isinstance(hold, list) or len(hold) > MAX_KEYS_PER_CHORD or any(h not in MODIFIERS for h in hold):
        raise ActionError("bad_hold", "hold must list modifiers")
    chord = ""
    if "keys" in record:
        if type(record["keys"]) is not str:
            raise ActionError("bad_type", "keys must be a string")
        chord = parse_chord_text(record["keys"])
    region = None
    if "region" in record:
        raw_region = record["region"]
        if not isinstance(raw_region, list) or len(raw_region) != 4:
            raise ActionError("bad_region", "region is [x0, y0, x1, y1]")
        x0, y0, x1, y1 = (coord(v, "region") for v in raw_region)
        region = (x0, y0, x1, y1)
    if kind is Kind.TYPE:
        if not text:
            raise ActionError("no_text", "a typing record needs its text beside it")
        if record.get("text_len") != len(text) or record.get("text_sha256") != text_sha256(text):
            raise ActionError("text_mismatch", "the text given does not match the record's length and SHA-256")
        _text(text)
    elif text or "text_len" in record or "text_sha256" in record:
        raise ActionError("bad_field", f"a {kind.value} types no text")
    action = Action(
        kind, point=point, button=button, path=path,
        scroll_x=_int(record.get("scroll_x", 0), "scroll_x", -MAX_SCROLL_NOTCHES, MAX_SCROLL_NOTCHES),
        scroll_y=_int(record.get("scroll_y", 0), "scroll_y", -MAX_SCROLL_NOTCHES, MAX_SCROLL_NOTCHES),
        chord=chord, hold=tuple(hold), text=text,
        duration_ms=_int(record.get("duration_ms", 0), "duration_ms", 0, MAX_WAIT_MS),
        repeat=_int(record.get("repeat", 1), "repeat", 1, MAX_REPEAT), region=region,
    )  # fmt: skip
    if action.to_record() != record:
        raise ActionError("not_canonical", "the record is not one this version writes for that action")
    return action
