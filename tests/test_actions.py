"""The normalized Action type and the strict vendor parsers (cua_tui.core.actions)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core.actions import (
    ANTHROPIC_MEMBERS,
    MAX_PATH_POINTS,
    MAX_SCROLL_PIXELS,
    MAX_TEXT,
    MODIFIERS,
    Action,
    ActionError,
    Kind,
    make_chord,
    normalize_key,
    parse_anthropic,
    parse_chord_text,
    parse_openai,
)
from cua_tui.core.geometry import Scaling, Size

SCREEN = Size(1024, 720)
S = Scaling.identity(SCREEN)

OPENAI_KINDS = ("click", "double_click", "drag", "move", "scroll", "keypress", "type", "wait", "screenshot")


def refused(call: Any, *args: Any) -> ActionError:
    with pytest.raises(ActionError) as info:
        call(*args)
    return info.value


def openai_error(raw: Any, scaling: Scaling = S) -> ActionError:
    return refused(parse_openai, raw, scaling)


def anthropic_error(name: Any, raw: Any, scaling: Scaling = S, toolset: Any = "computer") -> ActionError:
    return refused(parse_anthropic, name, raw, scaling, toolset)


# ---------------------------------------------------------------------------------------------------
# OpenAI: every action kind
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("button", "expected"),
    [("left", "left"), ("right", "right"), ("wheel", "middle"), ("middle", "middle"), ("back", "back"),
     ("forward", "forward")],
)  # fmt: skip
def test_openai_click_buttons(button: str, expected: str) -> None:
    action = parse_openai({"type": "click", "button": button, "x": 10, "y": 20}, S)
    assert action == Action(Kind.CLICK, point=(10, 20), button=expected)


def test_openai_click_defaults_to_left_and_accepts_screen_edges() -> None:
    assert parse_openai({"type": "click", "x": 0, "y": 0}, S) == Action(Kind.CLICK, point=(0, 0))
    assert parse_openai({"type": "click", "x": 1023, "y": 719}, S).point == (1023, 719)


@pytest.mark.parametrize("button", ["WHEEL", "Left", "primary", "", None, 1, True, ["left"]])
def test_openai_click_refuses_unknown_buttons(button: Any) -> None:
    err = openai_error({"type": "click", "button": button, "x": 1, "y": 1})
    assert err.code == "bad_field"
    assert err.reason.startswith("unknown mouse button ")


def test_openai_double_click_move_with_held_modifiers() -> None:
    assert parse_openai({"type": "double_click", "x": 5, "y": 6}, S) == Action(Kind.DOUBLE_CLICK, point=(5, 6))
    assert parse_openai({"type": "move", "x": 7, "y": 8, "keys": ["SHIFT", "CTRL"]}, S) == Action(
        Kind.MOVE, point=(7, 8), hold=("ctrl", "shift")
    )
    click = parse_openai({"type": "click", "x": 1, "y": 2, "keys": ["SHIFT"]}, S)
    assert click.hold == ("shift",)
    assert parse_openai({"type": "click", "x": 1, "y": 2, "keys": []}, S).hold == ()
    assert parse_openai({"type": "click", "x": 1, "y": 2, "keys": None}, S).hold == ()
    # Held modifiers come back in canonical order, whatever the aliases.
    assert parse_openai({"type": "click", "x": 1, "y": 2, "keys": ["META", "Alt_L", "control"]}, S).hold == (
        "ctrl",
        "alt",
        "super",
    )


def test_openai_drag() -> None:
    raw = {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}, {"x": 5, "y": 6}], "keys": ["shift"]}
    assert parse_openai(raw, S) == Action(Kind.DRAG, path=((1, 2), (3, 4), (5, 6)), hold=("shift",))


@pytest.mark.parametrize(
    ("scroll_x", "scroll_y", "notches"),
    [
        (0, 1, (0, 1)),  # any non-zero scroll is at least one notch
        (0, -1, (0, -1)),
        (0, 49, (0, 1)),
        (0, 100, (0, 1)),
        (0, 149, (0, 1)),
        (0, 151, (0, 2)),
        (0, 200, (0, 2)),
        (-300, 0, (-3, 0)),
        (120, -480, (1, -5)),
        (0, MAX_SCROLL_PIXELS, (0, 100)),
        (-MAX_SCROLL_PIXELS, 0, (-100, 0)),
    ],
)
def test_openai_scroll_pixels_to_notches(scroll_x: int, scroll_y: int, notches: tuple[int, int]) -> None:
    raw = {"type": "scroll", "x": 50, "y": 60, "scroll_x": scroll_x, "scroll_y": scroll_y}
    assert parse_openai(raw, S) == Action(Kind.SCROLL, point=(50, 60), scroll_x=notches[0], scroll_y=notches[1])


@given(st.integers(-MAX_SCROLL_PIXELS, MAX_SCROLL_PIXELS).filter(bool))
@settings(max_examples=200, deadline=None)
def test_openai_scroll_notches_property(pixels: int) -> None:
    action = parse_openai({"type": "scroll", "x": 0, "y": 0, "scroll_y": pixels}, S)
    assert action.scroll_x == 0
    notches = action.scroll_y
    assert notches != 0 and (notches > 0) == (pixels > 0)  # never lost, never reversed
    assert abs(notches) == 1 or abs(abs(notches) * 100 - abs(pixels)) <= 50  # 100 px per notch, rounded


def test_openai_scroll_bounds() -> None:
    err = openai_error({"type": "scroll", "x": 0, "y": 0, "scroll_x": 0, "scroll_y": 0})
    assert (err.code, err.reason) == ("bad_field", "scroll needs a non-zero scroll_x or scroll_y")
    err = openai_error({"type": "scroll", "x": 0, "y": 0})
    assert err.code == "bad_field"
    err = openai_error({"type": "scroll", "x": 0, "y": 0, "scroll_y": MAX_SCROLL_PIXELS + 1})
    assert (err.code, err.reason) == ("out_of_range", "scroll_y=10001 is outside [-10000, 10000]")
    err = openai_error({"type": "scroll", "x": 0, "y": 0, "scroll_x": -MAX_SCROLL_PIXELS - 1})
    assert err.code == "out_of_range"
    err = openai_error({"type": "scroll", "x": 0, "y": 0, "scroll_y": 1.5})
    assert err.code == "bad_type"
    err = openai_error({"type": "scroll", "x": 0, "y": 0, "scroll_y": float("nan")})
    assert err.code == "bad_type"
    err = openai_error({"type": "scroll", "x": 0, "y": 0, "scroll_y": True})
    assert err.code == "bad_type"


@pytest.mark.parametrize(
    ("keys", "chord"),
    [
        (["ENTER"], "Return"),
        (["Return"], "Return"),
        (["CTRL", "A"], "ctrl+a"),
        (["ctrl+a"], "ctrl+a"),  # one "ctrl+a" string element is one chord
        (["SHIFT", "CTRL", "ALT", "t"], "ctrl+alt+shift+t"),  # canonical modifier order
        (["ARROWLEFT"], "Left"),
        (["ESC"], "Escape"),
        (["space"], "space"),
        ([" "], "space"),
        (["+"], "plus"),
        (["CTRL", "+"], "ctrl+plus"),
        (["META", "l"], "super+l"),
        (["F5"], "F5"),
        (["kp_enter"], "KP_Enter"),
    ],
)
def test_openai_keypress(keys: list[str], chord: str) -> None:
    assert parse_openai({"type": "keypress", "keys": keys}, S) == Action(Kind.KEYPRESS, chord=chord)


@pytest.mark.parametrize(
    ("keys", "code", "reason"),
    [
        ([], "bad_key", "a key combination needs at least one key"),
        (["a", "b"], "bad_key", "a key combination has one non-modifier key, got a, b"),
        (["CTRL", "ctrl", "a"], "bad_key", "a modifier is repeated in the key combination"),
        (["ctrl", "control", "a"], "bad_key", "a modifier is repeated in the key combination"),
        (["ctrl", "NOSUCHKEY"], "bad_key", "unknown key name 'NOSUCHKEY'"),
        (["ctrl", 1], "bad_key", "a key must be a string, not int"),
        (["ctrl", None], "bad_key", "a key must be a string, not null"),
        (["ctrl", ""], "bad_key", "key name '' is empty or too long"),
        (["é"], "bad_key", "unknown key name 'é'"),
        (["a"] * 7, "bad_key", "a key combination has at most 6 keys"),
        ("ctrl+a", "bad_type", "keypress keys must be a list of key names"),
        (None, "missing_field", "keypress action needs 'keys'"),
    ],
)
def test_openai_keypress_refusals(keys: Any, code: str, reason: str) -> None:
    err = openai_error({"type": "keypress", "keys": keys})
    assert (err.code, err.reason) == (code, reason)


def test_openai_type_wait_screenshot() -> None:
    assert parse_openai({"type": "type", "text": "hello"}, S) == Action(Kind.TYPE, text="hello")
    assert parse_openai({"type": "type", "text": "x" * MAX_TEXT}, S).text == "x" * MAX_TEXT
    assert parse_openai({"type": "wait"}, S) == Action(Kind.WAIT, duration_ms=1000)
    assert parse_openai({"type": "screenshot"}, S) == Action(Kind.SCREENSHOT)


def test_openai_type_refusals() -> None:
    err = openai_error({"type": "type", "text": "x" * (MAX_TEXT + 1)})
    assert (err.code, err.reason) == ("too_long", "text has 10001 characters; at most 10000 are accepted")
    err = openai_error({"type": "type", "text": ""})
    assert (err.code, err.reason) == ("bad_field", "text is empty")
    err = openai_error({"type": "type", "text": 5})
    assert (err.code, err.reason) == ("bad_type", "text must be a string, not int")
    err = openai_error({"type": "type"})
    assert (err.code, err.reason) == ("missing_field", "type action needs 'text'")


# ---------------------------------------------------------------------------------------------------
# OpenAI: strictness
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x", "reason"),
    [
        (True, "point.x must be an integer, not bool True"),
        (False, "point.x must be an integer, not bool False"),
        (1.0, "point.x must be an integer, not float 1.0"),
        (float("nan"), "point.x must be an integer, not float nan"),
        (float("inf"), "point.x must be an integer, not float inf"),
        ("5", "point.x must be an integer, not str 5"),
        ([5], "point.x must be an integer, not list [5]"),
        ({"v": 5}, "point.x must be an integer, not dict {'v': 5}"),
    ],
)
def test_openai_coordinates_must_be_plain_ints(x: Any, reason: str) -> None:
    for kind in ("click", "double_click", "move"):
        err = openai_error({"type": kind, "x": x, "y": 1})
        assert (err.code, err.reason) == ("bad_type", reason)
    err = openai_error({"type": "click", "x": 1, "y": x})
    assert err.code == "bad_type" and err.reason.startswith("point.y must be an integer")


@pytest.mark.parametrize("kind", ["click", "double_click", "move", "scroll"])
def test_openai_missing_or_null_coordinates(kind: str) -> None:
    base = {"type": kind, "scroll_y": 100} if kind == "scroll" else {"type": kind}
    err = openai_error({**base, "y": 1})
    assert (err.code, err.reason) == ("missing_field", f"{kind} action needs 'x'")
    err = openai_error({**base, "x": None, "y": 1})
    assert (err.code, err.reason) == ("missing_field", f"{kind} action needs 'x'")
    err = openai_error({**base, "x": 1})
    assert (err.code, err.reason) == ("missing_field", f"{kind} action needs 'y'")


@pytest.mark.parametrize("point", [(1024, 0), (0, 720), (-1, 0), (0, -1), (5000, 5000), (-(2**31), 0)])
def test_openai_outside_screen_is_refused_not_clamped(point: tuple[int, int]) -> None:
    x, y = point
    for raw in (
        {"type": "click", "x": x, "y": y},
        {"type": "double_click", "x": x, "y": y},
        {"type": "move", "x": x, "y": y},
        {"type": "scroll", "x": x, "y": y, "scroll_y": 100},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": x, "y": y}]},
    ):
        err = openai_error(raw)
        assert err.code == "outside_screen", raw
        assert err.reason == f"point ({x}, {y}) is outside the 1024x720 screenshot"


def test_openai_coordinates_beyond_int32_are_out_of_range() -> None:
    err = openai_error({"type": "click", "x": 2**31 + 1, "y": 0})
    assert err.code == "out_of_range"
    assert err.reason.startswith("point.x=2147483649 is outside")
    err = openai_error({"type": "click", "x": 10**30, "y": 0})
    assert err.code == "out_of_range"


@pytest.mark.parametrize(
    "kind", ["shell", "navigate", "exec", "run_command", "bash", "left_click", "Click", "CLICK", "", "type "]
)
def test_openai_unknown_kinds_are_refused(kind: str) -> None:
    err = openai_error({"type": kind, "x": 1, "y": 1})
    assert (err.code, err.reason) == ("unknown_kind", f"unknown action kind {kind!r}")


def test_openai_unknown_kind_reason_is_clipped() -> None:
    err = openai_error({"type": "rm -rf /" + "x" * 100})
    assert err.code == "unknown_kind"
    assert len(err.reason) < 80 and err.reason.endswith("…'")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"type": "click", "x": 1, "y": 1, "approved": True}, "click action does not take field(s): approved"),
        ({"type": "type", "text": "hi", "confirmed": True}, "type action does not take field(s): confirmed"),
        (
            {"type": "keypress", "keys": ["a"], "safety_check": "ok", "approved": 1},
            "keypress action does not take field(s): approved, safety_check",
        ),
        ({"type": "wait", "ms": 5000}, "wait action does not take field(s): ms"),
        ({"type": "screenshot", "x": 1}, "screenshot action does not take field(s): x"),
        ({"type": "type", "text": "hi", "keys": ["ctrl"]}, "type action does not take field(s): keys"),
        (
            {"type": "double_click", "x": 1, "y": 1, "button": "right"},
            "double_click action does not take field(s): button",
        ),
        (
            {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 2, "y": 2, "approved": True}]},
            "drag path point 1 does not take field(s): approved",
        ),
    ],
)
def test_openai_unknown_fields_are_refused(raw: dict[str, Any], reason: str) -> None:
    err = openai_error(raw)
    assert (err.code, err.reason) == ("unknown_field", reason)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "an action must be a JSON object, not null"),
        ([{"type": "click", "x": 1, "y": 1}], "an action must be a JSON object, not list"),
        ("click", "an action must be a JSON object, not str"),
        (42, "an action must be a JSON object, not int"),
        ({}, "the action has no string 'type'"),
        ({"type": None}, "the action has no string 'type'"),
        ({"type": ["click"]}, "the action has no string 'type'"),
        ({"action": {"type": "click", "x": 1, "y": 1}}, "the action has no string 'type'"),
    ],
)
def test_openai_non_objects_are_refused(raw: Any, reason: str) -> None:
    err = openai_error(raw)
    assert (err.code, err.reason) == ("bad_schema", reason)


def test_openai_dict_subclass_is_not_a_json_object() -> None:
    class Sneaky(dict[str, Any]):
        pass

    assert openai_error(Sneaky(type="screenshot")).code == "bad_schema"


@pytest.mark.parametrize(
    ("path", "code", "reason"),
    [
        ([{"x": 1, "y": 1}], "out_of_range", "drag path needs 2 to 256 points, got 1"),
        ([], "out_of_range", "drag path needs 2 to 256 points, got 0"),
        ([{"x": 1, "y": 1}] * (MAX_PATH_POINTS + 1), "out_of_range", "drag path needs 2 to 256 points, got 257"),
        ({"x": 1, "y": 1}, "bad_type", "drag path must be a list of points"),
        ([[1, 1], [2, 2]], "bad_type", "drag path point 0 must be an object with x and y"),
        ([{"x": 1, "y": 1}, {"x": 2}], "missing_field", "drag point needs 'y'"),
        ([{"x": 1, "y": 1}, {"x": 2.0, "y": 2}], "bad_type", "path[1].x must be an integer, not float 2.0"),
        (None, "missing_field", "drag action needs 'path'"),
    ],
)
def test_openai_drag_path_bounds(path: Any, code: str, reason: str) -> None:
    err = openai_error({"type": "drag", "path": path})
    assert (err.code, err.reason) == (code, reason)


def test_openai_drag_path_at_its_bounds() -> None:
    two = parse_openai({"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 1, "y": 1}]}, S)
    assert two.path == ((0, 0), (1, 1))
    most = [{"x": i % 1024, "y": i % 720} for i in range(MAX_PATH_POINTS)]
    assert len(parse_openai({"type": "drag", "path": most}, S).path) == MAX_PATH_POINTS


@pytest.mark.parametrize(
    ("keys", "code", "reason"),
    [
        (["a"], "bad_key", "only modifier keys can be held during a pointer action, not 'a'"),
        (["Return"], "bad_key", "only modifier keys can be held during a pointer action, not 'Return'"),
        (["shift", "SHIFT"], "bad_key", "a modifier is repeated in keys"),
        (["ctrl", "alt", "shift", "super", "ctrl"], "bad_key", "keys holds at most 4 modifiers"),
        (["bogus"], "bad_key", "unknown key name 'bogus'"),
        ({"shift": True}, "bad_field", "keys must be a list of modifier keys"),
        (7, "bad_field", "keys must be a list of modifier keys"),
    ],
)
def test_openai_held_keys_must_be_modifiers(keys: Any, code: str, reason: str) -> None:
    for raw in (
        {"type": "click", "x": 1, "y": 1, "keys": keys},
        {"type": "scroll", "x": 1, "y": 1, "scroll_y": 100, "keys": keys},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 2, "y": 2}], "keys": keys},
    ):
        err = openai_error(raw)
        assert (err.code, err.reason) == (code, reason), raw


# ---------------------------------------------------------------------------------------------------
# Anthropic: all 17 toolset members
# ---------------------------------------------------------------------------------------------------
ANTHROPIC_CASES: list[tuple[str, dict[str, Any] | None, Action]] = [
    ("key", {"text": "ctrl+shift+t"}, Action(Kind.KEYPRESS, chord="ctrl+shift+t")),
    ("hold_key", {"text": "shift", "duration": 1.5}, Action(Kind.HOLD_KEY, chord="shift", duration_ms=1500)),
    ("type", {"text": "hello world"}, Action(Kind.TYPE, text="hello world")),
    ("cursor_position", {}, Action(Kind.CURSOR_POSITION)),
    ("mouse_move", {"coordinate": [10, 20]}, Action(Kind.MOVE, point=(10, 20))),
    ("left_mouse_down", {}, Action(Kind.MOUSE_DOWN)),
    ("left_mouse_up", {"coordinate": [3, 4]}, Action(Kind.MOUSE_UP, point=(3, 4))),
    ("left_click", {"coordinate": [1, 2]}, Action(Kind.CLICK, point=(1, 2))),
    ("right_click", {"coordinate": [1, 2]}, Action(Kind.CLICK, point=(1, 2), button="right")),
    ("middle_click", {"coordinate": [1, 2]}, Action(Kind.CLICK, point=(1, 2), button="middle")),
    ("double_click", {"coordinate": [1, 2]}, Action(Kind.DOUBLE_CLICK, point=(1, 2))),
    ("triple_click", {"coordinate": [1, 2], "text": "shift"}, Action(Kind.TRIPLE_CLICK, point=(1, 2), hold=("shift",))),
    (
        "left_click_drag",
        {"start_coordinate": [5, 6], "coordinate": [7, 8]},
        Action(Kind.DRAG, path=((5, 6), (7, 8))),
    ),
    (
        "scroll",
        {"scroll_direction": "down", "scroll_amount": 3, "coordinate": [9, 10]},
        Action(Kind.SCROLL, point=(9, 10), scroll_y=3),
    ),
    ("wait", {"duration": 2}, Action(Kind.WAIT, duration_ms=2000)),
    ("screenshot", {}, Action(Kind.SCREENSHOT)),
    ("zoom", {"region": [0, 0, 512, 360]}, Action(Kind.ZOOM, region=(0, 0, 512, 360))),
]


def test_anthropic_cases_cover_every_member() -> None:
    assert len(ANTHROPIC_MEMBERS) == 17
    assert sorted(name for name, _, _ in ANTHROPIC_CASES) == sorted(ANTHROPIC_MEMBERS)


@pytest.mark.parametrize(("name", "raw", "expected"), ANTHROPIC_CASES, ids=[c[0] for c in ANTHROPIC_CASES])
def test_anthropic_members(name: str, raw: dict[str, Any], expected: Action) -> None:
    assert parse_anthropic(name, raw, S) == expected
    assert parse_anthropic(name, raw, S, "computer") == expected


def test_anthropic_null_input_is_empty_input() -> None:
    assert parse_anthropic("screenshot", None, S) == Action(Kind.SCREENSHOT)
    assert parse_anthropic("cursor_position", None, S) == Action(Kind.CURSOR_POSITION)
    err = anthropic_error("left_click", None)
    assert err.code == "missing_field"


@pytest.mark.parametrize(
    ("direction", "scroll_x", "scroll_y"), [("up", 0, -4), ("down", 0, 4), ("left", -4, 0), ("right", 4, 0)]
)
def test_anthropic_scroll_directions(direction: str, scroll_x: int, scroll_y: int) -> None:
    action = parse_anthropic("scroll", {"scroll_direction": direction, "scroll_amount": 4}, S)
    assert action == Action(Kind.SCROLL, point=None, scroll_x=scroll_x, scroll_y=scroll_y)


@pytest.mark.parametrize(
    ("raw", "code", "reason"),
    [
        ({"scroll_direction": "down", "scroll_amount": 0}, "out_of_range", "scroll_amount=0 is outside [1, 100]"),
        ({"scroll_direction": "down", "scroll_amount": 101}, "out_of_range", "scroll_amount=101 is outside [1, 100]"),
        ({"scroll_direction": "down", "scroll_amount": -1}, "out_of_range", "scroll_amount=-1 is outside [1, 100]"),
        (
            {"scroll_direction": "down", "scroll_amount": 2.0},
            "bad_type",
            "scroll_amount must be an integer, not float 2.0",
        ),
        (
            {"scroll_direction": "down", "scroll_amount": True},
            "bad_type",
            "scroll_amount must be an integer, not bool True",
        ),
        (
            {"scroll_direction": "sideways", "scroll_amount": 1},
            "bad_field",
            "scroll_direction must be up, down, left or right, not 'sideways'",
        ),
        (
            {"scroll_direction": "UP", "scroll_amount": 1},
            "bad_field",
            "scroll_direction must be up, down, left or right, not 'UP'",
        ),
        ({"scroll_amount": 1}, "missing_field", "scroll action needs 'scroll_direction'"),
        ({"scroll_direction": "up"}, "missing_field", "scroll action needs 'scroll_amount'"),
    ],
)
def test_anthropic_scroll_bounds(raw: dict[str, Any], code: str, reason: str) -> None:
    err = anthropic_error("scroll", raw)
    assert (err.code, err.reason) == (code, reason)


def test_anthropic_scroll_at_its_bounds() -> None:
    assert parse_anthropic("scroll", {"scroll_direction": "up", "scroll_amount": 100}, S).scroll_y == -100
    assert parse_anthropic("scroll", {"scroll_direction": "right", "scroll_amount": 1}, S).scroll_x == 1


@pytest.mark.parametrize("member", ["left_click", "right_click", "middle_click", "double_click", "triple_click"])
def test_anthropic_click_without_coordinate_is_refused(member: str) -> None:
    for raw in ({}, {"coordinate": None}, {"text": "shift"}):
        err = anthropic_error(member, raw)
        assert err.code == "missing_field"
        assert err.reason == (
            f"{member} action needs 'coordinate' (clicking wherever the pointer happens to be is not accepted)"
        )


def test_anthropic_click_held_modifiers_via_text() -> None:
    assert parse_anthropic("left_click", {"coordinate": [1, 1], "text": "shift"}, S).hold == ("shift",)
    assert parse_anthropic("left_click", {"coordinate": [1, 1], "text": "SHIFT+ctrl"}, S).hold == ("ctrl", "shift")
    assert parse_anthropic("left_click", {"coordinate": [1, 1], "text": ""}, S).hold == ()
    assert parse_anthropic("mouse_move", {"coordinate": [1, 1], "text": "alt"}, S).hold == ("alt",)
    drag = parse_anthropic("left_click_drag", {"start_coordinate": [0, 0], "coordinate": [1, 1], "text": "ctrl"}, S)
    assert drag.hold == ("ctrl",)
    err = anthropic_error("left_click", {"coordinate": [1, 1], "text": "a"})
    assert (err.code, err.reason) == ("bad_key", "only modifier keys can be held during a pointer action, not 'a'")
    err = anthropic_error("right_click", {"coordinate": [1, 1], "text": "ctrl+Return"})
    assert err.code == "bad_key"
    err = anthropic_error("left_click", {"coordinate": [1, 1], "text": "shift+shift"})
    assert (err.code, err.reason) == ("bad_key", "a modifier is repeated in text")


@pytest.mark.parametrize(
    ("coordinate", "code", "reason"),
    [
        ([True, 1], "bad_type", "coordinate.x must be an integer, not bool True"),
        ([1, False], "bad_type", "coordinate.y must be an integer, not bool False"),
        ([1.0, 1], "bad_type", "coordinate.x must be an integer, not float 1.0"),
        (["1", 1], "bad_type", "coordinate.x must be an integer, not str 1"),
        ([None, 1], "bad_type", "coordinate.x must be an integer, not null None"),
        ([1], "bad_type", "coordinate must be a list [x, y]"),
        ([1, 2, 3], "bad_type", "coordinate must be a list [x, y]"),
        ((1, 2), "bad_type", "coordinate must be a list [x, y]"),
        ({"x": 1, "y": 2}, "bad_type", "coordinate must be a list [x, y]"),
        ("1,2", "bad_type", "coordinate must be a list [x, y]"),
        ([1024, 0], "outside_screen", "point (1024, 0) is outside the 1024x720 screenshot"),
        ([0, 720], "outside_screen", "point (0, 720) is outside the 1024x720 screenshot"),
        ([-1, 5], "outside_screen", "point (-1, 5) is outside the 1024x720 screenshot"),
    ],
)
def test_anthropic_coordinate_strictness(coordinate: Any, code: str, reason: str) -> None:
    for member in ("left_click", "mouse_move", "double_click"):
        err = anthropic_error(member, {"coordinate": coordinate})
        assert (err.code, err.reason) == (code, reason), member
    err = anthropic_error("left_click_drag", {"start_coordinate": [0, 0], "coordinate": coordinate})
    assert err.code == code


def test_anthropic_drag_start_coordinate_is_checked() -> None:
    err = anthropic_error("left_click_drag", {"start_coordinate": [2000, 0], "coordinate": [1, 1]})
    assert err.code == "outside_screen"
    err = anthropic_error("left_click_drag", {"coordinate": [1, 1]})
    assert (err.code, err.reason) == ("missing_field", "left_click_drag action needs 'start_coordinate'")
    err = anthropic_error("left_click_drag", {"start_coordinate": [1, 1]})
    assert (err.code, err.reason) == ("missing_field", "left_click_drag action needs 'coordinate'")


@pytest.mark.parametrize(
    ("duration", "code", "reason"),
    [
        (float("nan"), "bad_type", "duration must be a finite number, not float nan"),
        (float("inf"), "bad_type", "duration must be a finite number, not float inf"),
        (float("-inf"), "bad_type", "duration must be a finite number, not float -inf"),
        (True, "bad_type", "duration must be a finite number, not bool True"),
        ("1", "bad_type", "duration must be a finite number, not str 1"),
        (-1, "out_of_range", "duration=-1 is outside [0, 120.0]"),
        (-0.001, "out_of_range", "duration=-0.001 is outside [0, 120.0]"),
        (120.5, "out_of_range", "duration=120.5 is outside [0, 120.0]"),
        (None, "missing_field", "wait action needs 'duration'"),
    ],
)
def test_anthropic_wait_duration(duration: Any, code: str, reason: str) -> None:
    err = anthropic_error("wait", {"duration": duration})
    assert (err.code, err.reason) == (code, reason)


def test_anthropic_wait_duration_in_range() -> None:
    assert parse_anthropic("wait", {"duration": 0}, S).duration_ms == 0
    assert parse_anthropic("wait", {"duration": 0.25}, S).duration_ms == 250
    assert parse_anthropic("wait", {"duration": 120}, S).duration_ms == 120_000
    assert parse_anthropic("wait", {"duration": 120.0}, S).duration_ms == 120_000


def test_anthropic_huge_integer_duration_is_out_of_range_not_a_parser_crash() -> None:
    # Python's json module turns a long run of digits into an int that does not fit a float.
    duration = json.loads("1" + "0" * 400)
    for member, raw in (("wait", {"duration": duration}), ("hold_key", {"text": "a", "duration": duration})):
        err = anthropic_error(member, raw)
        assert err.code == "out_of_range", err.reason


def test_anthropic_hold_key() -> None:
    assert parse_anthropic("hold_key", {"text": "ctrl+a", "duration": 0.5}, S) == Action(
        Kind.HOLD_KEY, chord="ctrl+a", duration_ms=500
    )
    err = anthropic_error("hold_key", {"text": "shift"})
    assert (err.code, err.reason) == ("missing_field", "hold_key action needs 'duration'")
    err = anthropic_error("hold_key", {"text": "shift", "duration": float("nan")})
    assert err.code == "bad_type"
    err = anthropic_error("hold_key", {"text": "nokey", "duration": 1})
    assert (err.code, err.reason) == ("bad_key", "unknown key name 'nokey'")


@pytest.mark.parametrize(
    ("text", "chord"),
    [
        ("Return", "Return"),
        ("ENTER", "Return"),
        ("ctrl+alt+T", "ctrl+alt+t"),
        ("alt+f2", "alt+F2"),
        ("super", "super"),
        ("cmd+l", "super+l"),
        ("+", "plus"),
        ("ctrl+plus", "ctrl+plus"),
        (" ctrl+a ", "ctrl+a"),
        ("shift+ArrowLeft", "shift+Left"),
    ],
)
def test_anthropic_key(text: str, chord: str) -> None:
    assert parse_anthropic("key", {"text": text}, S) == Action(Kind.KEYPRESS, chord=chord)


def test_anthropic_key_without_text_is_missing() -> None:
    for raw in ({}, {"text": None}, {"repeat": 2}):
        err = anthropic_error("key", raw)
        assert (err.code, err.reason) == ("missing_field", "key action needs 'text'")


def test_anthropic_key_repeat() -> None:
    assert parse_anthropic("key", {"text": "Down", "repeat": 5}, S) == Action(Kind.KEYPRESS, chord="Down", repeat=5)
    assert parse_anthropic("key", {"text": "Down", "repeat": 100}, S).repeat == 100
    for repeat, code in ((0, "out_of_range"), (101, "out_of_range"), (2.0, "bad_type"), (True, "bad_type")):
        assert anthropic_error("key", {"text": "Down", "repeat": repeat}).code == code


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "key text must be a non-empty string"),
        ("   ", "key text must be a non-empty string"),
        (["ctrl", "a"], "key text must be a non-empty string"),
        (5, "key text must be a non-empty string"),
        ("ctrl+a ctrl+b", "one key combination per action (no spaces)"),
        ("a" * 81, "key text is too long"),
        ("ctrl+", "key name '' is empty or too long"),
        ("a+b", "a key combination has one non-modifier key, got a, b"),
        ("ctrl+CTRL+a", "a modifier is repeated in the key combination"),
        ("ctrl+launch_missiles", "unknown key name 'launch_missiles'"),
    ],
)
def test_anthropic_key_refusals(text: Any, reason: str) -> None:
    err = anthropic_error("key", {"text": text})
    assert (err.code, err.reason) == ("bad_key", reason)


def test_anthropic_type_refusals() -> None:
    err = anthropic_error("type", {"text": "y" * (MAX_TEXT + 1)})
    assert (err.code, err.reason) == ("too_long", "text has 10001 characters; at most 10000 are accepted")
    err = anthropic_error("type", {"text": ""})
    assert (err.code, err.reason) == ("bad_field", "text is empty")
    err = anthropic_error("type", {})
    assert (err.code, err.reason) == ("missing_field", "type action needs 'text'")
    assert parse_anthropic("type", {"text": "z" * MAX_TEXT}, S).text == "z" * MAX_TEXT


@pytest.mark.parametrize(
    ("region", "code", "reason"),
    [
        ([0, 0, 0, 0], "out_of_range", "region.x1=0 is outside [1, 2147483648]"),
        ([10, 10, 10, 20], "bad_field", "zoom region must run from its top-left to its bottom-right corner"),
        ([10, 10, 5, 20], "bad_field", "zoom region must run from its top-left to its bottom-right corner"),
        ([0, 0, 1025, 720], "outside_screen", "point (1024, 719) is outside the 1024x720 screenshot"),
        ([-1, 0, 10, 10], "outside_screen", "point (-1, 0) is outside the 1024x720 screenshot"),
        ([0, 0, 10], "bad_type", "zoom region must be a list [x0, y0, x1, y1]"),
        ({"x0": 0}, "bad_type", "zoom region must be a list [x0, y0, x1, y1]"),
        ([0.0, 0, 10, 10], "bad_type", "region start.x must be an integer, not float 0.0"),
        ([0, 0, 10, True], "bad_type", "region.y1 must be an integer, not bool True"),
    ],
)
def test_anthropic_zoom_refusals(region: Any, code: str, reason: str) -> None:
    err = anthropic_error("zoom", {"region": region})
    assert (err.code, err.reason) == (code, reason)


def test_anthropic_zoom_region_and_target() -> None:
    action = parse_anthropic("zoom", {"region": [100, 200, 300, 400]}, S)
    assert action.region == (100, 200, 300, 400)
    assert action.target == (200, 300)
    assert parse_anthropic("zoom", {"region": [0, 0, 1, 1]}, S).region == (0, 0, 1, 1)
    assert parse_anthropic("zoom", {"region": [1023, 719, 1024, 720]}, S).region == (1023, 719, 1024, 720)


@pytest.mark.parametrize("toolset", ["bash", "text_editor", "Computer", "", None, 1, ["computer"]])
def test_anthropic_other_toolsets_are_refused(toolset: Any) -> None:
    err = anthropic_error("left_click", {"coordinate": [1, 1]}, S, toolset)
    assert err.code == "unknown_kind"
    assert err.reason.startswith("unknown toolset ")


@pytest.mark.parametrize(
    "name", ["bash", "computer", "shell", "navigate", "exec", "run_command", "click", "key ", None, 3]
)
def test_anthropic_unknown_members_are_refused(name: Any) -> None:
    err = anthropic_error(name, {})
    assert err.code == "unknown_kind"
    assert err.reason.startswith("unknown computer toolset member ")


@pytest.mark.parametrize(
    ("name", "raw", "reason"),
    [
        ("left_click", {"coordinate": [1, 1], "approved": True}, "left_click action does not take field(s): approved"),
        ("type", {"text": "hi", "confirmed": True}, "type action does not take field(s): confirmed"),
        ("screenshot", {"coordinate": [1, 1]}, "screenshot action does not take field(s): coordinate"),
        ("key", {"text": "a", "coordinate": [1, 1]}, "key action does not take field(s): coordinate"),
        ("left_mouse_down", {"text": "shift"}, "left_mouse_down action does not take field(s): text"),
        ("wait", {"duration": 1, "action": "wait"}, "wait action does not take field(s): action"),
    ],
)
def test_anthropic_unknown_fields_are_refused(name: str, raw: dict[str, Any], reason: str) -> None:
    err = anthropic_error(name, raw)
    assert (err.code, err.reason) == ("unknown_field", reason)


@pytest.mark.parametrize("raw", [[], "left_click", 5, True, [{"coordinate": [1, 1]}]])
def test_anthropic_non_object_input_is_refused(raw: Any) -> None:
    err = anthropic_error("left_click", raw)
    assert err.code == "bad_schema"
    assert err.reason.startswith("tool input must be a JSON object, not ")


# ---------------------------------------------------------------------------------------------------
# Key grammar
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("token", "name"),
    [
        ("ENTER", "Return"),
        ("enter", "Return"),
        ("Return", "Return"),
        ("KP_ENTER", "KP_Enter"),
        ("CTRL", "ctrl"),
        ("Control_L", "ctrl"),
        ("ALT", "alt"),
        ("option", "alt"),
        ("SHIFT_R", "shift"),
        ("META", "super"),
        ("cmd", "super"),
        ("win", "super"),
        ("Super_L", "super"),
        ("ARROWLEFT", "Left"),
        ("arrow_down", "Down"),
        ("ESC", "Escape"),
        ("PageUp", "Page_Up"),
        ("pgdn", "Page_Down"),
        ("backspace", "BackSpace"),
        ("DEL", "Delete"),
        ("f12", "F12"),
        ("F24", "F24"),
        ("kp_5", "KP_5"),
        ("A", "a"),
        ("z", "z"),
        ("7", "7"),
        ("#", "#"),
        ("+", "plus"),
        (" ", "space"),
        ("/", "slash"),
        ("[", "bracketleft"),
        ("'", "apostrophe"),
        ("XF86AudioMute", "XF86AudioMute"),
    ],
)
def test_normalize_key(token: str, name: str) -> None:
    assert normalize_key(token) == name


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("launch", "unknown key name 'launch'"),
        ("F25", "unknown key name 'F25'"),
        ("é", "unknown key name 'é'"),
        ("\n", "unknown key name '\\n'"),
        ("Meta_R", "unknown key name 'Meta_R'"),
        ("", "key name '' is empty or too long"),
        ("x" * 33, "key name 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is empty or too long"),
        (5, "a key must be a string, not int"),
        (None, "a key must be a string, not null"),
        (True, "a key must be a string, not bool"),
    ],
)
def test_normalize_key_refusals(token: Any, reason: str) -> None:
    err = refused(normalize_key, token)
    assert (err.code, err.reason) == ("bad_key", reason)


def test_make_chord_and_parse_chord_text() -> None:
    assert make_chord(["CTRL", "A"]) == "ctrl+a"
    assert make_chord(["shift", "super", "alt", "ctrl", "Delete"]) == "ctrl+alt+shift+super+Delete"
    assert make_chord(["super"]) == "super"
    assert make_chord(["ctrl", "shift"]) == "ctrl+shift"
    assert parse_chord_text("ctrl+shift+t") == "ctrl+shift+t"
    assert parse_chord_text("CTRL+ALT+DEL") == "ctrl+alt+Delete"
    assert parse_chord_text("+") == "plus"
    assert refused(make_chord, []).reason == "a key combination needs at least one key"
    assert refused(make_chord, ["a", "Return"]).reason == "a key combination has one non-modifier key, got a, Return"
    assert refused(make_chord, ["alt", "option", "x"]).reason == "a modifier is repeated in the key combination"


_KEY_NAMES = ["Return", "Delete", "F2", "t", "T", "Left", "space", "+", "7", "KP_Enter", "Page_Up", "semicolon"]
_MOD_ALIASES = {"ctrl": ["ctrl", "CTRL", "control"], "alt": ["alt", "Alt_L", "option"], "shift": ["shift", "Shift_R"],
                "super": ["super", "META", "cmd", "win"]}  # fmt: skip


@given(
    st.sets(st.sampled_from(MODIFIERS)),
    st.one_of(st.none(), st.sampled_from(_KEY_NAMES)),
    st.randoms(use_true_random=False),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_chord_canonical_form_property(mods: set[str], key: str | None, rnd: Any, data: st.DataObject) -> None:
    if not mods and key is None:
        return
    tokens = [data.draw(st.sampled_from(_MOD_ALIASES[m])) for m in mods]
    rnd.shuffle(tokens)
    if key is not None:
        tokens.insert(rnd.randrange(len(tokens) + 1), key)
    chord = make_chord(tokens)
    parts = chord.split("+")
    expected_mods = [m for m in MODIFIERS if m in mods]
    assert parts[: len(expected_mods)] == expected_mods  # modifiers first, in canonical order
    if key is not None:
        assert parts[len(expected_mods) :] == [normalize_key(key)]
    # Canonical chords are fixed points of both entry points.
    assert parse_chord_text(chord) == chord
    assert make_chord(parts) == chord
    assert parse_openai({"type": "keypress", "keys": tokens}, S).chord == chord


# ---------------------------------------------------------------------------------------------------
# The Action type: immutability, records, descriptions
# ---------------------------------------------------------------------------------------------------
def test_action_is_frozen() -> None:
    action = parse_openai({"type": "click", "x": 1, "y": 2}, S)
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.point = (500, 500)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.kind = Kind.TYPE  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.text = "rm -rf /"  # type: ignore[misc]
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        action.approved = True  # type: ignore[attr-defined]
    assert action.point == (1, 2) and action.kind is Kind.CLICK
    assert hash(action) == hash(parse_openai({"type": "click", "x": 1, "y": 2}, S))
    drag = parse_openai({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 2, "y": 2}]}, S)
    assert type(drag.path) is tuple and all(type(p) is tuple for p in drag.path)


SECRET = "correct horse battery staple 4242"


@pytest.mark.parametrize("parse", ["openai", "anthropic"])
def test_typed_text_is_redacted_everywhere(parse: str) -> None:
    if parse == "openai":
        action = parse_openai({"type": "type", "text": SECRET}, S)
    else:
        action = parse_anthropic("type", {"text": SECRET}, S)
    assert action.text == SECRET  # kept in memory for execution and review
    record = action.to_record()
    assert record == {
        "kind": "type",
        "text_len": len(SECRET),
        "text_sha256": hashlib.sha256(SECRET.encode("utf-8")).hexdigest(),
    }
    assert action.text_sha256 == hashlib.sha256(SECRET.encode("utf-8")).hexdigest()
    for rendered in (json.dumps(record), action.describe(), repr(action), str(action)):
        assert SECRET not in rendered
        assert "horse" not in rendered
    assert action.describe() == f"type {len(SECRET)} characters"


def test_text_sha256_of_non_ascii_and_lone_surrogates() -> None:
    text = "héllo wörld ✓ 日本"
    action = parse_openai({"type": "type", "text": text}, S)
    assert action.to_record()["text_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert action.to_record()["text_len"] == len(text)
    lone = json.loads('"abc\\ud800def"')  # valid JSON, not encodable as UTF-8
    record = parse_openai({"type": "type", "text": lone}, S).to_record()
    assert record["text_sha256"] == hashlib.sha256(lone.encode("utf-8", "surrogatepass")).hexdigest()
    json.dumps(record)


@pytest.mark.parametrize(
    ("action", "record", "description"),
    [
        (
            Action(Kind.CLICK, point=(1, 2)),
            {"kind": "click", "x": 1, "y": 2, "button": "left"},
            "click at (1, 2)",
        ),
        (
            Action(Kind.CLICK, point=(1, 2), button="right", hold=("ctrl", "shift")),
            {"kind": "click", "x": 1, "y": 2, "button": "right", "hold": ["ctrl", "shift"]},
            "ctrl+shift+click right at (1, 2)",
        ),
        (Action(Kind.DOUBLE_CLICK, point=(3, 4)), {"kind": "double_click", "x": 3, "y": 4}, "double_click at (3, 4)"),
        (Action(Kind.MOVE, point=(3, 4)), {"kind": "move", "x": 3, "y": 4}, "move to (3, 4)"),
        (
            Action(Kind.DRAG, path=((0, 0), (5, 5), (9, 9))),
            {"kind": "drag", "path": [[0, 0], [5, 5], [9, 9]]},
            "drag (0, 0) → (9, 9) via 3 points",
        ),
        (
            Action(Kind.SCROLL, point=(1, 1), scroll_y=-3),
            {"kind": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": -3},
            "scroll x=0 y=-3 notches at (1, 1)",
        ),
        (Action(Kind.SCROLL, scroll_x=2), {"kind": "scroll", "scroll_x": 2, "scroll_y": 0}, "scroll x=2 y=0 notches"),
        (Action(Kind.KEYPRESS, chord="ctrl+a"), {"kind": "keypress", "keys": "ctrl+a"}, "press ctrl+a"),
        (
            Action(Kind.KEYPRESS, chord="Down", repeat=3),
            {"kind": "keypress", "keys": "Down", "repeat": 3},
            "press Down ×3",
        ),
        (
            Action(Kind.HOLD_KEY, chord="shift", duration_ms=500),
            {"kind": "hold_key", "keys": "shift", "duration_ms": 500},
            "hold shift for 500 ms",
        ),
        (Action(Kind.WAIT, duration_ms=1000), {"kind": "wait", "duration_ms": 1000}, "wait 1000 ms"),
        (Action(Kind.SCREENSHOT), {"kind": "screenshot"}, "screenshot"),
        (Action(Kind.CURSOR_POSITION), {"kind": "cursor_position"}, "cursor position"),
        (Action(Kind.ZOOM, region=(1, 2, 3, 4)), {"kind": "zoom", "region": [1, 2, 3, 4]}, "zoom on (1, 2)-(3, 4)"),
        (Action(Kind.MOUSE_DOWN), {"kind": "mouse_down", "button": "left"}, "mouse down left"),
        (
            Action(Kind.MOUSE_UP, point=(7, 8)),
            {"kind": "mouse_up", "x": 7, "y": 8, "button": "left"},
            "mouse up left at (7, 8)",
        ),
    ],
)
def test_to_record_and_describe(action: Action, record: dict[str, Any], description: str) -> None:
    assert action.to_record() == record
    assert action.describe() == description
    json.dumps(action.to_record())


# ---------------------------------------------------------------------------------------------------
# Property: whatever arrives, the parsers return an Action or raise ActionError
# ---------------------------------------------------------------------------------------------------
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-5, 1100)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["ctrl", "shift+ctrl", "Return", "wheel", "up", "down", "super", "+", "a", ""])
)
json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=15,
)
# Field values: mostly well-formed (so that many draws parse), sometimes any JSON value at all.
_ints = st.integers(-3, 1100)
_key_names = st.sampled_from(
    ["ctrl", "SHIFT", "alt", "super", "a", "T", "Return", "F2", "Delete", "+", "Left"]
) | st.sampled_from(["bogus", "", "a", "ENTER"])
_chord_texts = st.lists(_key_names, min_size=1, max_size=3).map("+".join)
_FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "x": _ints,
    "y": _ints,
    "button": st.sampled_from(["left", "right", "wheel", "back", "forward", "middle", "primary"]),
    "keys": st.lists(_key_names, max_size=3),
    "path": st.lists(st.fixed_dictionaries({"x": _ints, "y": _ints}), max_size=4),
    "scroll_x": st.integers(-12_000, 12_000),
    "scroll_y": st.integers(-12_000, 12_000),
    "text": st.text(max_size=40) | _chord_texts,
    "repeat": st.integers(-1, 120),
    "duration": st.floats(-1, 130) | st.integers(-1, 130) | st.sampled_from([math.nan, math.inf, 10**400]),
    "coordinate": st.lists(_ints, min_size=2, max_size=2),
    "start_coordinate": st.lists(_ints, min_size=2, max_size=2),
    "scroll_direction": st.sampled_from(["up", "down", "left", "right", "sideways"]),
    "scroll_amount": st.integers(-1, 120),
    "region": st.lists(_ints, min_size=4, max_size=4),
}
_OPENAI_FIELDS = {
    "click": ["button", "x", "y", "keys"],
    "double_click": ["x", "y", "keys"],
    "drag": ["path", "keys"],
    "move": ["x", "y", "keys"],
    "scroll": ["x", "y", "scroll_x", "scroll_y", "keys"],
    "keypress": ["keys"],
    "type": ["text"],
    "wait": [],
    "screenshot": [],
    "shell": ["text"],
    "navigate": ["text"],
}
_ANTHROPIC_FIELDS = {
    "key": ["text", "repeat"],
    "hold_key": ["text", "duration"],
    "type": ["text"],
    "cursor_position": [],
    "mouse_move": ["coordinate", "text"],
    "left_mouse_down": ["coordinate"],
    "left_mouse_up": ["coordinate"],
    **{name: ["coordinate", "text"] for name in ("left_click", "right_click", "middle_click", "double_click")},
    "triple_click": ["coordinate", "text"],
    "left_click_drag": ["start_coordinate", "coordinate", "text"],
    "scroll": ["scroll_direction", "scroll_amount", "coordinate", "text"],
    "wait": ["duration"],
    "screenshot": [],
    "zoom": ["region"],
}
_scalings = st.sampled_from([S, Scaling(Size(2048, 1440), Size(1024, 720)), Scaling.fit(Size(1920, 1080), 1024)])


@st.composite
def _shaped(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    for name in names:
        roll = draw(st.integers(0, 7))
        if roll == 0:
            continue  # field left out
        raw[name] = draw(json_values if roll == 1 else _FIELD_VALUES[name])
    if draw(st.integers(0, 9)) == 0:  # now and then an injected or misspelt field
        raw[draw(st.sampled_from(["approved", "confirmed", "type", "x", "coordinates"]))] = draw(json_values)
    return raw


@st.composite
def openai_shaped(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(_OPENAI_FIELDS)))
    return {"type": kind, **draw(_shaped(_OPENAI_FIELDS[kind]))}


@st.composite
def anthropic_shaped(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(ANTHROPIC_MEMBERS))
    return name, draw(_shaped(_ANTHROPIC_FIELDS[name]))


def test_fuzz_field_tables_match_the_reference() -> None:
    assert sorted(_ANTHROPIC_FIELDS) == sorted(ANTHROPIC_MEMBERS)
    assert set(OPENAI_KINDS) <= set(_OPENAI_FIELDS)


def _check_action(action: Action) -> None:
    assert isinstance(action, Action)
    record = action.to_record()
    description = action.describe()
    json.dumps(record)  # JSON-ready
    assert "text" not in record
    if action.kind is Kind.TYPE:
        assert 1 <= len(action.text) <= MAX_TEXT
        sha = hashlib.sha256(action.text.encode("utf-8", "surrogatepass")).hexdigest()
        expected = {"kind": "type", "text_len": len(action.text), "text_sha256": sha}
        if any(c in action.text for c in "\t\n\r"):  # the one fact told of the text: it leaves its field
            expected["moves_focus"] = True
        assert record == expected
        assert description == f"type {len(action.text)} characters"
        if len(action.text) >= 12:
            assert action.text not in json.dumps(record, ensure_ascii=False)
            assert action.text not in description
    else:
        assert action.text == ""
    if action.point is not None:
        assert type(action.point[0]) is int and type(action.point[1]) is int
    for x, y in action.path:
        assert type(x) is int and type(y) is int


def _check_error(err: ActionError) -> None:
    assert type(err.code) is str and err.code
    assert type(err.reason) is str and err.reason
    # "malformed" is the parsers' safety net for their own bugs: no input should reach it.
    assert err.code != "malformed", err.reason


@given(st.one_of(json_values, openai_shaped(), openai_shaped()), _scalings)
@settings(max_examples=400, deadline=None)
def test_parse_openai_never_raises_anything_else(raw: Any, scaling: Scaling) -> None:
    try:
        action = parse_openai(raw, scaling)
    except ActionError as err:
        _check_error(err)
    else:
        _check_action(action)


@given(
    st.one_of(
        anthropic_shaped(), anthropic_shaped(), st.tuples(st.sampled_from(ANTHROPIC_MEMBERS) | json_values, json_values)
    ),
    _scalings,
    st.one_of(st.just("computer"), st.just("computer"), st.just("computer"), json_values),
)
@settings(max_examples=400, deadline=None)
def test_parse_anthropic_never_raises_anything_else(call: tuple[Any, Any], scaling: Scaling, toolset: Any) -> None:
    name, raw = call
    try:
        action = parse_anthropic(name, raw, scaling, toolset)
    except ActionError as err:
        _check_error(err)
    else:
        assert toolset == "computer" and name in ANTHROPIC_MEMBERS
        _check_action(action)


@given(st.text(min_size=1, max_size=200))
@settings(max_examples=300, deadline=None)
def test_typed_text_never_leaks_property(text: str) -> None:
    for action in (parse_openai({"type": "type", "text": text}, S), parse_anthropic("type", {"text": text}, S)):
        assert action.text == text
        record = action.to_record()
        leaves = {"moves_focus": True} if any(c in text for c in "\t\n\r") else {}
        assert record == {
            "kind": "type",
            "text_len": len(text),
            "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            **leaves,
        }
        assert action.describe() == f"type {len(text)} characters"
        assert "text=" not in repr(action)


def test_anthropic_durations_become_whole_milliseconds() -> None:
    for seconds, ms in ((1e-9, 0), (0.001, 1), (0.0104, 10), (2.5, 2500), (119.9999, 120_000)):
        action = parse_anthropic("wait", {"duration": seconds}, S)
        assert type(action.duration_ms) is int and action.duration_ms == ms


# ---------------------------------------------------------------------------------------------------
# Hostile shapes (issue 8): nesting and size, null optional fields, the plus key, unencodable text
# ---------------------------------------------------------------------------------------------------
def _deep(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


# The smallest valid input of every kind, with the fields the vendor's schema marks optional
# (REFERENCE.md; openai/types/responses/response_computer_tool_call.py). Every field the parser takes is
# in one or the other, so a new field cannot escape the null-means-absent rule unclassified.
OPENAI_MINIMAL: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "click": ({"type": "click", "button": "left", "x": 1, "y": 2}, ("keys",)),
    "double_click": ({"type": "double_click", "x": 1, "y": 2}, ("keys",)),
    "drag": ({"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}, ("keys",)),
    "move": ({"type": "move", "x": 1, "y": 2}, ("keys",)),
    "scroll": ({"type": "scroll", "x": 1, "y": 2, "scroll_x": 0, "scroll_y": 100}, ("keys",)),
    "keypress": ({"type": "keypress", "keys": ["a"]}, ()),
    "type": ({"type": "type", "text": "a"}, ()),
    "wait": ({"type": "wait"}, ()),
    "screenshot": ({"type": "screenshot"}, ()),
}
# Required by OpenAI's schema, yet defaulted by the parser when missing: null there stays a refusal.
OPENAI_DEFAULTED_REQUIRED = {"click": ("button",), "scroll": ("scroll_x", "scroll_y")}
ANTHROPIC_MINIMAL: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "key": ({"text": "a"}, ("repeat",)),
    "hold_key": ({"text": "a", "duration": 1}, ()),
    "type": ({"text": "a"}, ()),
    "cursor_position": ({}, ()),
    "mouse_move": ({"coordinate": [1, 2]}, ("text",)),
    "left_mouse_down": ({}, ("coordinate",)),
    "left_mouse_up": ({}, ("coordinate",)),
    **{m: ({"coordinate": [1, 2]}, ("text",)) for m in ("left_click", "right_click", "middle_click")},
    **{m: ({"coordinate": [1, 2]}, ("text",)) for m in ("double_click", "triple_click")},
    "left_click_drag": ({"start_coordinate": [1, 2], "coordinate": [3, 4]}, ("text",)),
    "scroll": ({"scroll_direction": "down", "scroll_amount": 1}, ("coordinate", "text")),
    "wait": ({"duration": 1}, ()),
    "screenshot": ({}, ()),
    "zoom": ({"region": [0, 0, 10, 10]}, ()),
}


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except ActionError as err:
        return (err.code, err.reason)


def test_minimal_tables_classify_every_field_of_every_kind() -> None:
    from cua_tui.core.actions import _ANTHROPIC_FIELDS, _OPENAI_FIELDS

    assert sorted(OPENAI_MINIMAL) == sorted(_OPENAI_FIELDS)
    for kind, (base, optional) in OPENAI_MINIMAL.items():
        assert set(base) | set(optional) == _OPENAI_FIELDS[kind], kind
        assert isinstance(parse_openai(base, S), Action)
    assert sorted(ANTHROPIC_MINIMAL) == sorted(ANTHROPIC_MEMBERS)
    for name, (base, optional) in ANTHROPIC_MINIMAL.items():
        assert set(base) | set(optional) == _ANTHROPIC_FIELDS[name], name
        assert isinstance(parse_anthropic(name, base, S), Action)


@pytest.mark.parametrize(("kind", "field"), [(k, f) for k, (_, optional) in OPENAI_MINIMAL.items() for f in optional])
def test_openai_null_optional_field_means_absent(kind: str, field: str) -> None:
    base = OPENAI_MINIMAL[kind][0]
    assert parse_openai({**base, field: None}, S) == parse_openai(base, S)


@pytest.mark.parametrize(
    ("name", "field"), [(n, f) for n, (_, optional) in ANTHROPIC_MINIMAL.items() for f in optional]
)
def test_anthropic_null_optional_field_means_absent(name: str, field: str) -> None:
    base = ANTHROPIC_MINIMAL[name][0]
    assert _outcome(parse_anthropic, name, {**base, field: None}, S) == _outcome(parse_anthropic, name, base, S)


def test_anthropic_key_with_null_repeat_is_one_press() -> None:
    action = parse_anthropic("key", {"text": "Return", "repeat": None}, S)
    assert action == Action(Kind.KEYPRESS, chord="Return", repeat=1)


def test_null_in_a_required_field_is_refused_in_every_kind() -> None:
    for kind, (base, _) in OPENAI_MINIMAL.items():
        for field in set(base) - {"type"}:
            err = openai_error({**base, field: None})
            if field in OPENAI_DEFAULTED_REQUIRED.get(kind, ()):
                assert err.code in ("bad_field", "bad_type"), (kind, field)
            else:
                assert (err.code, err.reason) == ("missing_field", f"{kind} action needs {field!r}"), (kind, field)
    for name, (base, _) in ANTHROPIC_MINIMAL.items():
        for field in base:
            err = anthropic_error(name, {**base, field: None})
            assert err.code == "missing_field" and f"needs {field!r}" in err.reason, (name, field)


@pytest.mark.parametrize(
    ("text", "chord"),
    [
        ("ctrl++", "ctrl+plus"),
        ("CTRL++", "ctrl+plus"),
        ("shift++", "shift+plus"),
        ("ctrl+alt++", "ctrl+alt+plus"),
        ("ctrl+plus", "ctrl+plus"),
        (" ctrl++ ", "ctrl+plus"),
        ("+", "plus"),
    ],
)
def test_the_plus_key_in_chord_text(text: str, chord: str) -> None:
    assert parse_chord_text(text) == chord
    assert parse_anthropic("key", {"text": text}, S).chord == chord
    assert parse_anthropic("hold_key", {"text": text, "duration": 1}, S).chord == chord


@pytest.mark.parametrize(
    ("keys", "chord"),
    [
        (["CTRL", "+"], "ctrl+plus"),
        (["shift", "+"], "shift+plus"),
        (["ctrl++"], "ctrl+plus"),
        (["CTRL+ALT++"], "ctrl+alt+plus"),
        (["ctrl+plus"], "ctrl+plus"),
        (["+"], "plus"),
    ],
)
def test_the_plus_key_in_openai_keypress(keys: list[str], chord: str) -> None:
    assert parse_openai({"type": "keypress", "keys": keys}, S).chord == chord


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ctrl+", "key name '' is empty or too long"),
        ("+ctrl", "key text '+ctrl' has an empty key name between '+' signs"),
        ("ctrl++a", "key text 'ctrl++a' has an empty key name between '+' signs"),
        ("++", "key text '++' has an empty key name between '+' signs"),
        ("ctrl+++", "key text 'ctrl+++' has an empty key name between '+' signs"),
        ("ctrl+ +", "one key combination per action (no spaces)"),
        ("a++", "a key combination has one non-modifier key, got a, plus"),
        ("ctrl++shift", "key text 'ctrl++shift' has an empty key name between '+' signs"),
    ],
)
def test_bad_chords_are_refused_with_accurate_reasons(text: str, reason: str) -> None:
    for err in (refused(parse_chord_text, text), anthropic_error("key", {"text": text})):
        assert err.code == "bad_key"
        assert err.reason.startswith(reason), err.reason
    if " " not in text:
        err = openai_error({"type": "keypress", "keys": [text]})
        assert err.code == "bad_key" and err.reason.startswith(reason), err.reason


def test_held_modifier_text_with_a_dangling_plus_is_refused_not_trimmed() -> None:
    for text in ("shift+", "+shift", "shift++"):
        err = anthropic_error("left_click", {"coordinate": [1, 1], "text": text})
        assert err.code == "bad_key", text


@given(st.sets(st.sampled_from(MODIFIERS), min_size=1), st.sampled_from(["CTRL", "ctrl", "Ctrl"]))
def test_plus_written_last_or_by_name_is_the_same_chord(mods: set[str], _case: str) -> None:
    prefix = "+".join(sorted(mods))
    assert parse_chord_text(prefix + "++") == parse_chord_text(prefix + "+plus") == make_chord([*mods, "+"])


def _openai_fields() -> list[tuple[dict[str, Any], str]]:
    return [(base, f) for base, optional in OPENAI_MINIMAL.values() for f in (set(base) | set(optional)) - {"type"}]


def _anthropic_fields() -> list[tuple[str, dict[str, Any], str]]:
    return [(n, base, f) for n, (base, optional) in ANTHROPIC_MINIMAL.items() for f in set(base) | set(optional)]


@pytest.mark.parametrize("levels", [9, 200_000])
def test_deep_nesting_in_any_field_is_refused_as_bad_schema(levels: int) -> None:
    deep = _deep(levels)
    for base, field in _openai_fields():
        err = openai_error({**base, field: deep})
        assert err.code == "bad_schema", (base["type"], field, err.reason)
        assert err.reason == f"{base['type']} action: field {field!r} nests deeper than 8 levels"
    for name, base, field in _anthropic_fields():
        err = anthropic_error(name, {**base, field: deep})
        assert (err.code, err.reason) == ("bad_schema", f"{name} action: field {field!r} nests deeper than 8 levels")
    # An unknown field is no way around it, nor is a dict in place of a list.
    err = openai_error({"type": "click", "x": 1, "y": 1, "approved": {"a": deep}})
    assert err.code == "bad_schema"


def test_nesting_up_to_the_bound_gets_the_fields_own_refusal() -> None:
    err = openai_error({"type": "click", "x": _deep(7), "y": 1})  # the action is level 1, x's lists 2-8
    assert err.code == "bad_type" and err.reason.startswith("point.x must be an integer, not list [[[")
    assert len(err.reason) < 100


def test_oversized_fields_are_refused_in_bounded_time() -> None:
    import time

    huge = list(range(1_000_000))
    started = time.monotonic()
    for base, field in _openai_fields():
        err = openai_error({**base, field: huge})
        assert (err.code, err.reason) == ("bad_schema", f"{base['type']} action is too large (more than 4096 values)")
    for name, base, field in _anthropic_fields():
        assert anthropic_error(name, {**base, field: huge}).code == "bad_schema"
    err = openai_error({"type": "click", "x": 1, "y": 1, **{f"k{i}": 0 for i in range(5000)}})
    assert err.code == "bad_schema"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("value", [10**5000, -(10**5000), 2**100_000], ids=["1e5000", "-1e5000", "2^100000"])
def test_integers_too_long_to_print_are_out_of_range_not_malformed(value: int) -> None:
    err = openai_error({"type": "click", "x": value, "y": 1})
    assert err.code == "out_of_range" and "-bit integer>" in err.reason and len(err.reason) < 100
    err = anthropic_error("wait", {"duration": value})
    assert err.code == "out_of_range" and len(err.reason) < 100
    err = anthropic_error("key", {"text": "a", "repeat": value})
    assert err.code == "out_of_range"


LONE = json.loads('"\\ud800"')


@pytest.mark.parametrize(
    "raw",
    [
        {"type": LONE},
        {"type": "click", "x": 1, "y": 1, LONE: 1},
        {"type": "click", "x": LONE, "y": 1},
        {"type": "click", "button": LONE, "x": 1, "y": 1},
        {"type": "keypress", "keys": [LONE]},
        {"type": "keypress", "keys": ["ctrl+" + LONE]},
        {"type": "move", "x": 1, "y": 1, "keys": [LONE]},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {LONE: 2}]},
    ],
)
def test_reasons_quoting_lone_surrogates_are_encodable(raw: dict[str, Any]) -> None:
    err = openai_error(raw)
    err.reason.encode("utf-8")
    str(err).encode("utf-8")
    assert "\\ud800" in err.reason


@given(st.text(alphabet=st.characters(codec=None, categories=["Cs", "Lu", "P"]), max_size=30), st.data())
@settings(max_examples=200, deadline=None)
def test_every_reason_is_encodable_property(text: str, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(ANTHROPIC_MEMBERS))
    base, optional = ANTHROPIC_MINIMAL[name]
    field = data.draw(st.sampled_from(sorted({*base, *optional, text or "x"})))
    calls: tuple[Callable[[], object], ...] = (
        lambda: parse_anthropic(name, {**base, field: text}, S),
        lambda: parse_anthropic(text, base, S),
        lambda: parse_anthropic(name, base, S, text),
        lambda: parse_openai({"type": text}, S),
        lambda: parse_openai({"type": "keypress", "keys": [text]}, S),
    )
    for call in calls:
        try:
            call()
        except ActionError as err:
            err.reason.encode("utf-8")
            _check_error(err)
