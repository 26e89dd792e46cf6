"""UI-TARS' grammar (bytedance/UI-TARS, codes/ui_tars/action_parser.py and prompt.py; UI-TARS-desktop's
packages/ui-tars/action-parser): ``Thought: ...`` then ``Action: click(start_box='(x,y)')``; several actions
of one step after one ``Action:``, separated by a blank line. The coordinates are written
``'(x,y)'``, ``'<|box_start|>(x,y)<|box_end|>'``, ``'<point>x y</point>'``, ``'[x1, y1, x2, y2]'`` (a box: its
centre) or bare ``'x1, y1, x2, y2'``; UI-TARS-1.5 means pixels of the image it was sent, v1 a 0-1000 grid (the
grammar's Scaling says which: core/grammars/__init__.py).

Read strictly: exactly one ``Action:`` label, every action a call of a known name whose arguments are
literals (core/grammars/pycall.py: parsed, never evaluated). The one leniency is UI-TARS' own: the text of
``type(content='...')`` and ``finished(content='...')`` may hold an unescaped quote, as the published
parser allows (the text is then taken between ``content='`` and the final ``')``).
"""

from __future__ import annotations

import re
from typing import Any

from ..actions import ActionError
from .pycall import PyCall, read_call
from .reply import Reply, ReplyError, bounded, check_units, no_arguments, text_argument, words
from .units import refused, unit

ACTION = re.compile(r"(?:^|\n|\s)Action[:：]\s*")
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
# what comes before the action: Thought / Reflection / Action_Summary, whichever the model wrote
LABEL = re.compile(r"^\s*(Thought|Reflection|Action_Summary)[:：]\s*", re.MULTILINE)
NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
POINT_TEXT = re.compile(
    r"^\s*(?:<\|box_start\|>|<point>|<bbox>)?\s*[\[(]?\s*([^\[\]()<>|]*?)\s*[\])]?\s*(?:<\|box_end\|>|</point>|</bbox>)?\s*$"
)
CONTENT_CALL = re.compile(r"^(type|finished)\(content=(['\"])(.*)\2\)$", re.DOTALL)
# 5 wheel notches a scroll (pyautogui.scroll(±5) in the published converter), 5 s a wait
SCROLL_NOTCHES = 5
WAIT_MS = 5000
SCROLLS = {"down": (0, SCROLL_NOTCHES), "up": (0, -SCROLL_NOTCHES), "right": (SCROLL_NOTCHES, 0),
           "left": (-SCROLL_NOTCHES, 0)}  # fmt: skip
CLICKS = {"click": ("left", 1), "left_single": ("left", 1), "left_double": ("left", 2), "right_single": ("right", 1)}
# actions of UI-TARS' other prompts (mobile, Doubao) that this desktop has no way to do
ELSEWHERE = {"long_press", "open_app", "press_home", "press_back", "press", "release", "keydown", "keyup",
             "navigate", "navigate_back", "select"}  # fmt: skip


def read(text: Any, cursor: tuple[float, float] | None = None) -> Reply:
    """One UI-TARS reply; ReplyError when it cannot be read."""
    text = THINK.sub("", bounded(text))
    labels = list(ACTION.finditer(text))
    if not labels:
        raise ReplyError("no_action", "the reply has no 'Action:' line")
    if len(labels) > 1:
        raise ReplyError(
            "two_actions", "the reply has more than one 'Action:' line; write one, actions separated by a blank line"
        )
    head, body = text[: labels[0].start()], text[labels[0].end() :].strip()
    thought = LABEL.sub("", head).strip()
    if not body:
        raise ReplyError("no_action", "the 'Action:' line is empty")
    units: list[dict[str, Any]] = []
    end: str | None = None
    asks: str | None = None
    steps = [step.strip() for step in re.split(r"\n\s*\n", body) if step.strip()]
    for number, step in enumerate(steps, 1):
        if end is not None or asks is not None:
            raise ReplyError("after_end", "nothing may follow finished() or call_user() in one reply")
        call = _call(step, number)
        if call.name == "finished":
            end = _text_arg(call, "content", optional=True) or ""
        elif call.name == "call_user":
            no_arguments(call)
            asks = ""
        else:
            units.extend(_units(call))
    kept = check_units(units)
    said = words(thought, kept)
    if end is not None:
        end = end.strip() or said
    return Reply(said, kept, end=end, asks=said if asks is not None else None)


def _call(step: str, number: int) -> PyCall:
    what = f"action {number}"
    try:
        return read_call(step, what=what)
    except ActionError as exc:
        # UI-TARS' own leniency: a quote inside type()'s or finished()'s text, unescaped
        found = CONTENT_CALL.match(step.strip())
        if found is None:
            raise ReplyError(exc.code, exc.reason) from None
        return PyCall(found.group(1), (), {"content": _unescape(found.group(3))})


def _unescape(text: str) -> str:
    """The escapes UI-TARS' prompt asks for (\\', \\", \\n) and a backslash itself; nothing else."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, "\\")
        out.append({"n": "\n", "'": "'", '"': '"', "\\": "\\", "t": "\t"}.get(following, "\\" + following))
    return "".join(out)


def _units(call: PyCall) -> list[dict[str, Any]]:
    name = call.name
    args = _named(call)
    if name in CLICKS:
        button, count = CLICKS[name]
        return [unit(name, "click", button=button, count=count, at=_where(args, name, "start_box", "point"))]
    if name == "hover":
        return [unit(name, "move", at=_where(args, name, "start_box", "point"))]
    if name == "drag":
        start = _where(args, name, "start_box", "start_point")
        end = _where(args, name, "end_box", "end_point")
        return [unit(name, "drag", **{"from": start, "to": end})]
    if name == "hotkey":
        keys = text_argument(args, name, "key", "keys")
        tokens = [k for k in re.split(r"[\s+]+", keys.strip()) if k]
        if not tokens:
            raise ReplyError("bad_key", "hotkey() names no key")
        return [unit(name, "key", keys=tokens)]
    if name == "type":
        text = text_argument(args, name, "content")
        # "\n" at the end submits: Return, a key of its own (the policy weighs it as one)
        submit = text.endswith("\n")
        body = text[:-1] if submit else text
        out = [unit(name, "type", text=body)] if body else []
        if submit:
            out.append(unit(name, "key", keys=["Return"]))
        if not out:
            raise ReplyError("bad_field", "type() has no content")
        return out
    if name == "scroll":
        direction = text_argument(args, name, "direction").strip().lower()
        if direction not in SCROLLS:
            raise ReplyError("bad_field", "scroll()'s direction is up, down, left or right")
        dx, dy = SCROLLS[direction]
        at = _where(args, name, "start_box", "point", optional=True)
        return [unit(name, "scroll", dx=dx, dy=dy, **({"at": at} if at is not None else {}))]
    if name == "wait":
        no_arguments(call)
        return [unit(name, "wait", ms=WAIT_MS)]
    if name in ELSEWHERE:
        return [refused(name, "unsupported", f"{name}() is not available on this desktop")]
    return [refused(name, "unknown_action", f"{name}() is not an action of UI-TARS' action space")]


def _named(call: PyCall) -> dict[str, Any]:
    if call.args:
        raise ReplyError("bad_argument", f"{call.name}() takes named arguments (start_box='(x,y)')")
    return call.kwargs


def _text_arg(call: PyCall, key: str, *, optional: bool = False) -> str | None:
    args = _named(call)
    if key not in args and optional:
        return None
    return text_argument(args, call.name, key)


def _where(args: dict[str, Any], name: str, *keys: str, optional: bool = False) -> list[float] | None:
    """The point a box argument names (a box of four numbers: its centre), in the model's space."""
    found = [key for key in keys if key in args]
    if not found:
        if optional:
            return None
        raise ReplyError("missing_field", f"{name}() needs {keys[0]}=")
    key = found[0]
    value = args[key]
    if isinstance(value, list):
        numbers = value
    elif isinstance(value, str):
        match = POINT_TEXT.match(value)
        inner = match.group(1) if match else ""
        numbers = [float(n) for n in NUMBERS.findall(inner)] if inner and not re.search(r"[^\d\s,.\-]", inner) else []
    else:
        numbers = []
    if len(numbers) not in (2, 4) or not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
        raise ReplyError("bad_point", f"{name}()'s {key} is not a point '(x,y)' or a box '(x1,y1,x2,y2)'")
    if len(numbers) == 4:
        x1, y1, x2, y2 = numbers
        return [(x1 + x2) / 2, (y1 + y2) / 2]
    return [numbers[0], numbers[1]]
