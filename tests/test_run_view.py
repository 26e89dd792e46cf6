"""RunView, the one reducer of a run's event stream (plain data, no Textual): fed the events of real runs
(the scenes' runs of the real supervisor), it says what is pending, where the chain stands and what each
action of the shown turn became, and nothing but the stream changes it."""

from __future__ import annotations

from pathlib import Path

from scenes import awaiting_decision, finished, refused

from cua_tui.core import events as ev
from cua_tui.core.actions import Kind
from cua_tui.core.run_view import RunView


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
    asked = next(s.event for s in events if isinstance(s.event, ev.DecisionRequested))
    assert asked.request is view.pending  # the request travels inside its event, nowhere else
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
        (None, "not_executed"),
    ]
    assert view.pending is None and view.phase == "waiting_model"


def test_the_view_is_typed_with_the_cores_enums_and_bumps_its_version_per_event() -> None:
    from cua_tui.core.events import RunPhase
    from cua_tui.core.policy import Verdict
    from cua_tui.core.run_view import ActionState

    events = list(refused().events)
    view = RunView()
    for number, stamped in enumerate(events, 1):
        view.apply(stamped)
        assert view.version == number
    assert isinstance(view.phase, RunPhase)
    for action in view.actions.values():
        assert isinstance(action.state, ActionState)
        assert action.verdict is None or isinstance(action.verdict, Verdict)
    assert {a.state for a in view.actions.values()} & {ActionState.REFUSED}


def test_values_this_version_does_not_know_claim_nothing() -> None:
    """A run directory from elsewhere (hostile or newer) may record any string: the view keeps what it
    knew rather than name a verdict, a state or a phase nobody recorded."""
    from cua_tui.core.run_view import ActionState

    events = list(awaiting_decision().events)
    view = fold(events)
    phase = view.phase
    head = events[-1]

    def forged(event: ev.Event, seq: int) -> ev.Stamped:
        return ev.Stamped(seq, head.head, event)

    view.apply(forged(ev.Phase("dancing", "?"), head.seq + 1))  # type: ignore[arg-type]
    assert view.phase == phase
    view.apply(forged(ev.PolicyVerdict(view.batch_turn, 2, "maybe", "why", "rule"), head.seq + 2))  # type: ignore[arg-type]
    assert view.actions[2].verdict is None
    view.apply(
        forged(ev.Outcome(view.batch_turn, 2, "c", "vanished", "msg", 0), head.seq + 3)  # type: ignore[arg-type]
    )
    assert view.actions[2].state is ActionState.WAITING


def test_a_snapshot_is_left_as_it_was_by_every_event_applied_after_it(tmp_path: Path) -> None:
    """Replay keeps a snapshot of the view every 512 lines and folds on from copies of them: whatever comes
    later (outcomes, edits, grants granted and revoked, refused egress, alerts, a takeover, the end) must
    leave each snapshot equal to the view folded from the start to its line."""
    from runlogs import UNSIGNED, action_records, write_run

    from cua_tui.core.runlog import RunLog
    from cua_tui.core.safeio import RunFolder

    records = action_records(3)
    at = next(i for i, (kind, p) in enumerate(records) if kind == "model_turn" and p["turn"] == 2)
    records[at:at] = [
        ("grant", {"grant": 1, "scope": "chord", "key": "ctrl+l", "label": "ctrl+l", "by": "alice", "turn": 1,
                   "index": 0}),
        ("egress", {"host": "evil.example", "port": 80, "method": "GET", "allowed": False, "reason": "not listed"}),
        ("egress", {"host": "clients2.google.com", "port": 443, "method": "CONNECT", "allowed": False}),
        ("takeover", {"turn": 1, "by": "human", "operator": "alice", "where": "tui"}),
        ("takeover_ended", {"turn": 1, "actions": 0, "told": "handed back"}),
        ("grant_revoked", {"grant": 1, "by": "alice"}),
    ]  # fmt: skip
    path = write_run(tmp_path / "20261201-000000-abcdef", None, records, signed=UNSIGNED)
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        logged = log.poll()
    changed: set[str] = set()
    for events in (logged, list(refused().events), list(finished().events)):
        view, snapshots = RunView(), []
        for stamped in events:
            view.apply(stamped)
            snapshots.append(view.snapshot())
            changed |= {"alerts"} if view.attention.unseen else set()
            changed |= {"grants"} if view.grants else set()
            changed |= {"rows"} if any(row.state != "waiting" for row in view.actions.values()) else set()
        for upto, snapshot in enumerate(snapshots, start=1):
            assert snapshot == fold(events[:upto]), upto
    assert changed == {"alerts", "grants", "rows"}  # each part apply changes in place was changed
