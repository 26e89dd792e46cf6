"""Reading untrusted JSON (script files, model replies): a one-line ``JSONError`` or a value, never a
RecursionError, a traceback, or a number nobody can use.

Python's ``json`` accepts more than JSON: ``NaN`` and ``Infinity`` literals, ``1e999`` (which becomes inf),
and integers of any length up to the interpreter's conversion limit (past it, a ValueError that is not a
JSONDecodeError). Its decoder recurses once per level of nesting and gives up with RecursionError somewhere
past a thousand levels, and everything downstream that walks the value (repr, the audit encoder, the
SDKs' request builders) recurses too. So nesting is capped well below any recursion limit, numbers must be
finite, and every refusal says what and where.

Lone surrogates (``"\\ud800"``) are valid JSON and pass through as they are: the text they sit in reaches
whoever records or shows it, which makes it encodable (``core.text``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from typing import Any

# containers inside containers; real replies and scripts nest fewer than 10 deep
MAX_DEPTH = 64


class JSONError(ValueError):
    """Text that is not acceptable JSON. ``str()`` is one line and names the place when it is known;
    ``syntax`` is true when the text is not JSON at all (callers word that their own way), false when it is
    JSON this reader refuses (nesting too deep)."""

    def __init__(self, message: str, *, syntax: bool) -> None:
        super().__init__(message)
        self.syntax = syntax


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value of ``text`` (UTF-8 if bytes), or JSONError."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONError(f"not UTF-8 at byte {exc.start}", syntax=True) from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise JSONError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}", syntax=True) from None
    except RecursionError:
        # the decoder's own limit, far above max_depth: locate the first level too deep
        raise JSONError(_too_deep(max_depth, text), syntax=False) from None
    except _Refused as exc:
        raise JSONError(str(exc), syntax=True) from None
    except ValueError:
        # int() past the interpreter's digit limit, with advice meant for programmers
        limit = sys.get_int_max_str_digits()
        raise JSONError(f"an integer of more than {limit} digits", syntax=True) from None
    if depth_exceeds(value, max_depth):
        raise JSONError(_too_deep(max_depth, text), syntax=False)
    return value


def depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether containers (lists, tuples, dicts) nest more than ``max_depth`` deep in ``value``, found
    without recursion (so it is safe on any value, however deep)."""
    containers = (dict, list, tuple)
    if type(value) not in containers:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return True
        for child in item.values() if type(item) is dict else item:
            if type(child) in containers:
                stack.append((child, depth + 1))
    return False


class _Refused(ValueError):
    pass


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Refused(f"the number {literal[:24]} is too large for a double")
    return value


# One token per match, strings whole (so brackets inside them do not count). A string always matches
# up to its closing quote or the end of the text (even unterminated), so the scan stays linear on
# any input.
_TOKENS = re.compile(r'"(?:[^"\\]++|\\.|\\\Z)*+(?:"|\Z)|[\[\]{}]', re.DOTALL)


# past this many tokens (~0.5 s) the place is not worth finding
_LOCATE_TOKENS = 2_000_000


def _too_deep(max_depth: int, text: str) -> str:
    depth = 0
    for match in itertools.islice(_TOKENS.finditer(text), _LOCATE_TOKENS):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            if depth > max_depth:
                pos = match.start()
                line = text.count("\n", 0, pos) + 1
                column = pos - (text.rfind("\n", 0, pos) + 1) + 1
                return f"nesting deeper than {max_depth} (line {line}, column {column})"
        elif token == "]" or token == "}":
            depth -= 1
    return f"nesting deeper than {max_depth}"
