"""GLM-4.5V's and GLM-4.1V-Thinking's desktop grammar (zai-org/GLM-V, examples/gui-agent/glm-45v/agent.md and
gui_agent_45v.py): an optional ``<think>...</think>``, plain words with one action such as
``left_click(start_box='[x,y]', element_info='...')``, often wrapped in ``<|begin_of_box|>...<|end_of_box|>``,
then ``Memory:`` and a JSON list the model wants back next turn. Coordinates are thousandths of the
screenshot, 0-999 (the grammar's Scaling: a 0-999 grid).

Read strictly: exactly one action (the prompt says "NEVER output multiple actions at once"), a call of a
known name with literal arguments (core/grammars/pycall.py); ``DONE()`` ends the run with the model's words
as its claim, ``FAIL()`` ends it "gave up".
"""

from __future__ import annotations

import re
from typing import Any

from .pycall import PyCall, read_call
from .reply import Reply, ReplyError, bounded, check_units, no_arguments, text_argument, words
from .units import refused, unit

THINK = re.compile(r"^.*?</think>", re.DOTALL)
ANSWER = re.compile(r"</?answer>")
BOX = re.compile(r"<\|begin_of_box\|>(.*?)<\|end_of_box\|>", re.DOTALL)
# "Action:" written before the action's box, as the reward tests' replies have it: not the model's words
LABEL = re.compile(r"\s*Action[:：]\s*$")
MEMORY = re.compile(r"^\s*Memory[:：]", re.MULTILINE)
NAMES = ("left_click", "right_click", "middle_click", "hover", "left_double_click", "left_drag", "key", "type",
         "scroll", "WAIT", "DONE", "FAIL")  # fmt: skip
CALL = re.compile(r"\b(" + "|".join(NAMES) + r")\(", re.IGNORECASE)
POINT = re.compile(
    r"^\s*\[\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*(?:,\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*)?\]\s*$"
)
CLICKS = {"left_click": ("left", 1), "right_click": ("right", 1), "middle_click": ("middle", 1),
          "left_double_click": ("left", 2)}  # fmt: skip
DEFAULT_STEP = 5
WAIT_MS = 5000
MAX_MEMORY = 4000


def read(text: Any, cursor: tuple[float, float] | None = None) -> Reply:
    """One GLM-V reply; ReplyError when it cannot be read."""
    text = ANSWER.sub("", THINK.sub("", bounded(text)))
    memory = ""
    found = list(MEMORY.finditer(text))
    if found:
        memory = text[found[-1].end() :].strip()
        text = text[: found[0].start()]
        if len(memory) > MAX_MEMORY:
            raise ReplyError("too_long", f"the Memory: part has {len(memory)} characters; at most {MAX_MEMORY}")
    boxes = BOX.findall(text)
    if len(boxes) > 1:
        raise ReplyError("two_actions", "the reply holds more than one action; write one")
    if boxes:
        action = boxes[0].strip()
        thought = BOX.sub("", text)
    else:
        action, thought = _bare(text)
    call = _read(action)
    said = words(LABEL.sub("", thought.replace("<|begin_of_box|>", "").replace("<|end_of_box|>", "")), [])
    name = call.name.upper()
    if name == "DONE":
        no_arguments(call)
        return Reply(said, end=said, memory=memory, written=action)
    if name == "FAIL":
        no_arguments(call)
        return Reply(said, end=said, gave_up=True, memory=memory, written=action)
    units = check_units(_units(call))
    return Reply(words(said, units), units, memory=memory, written=action)


def _bare(text: str) -> tuple[str, str]:
    """The one action written without its box tokens (a server that drops special tokens): from a known
    name's ``(`` to the end of its line."""
    calls = list(CALL.finditer(text))
    if not calls:
        raise ReplyError("no_action", "the reply holds no action (left_click(start_box='[x,y]'), DONE(), ...)")
    if len(calls) > 1:
        raise ReplyError("two_actions", "the reply holds more than one action; write one")
    start = calls[0].start()
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    return text[start:end].strip(), text[:start] + text[end:]


def _read(action: str) -> PyCall:
    if not action:
        raise ReplyError("no_action", "the action box is empty")
    try:
        return read_call(action, what="the action")
    except ReplyError:
        raise
    except ValueError as exc:
        code = getattr(exc, "code", "syntax")
        raise ReplyError(code, str(exc)) from None


def _units(call: PyCall) -> list[dict[str, Any]]:
    name = call.name
    if call.args:
        raise ReplyError("bad_argument", f"{name}() takes named arguments (start_box='[x,y]')")
    args = call.kwargs
    if name in CLICKS:
        button, count = CLICKS[name]
        return [unit(name, "click", button=button, count=count, at=_point(args, name, "start_box"))]
    if name == "hover":
        return [unit(name, "move", at=_point(args, name, "start_box"))]
    if name == "left_drag":
        return [unit(name, "drag", **{"from": _point(args, name, "start_box"), "to": _point(args, name, "end_box")})]
    if name == "key":
        keys = text_argument(args, name, "keys", "key")
        tokens = [k for k in keys.strip().split("+") if k] if keys.strip() != "+" else ["+"]
        if not tokens:
            raise ReplyError("bad_key", "key() names no key")
        return [unit(name, "key", keys=tokens)]
    if name == "type":
        return [unit(name, "type", text=text_argument(args, name, "content"))]
    if name == "scroll":
        direction = text_argument(args, name, "direction").strip().lower()
        if direction not in ("up", "down"):
            raise ReplyError("bad_field", "scroll()'s direction is up or down")
        step = args.get("step", DEFAULT_STEP)
        if isinstance(step, str) and step.strip().isdigit():
            step = int(step.strip())
        if type(step) is not int or not 1 <= step <= 50:
            raise ReplyError("bad_field", "scroll()'s step is a number of wheel steps, 1 to 50")
        return [
            unit(name, "scroll", at=_point(args, name, "start_box"), dx=0, dy=step if direction == "down" else -step)
        ]
    if name.upper() == "WAIT":
        no_arguments(call)
        return [unit(name, "wait", ms=WAIT_MS)]
    return [refused(name, "unknown_action", f"{name}() is not an action of GLM-V's desktop action space")]


def _point(args: dict[str, Any], name: str, key: str) -> list[float]:
    value = args.get(key)
    if value is None:
        raise ReplyError("missing_field", f"{name}() needs {key}='[x,y]'")
    if isinstance(value, list):
        numbers = value
    elif isinstance(value, str) and (
        match := POINT.match(value.replace("<|begin_of_box|>", "").replace("<|end_of_box|>", ""))
    ):
        numbers = [float(n) for n in match.groups() if n is not None]
    else:
        numbers = []
    if len(numbers) not in (2, 4) or not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
        raise ReplyError("bad_point", f"{name}()'s {key} is not a point '[x,y]'")
    if len(numbers) == 4:
        return [(numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2]
    return [numbers[0], numbers[1]]
