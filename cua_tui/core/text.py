"""Showing untrusted text literally: control characters become visible symbols.

Model messages, typed text and page titles may carry terminal escape sequences, carriage returns that
overwrite a line, or bidirectional overrides that reorder what a reviewer reads. ``visible`` maps them all
to printable stand-ins, so what is shown is exactly what is there.

JSON can also carry lone surrogates (``"\\ud800"``): valid JSON, a valid Python ``str``, yet not encodable
as UTF-8, so printing or recording such text raises UnicodeEncodeError. ``visible`` shows them as escapes;
``encodable`` makes any text safe to encode where it is recorded.
"""

from __future__ import annotations

import re

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_ZERO_WIDTH = {0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF}
_SURROGATES = set(range(0xD800, 0xE000))
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _build_table(keep_newlines: bool) -> dict[int, str]:
    table: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20)}  # ␀ … ␟ (␛ for ESC)
    table[0x7F] = "␡"
    table[0x09] = "⇥"
    table[0x0A] = "\n" if keep_newlines else "↵"
    table[0x0D] = "␍"
    for c in range(0x80, 0xA0):  # C1 controls, including the 8-bit CSI
        table[c] = f"\\x{c:02x}"
    for c in _BIDI | _ZERO_WIDTH | _SURROGATES:
        table[c] = f"\\u{c:04x}"
    return table


_ONE_LINE = _build_table(False)
_MULTI_LINE = _build_table(True)


def visible(text: str, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """``text`` with every control, bidi and zero-width character replaced by a visible stand-in."""
    if not isinstance(text, str):
        text = str(text)
    if limit is not None:
        text = truncate(text, limit)
    return text.translate(_MULTI_LINE if keep_newlines else _ONE_LINE)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the last one an ellipsis when anything was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


# A path under a temporary directory: gone (the run's workspace is removed when it stops) by the
# time a person reads the message that names it.
_TEMP_PATH = re.compile(r"(?:/tmp|/var/tmp|/dev/shm|/run/user/\d+)/[^\s'\"():,;]*")
_REPR = re.compile(r"\b([A-Z][A-Za-z]*Path|[A-Za-z_.]+Error|[A-Za-z_.]+Exception)\(('[^']*'|\"[^\"]*\")\)")


def failure(exc: BaseException, limit: int = 200) -> str:
    """An exception as the reason a person reads: its message in one line, never a Python repr
    (``PosixPath('…')``, ``ValueError('…')``) and never a path under a temporary directory (replaced by
    "a temporary file"). A system error says what went wrong and the file's base name."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
        if exc.filename is not None:
            name = str(exc.filename).rstrip("/").rsplit("/", 1)[-1]
            text += f" ({name})" if name else ""
    else:
        text = str(exc) or type(exc).__name__
        if isinstance(exc, KeyError) and exc.args:  # str() of a KeyError is the key's repr
            text = f"no {exc.args[0]!s}"
    text = _REPR.sub(lambda m: m.group(2)[1:-1], text)
    text = _TEMP_PATH.sub("a temporary file", text)
    return one_line(text, limit)


def one_line(text: str, limit: int = 300) -> str:
    """``text`` (an error message, a reply) as one line of at most ``limit`` characters: runs of white space
    become one space. Encodable too, as it may quote a model's reply and is recorded."""
    return encodable(truncate(" ".join(str(text).split()), limit))


def lone_surrogate(text: str) -> int:
    """Index of the first lone surrogate in ``text`` (a code point UTF-8 cannot encode), or -1."""
    if text.isascii():
        return -1
    match = _LONE_SURROGATE.search(text)
    return match.start() if match else -1


def encodable(text: str) -> str:
    """``text`` with every lone surrogate replaced by its visible escape (``\\ud800``), so that it encodes
    as UTF-8; any other text comes back unchanged (the same object)."""
    if lone_surrogate(text) < 0:
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
