"""OpenCUA-7B's and -32B's grammar (xlang-ai/OpenCUA; OSWorld's mm_agents/opencua agent): ``## Thought:``,
``## Action:`` (a sentence) and ``## Code:`` with one fenced block of PyAutoGUI calls and the functions
``computer.triple_click(x=, y=)``, ``computer.wait()`` and ``computer.terminate(status=..., answer=...)``.
Coordinates are pixels of the image sent (smart-resized, factor 28).

The code is parsed as Python syntax (core/grammars/pycall.py) and each statement matched against the short
list of calls and keyword arguments OpenCUA's data uses: never executed, never evaluated. ``moveTo`` then
``dragTo`` is a drag from where the pointer was moved (the reader follows the pointer through the reply and
from one reply to the next: ``cursor``).
"""

from __future__ import annotations

import re
from typing import Any

from .pycall import PyCall, read_calls
from .reply import Reply, ReplyError, bounded, check_units, words
from .units import refused, unit

SECTION = re.compile(r"^##\s*(Observation|Thought|Action|Code)\s*:?\s*$", re.MULTILINE | re.IGNORECASE)
FENCE = re.compile(r"```[ \t]*(?:python|code|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
CLICKS = {"click": ("left", 1), "leftClick": ("left", 1), "doubleClick": ("left", 2), "tripleClick": ("left", 3),
          "rightClick": ("right", 1), "middleClick": ("middle", 1)}  # fmt: skip
# the arguments each call may take beyond its point (timing arguments are read and ignored: the desktop paces)
TIMING = {"duration", "interval", "tween", "pause", "_pause", "logScreenshot"}
WAIT_MS = 20_000  # computer.wait(): "Make the computer wait for 20 seconds"
MAX_PRESSES = 20


def read(text: Any, cursor: tuple[float, float] | None = None) -> Reply:
    """One OpenCUA reply (``cursor``: where its last pointer action left the pointer, in the model's space)."""
    text = bounded(text)
    sections: dict[str, str] = {}
    marks = list(SECTION.finditer(text))
    for number, mark in enumerate(marks):
        name = mark.group(1).lower()
        if name in sections:
            raise ReplyError("two_actions", f"the reply has two '## {mark.group(1)}:' sections")
        stop = marks[number + 1].start() if number + 1 < len(marks) else len(text)
        sections[name] = text[mark.end() : stop].strip()
    code_text = sections.get("code", text if not marks else "")
    blocks = FENCE.findall(code_text)
    if not blocks and "```" not in code_text and code_text.strip():
        blocks = [code_text]  # OpenCUA's data writes the code under '## Code:' without a fence
    if len(blocks) != 1:
        what = "no" if not blocks else f"{len(blocks)}"
        raise ReplyError(
            "no_action" if not blocks else "two_actions",
            f"the reply has {what} fenced code blocks; write one under '## Code:'",
        )
    thought = "\n\n".join(part for part in (sections.get("thought", ""), sections.get("action", "")) if part)
    if not marks:
        thought = FENCE.sub("", text)
    calls = read_calls(blocks[0].strip(), what="the code")
    units: list[dict[str, Any]] = []
    end: str | None = None
    gave_up = False
    for call in calls:
        if end is not None:
            raise ReplyError("after_end", "nothing may follow computer.terminate() in one reply")
        if call.name == "computer.terminate":
            end, gave_up = _terminate(call)
            continue
        made, cursor = _units(call, cursor)
        units.extend(made)
    kept = check_units(units)
    said = words(thought, kept)
    if end is not None:
        end = end.strip() or said
    return Reply(said, kept, end=end, gave_up=gave_up, cursor=cursor)


def _terminate(call: PyCall) -> tuple[str, bool]:
    args = _only(call, {"status", "answer"})
    status = args.get("status", call.args[0] if call.args else None)
    if status not in ("success", "fail", "failure"):
        raise ReplyError("bad_field", "computer.terminate()'s status is 'success' or 'failure'")
    answer = args.get("answer", "")
    if not isinstance(answer, str):
        raise ReplyError("bad_argument", "computer.terminate()'s answer is text")
    return answer, status != "success"


def _units(call: PyCall, cursor: tuple[float, float] | None) -> tuple[list[dict[str, Any]], tuple[float, float] | None]:
    name = call.name
    short = name.removeprefix("pyautogui.").removeprefix("computer.")
    if name in ("computer.triple_click", "computer.tripleClick"):
        short = "tripleClick"
    elif not name.startswith("pyautogui.") and name != "computer.wait":
        return [refused(name, "unknown_action", f"{name}() is not a call of OpenCUA's action space")], cursor
    if short in CLICKS:
        args = _only(call, {"x", "y", "clicks", "button"} | TIMING, positional=2)
        at = _xy(call, args)
        button, count = CLICKS[short]
        if short == "click":
            button = args.get("button", "left")
            count = args.get("clicks", 1)
            if button not in ("left", "right", "middle") or type(count) is not int or not 1 <= count <= 3:
                raise ReplyError("bad_field", f"{name}(): button left, right or middle, clicks 1 to 3")
        return [unit(name, "click", button=button, count=count, at=at)], (at[0], at[1])
    if short == "moveTo":
        at = _xy(call, _only(call, {"x", "y"} | TIMING, positional=2))
        return [unit(name, "move", at=at)], (at[0], at[1])
    if short == "dragTo":
        args = _only(call, {"x", "y", "button", "mouseDownUp"} | TIMING, positional=2)
        if args.get("button", "left") != "left":
            raise ReplyError("bad_field", f"{name}() drags with the left button")
        if cursor is None:
            raise ReplyError("no_start", f"{name}() drags from where the pointer is: move it first (pyautogui.moveTo)")
        at = _xy(call, args)
        return [unit(name, "drag", **{"from": list(cursor), "to": at})], (at[0], at[1])
    if short in ("scroll", "hscroll"):
        args = _only(call, {"clicks", "x", "y"} | TIMING, positional=3)
        clicks = args.get("clicks", call.args[0] if call.args else None)
        if type(clicks) is not int or clicks == 0:
            raise ReplyError("bad_field", f"{name}() scrolls a whole number of clicks, not 0")
        # pyautogui: positive scrolls up (or right); a wheel notch down is positive here
        where: dict[str, Any] = {}
        if len(call.args) >= 3 or ("x" in args and "y" in args):
            at = [
                args.get("x", call.args[1] if len(call.args) > 1 else None),
                args.get("y", call.args[2] if len(call.args) > 2 else None),
            ]
            where = {"at": at}
        dx, dy = (clicks, 0) if short == "hscroll" else (0, -clicks)
        return [unit(name, "scroll", dx=dx, dy=dy, **where)], cursor
    if short in ("write", "typewrite"):
        args = _only(call, {"message"} | TIMING, positional=1)
        message = args.get("message", call.args[0] if call.args else None)
        if not isinstance(message, str) or not message:
            raise ReplyError("bad_field", f"{name}() writes a non-empty message")
        return [unit(name, "type", text=message)], cursor
    if short in ("press", "hotkey"):
        args = _only(call, {"keys", "presses"} | TIMING, positional=6)
        keys: Any = args.get("keys", list(call.args))
        if isinstance(keys, str):
            keys = [keys]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise ReplyError("bad_key", f"{name}() names its keys: keys=['ctrl', 'c']")
        presses = args.get("presses", 1)
        if type(presses) is not int or not 1 <= presses <= MAX_PRESSES:
            raise ReplyError("bad_field", f"{name}()'s presses is 1 to {MAX_PRESSES}")
        if short == "press" and len(keys) > 1:
            # press(['a', 'b']) presses each in turn; hotkey holds them together
            return [unit(name, "key", keys=[key]) for key in keys for _ in range(presses)], cursor
        return [unit(name, "key", keys=keys) for _ in range(presses)], cursor
    if name == "computer.wait":
        _only(call, set())
        return [unit(name, "wait", ms=WAIT_MS)], cursor
    return [refused(name, "unsupported", f"{name}() is not available on this desktop")], cursor


def _only(call: PyCall, allowed: set[str], positional: int = 0) -> dict[str, Any]:
    extra = set(call.kwargs) - allowed
    if extra:
        raise ReplyError("bad_argument", f"{call.name}() does not take {', '.join(sorted(extra))}")
    if len(call.args) > positional:
        raise ReplyError("bad_argument", f"{call.name}() takes at most {positional} positional arguments")
    return {k: v for k, v in call.kwargs.items() if k not in TIMING}


def _xy(call: PyCall, args: dict[str, Any]) -> list[Any]:
    x = args.get("x", call.args[0] if len(call.args) > 0 else None)
    y = args.get("y", call.args[1] if len(call.args) > 1 else None)
    if x is None or y is None:
        raise ReplyError("missing_field", f"{call.name}() needs x= and y=")
    return [x, y]
