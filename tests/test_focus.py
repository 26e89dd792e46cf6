"""Which field typing goes to (issue 22, point 6): one rule in the core (core/focus.py) that the
supervisor, the TUI's reducer and replay all use; a typing grant never outlives the field it named; a
chord's scope is worded as the chord; a region that sends data out is never offered ``a``."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core import focus, grants
from cua_tui.core import timeline as tl
from cua_tui.core.actions import Action, Kind, parse_openai
from cua_tui.core.events import Stamped
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.policy import Decision, Policy, Verdict
from cua_tui.core.ports import Answer, DecisionRequest, Ruling, Scope
from cua_tui.core.run_view import RunView
from cua_tui.core.runindex import RunIndex
from cua_tui.core.runlog import RunReader
from cua_tui.labs import LABS
from cua_tui.tui.replay import ReplayScreen

FIELD = (250, 182)
OTHER = (250, 400)
CONFIRM = Decision(Verdict.CONFIRM, "asks", "actions.type")


@pytest.mark.parametrize(
    ("action", "after"),
    [
        (Action(Kind.CLICK, point=OTHER), OTHER),  # a click names a new field
        (Action(Kind.TRIPLE_CLICK, point=OTHER), OTHER),
        (Action(Kind.TYPE, text="hello"), FIELD),
        (Action(Kind.TYPE, text="a\tb"), None),  # the Tab in the text moves on
        (Action(Kind.TYPE, text="line\n"), None),
        (Action(Kind.KEYPRESS, chord="Tab"), None),
        (Action(Kind.KEYPRESS, chord="shift+Tab"), None),
        (Action(Kind.KEYPRESS, chord="Return"), None),
        (Action(Kind.KEYPRESS, chord="KP_Enter"), None),
        (Action(Kind.KEYPRESS, chord="Escape"), None),
        (Action(Kind.KEYPRESS, chord="Down"), None),  # a list or a menu may take it
        (Action(Kind.KEYPRESS, chord="ctrl+l"), None),  # the address bar
        (Action(Kind.KEYPRESS, chord="alt+d"), None),
        (Action(Kind.KEYPRESS, chord="F6"), None),
        (Action(Kind.KEYPRESS, chord="BackSpace"), FIELD),  # editing inside the field
        (Action(Kind.KEYPRESS, chord="ctrl+a"), FIELD),
        (Action(Kind.KEYPRESS, chord="shift+Left"), FIELD),
        (Action(Kind.SCROLL, point=OTHER, scroll_y=3), FIELD),
        (Action(Kind.MOVE, point=OTHER), FIELD),
        (Action(Kind.WAIT, duration_ms=100), FIELD),
        (Action(Kind.DRAG, path=(FIELD, OTHER)), None),
        (Action(Kind.MOUSE_DOWN, point=OTHER), None),
    ],
)
def test_the_focused_field_after_each_kind_of_action(action: Action, after: tuple[int, int] | None) -> None:
    assert focus.after_action(FIELD, action) == after
    # replay reads the same from the record (typed text is not stored; ``moves_focus`` stands for it)
    assert focus.after_record(FIELD, action.to_record()) == after


def test_the_record_says_only_that_typed_text_leaves_its_field() -> None:
    assert Action(Kind.TYPE, text="a\tb").to_record()["moves_focus"] is True
    assert "moves_focus" not in Action(Kind.TYPE, text="ab").to_record()
    assert "a\tb" not in str(Action(Kind.TYPE, text="a\tb").to_record())


def test_outcomes_that_did_not_run_leave_the_field_and_a_failure_forgets_it() -> None:
    tab = Action(Kind.KEYPRESS, chord="Tab")
    for status in ("declined", "refused", "not_executed", "stale"):
        assert focus.after_outcome(FIELD, status, tab) == FIELD
    assert focus.after_outcome(FIELD, "failed", Action(Kind.TYPE, text="x")) is None
    assert focus.after_outcome(FIELD, "executed", tab) is None


def test_the_chord_scope_names_the_chord() -> None:
    enter = parse_openai({"type": "keypress", "keys": ["ENTER"]}, Scaling(Size(1024, 768), Size(1024, 768)))
    scope = grants.scope_for(enter, Decision(Verdict.CONFIRM, "submits", "keys.confirm:Return"), None)
    assert scope is not None and scope.label == "the key chord Return" and scope.key == "Return"
    assert grants.covers(scope, enter, CONFIRM, None)


def test_typing_that_leaves_its_field_is_neither_offered_nor_covered() -> None:
    assert grants.scope_for(Action(Kind.TYPE, text="a\tb"), CONFIRM, FIELD) is None
    scope = grants.scope_for(Action(Kind.TYPE, text="ab"), CONFIRM, FIELD)
    assert scope is not None
    assert grants.covers(scope, Action(Kind.TYPE, text="more"), CONFIRM, FIELD)
    assert not grants.covers(scope, Action(Kind.TYPE, text="more\n"), CONFIRM, FIELD)


def test_a_region_that_sends_data_out_is_never_offered_a() -> None:
    lab = LABS["injection"]()
    policy = Policy.default().with_regions(lab.regions())
    (region,) = policy.regions
    assert region.sends_out
    centre = (region.x + region.width // 2, region.y + region.height // 2)
    click = Action(Kind.CLICK, point=centre)
    decision = policy.classify(click)
    assert decision.verdict is Verdict.CONFIRM and decision.sends_out
    assert grants.scope_for(click, decision, None) is None
    # even a region grant made by hand for its rule covers nothing that sends out
    assert not grants.covers(Scope("region", decision.rule, "x"), click, decision, None)
    assert "(sends data out)" in "\n".join(policy.summary())


def test_a_policy_file_marks_a_region_that_sends_out() -> None:
    text = '[[regions]]\nname = "post"\nx = 0\ny = 0\nwidth = 10\nheight = 10\nsends_out = true\n'
    policy = Policy.from_toml(text, source="colleague.toml")
    assert policy.regions[0].sends_out
    assert not Policy.from_toml(text.replace("sends_out = true\n", ""), source="x.toml").regions[0].sends_out


# ---------------------------------------------------------------------------------------------------
# One rule for the supervisor, the reducer and replay, in a real run
# ---------------------------------------------------------------------------------------------------
class Reviewer:
    """Approves the first typing with ``a`` (its scope), then approves what is asked."""

    def __init__(self) -> None:
        self.requests: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.requests.append(request)
        return Ruling(Answer.APPROVE, "human (TUI)", human=True, grant=len(self.requests) == 1)


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def typing(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


def test_a_typing_grant_ends_where_the_focus_moves_in_the_supervisor_the_reducer_and_replay(tmp_path: Path) -> None:
    turns = [
        {"actions": [click(FIELD), typing("first")]},  # granted with a
        {"actions": [typing("second")]},  # the same field: the grant approves it
        {"actions": [{"type": "keypress", "keys": ["TAB"]}, typing("third")]},  # a Tab: asked again
    ]
    reviewer = Reviewer()
    stamped: list[Stamped] = []
    sup, events, _agent = make_supervisor(tmp_path, turns, approver=reviewer, operator="alice@desk-7")
    sup.subscribe(stamped.append)
    sup.run()
    asked = [(r.turn, r.index) for r in reviewer.requests]
    assert asked == [(1, 1), (3, 1)], asked  # turn 2's typing went by the grant, turn 3's was asked
    assert reviewer.requests[1].scope is None  # the field after a Tab is unknown: no typing scope offered
    revoked = [e for e in events if isinstance(e, ev.GrantRevoked)]
    assert len(revoked) == 1 and revoked[0].by == "the focus left the field"
    kinds = [e.kind for e in events]
    tab_outcome = next(i for i, e in enumerate(events) if isinstance(e, ev.Outcome) and e.turn == 3 and e.index == 0)
    assert kinds.index("grant_revoked") > kinds.index("grant") and kinds.index("grant_revoked") < tab_outcome + 3

    # the reducer (live TUI, fleet) at each decision shows the field the supervisor used
    view = RunView()
    seen: dict[tuple[int, int], tuple[int, int] | None] = {}
    for item in stamped:
        view.apply(item)
        if isinstance(item.event, ev.DecisionRequested):
            seen[(item.event.turn, item.event.index)] = view.focused
    assert seen == {(1, 1): FIELD, (3, 1): None}
    assert view.grants == {}  # the revoked grant is gone from the view too

    # replay, from the records alone (read back from the log, by its index)
    line = tl.build(stamped)
    reader = RunReader(sup.audit.path.parent)
    index = RunIndex(reader.log)
    while index.advance():
        pass
    host = SimpleNamespace(steps=[index.step(n) for n in range(index.count)], index=index)
    assert host.steps == line.steps
    host._field_before = lambda number: ReplayScreen._field_before(host, number)  # type: ignore[arg-type]
    targets = {(s.turn, s.index): ReplayScreen._target(host, s) for s in line.steps if s.kind == "type"}  # type: ignore[arg-type]
    assert targets[(1, 1)] is not None and targets[(1, 1)].point == FIELD
    assert targets[(2, 0)] is not None and targets[(2, 0)].point == FIELD
    assert targets[(3, 1)] is None
    reader.close()
