"""Policy: TOML file or built-in default -> Decision(allow | confirm | block) (cua_tui.core.policy)."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import re
import textwrap
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core import policy as policy_module
from cua_tui.core.actions import MODIFIERS, Action, Kind, make_chord, parse_anthropic, parse_openai
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.policy import (
    DEFAULT_ALLOWED,
    DEFAULT_BLOCK_KEYS,
    DEFAULT_CONFIRM_KEYS,
    DEFAULT_CONFIRMED,
    DEFAULT_POLICY_TOML,
    Decision,
    Limits,
    Policy,
    PolicyError,
    Verdict,
)

S = Scaling.identity(Size(1024, 720))
# The complete example moved from the README to the manual's page (the tests below still say README).
README = Path(__file__).resolve().parents[1] / "docs" / "files" / "policy.md"

TYPING_REASON = "typing counts as transmission: the text can leave the sandbox"


@pytest.fixture(scope="module")
def default() -> Policy:
    return Policy.default()


def openai(raw: dict[str, Any]) -> Action:
    return parse_openai(raw, S)


def key(text: str) -> Action:
    return parse_anthropic("key", {"text": text}, S)


def click(x: int, y: int, **extra: Any) -> Action:
    return openai({"type": "click", "x": x, "y": y, **extra})


def error_of(text: str, source: str = "p.toml") -> str:
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(textwrap.dedent(text), source=source)
    return str(info.value)


# ---------------------------------------------------------------------------------------------------
# Built-in default
# ---------------------------------------------------------------------------------------------------
def test_default_policy_identity(default: Policy) -> None:
    assert default.name == "default"
    assert default.source == "built-in"
    assert default.text == DEFAULT_POLICY_TOML
    assert default.limits == Limits()
    assert default.confirm == frozenset({Kind.TYPE})
    assert default.withheld == frozenset({Kind.MOUSE_DOWN, Kind.MOUSE_UP, Kind.HOLD_KEY})
    assert default.regions == ()


def test_built_in_policy_text_and_code_defaults_agree(default: Policy) -> None:
    # The defaults live in code (Limits, DEFAULT_*); the built-in TOML spells them out for people to copy.
    data = tomllib.loads(DEFAULT_POLICY_TOML)
    assert data["limits"] == dataclasses.asdict(Limits())
    assert data["actions"]["allow"] == [k.value for k in DEFAULT_ALLOWED]
    assert data["actions"]["confirm"] == [k.value for k in DEFAULT_CONFIRMED]
    assert data["keys"] == {"confirm": list(DEFAULT_CONFIRM_KEYS), "block": list(DEFAULT_BLOCK_KEYS)}
    # A file that leaves the sections out gets the same rules, and the schema knows the same limits.
    bare = Policy.from_toml("version = 1\n")
    assert (bare.limits, bare.allow, bare.confirm, bare.confirm_keys, bare.block_keys) == (
        default.limits,
        default.allow,
        default.confirm,
        default.confirm_keys,
        default.block_keys,
    )
    assert policy_module._Limits.__struct_fields__ == tuple(f.name for f in dataclasses.fields(Limits))


def test_typing_needs_confirmation(default: Policy) -> None:
    for action in (openai({"type": "type", "text": "hello"}), parse_anthropic("type", {"text": "hi"}, S)):
        assert default.classify(action) == Decision(Verdict.CONFIRM, TYPING_REASON, "actions.type")


@pytest.mark.parametrize(
    ("action", "reason", "rule"),
    [
        (key("Return"), "Return usually submits a form or sends a message", "keys.confirm:Return"),
        (key("ENTER"), "Return usually submits a form or sends a message", "keys.confirm:Return"),
        (openai({"type": "keypress", "keys": ["ENTER"]}), "Return usually submits a form or sends a message",
         "keys.confirm:Return"),
        (key("KP_Enter"), "Enter usually submits a form or sends a message", "keys.confirm:KP_Enter"),
        (key("ctrl+Return"), "ctrl+Return usually sends a message", "keys.confirm:ctrl+Return"),
        (openai({"type": "keypress", "keys": ["CTRL", "ENTER"]}), "ctrl+Return usually sends a message",
         "keys.confirm:ctrl+Return"),
        (parse_anthropic("key", {"text": "Return", "repeat": 3}, S), "Return usually submits a form or sends a message",
         "keys.confirm:Return"),
    ],
)  # fmt: skip
def test_submit_keys_need_confirmation(default: Policy, action: Action, reason: str, rule: str) -> None:
    assert default.classify(action) == Decision(Verdict.CONFIRM, reason, rule)


@pytest.mark.parametrize(
    ("action", "reason", "rule"),
    [
        (key("ctrl+alt+Delete"), "a system key combination (log out / restart)", "keys.block:ctrl+alt+Delete"),
        (openai({"type": "keypress", "keys": ["CTRL", "ALT", "DEL"]}), "a system key combination (log out / restart)",
         "keys.block:ctrl+alt+Delete"),
        (key("super"), "the super key opens the system menu or launcher", "keys.block:super"),
        (key("super+l"), "the super key opens the system menu or launcher", "keys.block:super"),
        (openai({"type": "keypress", "keys": ["META"]}), "the super key opens the system menu or launcher",
         "keys.block:super"),
        (openai({"type": "keypress", "keys": ["win", "r"]}), "the super key opens the system menu or launcher",
         "keys.block:super"),
        (key("ctrl+alt+t"), "opens a terminal outside the browser", "keys.block:ctrl+alt+t"),
        (key("ctrl+alt+T"), "opens a terminal outside the browser", "keys.block:ctrl+alt+t"),
        (openai({"type": "keypress", "keys": ["ALT", "CTRL", "T"]}), "opens a terminal outside the browser",
         "keys.block:ctrl+alt+t"),
        (key("alt+F2"), "opens a run-command dialog", "keys.block:alt+F2"),
        (key("ALT+f2"), "opens a run-command dialog", "keys.block:alt+F2"),
        (key("alt+F4"), "closes the window", "keys.block:alt+F4"),
        (key("F12"), "opens the browser's developer tools", "keys.block:F12"),
        (key("ctrl+shift+I"), "opens the browser's developer tools", "keys.block:ctrl+shift+i"),
        (key("ctrl+alt+BackSpace"), "ctrl+alt+BackSpace is blocked by the policy", "keys.block:ctrl+alt+BackSpace"),
        (key("ctrl+alt+F3"), "ctrl+alt+F3 is blocked by the policy", "keys.block:ctrl+alt+F3"),
        (key("ctrl+shift+Escape"), "ctrl+shift+Escape is blocked by the policy", "keys.block:ctrl+shift+Escape"),
    ],
)  # fmt: skip
def test_system_keys_are_blocked(default: Policy, action: Action, reason: str, rule: str) -> None:
    assert default.classify(action) == Decision(Verdict.BLOCK, reason, rule)


def test_super_held_during_a_pointer_action_is_blocked(default: Policy) -> None:
    expected = Decision(Verdict.BLOCK, "the super key opens the system menu or launcher", "keys.block:super")
    assert default.classify(click(10, 10, keys=["SUPER"])) == expected
    assert default.classify(click(10, 10, keys=["shift", "cmd"])) == expected
    assert default.classify(parse_anthropic("left_click", {"coordinate": [5, 5], "text": "super"}, S)) == expected
    assert default.classify(openai({"type": "scroll", "x": 1, "y": 1, "scroll_y": 100, "keys": ["meta"]})) == expected
    drag = openai({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 9, "y": 9}], "keys": ["win"]})
    assert default.classify(drag) == expected
    # Other held modifiers are fine.
    assert default.classify(click(10, 10, keys=["SHIFT"])).verdict is Verdict.ALLOW
    assert default.classify(click(10, 10, keys=["ctrl", "alt"])).verdict is Verdict.ALLOW


@given(
    st.sets(st.sampled_from([m for m in MODIFIERS if m != "super"])), st.sampled_from(["a", "t", "Return", "F2", None])
)
@settings(max_examples=150, deadline=None)
def test_any_chord_with_super_is_blocked(mods: set[str], last: str | None) -> None:
    chord = make_chord([*mods, "super", *([last] if last else [])])
    decision = Policy.default().classify(Action(Kind.KEYPRESS, chord=chord))
    assert decision.verdict is Verdict.BLOCK
    # super, or a more specific blocked chord it contains (ctrl+alt+super+t is still ctrl+alt+t)
    assert decision.rule.startswith("keys.block:") and ("super" in decision.rule or "alt+" in decision.rule)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("left_mouse_down", {}),
        ("left_mouse_up", {"coordinate": [5, 5]}),
        ("hold_key", {"text": "shift", "duration": 1}),
    ],
)
def test_withheld_kinds_are_blocked(default: Policy, name: str, raw: dict[str, Any]) -> None:
    action = parse_anthropic(name, raw, S)
    kind = action.kind.value
    assert default.classify(action) == Decision(
        Verdict.BLOCK, f"{kind} actions are withheld by the policy", f"actions.{kind}"
    )


@pytest.mark.parametrize(
    "action",
    [
        click(1, 1),
        click(1023, 719, button="right"),
        click(5, 5, button="wheel"),
        openai({"type": "double_click", "x": 1, "y": 1}),
        parse_anthropic("triple_click", {"coordinate": [1, 1]}, S),
        openai({"type": "move", "x": 1, "y": 1}),
        openai({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 100, "y": 100}]}),
        openai({"type": "scroll", "x": 1, "y": 1, "scroll_y": 300}),
        parse_anthropic("scroll", {"scroll_direction": "up", "scroll_amount": 15}, S),
        openai({"type": "screenshot"}),
        openai({"type": "wait"}),
        parse_anthropic("wait", {"duration": 10}, S),
        parse_anthropic("cursor_position", {}, S),
        parse_anthropic("zoom", {"region": [0, 0, 100, 100]}, S),
        key("ctrl+a"),
        key("Tab"),
        key("shift+t"),
        key("ctrl+alt+shift+Left"),
    ],
    ids=lambda a: a.describe(),
)
def test_ordinary_actions_are_allowed(default: Policy, action: Action) -> None:
    kind = action.kind.value
    assert default.classify(action) == Decision(Verdict.ALLOW, f"{kind} is allowed", f"actions.{kind}")


# ---------------------------------------------------------------------------------------------------
# Caps
# ---------------------------------------------------------------------------------------------------
def test_text_length_cap(default: Policy) -> None:
    assert default.classify(openai({"type": "type", "text": "x" * 500})).verdict is Verdict.CONFIRM
    assert default.classify(openai({"type": "type", "text": "x" * 501})) == Decision(
        Verdict.BLOCK, "typed text of 501 characters exceeds the cap of 500", "limits.max_text_length"
    )


def test_wait_cap(default: Policy) -> None:
    assert default.classify(parse_anthropic("wait", {"duration": 10}, S)).verdict is Verdict.ALLOW
    assert default.classify(parse_anthropic("wait", {"duration": 10.5}, S)) == Decision(
        Verdict.BLOCK, "10.5 s exceeds the cap of 10 s", "limits.max_wait_seconds"
    )
    assert default.classify(parse_anthropic("wait", {"duration": 120}, S)).rule == "limits.max_wait_seconds"


def test_hold_key_wait_cap_when_hold_key_is_allowed() -> None:
    policy = Policy.from_toml('[actions]\nallow = ["hold_key"]\n')
    assert policy.classify(parse_anthropic("hold_key", {"text": "shift", "duration": 2}, S)).verdict is Verdict.ALLOW
    assert policy.classify(parse_anthropic("hold_key", {"text": "shift", "duration": 11}, S)) == Decision(
        Verdict.BLOCK, "11 s exceeds the cap of 10 s", "limits.max_wait_seconds"
    )


def test_scroll_cap(default: Policy) -> None:
    assert default.classify(
        parse_anthropic("scroll", {"scroll_direction": "down", "scroll_amount": 15}, S)
    ).verdict is (Verdict.ALLOW)
    expected = Decision(Verdict.BLOCK, "scrolling 16 notches exceeds the cap of 15", "limits.max_scroll")
    assert default.classify(parse_anthropic("scroll", {"scroll_direction": "up", "scroll_amount": 16}, S)) == expected
    assert default.classify(parse_anthropic("scroll", {"scroll_direction": "left", "scroll_amount": 16}, S)) == expected
    assert default.classify(openai({"type": "scroll", "x": 1, "y": 1, "scroll_y": 1600})) == expected
    assert default.classify(openai({"type": "scroll", "x": 1, "y": 1, "scroll_x": -1600})) == expected


def test_drag_points_cap(default: Policy) -> None:
    def drag(n: int) -> Action:
        return openai({"type": "drag", "path": [{"x": i, "y": i} for i in range(n)]})

    assert default.classify(drag(64)).verdict is Verdict.ALLOW
    assert default.classify(drag(65)) == Decision(
        Verdict.BLOCK, "a drag of 65 points exceeds the cap of 64", "limits.max_drag_points"
    )


def test_caps_win_over_confirmation_and_allowance() -> None:
    policy = Policy.from_toml('[actions]\nallow = ["type", "wait"]\n')
    assert policy.classify(openai({"type": "type", "text": "ok"})).verdict is Verdict.ALLOW
    assert policy.classify(openai({"type": "type", "text": "x" * 501})).verdict is Verdict.BLOCK


def test_with_limits_overrides(default: Policy) -> None:
    tight = default.with_limits(max_text_length=5, max_wait_seconds=1, max_scroll=2, max_drag_points=3, max_turns=4)
    assert tight.limits == dataclasses.replace(
        Limits(), max_text_length=5, max_wait_seconds=1, max_scroll=2, max_drag_points=3, max_turns=4
    )
    assert default.limits == Limits()  # the original is untouched
    assert tight.classify(openai({"type": "type", "text": "hello"})).verdict is Verdict.CONFIRM
    assert tight.classify(openai({"type": "type", "text": "hello!"})) == Decision(
        Verdict.BLOCK, "typed text of 6 characters exceeds the cap of 5", "limits.max_text_length"
    )
    assert tight.classify(parse_anthropic("wait", {"duration": 1.5}, S)).rule == "limits.max_wait_seconds"
    assert tight.classify(parse_anthropic("scroll", {"scroll_direction": "up", "scroll_amount": 3}, S)).rule == (
        "limits.max_scroll"
    )
    path = [{"x": i, "y": i} for i in range(4)]
    assert tight.classify(openai({"type": "drag", "path": path})).rule == "limits.max_drag_points"
    # None means "not given on the command line": the policy's value stays.
    same = default.with_limits(max_turns=None, max_steps=None)
    assert same.limits == default.limits
    # Everything else carries over.
    for name in ("name", "source", "text", "allow", "confirm", "confirm_keys", "block_keys", "regions"):
        assert getattr(tight, name) == getattr(default, name)
    assert tight.sha256 == default.sha256
    assert "limits: 4 turns, 200 steps, 1800 s, text <= 5, wait <= 1 s, scroll <= 2" in tight.summary()


# ---------------------------------------------------------------------------------------------------
# Regions
# ---------------------------------------------------------------------------------------------------
REGIONS_TOML = """\
version = 1
name = "regions"

[[regions]]
name = "send"
x = 40
y = 400
width = 160
height = 44
verdict = "confirm"
reason = "the Send button transmits the report"

[[regions]]
name = "delete"
x = 800
y = 20
width = 200
height = 40
verdict = "block"
reason = "deleting records is out of scope"

[[regions]]
name = "buy"
x = 500
y = 500
width = 10
height = 10
"""


@pytest.fixture(scope="module")
def regional(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    path = tmp_path_factory.mktemp("policy") / "regions.toml"
    path.write_text(REGIONS_TOML)
    policy = Policy.load(path)
    assert policy.source == str(path)
    assert policy.name == "regions"
    assert policy.text == REGIONS_TOML
    return policy


SEND = Decision(Verdict.CONFIRM, "the Send button transmits the report", "regions.send")
DELETE = Decision(Verdict.BLOCK, "deleting records is out of scope", "regions.delete")


@pytest.mark.parametrize("point", [(40, 400), (199, 443), (120, 420)])
def test_click_in_send_region_confirms(regional: Policy, point: tuple[int, int]) -> None:
    assert regional.classify(click(*point)) == SEND
    assert regional.classify(parse_anthropic("double_click", {"coordinate": list(point)}, S)) == SEND


@pytest.mark.parametrize("point", [(800, 20), (999, 59), (900, 40)])
def test_click_in_block_region_blocks(regional: Policy, point: tuple[int, int]) -> None:
    assert regional.classify(click(*point)) == DELETE
    assert regional.classify(click(*point, button="right")) == DELETE


@pytest.mark.parametrize("point", [(39, 400), (200, 400), (40, 399), (40, 444), (1000, 20), (799, 59), (0, 0)])
def test_click_outside_regions_is_allowed(regional: Policy, point: tuple[int, int]) -> None:
    assert regional.classify(click(*point)) == Decision(Verdict.ALLOW, "click is allowed", "actions.click")


def test_region_without_reason_gets_a_default_reason(regional: Policy) -> None:
    assert regional.classify(click(505, 505)) == Decision(
        Verdict.CONFIRM, "the click lands in the 'buy' region", "regions.buy"
    )


def test_drag_entering_a_region_is_caught(regional: Policy) -> None:
    through_send = openai({"type": "drag", "path": [{"x": 10, "y": 10}, {"x": 100, "y": 420}, {"x": 300, "y": 600}]})
    assert regional.classify(through_send) == SEND
    onto_delete = parse_anthropic("left_click_drag", {"start_coordinate": [10, 10], "coordinate": [850, 30]}, S)
    assert regional.classify(onto_delete) == DELETE
    from_delete = parse_anthropic("left_click_drag", {"start_coordinate": [850, 30], "coordinate": [10, 10]}, S)
    assert regional.classify(from_delete) == DELETE
    # Through both: block wins over confirm, whatever the order.
    both = openai({"type": "drag", "path": [{"x": 100, "y": 420}, {"x": 850, "y": 30}]})
    assert regional.classify(both) == DELETE
    clear = openai({"type": "drag", "path": [{"x": 10, "y": 10}, {"x": 300, "y": 300}]})
    assert regional.classify(clear).verdict is Verdict.ALLOW


def test_key_block_wins_over_region_confirm(regional: Policy) -> None:
    decision = regional.classify(click(100, 420, keys=["super"]))
    assert (decision.verdict, decision.rule) == (Verdict.BLOCK, "keys.block:super")
    # A region's confirm still applies with harmless held modifiers.
    assert regional.classify(click(100, 420, keys=["shift"])) == SEND


def test_region_block_wins_over_typing_confirm_and_other_pointer_kinds(regional: Policy) -> None:
    assert regional.classify(openai({"type": "scroll", "x": 850, "y": 30, "scroll_y": 100})) == DELETE
    assert regional.classify(openai({"type": "move", "x": 100, "y": 420})) == SEND
    # Typing has no target: the kind's own rule decides.
    assert regional.classify(openai({"type": "type", "text": "hi"})) == Decision(
        Verdict.CONFIRM, TYPING_REASON, "actions.type"
    )


def test_overlapping_regions_block_wins() -> None:
    policy = Policy.from_toml(
        textwrap.dedent("""\
        [[regions]]
        name = "a"
        x = 0
        y = 0
        width = 100
        height = 100

        [[regions]]
        name = "b"
        x = 50
        y = 50
        width = 100
        height = 100
        verdict = "block"
        """)
    )
    assert policy.classify(click(75, 75)).rule == "regions.b"
    assert policy.classify(click(25, 25)).rule == "regions.a"
    assert policy.classify(click(125, 125)).rule == "regions.b"


def test_regions_apply_through_scaling(regional: Policy) -> None:
    # The model sees half the display: its (60, 210) is display (120, 420), inside "send".
    half = Scaling(Size(2048, 1440), Size(1024, 720))
    assert regional.classify(parse_openai({"type": "click", "x": 60, "y": 210}, half)) == SEND


# ---------------------------------------------------------------------------------------------------
# Identity of a policy: hash, summary, defaults
# ---------------------------------------------------------------------------------------------------
def test_sha256_is_stable_and_content_addressed(default: Policy) -> None:
    assert default.sha256 == hashlib.sha256(DEFAULT_POLICY_TOML.encode()).hexdigest()
    assert Policy.default().sha256 == default.sha256
    assert Policy.from_toml(REGIONS_TOML).sha256 == Policy.from_toml(REGIONS_TOML, source="other").sha256
    assert Policy.from_toml(REGIONS_TOML + "# a comment\n").sha256 != Policy.from_toml(REGIONS_TOML).sha256
    assert re.fullmatch(r"[0-9a-f]{64}", default.sha256)


def test_summary(default: Policy, regional: Policy) -> None:
    lines = default.summary()
    assert lines[0] == "policy default (built-in)"
    assert "confirm: type" in lines
    assert "withheld: hold_key, mouse_down, mouse_up" in lines
    assert "keys needing a decision: Return, KP_Enter, ctrl+Return" in lines
    assert "limits: 30 turns, 200 steps, 1800 s, text <= 500, wait <= 10 s, scroll <= 15" in lines
    blocked = next(line for line in lines if line.startswith("blocked keys: "))
    assert "ctrl+alt+Delete" in blocked and "super" in blocked and "alt+F2" in blocked
    regional_lines = regional.summary()
    assert "region send: confirm at 40,400 160x44" in regional_lines
    assert "region delete: block at 800,20 200x40" in regional_lines


def test_every_key_is_optional() -> None:
    empty = Policy.from_toml("")
    default = Policy.default()
    assert empty.limits == default.limits
    assert empty.allow == default.allow and empty.confirm == default.confirm
    assert empty.confirm_keys == default.confirm_keys and empty.block_keys == default.block_keys
    assert empty.name == "custom"


def test_custom_lists_replace_the_defaults() -> None:
    policy = Policy.from_toml(
        textwrap.dedent("""\
        [actions]
        allow = ["click", "screenshot"]
        confirm = ["keypress"]

        [keys]
        confirm = []
        block = ["ctrl+w"]

        [network]
        allow_domains = ["Example.COM", "*.example.org", "10.0.0.1"]
        """)
    )
    assert policy.classify(click(1, 1)).verdict is Verdict.ALLOW
    assert policy.classify(key("a")) == Decision(
        Verdict.CONFIRM, "keypress actions need a decision under this policy", "actions.keypress"
    )
    assert policy.classify(key("CTRL+W")) == Decision(
        Verdict.BLOCK, "ctrl+w is blocked by the policy", "keys.block:ctrl+w"
    )
    assert policy.classify(key("super")).verdict is Verdict.CONFIRM  # only the listed keys are blocked now
    assert policy.classify(openai({"type": "type", "text": "x"})) == Decision(
        Verdict.BLOCK, "type actions are withheld by the policy", "actions.type"
    )
    assert policy.classify(openai({"type": "wait"})).verdict is Verdict.BLOCK
    assert policy.allow_domains == ("example.com", "*.example.org", "10.0.0.1")


# ---------------------------------------------------------------------------------------------------
# Broken files: a clear PolicyError naming the line
# ---------------------------------------------------------------------------------------------------
def test_invalid_toml_names_the_line() -> None:
    message = error_of("""\
        version = 1
        [limits
        max_turns = 3
        """)
    assert message.startswith("policy file p.toml, line 2")
    assert "invalid TOML" in message


def test_wrong_type_names_the_line() -> None:
    message = error_of("""\
        version = 1
        name = "x"
        [limits]
        max_turns = "ten"
        """)
    # The same text the README shows as its example of an error.
    assert message == "policy file p.toml, line 4: limits.max_turns: Expected `int`, got `str`"
    assert "line 4" in message


def test_bool_is_not_an_int_in_a_policy() -> None:
    message = error_of("""\
        [limits]
        max_steps = true
        """)
    assert message == "policy file p.toml, line 2: limits.max_steps: Expected `int`, got `bool`"


def test_unknown_key_names_its_line() -> None:
    assert (
        error_of("""\
        version = 1
        [limits]
        max_turns = 5
        max_turnz = 5
        """)
        == "policy file p.toml, line 4: limits.max_turnz: unknown key 'max_turnz'"
    )
    assert (
        error_of("""\
        version = 1
        nmae = "x"
        """)
        == "policy file p.toml, line 2: nmae: unknown key 'nmae'"
    )
    message = error_of("""\
        [limits]
        max_turns = 5

        [limtis]
        max_steps = 5
        """)
    assert message.startswith("policy file p.toml, line 4: ") and "limtis" in message


def test_unknown_action_kind_names_its_line() -> None:
    message = error_of("""\
        [actions]
        allow = ["click"]
        confirm = ["type"]
        block = ["shell"]
        """)
    assert message.startswith("policy file p.toml, line 4: actions.block: unknown action kind 'shell'; known: click,")


def test_unknown_key_name_names_its_line() -> None:
    message = error_of("""\
        [keys]
        confirm = ["Return"]
        block = ["ctrl+alt+Delete", "ctrl+bogus"]
        """)
    assert message == "policy file p.toml, line 3: keys.block: 'ctrl+bogus': unknown key name 'bogus'"
    message = error_of("""\
        [keys]
        confirm = ["a+b"]
        """)
    assert message.startswith("policy file p.toml, line 2: keys.confirm: 'a+b': ")


def test_bad_region_verdict_names_the_line_in_the_right_block() -> None:
    message = error_of("""\
        [[regions]]
        name = "a"
        x = 0
        y = 0
        width = 10
        height = 10
        verdict = "confirm"

        [[regions]]
        name = "b"
        x = 0
        y = 0
        width = 10
        height = 10
        verdict = "maybe"
        """)
    assert message == "policy file p.toml, line 15: regions.1.verdict: region 'b': verdict must be 'confirm' or 'block'"


def test_bad_region_field_names_the_line_in_the_right_block() -> None:
    message = error_of("""\
        [[regions]]
        name = "a"
        x = 0
        y = 0
        width = 10
        height = 10

        [[regions]]  # the second one
        name = "b"
        x = "left"
        y = 0
        width = 10
        height = 10
        """)
    assert message == "policy file p.toml, line 10: regions.1.x: Expected `int`, got `str`"
    message = error_of("""\
        [[regions]]
        name = "a"
        x = 0
        y = 0
        width = 10
        height = 10

        [[regions]]
        name = "b"
        x = 0
        y = 0
        width = 0
        height = 10
        """)
    assert message.startswith("policy file p.toml, line 12: regions.1.width: region 'b': needs")


def test_region_missing_a_field_names_its_block() -> None:
    message = error_of("""\
        [[regions]]
        name = "a"
        x = 0
        y = 0
        width = 10
        height = 10

        [[regions]]
        name = "b"
        x = 0
        width = 10
        height = 10
        """)
    assert message == "policy file p.toml, line 8: regions.1: missing required key 'y'"


@pytest.mark.parametrize("name", ["max_turns", "max_steps", "deadline_seconds", "max_text_length", "max_scroll",
                                  "max_drag_points"])  # fmt: skip
def test_limits_must_be_positive(name: str) -> None:
    for value in (0, -1):
        message = error_of(f"""\
            version = 1
            [limits]
            {name} = {value}
            """)
        assert message == f"policy file p.toml, line 3: limits.{name}: {name} must be at least 1"


def test_other_limit_bounds() -> None:
    assert error_of("[limits]\nmax_wait_seconds = 121\n") == (
        "policy file p.toml, line 2: limits.max_wait_seconds: must be between 0 and 120"
    )
    assert error_of("[limits]\nmax_wait_seconds = nan\n").startswith("policy file p.toml, line 2:")
    assert error_of("[limits]\nmax_tokens = -1\n").startswith("policy file p.toml, line 1: limits: ")
    assert error_of("version = 2\n") == "policy file p.toml, line 1: version: unsupported version 2 (expected 1)"


def test_kind_listed_twice_is_rejected() -> None:
    message = error_of("""\
        version = 1

        [actions]
        allow = ["click", "type"]
        confirm = ["type"]
        """)
    assert message == "policy file p.toml, line 3: actions: an action kind is listed twice: type"
    message = error_of("""\
        [actions]
        allow = ["click"]
        block = ["click"]
        """)
    assert message.endswith("an action kind is listed twice: click")


def test_bad_domain_is_rejected() -> None:
    message = error_of("""\
        [network]
        allow_domains = ["exa mple.com"]
        """)
    assert (
        message == "policy file p.toml, line 2: network.allow_domains: 'exa mple.com' is not a host name or IP address"
    )


def test_unreadable_files_are_policy_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    with pytest.raises(PolicyError) as info:
        Policy.load(missing)
    assert str(info.value) == f"policy file {missing}: cannot read it (No such file or directory)"
    with pytest.raises(PolicyError, match="cannot read it"):
        Policy.load(tmp_path)  # a directory
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'version = 1\nname = "\xff\xfe"\n')
    with pytest.raises(PolicyError) as info:
        Policy.load(binary)
    assert str(info.value) == f"policy file {binary}, line 2: not UTF-8 text (byte 20)"


def test_load_reports_the_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[limits]\nmax_turns = 0\n")
    with pytest.raises(PolicyError) as info:
        Policy.load(str(path))
    assert str(info.value) == f"policy file {path}, line 2: limits.max_turns: max_turns must be at least 1"


# ---------------------------------------------------------------------------------------------------
# The README's example policy
# ---------------------------------------------------------------------------------------------------
def readme_policy_example() -> str:
    text = README.read_text(encoding="utf-8") if README.exists() else ""
    if "```toml" not in text:
        pytest.skip("README.md has no ```toml block yet")
    heading = re.search(r"^#+ .*Policy file.*$", text, re.MULTILINE)
    assert heading, "README.md has TOML examples but no heading containing 'Policy file'"
    block = re.compile(r"^```toml\n(.*?)^```", re.MULTILINE | re.DOTALL).search(text, heading.end())
    assert block, "no ```toml block after the README's 'Policy file' heading"
    return block.group(1)


def test_readme_example_policy_parses() -> None:
    example = readme_policy_example()
    policy = Policy.from_toml(example, source="README.md")
    # The README promises a complete example: every section of the format appears.
    for section in ("[limits]", "[actions]", "[keys]", "[[regions]]", "[network]"):
        assert section in example, f"the README example has no {section} section"
    # It behaves as written: each region gets its own verdict for a click at its centre.
    assert policy.regions
    for region in policy.regions:
        decision = policy.classify(
            Action(Kind.CLICK, point=(region.x + region.width // 2, region.y + region.height // 2))
        )
        assert (decision.verdict, decision.rule) == (region.verdict, f"regions.{region.name}")
    assert policy.classify(Action(Kind.KEYPRESS, chord="ctrl+alt+Delete")).verdict is Verdict.BLOCK


@pytest.mark.parametrize(
    ("chord", "verdict", "rule"),
    [
        ("shift+Return", Verdict.CONFIRM, "keys.confirm:Return"),
        ("alt+KP_Enter", Verdict.CONFIRM, "keys.confirm:KP_Enter"),
        ("ctrl+shift+Return", Verdict.CONFIRM, "keys.confirm:ctrl+Return"),
        ("ctrl+alt+shift+t", Verdict.BLOCK, "keys.block:ctrl+alt+t"),
        ("shift+F12", Verdict.BLOCK, "keys.block:F12"),
        ("ctrl+t", Verdict.ALLOW, "actions.keypress"),
    ],
)
def test_extra_modifiers_do_not_escape_a_key_rule(chord: str, verdict: Verdict, rule: str) -> None:
    decision = Policy.default().classify(Action(Kind.KEYPRESS, chord=chord))
    assert (decision.verdict, decision.rule) == (verdict, rule)


# ---------------------------------------------------------------------------------------------------
# Hostile files: bounded, strict, and every error names its line in linear time
# ---------------------------------------------------------------------------------------------------
ERROR_AFTER = "[limits]\nmax_turns = 0\n"  # the error every long-line case below must still locate


def _long_line_cases(n: int) -> dict[str, tuple[str, int]]:
    """Valid TOML holding one line of about ``n`` characters, and how many lines it takes."""
    return {
        # What made the old line-finding pattern backtrack cubically: a header-like line of spaces.
        "header-like line in a string": ('description = """\n[' + " " * (n - 3) + ']x\n"""\n', 3),
        "brackets and quotes in a string": ('description = "' + "[ ] = . , \\\" ' # " * (n // 18) + '"\n', 1),
        "literal string": ("description = '" + '[ "a" ] = {' * (n // 12) + "'\n", 1),
        "comment": ("# " + "[ a . b = " * (n // 10) + "\n", 1),
        "spaces around a key": ("  " + " " * n + "name = 'x'\n", 1),
        "dotted table header with spaces": ("[ network" + " " * n + "]\n", 1),
    }


@pytest.mark.parametrize("n", [4_000, 30_000, 1_000_000])
@pytest.mark.parametrize("case", list(_long_line_cases(10)))
def test_a_long_line_costs_linear_time_and_the_error_names_its_line(case: str, n: int) -> None:
    prefix, lines = _long_line_cases(n)[case]
    started = time.perf_counter()
    message = error_of(prefix + ERROR_AFTER)
    elapsed = time.perf_counter() - started
    assert message == f"policy file p.toml, line {lines + 2}: limits.max_turns: max_turns must be at least 1"
    assert elapsed < 5.0, f"{elapsed:.2f} s for a {n}-character line"  # the quadratic pattern took hours


@pytest.mark.parametrize("n", [4_000, 30_000])
def test_a_long_list_still_locates_the_bad_element(n: int) -> None:
    kinds = ", ".join(['"click"'] * (n // 9))
    started = time.perf_counter()
    message = error_of(f'[actions]\nallow = [{kinds},\n  "shell"]\n')
    assert time.perf_counter() - started < 5.0
    assert message.startswith("policy file p.toml, line 3: actions.allow: unknown action kind 'shell'")


@pytest.mark.parametrize(
    "text",
    [
        "x = [\n",
        "[a.b\n",
        'description = "never closed\n',
        'description = """never closed\n\n',
        "name = 'x'\nregions = [{ name = 'a', x = 1,",
    ],
)
def test_invalid_toml_always_names_a_line(text: str) -> None:
    assert re.match(r"policy file p\.toml, line \d+", error_of(text))


def test_bad_entry_in_a_long_list_names_its_own_line() -> None:
    message = error_of("""\
        [network]
        allow_domains = [
            "example.com",
            "*.example.org",
            "127.1",
            "10.0.0.1",
        ]
        """)
    assert message.startswith("policy file p.toml, line 5: network.allow_domains: '127.1' is not a host name")


def test_keys_and_kinds_name_the_line_of_the_bad_element() -> None:
    message = error_of('[keys]\nblock = [\n  "ctrl+alt+t",\n  "ctrl+bogus",\n]\n')
    assert message == "policy file p.toml, line 4: keys.block: 'ctrl+bogus': unknown key name 'bogus'"
    message = error_of('[actions]\nallow = [\n  "click",\n  "shell",\n]\n')
    assert message.startswith("policy file p.toml, line 4: actions.allow: unknown action kind 'shell'")


@pytest.mark.parametrize(
    ("text", "line", "path"),
    [
        ("limits = { max_turnz = 3 }\n", 1, "limits.max_turnz"),
        ("version = 1\nlimits.max_turns = 0\n", 2, "limits.max_turns"),
        ('regions = [\n  { name = "a", x = 0, y = 0, width = 1, height = 1 },\n  { name = "b", x = "l" },\n]\n', 3,
         "regions.1.x"),
        ('[[regions]]\nname = "a"\nx = 0\ny = 0\nwidth = 1\nheight = 1\n[regions.extra]\nz = 1\n', 7,
         "regions.0.extra"),
        ("'limits' . \"max_turns\" = 0\n", 1, "limits.max_turns"),
    ],
)  # fmt: skip
def test_inline_tables_dotted_and_quoted_keys_name_their_line(text: str, line: int, path: str) -> None:
    message = error_of(text)
    assert message.startswith(f"policy file p.toml, line {line}: {path}: "), message


FLOAT_LIMITS = [f.name for f in dataclasses.fields(Limits) if f.type in ("float", float)]
# the soft budgets are bounded by their hard caps (tests/test_budgets.py)
INT_LIMITS = [f.name for f in dataclasses.fields(Limits) if f.type in ("int", int) and not f.name.startswith("ask_at")]


@pytest.mark.parametrize("value", ["nan", "+nan", "-nan", "inf", "+inf", "-inf"])
@pytest.mark.parametrize("name", FLOAT_LIMITS)
def test_float_limits_must_be_finite(name: str, value: str) -> None:
    assert FLOAT_LIMITS == ["max_wait_seconds", "max_cost_usd", "decision_timeout", "ask_at_cost_usd"]
    message = error_of(f"version = 1\n[limits]\n{name} = {value}\n")
    assert message == f"policy file p.toml, line 3: limits.{name}: {name} must be a finite number"


@pytest.mark.parametrize("name", INT_LIMITS)
def test_int_limits_are_bounded(name: str) -> None:
    for value in (10**9 + 1, 2**63 - 1, 10**30):
        message = error_of(f"[limits]\n{name} = {value}\n")
        assert message == f"policy file p.toml, line 2: limits.{name}: {name} must be at most 1000000000"
    assert getattr(Policy.from_toml(f"[limits]\n{name} = 1000000000\n").limits, name) == 10**9


def test_a_cost_cap_is_a_real_number() -> None:
    policy = Policy.from_toml("[limits]\nmax_cost_usd = 0.5\n")
    assert policy.limits.max_cost_usd == 0.5 and math.isfinite(policy.limits.max_cost_usd)


DEEP = 100_000


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (f"version = 1\n\nname = {'[' * DEEP}{']' * DEEP}\n", 3),
        (f"version = 1\nname = {'[' * DEEP}\n", 2),  # never closed
        (f"version = 1\n\n\nname = {'{ a = ' * DEEP}1{' }' * DEEP}\n", 4),
        (f"version = 1\nname = [{'{ a = [' * (DEEP // 2)}\n", 2),
        (f"version = 1\n{'a.' * DEEP}b = 1\n", 2),  # dotted keys: quadratic in tomllib, refused first
        (f"version = 1\n[{'a.' * DEEP}b]\n", 2),
        (f"version = 1\n[[{'a . ' * DEEP}b]]\n", 2),
        (f"version = 1\nx = {{ {'a.' * DEEP}b = 1 }}\n", 2),
        (f"version = 1\nname = {'[' * 40}{']' * 40}\n", 2),  # parses, but deeper than the cap
        (f"version = 1\n{'a.' * 40}b = 1\n", 2),
    ],
    ids=["array", "unclosed", "inline", "mixed", "dotted", "header", "array-of-tables", "inline-dotted", "40-arrays",
         "40-keys"],
)  # fmt: skip
def test_deep_nesting_is_a_clear_error_naming_its_line(text: str, line: int) -> None:
    started = time.perf_counter()
    message = error_of(text)
    assert time.perf_counter() - started < 5.0
    assert message == (
        f"policy file p.toml, line {line}: nested more than 32 levels deep (arrays, tables or dotted keys)"
    )


def test_nesting_within_the_cap_is_checked_as_usual() -> None:
    assert "Expected `str`, got `array`" in error_of(f"name = {'[' * 30}1{']' * 30}\n")
    assert "unknown key 'a'" in error_of(f"{'a.' * 30}b = 1\n")
    assert "unknown key 'x'" in error_of(f"x = '{'a.' * 40}a'\n")  # dots in a string are not a key


def test_a_policy_larger_than_the_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(PolicyError) as info:
        Policy.load(big)
    assert str(info.value) == f"policy file {big}: too large (a policy file is at most 1048576 bytes)"
    with pytest.raises(PolicyError, match="too large"):
        Policy.from_toml("#" * (1024 * 1024 + 1))


@pytest.mark.timeout(10)
def test_only_regular_files_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer forever
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")  # reading it would never end
    for path in (fifo, zero, Path("/dev/zero"), Path("/dev/null"), tmp_path):
        started = time.perf_counter()
        with pytest.raises(PolicyError) as info:
            Policy.load(path)
        assert time.perf_counter() - started < 5.0  # a read of the FIFO or /dev/zero would never end
        assert str(info.value) == f"policy file {path}: cannot read it (not a regular file)"
    regular = tmp_path / "link.toml"
    (tmp_path / "real.toml").write_text("version = 1\nname = 'linked'\n")
    regular.symlink_to(tmp_path / "real.toml")  # a link to a regular file is a regular file
    assert Policy.load(regular).name == "linked"


def test_error_messages_show_file_text_literally(tmp_path: Path) -> None:
    message = error_of('[[regions]]\nname = "\\u001b]52;c;aGk=\\u0007\\u009b2J"\nx = 0\ny = 0\nwidth = 1\nheight = 1\n'
                       'verdict = "maybe"\n')  # fmt: skip
    assert not any(c in message for c in "\x1b\x07\x9b")
    weird = tmp_path / "p\x1b[2J.toml"
    weird.write_text("[limits]\nmax_turns = 0\n")
    with pytest.raises(PolicyError) as info:
        Policy.load(weird)
    assert "\x1b" not in str(info.value) and "p␛[2J.toml" in str(info.value)


TOMLISH = st.text(alphabet="ab[]{}=.,'\"\\#\n \t0123456789-_+:xe", max_size=80)


@settings(max_examples=500, deadline=None)
@given(st.one_of(TOMLISH, st.text(max_size=60)))
def test_any_text_is_a_policy_or_a_policy_error_naming_a_line(text: str) -> None:
    try:
        Policy.from_toml(text, source="p.toml")
    except PolicyError as exc:
        assert re.match(r"policy file p\.toml, line \d+", str(exc)), str(exc)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["limits", "max_turns", "regions", "x", "name", "a"]), min_size=1, max_size=4),
    st.integers(min_value=0, max_value=6),
    st.sampled_from(["", "  ", "\t"]),
)
def test_an_unknown_key_is_located_wherever_it_is_written(parts: list[str], blank: int, indent: str) -> None:
    text = "version = 1\n" + "\n" * blank + indent + ".".join(parts) + "_zz = 1\n"
    try:
        Policy.from_toml(text, source="p.toml")
    except PolicyError as exc:
        assert str(exc).startswith(f"policy file p.toml, line {blank + 2}: "), str(exc)


def test_approvers_narrow_a_teams_rule_by_rule_then_tier_and_bad_entries_say_where() -> None:
    """``[[approvers]]`` (issue 39): a task's narrowing of a team's rules, found by its policy rule first, then
    its tier; a key that is neither, a role that is not a name, a quorum out of range or a rule listed twice is
    an error that names the line."""
    text = textwrap.dedent(
        """
        [[approvers]]
        rule = "actions.type"
        roles = ["alice", "payments", "alice"]
        quorum = 2

        [[approvers]]
        rule = "tier:transmission"
        quorum = 3
        """
    )
    made = Policy.from_toml(text)
    assert made.approvers_for("actions.type", "transmission") == policy_module.Approvers(
        "actions.type", ("alice", "payments"), 2
    )
    assert made.approvers_for("keys.confirm:Return", "transmission") == policy_module.Approvers(
        "tier:transmission", None, 3
    )
    assert made.approvers_for("actions.click", "other") is None
    for bad, says in (
        ('rule = "tier:everything"', "is neither a policy rule"),
        ('rule = "actions.type"\nroles = ["alice; DROP TABLE"]', "is not one"),
        ('rule = "actions.type"\nquorum = 9', "quorum is 1 to 5"),
        ('rule = "actions.type"\n[[approvers]]\nrule = "actions.type"', "listed twice"),
    ):
        with pytest.raises(PolicyError, match=says) as caught:
            Policy.from_toml(f"[[approvers]]\n{bad}\n", source="team.toml")
        assert "team.toml" in str(caught.value)
