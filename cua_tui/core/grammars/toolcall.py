"""The ``<tool_call>`` grammars: Qwen3-VL's and Qwen2.5-VL's ``computer_use`` function (QwenLM cookbooks,
utils/agent_function_call.py) and Fara-7B's (microsoft/fara, src/fara/_prompts.py and fara_agent.py). Words,
then one or more ``<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate":
[x, y]}}</tool_call>`` blocks, read as strict JSON (core/strictjson.py). Qwen3-VL's coordinates are a 0-1000
grid, Qwen2.5-VL's and Fara's pixels of the image sent (the grammar's Scaling says which).

Qwen's ``left_click_drag`` drags from where the pointer is (``cursor``: followed through the reply and from
one reply to the next). Fara's own actions become what its browser harness does (fara_agent.py): ``type``
clicks its coordinate first, clears the field if asked and presses Enter unless told not to;
``visit_url`` is ctrl+L, the address typed and Return; ``history_back`` alt+Left; ``web_search`` is refused
(this desktop reaches only the hosts its policy allows: the model is told to visit a page instead).
"""

from __future__ import annotations

import re
from typing import Any

from .. import strictjson
from .reply import Reply, ReplyError, bounded, check_units, memo, words
from .units import refused, unit

BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
THINK = re.compile(r"^.*?</think>", re.DOTALL)
FUNCTION = "computer_use"
MAX_CALLS = 10
# Fara scrolls 400 px a call whatever the amount (fara_agent.py: only the sign of pixels counts)
FARA_NOTCHES = 4
QWEN_ACTIONS = frozenset({"key", "type", "mouse_move", "left_click", "left_click_drag", "right_click",
                          "middle_click", "double_click", "triple_click", "scroll", "hscroll", "wait",
                          "terminate", "answer"})  # fmt: skip
FARA_ACTIONS = frozenset({"key", "type", "mouse_move", "left_click", "scroll", "visit_url", "web_search",
                          "history_back", "pause_and_memorize_fact", "wait", "terminate"})  # fmt: skip
CLICKS = {"left_click": ("left", 1), "right_click": ("right", 1), "middle_click": ("middle", 1),
          "double_click": ("left", 2), "triple_click": ("left", 3)}  # fmt: skip
WEB_SEARCH = ("web_search is not available in this sandbox: it reaches only the sites its policy allows. "
              "Use visit_url with the address of a page instead.")  # fmt: skip


def read_qwen(text: Any, cursor: tuple[float, float] | None = None) -> Reply:
    return _read(text, cursor, fara=False)


def read_fara(text: Any, cursor: tuple[float, float] | None = None) -> Reply:
    return _read(text, cursor, fara=True)


def _read(text: Any, cursor: tuple[float, float] | None, *, fara: bool) -> Reply:
    text = THINK.sub("", bounded(text)) if "</think>" in str(text) else bounded(text)
    if text.count("<tool_call>") != text.count("</tool_call>"):
        raise ReplyError("unclosed", "a <tool_call> block is not closed with </tool_call>")
    blocks = BLOCK.findall(text)
    if not blocks:
        raise ReplyError("no_action", 'the reply has no <tool_call>{"name": "computer_use", ...}</tool_call> block')
    if len(blocks) > MAX_CALLS:
        raise ReplyError("too_many", f"the reply has {len(blocks)} tool calls; at most {MAX_CALLS} are read")
    thought = BLOCK.sub("", text).strip()
    units: list[dict[str, Any]] = []
    memos: list[str] = []
    end: str | None = None
    gave_up = False
    for number, block in enumerate(blocks, 1):
        if end is not None:
            raise ReplyError("after_end", "nothing may follow terminate in one reply")
        action, args = _arguments(block, number, fara)
        if action == "terminate":
            status = args.get("status", "success")
            if status not in ("success", "failure"):
                raise ReplyError("bad_field", "terminate's status is 'success' or 'failure'")
            end, gave_up = "", status == "failure"
        elif action == "answer":
            end = _text(args, "text", action)
        elif action == "pause_and_memorize_fact":
            memos.append(memo(args.get("fact"), "pause_and_memorize_fact"))
        else:
            made, cursor = (_fara if fara else _qwen)(action, args, cursor)
            units.extend(made)
    kept = check_units(units)
    said = words(thought, kept)
    if end is not None:
        end = end.strip() or said
    return Reply(said, kept, end=end, gave_up=gave_up, memos=tuple(memos), cursor=cursor)


def _arguments(block: str, number: int, fara: bool) -> tuple[str, dict[str, Any]]:
    try:
        value = strictjson.loads(block.strip(), max_depth=4)
    except strictjson.JSONError as exc:
        raise ReplyError("bad_json", f"tool call {number} is not JSON: {exc}") from None
    if not isinstance(value, dict) or set(value) - {"name", "arguments"}:
        raise ReplyError("bad_schema", f'tool call {number} is not {{"name": ..., "arguments": {{...}}}}')
    if value.get("name") != FUNCTION:
        raise ReplyError("unknown_function", f"tool call {number} names a function other than {FUNCTION}")
    args = value.get("arguments")
    if isinstance(args, str):  # some servers hand the arguments back as a JSON string
        try:
            args = strictjson.loads(args, max_depth=3)
        except strictjson.JSONError as exc:
            raise ReplyError("bad_json", f"tool call {number}'s arguments are not JSON: {exc}") from None
    if not isinstance(args, dict):
        raise ReplyError("bad_schema", f"tool call {number}'s arguments are not an object")
    action = args.get("action")
    known = FARA_ACTIONS if fara else QWEN_ACTIONS
    if not isinstance(action, str):
        raise ReplyError("bad_schema", f"tool call {number} names no action")
    if action not in known:
        raise ReplyError(
            "unknown_action", f"tool call {number}: {action[:40]!r} is not an action of the computer_use tool"
        )
    return action, args


def _qwen(
    action: str, args: dict[str, Any], cursor: tuple[float, float] | None
) -> tuple[list[dict[str, Any]], tuple[float, float] | None]:
    if action in CLICKS:
        button, count = CLICKS[action]
        at = _coordinate(args, action, required=cursor is None) or list(cursor or ())
        return [unit(action, "click", button=button, count=count, at=at)], (at[0], at[1])
    if action == "mouse_move":
        at = _coordinate(args, action)
        return [unit(action, "move", at=at)], (at[0], at[1])
    if action == "left_click_drag":
        if cursor is None:
            raise ReplyError("no_start", "left_click_drag drags from where the pointer is: mouse_move there first")
        at = _coordinate(args, action)
        return [unit(action, "drag", **{"from": list(cursor), "to": at})], (at[0], at[1])
    if action in ("scroll", "hscroll"):
        pixels = args.get("pixels")
        if type(pixels) is not int or pixels == 0:
            raise ReplyError("bad_field", f"{action}: pixels is a whole number, not 0")
        # the cookbook scrolls pyautogui.scroll(pixels): clicks of the wheel, positive up (or right)
        notches = max(-100, min(100, pixels))
        dx, dy = (notches, 0) if action == "hscroll" else (0, -notches)
        at = _coordinate(args, action, required=False)
        return [unit(action, "scroll", dx=dx, dy=dy, **({"at": at} if at else {}))], cursor
    if action == "key":
        return [unit(action, "key", keys=_keys(args, action))], cursor
    if action == "type":
        return [unit(action, "type", text=_text(args, "text", action))], cursor
    return [unit(action, "wait", ms=_seconds(args, action))], cursor  # wait


def _fara(
    action: str, args: dict[str, Any], cursor: tuple[float, float] | None
) -> tuple[list[dict[str, Any]], tuple[float, float] | None]:
    if action == "left_click":
        at = _coordinate(args, action)
        return [unit(action, "click", button="left", count=1, at=at)], (at[0], at[1])
    if action == "mouse_move":
        at = _coordinate(args, action)
        return [unit(action, "move", at=at)], (at[0], at[1])
    if action == "type":
        text = _text(args, "text", action)
        at = _coordinate(args, action, required=False)
        out: list[dict[str, Any]] = []
        if at:
            out.append(unit(action, "click", button="left", count=1, at=at))
            cursor = (at[0], at[1])
        if _flag(args, "delete_existing_text", False, action):
            out += [unit(action, "key", keys=["ctrl", "a"]), unit(action, "key", keys=["BackSpace"])]
        out.append(unit(action, "type", text=text))
        if _flag(args, "press_enter", True, action):
            out.append(unit(action, "key", keys=["Return"]))
        return out, cursor
    if action == "scroll":
        pixels = args.get("pixels")
        if isinstance(pixels, bool) or not isinstance(pixels, int | float) or pixels == 0:
            raise ReplyError("bad_field", "scroll: pixels is a number, positive up, negative down")
        at = _coordinate(args, action, required=False)
        dy = -FARA_NOTCHES if pixels > 0 else FARA_NOTCHES
        return [unit(action, "scroll", dx=0, dy=dy, **({"at": at} if at else {}))], cursor
    if action == "key":
        return [unit(action, "key", keys=_keys(args, action))], cursor
    if action == "visit_url":
        url = _text(args, "url", action).strip()
        if any(c in url for c in "\n\r\t"):
            raise ReplyError("bad_field", "visit_url: an address is one line")
        return [unit(action, "key", keys=["ctrl", "l"]), unit(action, "type", text=url),
                unit(action, "key", keys=["Return"])], cursor  # fmt: skip
    if action == "history_back":
        return [unit(action, "key", keys=["alt", "Left"])], cursor
    if action == "web_search":
        return [refused(action, "unsupported", WEB_SEARCH)], cursor
    return [unit(action, "wait", ms=_seconds(args, action))], cursor  # wait


def _coordinate(args: dict[str, Any], action: str, *, required: bool = True) -> list[Any]:
    value = args.get("coordinate")
    if value is None:
        if required:
            raise ReplyError("missing_field", f"{action} needs a coordinate [x, y]")
        return []
    if not isinstance(value, list) or len(value) != 2:
        raise ReplyError("bad_point", f"{action}: the coordinate is [x, y]")
    return list(value)


def _keys(args: dict[str, Any], action: str) -> list[str]:
    keys = args.get("keys")
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise ReplyError("bad_key", f"{action}: keys is a list of key names")
    return keys


def _text(args: dict[str, Any], key: str, action: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise ReplyError("bad_field", f"{action} needs {key}")
    return value


def _flag(args: dict[str, Any], key: str, default: bool, action: str) -> bool:
    value = args.get(key, default)
    if not isinstance(value, bool):
        raise ReplyError("bad_field", f"{action}: {key} is true or false")
    return value


def _seconds(args: dict[str, Any], action: str) -> int:
    value = args.get("time", 1)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 120:
        raise ReplyError("bad_field", f"{action}: time is 0 to 120 seconds")
    return int(value * 1000)
