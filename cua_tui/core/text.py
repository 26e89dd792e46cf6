"""Showing untrusted text literally: every character that hides, or hides what follows it, is shown as a
stand-in.

Model messages, typed text and page titles may carry terminal escape sequences, carriage returns that
overwrite a line, bidirectional overrides that reorder what a reviewer reads, and characters a terminal
draws as nothing (zero-width and format characters, Unicode tags, variation selectors, fillers and blank
look-alikes of a space). ``hidden`` is the one predicate that says which; ``visible`` and the editor's
escaping (``core.edits``) both use it, so what is shown is exactly what is there.

JSON can also carry lone surrogates (``"\\ud800"``): valid JSON, a valid Python ``str``, yet not encodable
as UTF-8, so printing or recording such text raises UnicodeEncodeError. ``visible`` shows them as escapes;
``encodable`` makes any text safe to encode where it is recorded.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# Default_Ignorable_Code_Point, from DerivedCoreProperties.txt of this Unicode version (the same as
# Python's ``unicodedata.unidata_version``; tests/test_visible_text.py pins it): the code points a
# renderer draws as nothing. The other hidden characters come from the general category (see ``hidden``).
UNICODE_VERSION = "15.1.0"
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # Cf  SOFT HYPHEN
    (0x034F, 0x034F),  # Mn  COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # Cf  ARABIC LETTER MARK
    (0x115F, 0x1160),  # Lo  HANGUL CHOSEONG FILLER..HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # Mn  KHMER VOWEL INHERENT AQ..KHMER VOWEL INHERENT AA
    (0x180B, 0x180D),  # Mn  MONGOLIAN FREE VARIATION SELECTOR ONE..THREE
    (0x180E, 0x180E),  # Cf  MONGOLIAN VOWEL SEPARATOR
    (0x180F, 0x180F),  # Mn  MONGOLIAN FREE VARIATION SELECTOR FOUR
    (0x200B, 0x200F),  # Cf  ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),  # Cf  LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x2064),  # Cf  WORD JOINER..INVISIBLE PLUS
    (0x2065, 0x2065),  # Cn  <reserved-2065>
    (0x2066, 0x206F),  # Cf  LEFT-TO-RIGHT ISOLATE..NOMINAL DIGIT SHAPES
    (0x3164, 0x3164),  # Lo  HANGUL FILLER
    (0xFE00, 0xFE0F),  # Mn  VARIATION SELECTOR-1..VARIATION SELECTOR-16
    (0xFEFF, 0xFEFF),  # Cf  ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # Lo  HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # Cn  <reserved-FFF0>..<reserved-FFF8>
    (0x1BCA0, 0x1BCA3),  # Cf  SHORTHAND FORMAT LETTER OVERLAP..SHORTHAND FORMAT UP STEP
    (0x1D173, 0x1D17A),  # Cf  MUSICAL SYMBOL BEGIN BEAM..MUSICAL SYMBOL END PHRASE
    (0xE0000, 0xE0000),  # Cn  <reserved-E0000>
    (0xE0001, 0xE0001),  # Cf  LANGUAGE TAG
    (0xE0002, 0xE001F),  # Cn  <reserved-E0002>..<reserved-E001F>
    (0xE0020, 0xE007F),  # Cf  TAG SPACE..CANCEL TAG
    (0xE0080, 0xE00FF),  # Cn  <reserved-E0080>..<reserved-E00FF>
    (0xE0100, 0xE01EF),  # Mn  VARIATION SELECTOR-17..VARIATION SELECTOR-256
    (0xE01F0, 0xE0FFF),  # Cn  <reserved-E01F0>..<reserved-E0FFF>
)
# U+2800 BRAILLE PATTERN BLANK: a letter (So) that every font draws blank, a space in disguise
BLANK_LOOKALIKES = (0x2800,)

# hidden though printable (Python's str.isprintable covers the categories): the default-ignorable code
# points a letter or a mark carries, and the blank look-alikes
_IGNORABLE = re.compile(
    "["
    + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in DEFAULT_IGNORABLE)
    + "".join(f"\\U{c:08x}" for c in BLANK_LOOKALIKES)
    + "]"
)
# what may be hidden: anything but printable ASCII (the scan's fast path)
_SUSPECT = re.compile("[^ -~]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_SPACE = re.compile("[ \t\n\r\x0b\x0c]+")


def hidden(char: str) -> bool:
    """Whether ``char`` (one code point) hides itself or what follows, so that it is shown as a stand-in:
    a control, format (Cf), surrogate, private-use or unassigned code point, a line or paragraph separator,
    every space but U+0020, every default-ignorable code point (variation selectors and Unicode tags among
    them) and U+2800. The one predicate for ``visible`` and the editor's escaping."""
    return not char.isprintable() or _IGNORABLE.match(char) is not None


def escape(char: str) -> str:
    """The backslash escape of one code point, as Python writes it: ``\\x1b``, ``\\u200b``, ``\\U000e0041``
    (a code point above U+FFFF always has eight digits, so an escape never reads as a shorter one)."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


# the stand-ins of the C0 controls and DEL: one symbol each (␀ … ␟, ␛ for ESC)
_CONTROLS: dict[str, str] = {chr(c): chr(0x2400 + c) for c in range(0x20)} | {"\x7f": "␡", "\t": "⇥", "\n": "↵"}


def stand_in(char: str, *, keep_newlines: bool = False) -> str:
    """What ``visible`` shows for a hidden ``char``: a control symbol, else its escape."""
    if keep_newlines and char == "\n":
        return char
    return _CONTROLS.get(char) or escape(char)


def visible_parts(text: str, *, keep_newlines: bool = False, limit: int | None = None) -> list[tuple[str, bool]]:
    """``visible(text)`` as its pieces in order, each with whether it is a stand-in (True) or the text's own
    characters (False), so that a front end can draw the stand-ins apart: the literal text ``\\u200b`` is
    text, a real U+200B a stand-in."""
    if not isinstance(text, str):
        text = str(text)
    if limit is not None:
        text = truncate(text, limit)
    parts: list[tuple[str, bool]] = []
    start = 0
    for match in _SUSPECT.finditer(text):
        char = match.group()
        if not hidden(char) or (keep_newlines and char == "\n"):
            continue
        at = match.start()
        if at > start:
            parts.append((text[start:at], False))
        parts.append((stand_in(char), True))
        start = at + 1
    if start < len(text) or not parts:
        parts.append((text[start:], False))
    return parts


def visible(text: str, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """``text`` with every hidden character (``hidden``) replaced by a visible stand-in."""
    if not isinstance(text, str):
        text = str(text)
    if limit is not None:
        text = truncate(text, limit)
    if text.isprintable() and _IGNORABLE.search(text) is None:
        return text  # nothing hidden: the common case, at the speed of two C scans
    return "".join(part for part, _ in visible_parts(text, keep_newlines=keep_newlines))


# An operator's name, as ``--operator`` takes it: ASCII letters, digits and . - _ @, so that no name can look
# like another (a Cyrillic "ЬоЬ" is not "bob") or hide a character.
OPERATOR = re.compile("[A-Za-z0-9._@-]{1,64}")


def operator_problem(name: str) -> str | None:
    """Why ``name`` cannot name an operator (None: it can), in words that say which character is refused."""
    if OPERATOR.fullmatch(name):
        return None
    if not name:
        return "an operator's name is empty"
    if len(name) > 64:
        return f"an operator's name has at most 64 characters, not {len(name)}"
    char = next(c for c in name if not OPERATOR.fullmatch(c))
    what = unicodedata.name(char, "") or "a character"
    return (
        f"'{visible(name, limit=64)}' has {what} (U+{ord(char):04X}); an operator's name is ASCII letters, "
        "digits and . - _ @"
    )


def shown_operator(name: str, limit: int = 40) -> str:
    """A recorded operator's name as a table shows it: ``visible``, and every other character beyond ASCII
    escaped too (``\\u042c``), so that an old run directory's look-alike of ``bob`` never reads as bob."""
    name = truncate(name, limit)
    return "".join(stand_in(c) if hidden(c) else c if c.isascii() else escape(c) for c in name)


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


def either(names: Sequence[str]) -> str:
    """Names as a sentence offers them: ``local, cwsandbox or docker``."""
    *most, last = names
    return f"{', '.join(most)} or {last}" if most else last


def one_line(text: str, limit: int = 300) -> str:
    """``text`` (an error message, a reply) as one line of at most ``limit`` characters: runs of ASCII white
    space become one space (any other space or separator stays, for ``visible`` to show: a no-break space
    made a plain one would hide). Encodable too, as it may quote a model's reply and is recorded."""
    return encodable(truncate(_ASCII_SPACE.sub(" ", str(text)).strip(" "), limit))


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
