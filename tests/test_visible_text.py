"""Untrusted text with nothing hidden in it (issue #34, point 3): one predicate, ``core.text.hidden``, says
which characters are shown as stand-ins, and ``visible``, the editor's escaping, the HTML export, ``stats``,
``runs`` and the one form of errors all use it; ``--operator`` takes no name that could pass for another.

The property tests run over every code point of the Unicode version Python carries (pinned below)."""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_supervisor
from hypothesis import given, settings
from hypothesis import strategies as st
from literal_runs import recorded
from test_stats import TYPING, Person

from cua_tui.cli import main
from cua_tui.core.actions import ActionError
from cua_tui.core.edits import escape_text, unescape_text, written_escapes
from cua_tui.core.ports import Answer
from cua_tui.core.text import (
    BLANK_LOOKALIKES,
    DEFAULT_IGNORABLE,
    UNICODE_VERSION,
    escape,
    hidden,
    one_line,
    operator_problem,
    shown_operator,
    visible,
    visible_parts,
)

# 18 characters a terminal draws as "hello": the five letters, and between them a zero-width space, a soft
# hyphen, a combining grapheme joiner, a variation selector, four Unicode tags ("evil"), a line separator,
# an inhibit-symmetric-swapping format character, two Hangul fillers and an interlinear annotation anchor.
TAGS = "".join(chr(0xE0000 + ord(c)) for c in "evil")
HELLO = "h\u200be\u00adl\u034fl\ufe0fo" + TAGS + "\u2028\u206a\u3164\uffa0\ufff9"
IGNORABLE = frozenset(c for a, b in DEFAULT_IGNORABLE for c in range(a, b + 1))


@functools.cache
def every() -> str:
    """Every code point, lone surrogates included (made once, when a test asks: not at collection)."""
    return "".join(chr(c) for c in range(sys.maxunicode + 1))


def is_hidden(code: int) -> bool:
    """The rule as issue #34 words it, from the general category: the oracle ``hidden`` is checked against."""
    category = unicodedata.category(chr(code))
    return (category[0] in "CZ" and code != 0x20) or code in IGNORABLE or code in BLANK_LOOKALIKES


@functools.cache
def oracle() -> list[int]:
    """Every code point the oracle flags, in order (computed once: the sweeps below share it)."""
    return [c for c in range(sys.maxunicode + 1) if is_hidden(c)]


def draws_nothing_hidden(text: str, *, but: str = "") -> bool:
    """Whether no character of ``text`` (but those of ``but``) is hidden: each distinct one asked once."""
    return not any(hidden(c) for c in set(text) - set(but))


# ---------------------------------------------------------------------------------------------------
# The predicate and its data
# ---------------------------------------------------------------------------------------------------
def test_the_default_ignorable_ranges_are_of_the_unicode_python_carries() -> None:
    """The embedded Default_Ignorable_Code_Point ranges were generated for one Unicode version: a Python
    with another fails here, and the ranges are generated again from its DerivedCoreProperties.txt."""
    assert unicodedata.unidata_version == UNICODE_VERSION
    ends = [end for pair in DEFAULT_IGNORABLE for end in pair]
    assert ends == sorted(ends) and all(a <= b for a, b in DEFAULT_IGNORABLE)
    stated = {0x00AD: "Cf", 0x034F: "Mn", 0x3164: "Lo", 0xFFA0: "Lo", 0x2065: "Cn", 0xE0041: "Cf", 0xE0100: "Mn"}
    for code, category in stated.items():
        assert unicodedata.category(chr(code)) == category, hex(code)
    # every variation selector is among them
    selectors = [c for c in range(sys.maxunicode + 1) if "VARIATION SELECTOR" in unicodedata.name(chr(c), "")]
    assert len(selectors) == 16 + 240 + 4
    assert all(hidden(chr(c)) for c in selectors)


def test_one_predicate_over_every_code_point() -> None:
    flagged = [c for c in range(sys.maxunicode + 1) if hidden(chr(c))]
    assert flagged == oracle()
    for char in "\u00ad\u034f\u2028\u2029\u206a\u206f\ufe0f\u3164\uffa0\ufff9\ufffb\u2800\u00a0\u3000\U000e0041":
        assert hidden(char), f"U+{ord(char):04X}"
    assert not any(hidden(c) for c in " az~é日😀✓␛\\")


@pytest.mark.beside  # computes and measures nothing: on the CPU the other parts leave
def test_visible_shows_every_flagged_code_point_and_draws_nothing_hidden() -> None:
    for keep_newlines in (False, True):
        parts = visible_parts(every(), keep_newlines=keep_newlines)
        shown = "".join(part for part, _ in parts)
        assert shown == visible(every(), keep_newlines=keep_newlines)
        assert draws_nothing_hidden(shown, but="\n")
        stand_ins = [part for part, escaped in parts if escaped]
        newlines = 1 if keep_newlines else 0
        assert len(stand_ins) == len(oracle()) - newlines
        assert shown.encode("utf-8")
    # controls keep their symbols; the rest are escapes, eight digits above U+FFFF
    assert visible("\x00\x1b\t\n\r\x7f\x85") == "␀␛⇥↵␍␡\\x85"
    assert visible(HELLO) == (
        "h\\u200be\\xadl\\u034fl\\ufe0fo\\U000e0065\\U000e0076\\U000e0069\\U000e006c\\u2028\\u206a\\u3164\\uffa0\\ufff9"
    )
    assert escape("\U000e0041") == "\\U000e0041" and escape("\u200b") == "\\u200b" and escape("\x1b") == "\\x1b"


def test_the_eighteen_characters_that_drew_as_hello() -> None:
    assert len(HELLO) == 18 and "".join(c for c in HELLO if not hidden(c)) == "hello"
    shown = visible(HELLO)
    assert shown != "hello" and len([p for p, escaped in visible_parts(HELLO) if escaped]) == 13
    assert unescape_text(escape_text(HELLO)) == HELLO
    assert escape_text(HELLO) == shown  # the editor writes them as the panel shows them


def test_the_literal_text_of_an_escape_is_text_and_a_real_one_a_stand_in() -> None:
    literal, real = "\\u200b", "\u200b"
    assert visible(literal) == visible(real)  # the same characters on screen ...
    assert visible_parts(literal) == [(literal, False)] and visible_parts(real) == [(literal, True)]  # ... drawn apart
    # the editor's form tells them apart by the backslash, and marks the real one alone
    assert escape_text(literal) == "\\\\u200b" and escape_text(real) == "\\u200b"
    assert written_escapes("\\\\u200b \\u200b \\U000e0041 \\n") == [(8, 14), (15, 25), (26, 28)]


def test_one_line_keeps_every_space_but_the_ascii_ones_for_visible_to_show() -> None:
    assert one_line("a \t\n b\u00a0c\u2028d\u3000e") == "a b\u00a0c\u2028d\u3000e"
    assert visible(one_line("a\u00a0b")) == "a\\xa0b"


# ---------------------------------------------------------------------------------------------------
# The editor's escaping: every flagged character, and back
# ---------------------------------------------------------------------------------------------------
def test_the_editors_form_goes_back_exactly_over_every_code_point() -> None:
    written = escape_text(every())
    assert draws_nothing_hidden(written)
    assert unescape_text(written) == every()
    assert unescape_text("\\U000e0041\\u200b\\x1b") == "\U000e0041\u200b\x1b"
    with pytest.raises(ActionError, match="not a code point"):
        unescape_text("\\U00110000")


@given(st.text(alphabet=st.characters(codec=None), max_size=80))
@settings(max_examples=400, deadline=None)
def test_escape_and_visible_agree_on_any_text(text: str) -> None:
    written = escape_text(text)
    assert unescape_text(written) == text
    assert not any(hidden(c) for c in written) and not any(hidden(c) for c in visible(text))
    # a character is escaped by the editor exactly where visible shows a stand-in
    flagged = [c for c in text if hidden(c)]
    assert len([p for p, escaped in visible_parts(text) if escaped]) == len(flagged)
    assert len(written_escapes(written)) == len([c for c in text if hidden(c) or c in "\n\t\r"])


# ---------------------------------------------------------------------------------------------------
# --operator, and the names stats shows
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bob", "alice@example.org", "j.doe-2_x", "A" * 64])
def test_an_operators_name_of_the_strict_pattern_is_taken(name: str) -> None:
    assert operator_problem(name) is None and shown_operator(name, 64) == name


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("\u042c\u043e\u042c", "CYRILLIC CAPITAL LETTER SOFT SIGN (U+042C)"),  # looks like "bob"
        ("b\u200bob", "ZERO WIDTH SPACE (U+200B)"),
        ("bob\U000e0041", "TAG LATIN CAPITAL LETTER A (U+E0041)"),
        ("bob smith", "SPACE (U+0020)"),
        ("", "empty"),
        ("b" * 65, "at most 64"),
    ],
)
def test_a_name_that_could_pass_for_another_is_refused_at_entry_in_one_line(name: str, said: str) -> None:
    why = operator_problem(name)
    assert why is not None and said in why
    result = CliRunner().invoke(main, ["run", "--backend", "sim", "--operator", name])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: Invalid value for '--operator': ") and said in line
    assert not any(hidden(c) for c in line)


def test_stats_and_runs_show_a_recorded_look_alike_escaped(tmp_path: Path) -> None:
    """An old run directory may hold any operator: the table escapes what is not ASCII and what hides."""
    for name in ("bob", "\u042c\u043e\u042c", "b\u200bob\U000e0041"):
        person = Person((Answer.APPROVE, 300))
        sup, _events, _agent = make_supervisor(tmp_path, [TYPING], approver=person, operator=name, task=HELLO)
        sup.run()
    result = CliRunner().invoke(main, ["stats", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.stdout.splitlines()[1:]]
    assert sorted(names) == sorted(["bob", "\\u042c\\u043e\\u042c", "b\\u200bob\\U000e0041"])
    assert not any(hidden(c) or not c.isascii() for c in result.stdout if c != "\n")
    # runs lists the same runs, each task made visible (cut to its column)
    listed = CliRunner().invoke(main, ["runs", "--runs-dir", str(tmp_path / "runs")])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.count(visible(HELLO)[:30]) == 3
    assert not any(hidden(c) for c in listed.stdout if c != "\n")


# ---------------------------------------------------------------------------------------------------
# Everywhere else the text is shown: the HTML export, the one form of errors
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(tmp_path_factory.mktemp("hostile"))


def test_the_html_export_shows_hidden_characters_as_marked_escapes(hostile_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    exported = CliRunner().invoke(main, ["export", str(hostile_run), "--html", str(out)])
    assert exported.exit_code == 0, exported.output
    document = out.read_text()
    assert not any(hidden(c) for c in document if c != "\n")
    marks = re.findall('<mark class="esc">([^<]*)</mark>', document)
    assert {"\\u200b", "\\xad", "\\U000e0041", "\\ufe0f", "␛"} <= set(marks)
    assert not re.search('aria-label="[^"]*<', document)  # no mark inside an attribute


def test_an_error_that_quotes_hidden_characters_shows_them_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(tmp_path / f"no{HELLO}such")])
    assert result.exit_code != 0
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: ") and visible(HELLO) in line
    assert not any(hidden(c) for c in line)
