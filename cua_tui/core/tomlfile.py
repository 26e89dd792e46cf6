"""The one strict TOML reader: the policy, the tasks file, the settings and the themes are read here.

A file is read bounded (a regular file, at most a cap of bytes, UTF-8), parsed with tomllib (nesting and
dotted keys bounded first) and checked against a msgspec schema (unknown keys are errors). Every problem is a
``TomlFileError`` naming the file and the line of the key: ``policy file p.toml, line 4: limits.max_turns:
Expected `int`, got `str```.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from .errors import UsageError
from .safeio import FileProblem, read_small_file
from .text import visible

T = TypeVar("T")
KeyPath = tuple[Any, ...]

# a real settings-like file is a few kilobytes; this bounds what a hostile one costs
MAX_BYTES = 1024 * 1024
# the longest key path (tables, dotted keys, arrays, inline tables); the schemas need 3
MAX_NESTING = 32


class TomlFileError(ValueError, UsageError):
    """A file that cannot be used; the message names the file and, where known, the line.

    The message quotes the file (its path, keys, values): it is made visible here, once, so that no caller
    can print a terminal escape from a hostile file."""

    def __init__(self, message: str) -> None:
        super().__init__(visible(message))


# ------------------------------------------------------------------------------------------------
# Reading: bounded, regular files only, UTF-8
# --------------------------------------------------------------------------------------------------
def read_bytes(
    path: Path, label: str, *, cap: int = MAX_BYTES, what: str = "a file", error: type[TomlFileError] = TomlFileError
) -> bytes:
    """The bytes of the file (``label`` names it in messages: "policy file p.toml"; ``what`` its kind in the
    size message: "a policy file")."""
    try:
        return read_small_file(path, cap, what)
    except FileProblem as exc:
        raise error(f"{label}: {exc}") from None


def decode(data: bytes, label: str, error: type[TomlFileError] = TomlFileError) -> str:
    """UTF-8 text with its line ends made ``\\n``; a bad byte is reported with its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{label}, line {line}: not UTF-8 text (byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_text(
    path: Path, label: str, *, cap: int = MAX_BYTES, what: str = "a file", error: type[TomlFileError] = TomlFileError
) -> str:
    return decode(read_bytes(path, label, cap=cap, what=what, error=error), label, error)


def load(
    path: Path, label: str, *, cap: int = MAX_BYTES, what: str = "a file", error: type[TomlFileError] = TomlFileError
) -> TomlDoc:
    """Read and parse a file; check it against a schema with ``TomlDoc.convert``."""
    return parse(read_text(path, label, cap=cap, what=what, error=error), label, cap=cap, error=error)


def parse(text: str, label: str, *, cap: int = MAX_BYTES, error: type[TomlFileError] = TomlFileError) -> TomlDoc:
    """TOML text parsed, its size and nesting bounded first."""
    if len(text) > cap:
        raise error(f"{label}: too large (over {cap} characters)")
    layout = _Layout(text)
    # tomllib takes quadratic time on a key of many dotted parts ("a.a.a...a = 1"): refuse those
    # first. A quick pattern finds candidates (it also sees dots inside strings); the scanner
    # decides.
    if _MANY_PARTS_RE.search(text) and layout.too_deep_line() is not None:
        raise error(_too_deep(label, layout))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(_toml_error(label, text, str(exc))) from None
    except RecursionError:
        # tomllib descends one Python call per level of nesting: a deep enough file exhausts the
        # stack.
        raise error(_too_deep(label, layout)) from None
    if _depth(data) > MAX_NESTING:
        raise error(_too_deep(label, layout))
    return TomlDoc(label, text, data, error, layout)


@dataclass(frozen=True, slots=True)
class TomlDoc:
    """A parsed TOML text that knows the line of each key path, for messages that name it.

    Paths are those msgspec reports: ``("regions", 1, "verdict")`` is the key ``verdict`` of the second
    ``[[regions]]`` table, ``("keys", "block", 2)`` the third element of ``block = [...]`` in ``[keys]``."""

    label: str
    text: str
    data: dict[str, Any]
    # the exception its errors are (the policy's, the tasks file's, ...) and where its keys stand
    _error: type[TomlFileError]
    _layout: _Layout

    def convert(self, schema: type[T]) -> T:
        """The data checked against a msgspec schema (strict: no coercion)."""
        try:
            return msgspec.convert(self.data, schema, strict=True)
        except msgspec.ValidationError as exc:
            path, message = _msgspec_problem(str(exc))
            raise self.error(path, message) from None

    def line_of(self, path: KeyPath) -> int | None:
        """The line of ``path``, or else of the longest prefix of it found; None for the empty path."""
        return self.lines_of([path])[path]

    def lines_of(self, paths: Collection[KeyPath]) -> dict[KeyPath, int | None]:
        """``line_of`` for many paths, in one pass over the text."""
        return self._layout.lines_of(paths)

    def message(self, path: KeyPath, problem: str, item: int | None = None) -> str:
        """``label, line N: dotted.path: problem`` (``item``: the index of the offending element of a list)."""
        line = self.line_of(path if item is None else (*path, item))
        where = f"line {line}" if line else "at top level"
        dotted = ".".join(str(p) for p in path)
        return f"{self.label}, {where}: {dotted + ': ' if dotted else ''}{problem}"

    def error(self, path: KeyPath, problem: str, item: int | None = None) -> TomlFileError:
        """The error to raise for a problem at ``path`` (of the caller's error type)."""
        return self._error(self.message(path, problem, item))


# ------------------------------------------------------------------------------------------------
# Messages: tomllib says "... (at line 3, column 7)"; msgspec "... - at `$.limits.max_turns`"
# --------------------------------------------------------------------------------------------------
_TOML_WHERE_RE = re.compile(r" \(at line (\d+), column (\d+)\)$")
_AT_END = " (at end of document)"
_PATH_RE = re.compile(r" - at `\$((?:\.[A-Za-z0-9_-]+|\[\d+\])*)`")
_PATH_PART_RE = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]")
_UNKNOWN_FIELD = "Object contains unknown field `"
_MISSING_FIELD = "Object missing required field `"


def _toml_error(label: str, text: str, message: str) -> str:
    where = _TOML_WHERE_RE.search(message)
    if where:
        message = message[: where.start()]
        return f"{label}, line {where.group(1)}, column {where.group(2)}: invalid TOML: {message}"
    if message.endswith(_AT_END):
        last = text.count("\n") + (0 if text.endswith("\n") else 1)
        message = message.removesuffix(_AT_END)
        return f"{label}, line {max(last, 1)}: invalid TOML at the end of the file: {message}"
    return f"{label}: invalid TOML: {message}"


def _msgspec_problem(message: str) -> tuple[KeyPath, str]:
    """msgspec's message as (key path, problem); an unknown key's path ends with that key."""
    path: KeyPath = ()
    # The last marker: a field name may contain the marker too.
    cut = message.rfind(" - at `$")
    match = _PATH_RE.fullmatch(message, cut) if cut >= 0 else None
    if match:
        message = message[:cut]
        path = tuple(name if name else int(index) for name, index in _PATH_PART_RE.findall(match.group(1)))
    if message.startswith(_UNKNOWN_FIELD) and message.endswith("`"):
        name = message[len(_UNKNOWN_FIELD) : -1]
        return (*path, name), f"unknown key {name!r}"
    if message.startswith(_MISSING_FIELD) and message.endswith("`"):
        return path, f"missing required key {message[len(_MISSING_FIELD) : -1]!r}"
    return path, message


def _too_deep(label: str, layout: _Layout) -> str:
    line = layout.too_deep_line()
    where = f", line {line}" if line else ""
    return f"{label}{where}: nested more than {MAX_NESTING} levels deep (arrays, tables or dotted keys)"


def _depth(data: Any) -> int:
    """The longest key path in parsed TOML (``a.b = [[1]]`` is 4 deep: a, b, 0, 0), without recursion."""
    deepest = 0
    # Containers only, with the length of their path.
    todo: list[tuple[Any, int]] = [(data, 0)]
    while todo:
        node, depth = todo.pop()
        children = list(node.values()) if isinstance(node, dict) else node
        if children:
            deepest = max(deepest, depth + 1)
            if deepest > MAX_NESTING:
                break
            todo.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


# ------------------------------------------------------------------------------------------------
# Where each key path starts: tomllib keeps no positions, so the text is scanned for them
# --------------------------------------------------------------------------------------------------
# MAX_NESTING parts of a key, each followed by a dot, where a key may start (a line, "[", "{", ",").
# Linear: the quantifiers are possessive, an attempt starts only there, and a quoted part ends at
# the first quote that could start another attempt, so what two attempts scan overlaps by one key at
# most.
_MANY_PARTS_RE = re.compile(
    r"(?:^|[\[{,])[ \t]*+(?:(?:[A-Za-z0-9_-]++|\"(?:[^\"\\\n]|\\.)*+\"|'[^'\n]*+')[ \t]*+\.[ \t]*+)"
    + f"{{{MAX_NESTING}}}",
    re.MULTILINE,
)

# A hand-written scanner instead of regular expressions over whole lines: a pattern such as "a run
# of spaces, then key characters or spaces, then spaces" backtracks cubically on a long hostile
# line. Every step consumes input and a multi-line string that never closes ends the scan, so the
# cost is linear in the size of the text, whatever it holds.
_WS_RE = re.compile(r"[ \t\r]+")
_BARE_RE = re.compile(r"[^\s\[\]{},=\"'#.]+")
_BASIC_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LITERAL_RE = re.compile(r"'[^'\n]*'")
_ML_BASIC_RE = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""(?:""?)?', re.DOTALL)
_ML_LITERAL_RE = re.compile(r"'''(?:[^']|'(?!''))*'''(?:''?)?", re.DOTALL)
_PUNCT = frozenset("[]{},=.")
_STARTS_VALUE = frozenset({"key", "string", "[", "{"})


class _Layout:
    """Where each key path of a TOML text starts (1-based line): keys, table headers, list elements."""

    def __init__(self, text: str) -> None:
        self.text = text

    def lines_of(self, paths: Collection[KeyPath]) -> dict[KeyPath, int | None]:
        """For each path its first line, or else the first line of its longest prefix found (None if none)."""
        wanted = {path[:n] for path in paths for n in range(1, len(path) + 1)}
        first: dict[KeyPath, int] = {}
        for found, line in self._scan():
            if found in wanted and found not in first:
                first[found] = line
        return {
            path: next((first[path[:n]] for n in range(len(path), 0, -1) if path[:n] in first), None) for path in paths
        }

    def too_deep_line(self) -> int | None:
        """The line where a path first grows longer than MAX_NESTING (the scan stops there)."""
        for found, line in self._scan():
            if len(found) > MAX_NESTING:
                return line
        return None

    def _tokens(self) -> Iterator[tuple[str, str, int]]:
        """(kind, text, line): kind is "nl", "key" (a bare word or a one-line string, which may be a key),
        "string" (a multi-line string) or a punctuation character. Spaces and comments are skipped."""
        text, pos, line, end = self.text, 0, 1, len(self.text)
        while pos < end:
            c = text[pos]
            m: re.Match[str] | None
            if c == "\n":
                yield "nl", c, line
                line, pos = line + 1, pos + 1
            elif c in " \t\r":
                m = _WS_RE.match(text, pos)
                pos = m.end() if m else pos + 1
            elif c == "#" or (c in "\"'" and not text.startswith(c * 3, pos)):
                m = None if c == "#" else (_BASIC_RE if c == '"' else _LITERAL_RE).match(text, pos)
                if m is None:
                    # A comment, or a string not closed on its line: skip to the end of the line.
                    stop = text.find("\n", pos)
                    pos = end if stop < 0 else stop
                else:
                    yield "key", m.group(), line
                    pos = m.end()
            elif c in "\"'":
                m = (_ML_BASIC_RE if c == '"' else _ML_LITERAL_RE).match(text, pos)
                if m is None:
                    # Never closed: the rest of the text is inside it.
                    return
                yield "string", m.group(), line
                line += m.group().count("\n")
                pos = m.end()
            elif c in _PUNCT:
                yield c, c, line
                pos += 1
            else:
                m = _BARE_RE.match(text, pos)
                if m is None:
                    # A stray character (a form feed, a vertical tab): skip it.
                    pos += 1
                else:
                    yield "key", m.group(), line
                    pos = m.end()

    def _scan(self) -> Iterator[tuple[KeyPath, int]]:
        """(path, line) for every key, header and list element, in order; stops after the first path longer
        than MAX_NESTING (nothing deeper can be valid)."""
        scanner = _Scanner()
        for kind, token, line in self._tokens():
            for path in scanner.step(kind, token):
                yield path, line
                if len(path) > MAX_NESTING:
                    return


@dataclass
class _Array:
    """An array being read: its path, the index of its current element, and whether one is awaited."""

    path: KeyPath
    index: int = 0
    waiting: bool = True


@dataclass
class _Inline:
    """An inline table being read: its path, where it is in a ``key = value`` (key, keyparts, value,
    after), and the parts of that key."""

    path: KeyPath
    state: str = "key"
    parts: list[str] = field(default_factory=list)


class _Scanner:
    """The state machine of the scan: each token moves it on and may find paths (a path longer than
    MAX_NESTING is found as soon as it is, so that the scan can stop there)."""

    def __init__(self) -> None:
        self.table: KeyPath = ()
        self.arrays_of_tables: dict[KeyPath, int] = {}
        # The values being read, innermost last.
        self.stack: list[_Array | _Inline] = []
        # At statement level: start (of a line), header, key, value (after "="), rest (of the line).
        self.state = "start"
        self.parts: list[str] = []
        self.new_element = False
        self.value_path: KeyPath = ()

    def step(self, kind: str, token: str) -> Iterator[KeyPath]:
        if not self.stack:
            return self._statement(kind, token)
        top = self.stack[-1]
        if isinstance(top, _Array):
            return self._array(top, kind)
        return self._inline(top, kind, token)

    def _open(self, opener: str, path: KeyPath) -> None:
        if opener in ("[", "{"):
            self.stack.append(_Array(path) if opener == "[" else _Inline(path))

    def _statement(self, kind: str, token: str) -> Iterator[KeyPath]:
        if kind == "nl":
            self.state = "start"
        elif self.state == "start":
            if kind == "[":
                self.state, self.parts, self.new_element = "header", [], False
            elif kind == "key":
                self.state, self.parts = "key", [_key_name(token)]
            else:
                self.state = "rest"
        elif self.state == "header":
            yield from self._header(kind, token)
        elif self.state == "key":
            yield from self._key(kind, token)
        elif self.state == "value":
            self._open(kind, self.value_path)
            self.state = "rest"

    def _header(self, kind: str, token: str) -> Iterator[KeyPath]:
        if kind == "[" and not self.parts:
            # "[[name]]": a new element of an array of tables.
            self.new_element = True
        elif kind == "key":
            self.parts.append(_key_name(token))
            if len(self.parts) > MAX_NESTING:
                yield tuple(self.parts)
        elif kind == "]":
            self.table = _resolve(self.parts, self.arrays_of_tables, self.new_element)
            # The second "]" of "[[name]]" is ignored there.
            self.state = "rest"
            yield self.table

    def _key(self, kind: str, token: str) -> Iterator[KeyPath]:
        if kind == "key":
            self.parts.append(_key_name(token))
            if len(self.table) + len(self.parts) > MAX_NESTING:
                yield (*self.table, *self.parts)
        elif kind == "=":
            for n in range(1, len(self.parts)):
                yield (*self.table, *self.parts[:n])
            self.value_path, self.state = (*self.table, *self.parts), "value"
            yield self.value_path
        elif kind != ".":
            self.state = "rest"

    def _array(self, top: _Array, kind: str) -> Iterator[KeyPath]:
        if kind == ",":
            top.index, top.waiting = top.index + 1, True
        elif kind == "]":
            self.stack.pop()
        elif kind in _STARTS_VALUE and top.waiting:
            top.waiting = False
            element = (*top.path, top.index)
            self._open(kind, element)
            yield element

    def _inline(self, top: _Inline, kind: str, token: str) -> Iterator[KeyPath]:
        if kind == "}":
            self.stack.pop()
        elif top.state == "key" and kind == "key":
            top.state, top.parts = "keyparts", [_key_name(token)]
        elif top.state == "keyparts" and kind == "key":
            top.parts.append(_key_name(token))
            if len(top.path) + len(top.parts) > MAX_NESTING:
                yield (*top.path, *top.parts)
        elif top.state == "keyparts" and kind == "=":
            for n in range(1, len(top.parts)):
                yield (*top.path, *top.parts[:n])
            top.state = "value"
            yield (*top.path, *top.parts)
        elif top.state == "value" and kind in _STARTS_VALUE:
            top.state = "after"
            self._open(kind, (*top.path, *top.parts))
        elif top.state == "after" and kind == ",":
            top.state = "key"


def _key_name(token: str) -> str:
    if token.startswith('"'):
        try:
            # TOML's basic-string escapes are JSON's, bar \U and \e.
            return str(json.loads(token))
        except ValueError:
            return token[1:-1]
    if token.startswith("'"):
        return token[1:-1]
    return token


def _resolve(names: list[str], arrays_of_tables: dict[KeyPath, int], new_element: bool) -> KeyPath:
    """The path of a table header: each array of tables on the way adds the index of its current element."""
    path: KeyPath = ()
    for i, name in enumerate(names):
        path = (*path, name)
        if new_element and i == len(names) - 1:
            arrays_of_tables[path] = arrays_of_tables.get(path, -1) + 1
        if path in arrays_of_tables:
            path = (*path, arrays_of_tables[path])
    return path
