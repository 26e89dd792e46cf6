"""The injected instruction beside the action: a passage of the screen's text (its OCR) that reads as an
instruction to the agent, and that the model's words for the turn echo. A hint for the person at a
decision, never a permission and never a verdict; how it matches and what it misses: docs/tui.md,
"Possible injection". Pure: the screen's text comes in read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .allowlist import AllowListError, parse_entry
from .screentext import Box, ScreenText, Word, union
from .text import one_line

# A notice that claims authority over the agent or the session.
AUTHORITY = re.compile(
    r"\b(system (?:notice|message|prompt|instruction|override)|administrator|admin|it department|security team|"
    r"(?:has|have|is|are|been) (?:approved|authori[sz]ed|permitted|granted)|pre-?approved|authori[sz]ation|"
    r"mandatory|compliance|official notice|developer mode|(?:this|the) (?:step|action) is required|"
    r"you are (?:required|authori[sz]ed|permitted)|attention (?:ai|agent|assistant))\b",
    re.IGNORECASE,
)
# One that asks the agent to leave its task.
IGNORE = re.compile(
    r"\b(ignore|disregard|forget|override|bypass)\b.{0,40}\b(instructions?|task|rules?|prompt|guidelines?|above|"
    r"previous|prior|user)\b|\bnew (?:instructions?|task)\b|\binstead of (?:your|the) task\b",
    re.IGNORECASE,
)
# A host named in the text (a URL's, or a bare name): a run of host characters, split into its labels.
# No nested repetition: a pattern that repeats "label." backtracks quadratically on "a.a.a.a…1" (40,000
# such characters took 47 s), and page text and model text are hostile.
HOST_RUN = re.compile(r"[a-z0-9.-]+", re.IGNORECASE)
LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?", re.IGNORECASE)
TOP_LABEL = re.compile(r"[a-z]{2,24}", re.IGNORECASE)
MAX_HOST = 253
MAX_SCANNED = 20_000  # characters of a text looked at
# Words too common to show that the model took them from the passage.
COMMON = frozenset(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "before",
        "being",
        "below",
        "between",
        "both",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "from",
        "further",
        "have",
        "having",
        "here",
        "into",
        "just",
        "more",
        "most",
        "other",
        "over",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "very",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "page",
        "text",
        "shows",
        "says",
        "said",
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "all",
        "can",
        "her",
        "was",
        "one",
        "our",
        "out",
        "has",
        "his",
        "how",
        "its",
        "may",
        "new",
        "now",
        "see",
        "two",
        "way",
        "who",
        "did",
        "get",
        "let",
        "put",
        "too",
        "use",
    ]
)
MIN_WORD = 4  # shorter words are not counted as echoes
MIN_ECHO = 3  # distinct words of the passage the model's text must share ...
# ... at least one of them from what made it read as an instruction (the authority claim, the host)
PASSAGE_CHARS = 300
MAX_PASSAGES = 200  # paragraphs of a screen looked at


@dataclass(frozen=True, slots=True)
class Injection:
    """A possible injection: the on-screen ``passage`` (one line, cut), why it reads as an instruction
    (``signals``), the words of it the model's text repeats (``echoed``), and where it is (``box``)."""

    passage: str
    signals: tuple[str, ...]
    echoed: tuple[str, ...]
    box: Box

    @property
    def summary(self) -> str:
        """One line for people: what it does and which words the model repeated."""
        return f"{'; '.join(self.signals)}; the model's words repeat {', '.join(self.echoed[:6])}"


def passages(text: ScreenText) -> list[tuple[str, Box]]:
    """The screen's paragraphs as the engine grouped them (block and paragraph), in reading order."""
    groups: dict[tuple[int, int], list[Word]] = {}
    for word in text.words:
        groups.setdefault(word.line[:2], []).append(word)
    found = []
    for words in list(groups.values())[:MAX_PASSAGES]:
        found.append((" ".join(w.text for w in words), union(w.box for w in words)))
    return found


def signals_of(passage: str, allowed: Sequence[str]) -> tuple[list[str], set[str]]:
    """Why ``passage`` reads as an instruction to the agent, and its words that say so (lower case)."""
    passage = passage[:MAX_SCANNED]
    said: list[str] = []
    words: set[str] = set()
    if found := AUTHORITY.findall(passage):
        said.append("claims authority")
        words |= {w for phrase in found for w in _words(phrase)}
    if IGNORE.search(passage):
        said.append("asks to leave the task")
        words |= {"ignore", "disregard", "instructions", "task"}
    outside = sorted({h for h in hosts(passage) if not _allowed(h, allowed)})
    if outside:
        said.append(f"names a host outside the allow-list ({', '.join(outside[:3])})")
        for host in outside:
            words |= set(_words(host.replace(".", " ")))
            words.add(host)
    return said, words


def find_injection(text: ScreenText | None, model_text: str, allowed: Iterable[str] = ()) -> Injection | None:
    """The passage of ``text`` that reads as an instruction to the agent and that ``model_text`` echoes
    (None: none). ``allowed``: the run's allow-list entries (its own hosts are no sign)."""
    if text is None or not model_text.strip():
        return None
    model_text = model_text[:MAX_SCANNED]
    said_words = set(_words(model_text)) | set(hosts(model_text))
    allowed = tuple(allowed)
    best: Injection | None = None
    for passage, box in passages(text):
        signals, signal_words = signals_of(passage, allowed)
        if not signals:
            continue
        shared = list(dict.fromkeys(_words(passage) + hosts(passage)))
        echoed = [w for w in shared if w in said_words]
        if len(echoed) < MIN_ECHO or not signal_words & set(echoed):
            continue
        found = Injection(one_line(passage, PASSAGE_CHARS), tuple(signals), tuple(echoed), box)
        if best is None or len(found.echoed) > len(best.echoed):
            best = found
    return best


def hosts(text: str) -> list[str]:
    """The host names ``text`` names (lower case), in a URL or bare: two labels or more, the last of
    letters. Linear in the text (its first MAX_SCANNED characters)."""
    found = []
    for run in HOST_RUN.findall(text[:MAX_SCANNED]):
        name = run.strip(".-").lower()
        labels = name.split(".")
        if len(labels) < 2 or len(name) > MAX_HOST or not TOP_LABEL.fullmatch(labels[-1]):
            continue
        if all(LABEL.fullmatch(label) for label in labels):
            found.append(name)
    return found


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= MIN_WORD and w not in COMMON]


def _allowed(host: str, allowed: Sequence[str]) -> bool:
    host = host.lower().rstrip(".")
    if host in ("localhost",) or re.fullmatch(r"[0-9.]+", host):
        return True
    for entry in allowed:
        try:
            pattern = parse_entry(entry)
        except AllowListError:
            continue
        if pattern.matches(host):
            return True
    return False
