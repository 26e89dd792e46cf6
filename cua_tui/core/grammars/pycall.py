"""Reading the function-call text of open-weight models (``click(start_box='(10,20)')``,
``pyautogui.click(x=10, y=20)``) as Python syntax: parsed by ``ast``, never compiled, executed or
evaluated, and accepted only as calls of a plain or dotted name with literal arguments (strings, finite
numbers, booleans, None, and short lists or tuples of them). Anything else (an expression, a variable, an
f-string, ``float('nan')``, ``__import__``, nesting past a few levels) is one ActionError naming what.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any

from ..actions import ActionError

# brackets inside brackets, counted before Python's parser sees the text (whose own limit, 200, is far
# past anything a model writes and costs a deep recursion to reach)
MAX_BRACKETS = 8
# a literal list inside a list: [[x, y], [x, y]] is as deep as any documented call goes
MAX_LITERAL_DEPTH = 2
MAX_CALLS = 100
MAX_ARGS = 16
MAX_NUMBER = 10**9


@dataclass(frozen=True, slots=True)
class PyCall:
    """One call as written: its dotted name, positional and keyword literal arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def brackets_depth(text: str) -> int:
    """The deepest nesting of ( [ { in ``text``, outside quoted strings (a rough scan: enough to refuse a
    reply built to exhaust a parser before it is parsed)."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(0, depth - 1)
    return deepest


def read_calls(text: str, *, what: str = "the action") -> list[PyCall]:
    """Every statement of ``text`` as a call (at least one); ActionError for anything that is not."""
    if brackets_depth(text) > MAX_BRACKETS:
        raise ActionError("too_deep", f"{what} nests brackets more than {MAX_BRACKETS} deep")
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError as exc:
        line = f" (line {exc.lineno})" if exc.lineno else ""
        raise ActionError("syntax", f"{what} is not a well-formed call{line}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError):
        raise ActionError("syntax", f"{what} is not a well-formed call") from None
    if not tree.body:
        raise ActionError("no_action", f"{what} holds no call")
    if len(tree.body) > MAX_CALLS:
        raise ActionError("too_many", f"{what} holds more than {MAX_CALLS} calls")
    return [_call(statement, what) for statement in tree.body]


def read_call(text: str, *, what: str = "the action") -> PyCall:
    """Exactly one call."""
    calls = read_calls(text, what=what)
    if len(calls) != 1:
        raise ActionError("two_actions", f"{what} holds {len(calls)} calls where one is expected")
    return calls[0]


def _call(statement: ast.stmt, what: str) -> PyCall:
    if not isinstance(statement, ast.Expr) or not isinstance(statement.value, ast.Call):
        raise ActionError("not_a_call", f"{what} holds a statement that is not a call (line {statement.lineno})")
    node = statement.value
    name = _name(node.func, what)
    if len(node.args) + len(node.keywords) > MAX_ARGS:
        raise ActionError("bad_argument", f"{name} has more than {MAX_ARGS} arguments")
    args = tuple(_literal(arg, name, 0) for arg in node.args)
    kwargs: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ActionError("bad_argument", f"{name} unpacks arguments (**); only literals are read")
        if keyword.arg in kwargs:
            raise ActionError("bad_argument", f"{name} names {keyword.arg} twice")
        kwargs[keyword.arg] = _literal(keyword.value, f"{name}'s {keyword.arg}", 0)
    return PyCall(name, args, kwargs)


def _name(func: ast.expr, what: str) -> str:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or len(parts) > 2:
        raise ActionError("not_a_call", f"{what} calls something that is not a plain or dotted name")
    parts.append(func.id)
    return ".".join(reversed(parts))


def _literal(node: ast.expr, where: str, depth: int) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return value
        if isinstance(value, int | float):
            return _number(value, where)
        raise ActionError(
            "bad_argument", f"{where} is a {type(value).__name__} literal; only text and numbers are read"
        )
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, int | float)
            and not isinstance(operand.value, bool)
        ):
            value = -operand.value if isinstance(node.op, ast.USub) else operand.value
            return _number(value, where)
    if isinstance(node, ast.List | ast.Tuple):
        if depth >= MAX_LITERAL_DEPTH:
            raise ActionError("too_deep", f"{where} nests lists more than {MAX_LITERAL_DEPTH} deep")
        if len(node.elts) > MAX_ARGS:
            raise ActionError("bad_argument", f"{where} lists more than {MAX_ARGS} values")
        return [_literal(element, where, depth + 1) for element in node.elts]
    kind = type(node).__name__
    raise ActionError("bad_argument", f"{where} is not a literal ({kind}); nothing is evaluated")


def _number(value: int | float, where: str) -> int | float:
    if isinstance(value, float) and not math.isfinite(value):
        raise ActionError("bad_number", f"{where} is not a finite number")
    if abs(value) > MAX_NUMBER:
        raise ActionError("bad_number", f"{where} is out of range")
    return value
