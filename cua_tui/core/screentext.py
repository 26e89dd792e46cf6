"""Screen text: the words an OCR engine found on a screenshot, ordered for a reviewer.

Pure: the engine's raw table (one row per recognised item, as Tesseract's ``image_to_data`` gives it) is
checked and turned into words with their boxes and confidence, grouped into lines, ordered by distance to a
point (the pending action's target), and searched. The words are the page's own text, so untrusted: a front
end shows them literally (``core.text.visible``). Every count here is bounded.

``ScreenTextReader`` is what a front end needs of an OCR engine, and ``ScreenTextUnavailable`` and
``ScreenTextFailed`` are what it may raise: the TUI sits beside the OCR adapter (cua_tui.ocr, Tesseract) in the
layers and is given one through this protocol, as the App is given its event source.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # imaging loads Pillow; the protocol only names its limit
    from .imaging import ScreenLimit

# a dense 4K page has about 3,000; more is not a screen a person reads
MAX_WORDS = 5_000
# one recognised "word" longer than this is cut (a URL fits)
MAX_WORD_CHARS = 120
# pixels: how far from a point the words "around" it may be (a field and its label)
AROUND_RADIUS = 120
# pixels: words farther than the nearest one by more than this belong to something else
AROUND_GAP = 40
# horizontal pixels that count as one vertical pixel: a field is wide, its text on its row
ROW_WEIGHT = 3
AROUND_WORDS = 10

Point = tuple[int, int]
# x0, y0, x1, y1 (x1 and y1 exclusive), display pixels
Box = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class Word:
    """One recognised word: its text, its box on the screen, the engine's confidence (0 to 100) and the
    line the engine put it on (block, paragraph, line numbers: the page's own grouping)."""

    text: str
    box: Box
    conf: float
    line: tuple[int, int, int] = (0, 0, 0)

    def distance(self, point: Point) -> float:
        """Pixels from ``point`` to the word's box (0 inside it)."""
        return box_distance(self.box, point)


@dataclass(frozen=True, slots=True)
class Line:
    """Words the engine read as one line, left to right."""

    words: tuple[Word, ...]

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)

    @property
    def box(self) -> Box:
        return union(w.box for w in self.words)

    def distance(self, point: Point) -> float:
        return box_distance(self.box, point)


@dataclass(frozen=True, slots=True)
class ScreenText:
    """All the words of one screenshot (``width`` x ``height`` pixels), and its lines in reading order.
    ``truncated`` says that words beyond ``MAX_WORDS`` were dropped."""

    width: int
    height: int
    words: tuple[Word, ...]
    lines: tuple[Line, ...]
    truncated: bool = False

    @classmethod
    def of(cls, width: int, height: int, words: Iterable[Word], *, truncated: bool = False) -> ScreenText:
        kept = tuple(words)
        return cls(width, height, kept, group_lines(kept), truncated)

    def nearest_lines(self, point: Point, limit: int = 8) -> list[Line]:
        """Up to ``limit`` lines, nearest to ``point`` first (ties in reading order)."""
        order = sorted(range(len(self.lines)), key=lambda i: (self.lines[i].distance(point), i))
        return [self.lines[i] for i in order[:limit]]

    def around(
        self, point: Point, *, radius: float = AROUND_RADIUS, gap: float = AROUND_GAP, limit: int = AROUND_WORDS
    ) -> str:
        """The words around ``point`` (a field the last click focused: its placeholder, its label): of the
        ``limit`` nearest words within ``radius`` pixels, those no more than ``gap`` pixels farther than the
        nearest one, put back in reading order, lines joined by " / ". Empty when no word is near.
        Distances are ``row_distance``: words on the point's row count as near (a field is wide)."""

        def far(word: Word) -> float:
            return row_distance(word.box, point)

        order = sorted(range(len(self.words)), key=lambda i: (far(self.words[i]), i))
        near = [self.words[i] for i in order[:limit]]
        if not near or far(near[0]) > radius:
            return ""
        reach = min(radius, far(near[0]) + gap)
        near = [w for w in near if far(w) <= reach]
        chosen = set(map(id, near))
        parts = []
        for line in self.lines:
            words = [w.text for w in line.words if id(w) in chosen]
            if words:
                parts.append(" ".join(words))
        return " / ".join(parts)

    def label_line(self, point: Point, *, radius: float = AROUND_RADIUS) -> Line | None:
        """The line that names what is at ``point`` (a button's label, a field's placeholder or label):
        the nearest by ``row_distance`` within ``radius`` pixels, or None."""
        best = min(self.lines, key=lambda line: row_distance(line.box, point), default=None)
        return best if best is not None and row_distance(best.box, point) <= radius else None


@dataclass(frozen=True, slots=True)
class TargetText:
    """What is read at one point of a screen (a click's target, the field typing goes to), from crops of
    the element there rather than from the whole screen: the element's box (None: no box found there), the
    words it shows (a button's label, a field's content or placeholder) and the label beside it (a field's
    words above or to its left). Page text: untrusted, shown literally."""

    point: Point
    box: Box | None
    text: str
    label: str = ""
    label_box: Box | None = None

    @property
    def name(self) -> str:
        """The words that name the target for a person: its own (a button's), else the label beside it."""
        return self.text or self.label


class ScreenTextUnavailable(RuntimeError):
    """No engine to read screens with (not installed, no language data); ``str()`` is one line saying how to
    get one. Nothing more is tried: every later screen would fail the same way."""


class ScreenTextFailed(RuntimeError):
    """This screenshot could not be read (refused image, timeout, engine error); ``str()`` is one line."""


class ScreenTextReader(Protocol):
    """Reads screenshots as text, cached by the PNG's SHA-256. Thread-safe: a front end calls ``read`` from a
    worker thread and ``cached`` from its UI thread."""

    def cached(self, digest: str) -> ScreenText | None:
        """The text of the screen whose PNG has SHA-256 ``digest``, if it was read already (never blocks)."""
        ...

    def read(self, png: bytes, digest: str | None = None, *, limit: ScreenLimit) -> ScreenText:
        """The words of ``png`` (blocking), a screen of a run whose screen is ``limit`` (a larger one is refused
        from its header, never decoded); ``digest`` is its SHA-256 if known. Raises ScreenTextUnavailable
        (no engine) or ScreenTextFailed (this image)."""
        ...

    def cached_target(self, digest: str, point: Point) -> TargetText | None:
        """What was read at ``point`` of the screen ``digest``, if it was read already (never blocks)."""
        ...

    def read_target(self, png: bytes, digest: str, point: Point, *, limit: ScreenLimit) -> TargetText:
        """Read the element at ``point`` of ``png`` and its label (blocking; raises as ``read`` does)."""
        ...


def box_distance(box: Box, point: Point) -> float:
    """Euclidean pixels from ``point`` to the nearest pixel of ``box`` (0 inside)."""
    x, y = point
    x0, y0, x1, y1 = box
    dx = max(x0 - x, 0, x - (x1 - 1))
    dy = max(y0 - y, 0, y - (y1 - 1))
    return math.hypot(dx, dy)


def row_distance(box: Box, point: Point) -> float:
    """Like ``box_distance``, with horizontal pixels counting ``ROW_WEIGHT`` times less than vertical ones."""
    x, y = point
    x0, y0, x1, y1 = box
    dx = max(x0 - x, 0, x - (x1 - 1)) / ROW_WEIGHT
    dy = max(y0 - y, 0, y - (y1 - 1))
    return math.hypot(dx, dy)


def union(boxes: Iterable[Box]) -> Box:
    x0s, y0s, x1s, y1s = zip(*boxes, strict=True)
    return min(x0s), min(y0s), max(x1s), max(y1s)


def group_lines(words: Sequence[Word]) -> tuple[Line, ...]:
    """The words grouped by the engine's line, lines in the engine's reading order (the order their first
    word came in), words left to right within a line."""
    grouped: dict[tuple[int, int, int], list[Word]] = {}
    for word in words:
        grouped.setdefault(word.line, []).append(word)
    return tuple(Line(tuple(sorted(ws, key=lambda w: (w.box[0], w.box[1])))) for ws in grouped.values())


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def from_data(
    data: Mapping[str, Sequence[object]], width: int, height: int, *, max_words: int = MAX_WORDS
) -> ScreenText:
    """Words from the engine's table (Tesseract's TSV as columns: ``level``, ``block_num``, ``par_num``,
    ``line_num``, ``left``, ``top``, ``width``, ``height``, ``conf``, ``text``). Only word rows (level 5)
    with text and a confidence count; boxes are clipped to the screen; malformed rows are skipped."""
    columns = ("level", "block_num", "par_num", "line_num", "left", "top", "width", "height", "conf", "text")
    if not all(isinstance(data.get(c), Sequence) and not isinstance(data.get(c), str) for c in columns):
        return ScreenText.of(width, height, ())
    rows = min(len(data[c]) for c in columns)
    words: list[Word] = []
    truncated = False
    for i in range(rows):
        raw = data["text"][i]
        text = raw.strip() if isinstance(raw, str) else ""
        if _int(data["level"][i]) != 5 or not text:
            continue
        conf = _float(data["conf"][i])
        numbers = [_int(data[c][i]) for c in ("block_num", "par_num", "line_num", "left", "top", "width", "height")]
        if conf is None or conf < 0 or any(n is None for n in numbers):
            continue
        block, par, line, left, top, w, h = (n for n in numbers if n is not None)
        x0, y0 = min(max(left, 0), width), min(max(top, 0), height)
        x1, y1 = min(max(left + w, x0), width), min(max(top + h, y0), height)
        if x1 <= x0 or y1 <= y0:
            continue
        if len(words) >= max_words:
            truncated = True
            break
        words.append(
            Word(" ".join(text.split())[:MAX_WORD_CHARS], (x0, y0, x1, y1), min(conf, 100.0), (block, par, line))
        )
    return ScreenText.of(width, height, words, truncated=truncated)


def matches(text: str, query: str) -> list[tuple[int, int]]:
    """Where ``query`` occurs in ``text``, ignoring case: (start, end) spans, not overlapping. An empty
    query matches nothing."""
    if not query:
        return []
    haystack, needle = text.casefold(), query.casefold()
    if len(haystack) != len(text):
        # casefold changed the length (ß -> ss): fall back to lower()
        haystack, needle = text.lower(), query.lower()
        if len(haystack) != len(text):
            return []
    spans = []
    start = haystack.find(needle)
    while start >= 0 and needle:
        spans.append((start, start + len(needle)))
        start = haystack.find(needle, start + len(needle))
    return spans


def search(lines: Sequence[Line], query: str) -> list[int]:
    """Indices of the lines that contain ``query`` (ignoring case); every line for an empty query."""
    query = query.strip()
    if not query:
        return list(range(len(lines)))
    return [i for i, line in enumerate(lines) if matches(line.text, query)]
