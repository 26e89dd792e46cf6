"""Untrusted text and JSON: lone surrogates shown and recorded safely (core.text), and the strict JSON
reader for script files and model replies (core.strictjson): nesting capped, numbers finite, one-line
errors that say where, linear time on hostile input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core import strictjson
from cua_tui.core.text import encodable, lone_surrogate, visible

LONE_HIGH = json.loads('"\\ud800"')
LONE_LOW = json.loads('"\\udfff"')


# ---------------------------------------------------------------------------------------------------
# core.text
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [f"a{LONE_HIGH}b", LONE_LOW, f"{LONE_LOW}{LONE_HIGH}", f"x{LONE_HIGH}\x1b[31m"])
def test_lone_surrogates_are_shown_literally_and_recorded_encodably(text: str) -> None:
    with pytest.raises(UnicodeEncodeError):
        text.encode("utf-8")
    shown = visible(text)
    shown.encode("utf-8")
    assert "\\ud800" in shown or "\\udfff" in shown
    assert "\x1b" not in shown
    recorded = encodable(text)
    recorded.encode("utf-8")
    assert recorded.count("\\ud") == text.count(LONE_HIGH) + text.count(LONE_LOW)


def test_encodable_keeps_every_other_text_as_it_is() -> None:
    for text in ("", "plain", "héllo ✓ 日本 😀", "\x1b[31m\r\n", "\\ud800 written out"):
        assert encodable(text) is text
        assert lone_surrogate(text) == -1
    assert lone_surrogate(f"ab{LONE_HIGH}") == 2


@given(st.text(alphabet=st.characters(codec=None), max_size=60))
@settings(max_examples=300, deadline=None)
def test_visible_and_encodable_always_encode(text: str) -> None:
    visible(text).encode("utf-8")
    visible(text, keep_newlines=True).encode("utf-8")
    recorded = encodable(text)
    recorded.encode("utf-8")
    if lone_surrogate(text) < 0:
        assert recorded == text


# ---------------------------------------------------------------------------------------------------
# core.strictjson
# ---------------------------------------------------------------------------------------------------
def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def refused(text: str | bytes) -> strictjson.JSONError:
    with pytest.raises(strictjson.JSONError) as info:
        strictjson.loads(text)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return info.value


def test_nesting_up_to_the_cap_is_read() -> None:
    assert strictjson.MAX_DEPTH == 64
    value = strictjson.loads(nested(64))
    assert not strictjson.depth_exceeds(value, 64)
    assert strictjson.loads('{"a": ' + nested(63) + "}")["a"]


@pytest.mark.parametrize("levels", [65, 1000, 5000, 20_000, 200_000])
def test_nesting_past_the_cap_is_refused_with_its_place(levels: int) -> None:
    objects = '{"a":' * levels + "1" + "}" * levels
    for text in (nested(levels), '{"turns": [\n {"x": ' + nested(levels) + "}]}", objects):
        err = refused(text)
        assert not err.syntax
        assert str(err).startswith("nesting deeper than 64 (line ")
    refused("[" * levels)  # never closed: refused one way or the other, never a RecursionError


def test_the_place_of_deep_nesting_is_line_and_column() -> None:
    err = refused('{"a": "[[[[[[[[",\n "b": ' + nested(70) + "}")
    assert str(err) == "nesting deeper than 64 (line 2, column 70)"  # brackets inside strings do not count
    err = refused(b"[" * 200_000 + b"]" * 200_000)
    assert str(err) == "nesting deeper than 64 (line 1, column 65)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[NaN]", "NaN is not a JSON number"),
        ('{"x": Infinity}', "Infinity is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("[1e999]", "the number 1e999 is too large for a double"),
        ("[-1e400]", "the number -1e400 is too large for a double"),
        ("[" + "7" * 5000 + "]", "an integer of more than 4300 digits"),
        ("[1,", "line 1, column 4: Expecting value"),
        (b"\xff[]", "not UTF-8 at byte 0"),
    ],
)
def test_what_python_json_would_accept_or_crash_on_is_refused(text: str | bytes, message: str) -> None:
    err = refused(text)
    assert err.syntax and str(err) == message


def test_lone_surrogates_and_long_but_finite_numbers_pass() -> None:
    assert strictjson.loads('["\\ud800", 1e308, ' + "9" * 4300 + "]")[0] == LONE_HIGH


def test_depth_exceeds_walks_python_values_without_recursion() -> None:
    value: list[object] = []
    for _ in range(300_000):
        value = [value]
    assert strictjson.depth_exceeds(value, 64)
    assert strictjson.depth_exceeds({"a": ({"b": [[1]]},)}, 4)
    assert not strictjson.depth_exceeds({"a": ({"b": [[1]]},)}, 5)


@pytest.mark.parametrize(
    "text",
    [
        '"' + '\\"' * 1_000_000,  # an unterminated string full of escaped quotes
        '"\\' + "[" * 1_000_000,  # a trailing backslash
        "[]" * 1_000_000 + "[" * 100,  # the deep part after a long flat one
        '"[",' * 500_000 + "[" * 100,
    ],
)
def test_hostile_text_is_answered_in_linear_time(text: str) -> None:
    started = time.monotonic()
    refused(text)
    assert time.monotonic() - started < 3.0


# ---------------------------------------------------------------------------------------------------
# Failure reasons people read (issue 11, point 10): no Python repr, no path that is already gone
# ---------------------------------------------------------------------------------------------------
def test_failure_reasons_carry_no_repr_and_no_temporary_path(tmp_path: Path) -> None:
    import errno
    import tempfile

    from cua_tui.core.text import failure

    gone = Path(tempfile.mkdtemp(prefix="cua-ws-")) / "profile" / "Local State"
    disk_full = OSError(errno.ENOSPC, "No space left on device", str(gone))
    assert failure(disk_full) == "No space left on device (Local State)"
    assert failure(FileNotFoundError(errno.ENOENT, "No such file or directory", "/tmp/cua-x/a.png")) == (
        "No such file or directory (a.png)"
    )
    assert failure(KeyError("frame")) == "no frame"
    assert failure(ValueError(f"could not read {Path('/tmp/cua-ws-1/x.json')!r}")) == "could not read a temporary file"
    assert failure(RuntimeError("wrapped: ValueError('bad value')")) == "wrapped: bad value"
    assert failure(RuntimeError()) == "RuntimeError"
    text = failure(ValueError("x" * 1000 + "\n\x1b[2J"))
    assert len(text) <= 200 and "\n" not in text
    for reason in (failure(disk_full), failure(KeyError("frame"))):
        assert "(" not in reason.split(" (")[0] and "Error(" not in reason and "/tmp/" not in reason
