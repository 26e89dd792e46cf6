"""RunView, the one reducer of a run's event stream (plain data, no Textual): fed the events of real runs
(the scenes' runs of the real supervisor), it says what is pending, where the chain stands and what each
action of the shown turn became, and nothing but the stream changes it."""

from __future__ import annotations

from cua_tui.core import events as ev
from cua_tui.core.actions import Kind
from cua_tui.scenes import awaiting_decision, finished, refused
from cua_tui.tui.run_view import RunView


def fold(events: list[ev.Stamped]) -> RunView:
    view = RunView()
    for stamped in events:
        view.apply(stamped)
    return view


def test_events_carry_their_chain_place_as_written() -> None:
    events = list(finished().events)
    assert [s.seq for s in events] == list(range(len(events)))
    assert len({s.head for s in events}) == len(events)
    assert all(len(s.head) == 64 for s in events)


def test_a_request_in_the_stream_is_pending_until_its_decision() -> None:
    events = list(awaiting_decision().events)
    view = fold(events)
    assert view.running
    assert view.pending is not None and view.pending.index == 1
    assert view.pending.action is not None and view.pending.action.kind is Kind.TYPE
    assert view.phase == "awaiting_decision"
    assert view.seq == events[-1].seq and view.head == events[-1].head
    asked = next(s for s in events if isinstance(s.event, ev.DecisionRequested))
    assert asked.event.request is view.pending  # the request travels inside its event, nowhere else
    assert [(a.index, a.state) for a in view.actions.values()] == [(0, "executed"), (1, "waiting"), (2, "waiting")]


def test_the_decision_clears_what_was_pending_and_the_end_clears_everything() -> None:
    events = list(finished().events)
    view = RunView()
    pending_seen = []
    for stamped in events:
        view.apply(stamped)
        pending_seen.append(view.pending.index if view.pending else None)
        if isinstance(stamped.event, ev.DecisionMade) and stamped.event.by != "policy":
            assert view.pending is None
    assert {1, 2} <= {i for i in pending_seen if i is not None}
    assert view.pending is None and not view.running
    assert view.ended is not None and view.ended.status == "passed"
    assert view.final_text is not None


def test_a_refused_chord_and_the_rest_of_its_batch() -> None:
    view = fold(list(refused().events))
    assert [(a.verdict, a.state) for a in view.actions.values()] == [
        ("allow", "executed"),
        ("block", "refused"),
        ("", "not_executed"),
    ]
    assert view.pending is None and view.phase == "waiting_model"


async def test_the_status_bar_says_what_isolation_the_desktop_obtained() -> None:
    """Issue 12, point 1: a sandbox without bubblewrap says so in the status bar (and a full one too)."""
    from pilot_helpers import plain, until

    from cua_tui.scenes import make_app
    from cua_tui.tui.source import RecordedRun
    from cua_tui.tui.status import RunInfo, StatusBar

    for isolation, expected in (
        ({"bubblewrap": False, "remote": "cwsandbox"}, "NO bubblewrap"),
        ({"namespaces": ["user", "pid", "net"], "uid_per_run": True}, "bubblewrap (3 namespaces, uid per run)"),
    ):
        source = RecordedRun(
            RunInfo("r", "cwsandbox", "script"), [ev.Stamped(0, "0" * 64, ev.DesktopReady("x", isolation))]
        )
        app = make_app(source)
        async with app.run_test(size=(160, 20)) as pilot:
            await until(pilot, lambda app=app: app.view.isolation is not None, "the desktop_ready event")
            await pilot.pause()
            assert expected in plain(app.query_one(StatusBar))
