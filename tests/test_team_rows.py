"""A request row read back into the decision a panel shows (team/requests.py ``request_of_row``, core/actions.py
``action_of_record``): every request a worker posts comes back as it was, typed text included; a row or an
action record someone else wrote that this version would not have written is refused in one line, never
shown half."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core.actions import Action, ActionError, Kind, action_of_record, parse_chord_text
from cua_tui.core.ports import DecisionRequest, Gated, SafetyCheck, Scope
from cua_tui.team import requests as rq

TYPING = Action(Kind.TYPE, text="hello wörld\x1b[31m")
ACTIONS = [
    Action(Kind.CLICK, point=(10, 20)),
    Action(Kind.CLICK, point=(10, 20), button="right", hold=("ctrl", "shift")),
    Action(Kind.DOUBLE_CLICK, point=(0, 0)),
    Action(Kind.TRIPLE_CLICK, point=(1023, 719)),
    Action(Kind.DRAG, path=((1, 2), (3, 4), (5, 6))),
    Action(Kind.MOVE, point=(5, 5)),
    Action(Kind.SCROLL, point=(50, 60), scroll_y=-3),
    Action(Kind.KEYPRESS, chord=parse_chord_text("ctrl+s"), repeat=3),
    Action(Kind.HOLD_KEY, chord=parse_chord_text("shift"), duration_ms=500),
    TYPING,
    Action(Kind.TYPE, text="line\nnext"),
    Action(Kind.WAIT, duration_ms=1000),
    Action(Kind.SCREENSHOT),
    Action(Kind.MOUSE_DOWN, point=(7, 8)),
    Action(Kind.MOUSE_UP, point=(7, 8), button="middle"),
    Action(Kind.CURSOR_POSITION),
    Action(Kind.ZOOM, region=(0, 0, 100, 50)),
]


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.kind.value)
def test_every_action_comes_back_from_its_record(action: Action) -> None:
    assert action_of_record(action.to_record(), action.text) == action


@pytest.mark.parametrize(
    ("record", "text", "why"),
    [
        ("click", "", "must be an object"),
        ({"kind": "rm -rf"}, "", "unknown action kind"),
        ({"kind": "click", "x": 1, "y": 2, "button": "left", "evil": 1}, "", "does not take"),
        ({"kind": "click", "x": "1", "y": 2, "button": "left"}, "", "must be an integer"),
        ({"kind": "click", "x": True, "y": 2, "button": "left"}, "", "must be an integer"),
        ({"kind": "click", "x": -1, "y": 2, "button": "left"}, "", "outside"),
        ({"kind": "click", "x": 1, "y": 2, "button": "nose"}, "", "unknown button"),
        ({"kind": "type", "text_len": 5, "text_sha256": "0" * 64}, "hello", "does not match"),
        ({"kind": "type", "text_len": 5, "text_sha256": "0" * 64}, "", "needs its text"),
        ({"kind": "click", "x": 1, "y": 2, "button": "left"}, "smuggled", "types no text"),
        ({"kind": "drag", "path": [[1, 2]]}, "", "path"),
        ({"kind": "click", "x": 1, "y": 2}, "", "not one this version writes"),
        ({"kind": "keypress", "keys": ["ctrl"]}, "", "must be a string"),
        ({"kind": "click", "x": 1, "y": 2, "button": "left", "hold": ["ctrl", "meta-evil"]}, "", "modifiers"),
    ],
)
def test_a_record_this_version_would_not_write_is_refused(record: Any, text: str, why: str) -> None:
    with pytest.raises(ActionError, match=why):
        action_of_record(record, text)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(JSON, st.text(max_size=30))
def test_any_record_is_an_action_or_one_refusal(record: Any, text: str) -> None:
    try:
        action = action_of_record(record, text)
    except ActionError:
        pass
    else:
        assert action.to_record() == record and action.text == text
    # in a row, the refusal is one line, shown literally
    posted = rq.posting(request(), "actions.type", "fleet-1", 12)
    try:
        rq.request_of_row({**posted.body, "action": record}, {"action": text} if text else None, None, 5)
    except rq.RowError as exc:
        assert str(exc).isprintable()


def request(**more: Any) -> DecisionRequest:
    base = DecisionRequest(
        "run-1", 3, 1, "call_7", "action", "typing can send data out", action=TYPING,
        scope=Scope("typing", "field", "typing into this field"), deadline_s=90.0,
    )  # fmt: skip
    return dataclasses.replace(base, **more)


SAFETY = request(
    kind="safety_check",
    action=None,
    scope=None,
    safety_checks=(SafetyCheck("sc1", "malicious_instructions", "odd [b]page[/b]"),),
    gated=(
        Gated(0, Action(Kind.CLICK, point=(3, 4)), "allow", "", ""),
        Gated(1, TYPING, "confirm", "actions.type", "typing"),
        Gated(2, None, "block", "malformed", "bad action"),
    ),
)


ASK = request(kind="ask", action=None, scope=None, reason="the model asks for you: log me in, [b]please[/b]")


@pytest.mark.parametrize("asked", [request(), SAFETY, request(kind="budget", action=None, scope=None), ASK], ids=str)
def test_every_request_a_worker_posts_comes_back_as_it_was(asked: DecisionRequest) -> None:
    posted = rq.posting(asked, "actions.type", "fleet-1", 12)
    assert "hello" not in str(posted.body)  # the typed text is not in what every panel reads
    back = rq.request_of_row(posted.body, posted.texts or None, None, 5)
    assert back == asked


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda b, t: ({**b, "kind": "shell"}, t), "unknown kind"),
        (lambda b, t: ({**b, "turn": -1}, t), "turn is not a count"),
        (lambda b, t: ({**b, "reason": ["x"]}, t), "reason is not a string"),
        (lambda b, t: (b, {"action": "something else typed"}), "does not match"),
        (lambda b, t: (b, None), "needs its text"),
        (lambda b, t: ({**b, "deadline_s": "soon"}, t), "deadline_s"),
        (lambda b, t: ({**b, "safety_checks": [1]}, t), "not an object"),
        (lambda b, t: ({**b, "action": {**b["action"], "kind": "format_disk"}}, t), "unknown action kind"),
        (lambda b, t: ([b], t), "not an object"),
    ],
)
def test_a_row_someone_else_wrote_is_refused_in_one_line(change: Any, why: str) -> None:
    posted = rq.posting(request(), "actions.type", "fleet-1", 12)
    body, texts = change(posted.body, posted.texts)
    with pytest.raises(rq.RowError, match=why) as refused:
        rq.request_of_row(body, texts, None, 5)
    assert "\n" not in str(refused.value) and str(refused.value).startswith("request 5")
