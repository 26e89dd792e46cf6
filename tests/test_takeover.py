"""Take over, hand back (issue 24, points 2 and 3), in the core: the run pauses where nothing is in flight,
the reviewer's inputs are actions on record (proposed, checked and approved by them, each followed by its
screen), a private stretch keeps its actions out of what the model is told, and at hand-back the model
hears what the person did with the screen as it is now.

Real supervisor runs on the sim desktop with a script agent; the reviewer's inputs come from another
thread, as the TUI's do."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import events as ev
from cua_tui.core.actions import Action, Kind, text_sha256
from cua_tui.core.audit import verify_run
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.ports import Answer, DecisionRequest, Ruling
from cua_tui.core.supervisor import Supervisor
from cua_tui.core.takeover import BY_TAKEOVER, MSG_TAKEN_OVER, Done, takeover_note
from cua_tui.desktops.sim import PHRASE, SimDesktop

OPERATOR = "alice@desk-7"
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}
VERIFY = {"type": "click", "button": "left", "x": 550, "y": 182}


class TakingOver:
    """At the first decision, takes the desktop instead of answering (as ``T`` does)."""

    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None
        self.requests: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.requests.append(request)
        if len(self.requests) == 1:
            assert self.supervisor is not None and self.supervisor.take_over() is None
            return Ruling(Answer.REJECT, "human (TUI)", human=True, takeover=True)
        return Ruling(Answer.APPROVE, "human (TUI)", human=True)


def run(
    tmp_path: Path, turns: list[dict[str, Any]], inputs: list[Action | bool], approver: Any = None, **kw: Any
) -> tuple[Any, list[ev.Event], Any]:
    """Run ``turns``; once the takeover starts, feed ``inputs`` from another thread, then hand back."""
    desktop = kw.pop("desktop", None) or SimDesktop()
    sup, events, agent = make_supervisor(
        tmp_path, turns, approver=approver or TakingOver(), desktop=desktop, operator=OPERATOR, **kw
    )
    if isinstance(approver or sup.approver, TakingOver):
        sup.approver.supervisor = sup  # type: ignore[union-attr]

    def feed() -> None:
        for item in inputs:
            if isinstance(item, bool):
                sup.takeover_private(item)
            else:
                assert sup.takeover_input(item) is None
        sup.hand_back()

    def on_event(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.TakeoverStarted):
            threading.Thread(target=feed, daemon=True).start()

    sup.subscribe(on_event)
    result = sup.run()
    return result, events, agent


def of(events: list[ev.Event], kind: type[ev.Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_a_takeover_at_a_decision_does_the_persons_actions_on_record_and_tells_the_model(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [
        {"actions": [FIELD, {"type": "type", "text": "wrong words"}, VERIFY]},
        {"actions": [{"type": "wait"}]},
    ]
    inputs: list[Action | bool] = [
        Action(Kind.CLICK, point=(250, 182)),
        True,
        Action(Kind.TYPE, text=PHRASE),
        False,
        Action(Kind.KEYPRESS, chord="ctrl+alt+Delete"),  # blocked for the person too
        Action(Kind.CLICK, point=(550, 182)),
    ]
    result, events, agent = run(tmp_path, turns, inputs)
    assert result.status == "passed", result.reason  # the person typed the phrase and clicked Verify
    outcomes = {(o.turn, o.index): o for o in of(events, ev.Outcome)}
    assert (outcomes[1, 1].status, outcomes[1, 1].message) == ("declined", MSG_TAKEN_OVER)
    assert outcomes[1, 2].status == "not_executed"
    (started,) = of(events, ev.TakeoverStarted)
    assert (started.turn, started.by, started.operator) == (1, BY_TAKEOVER, OPERATOR)
    assert started.where == "before the model's next turn"
    theirs = [p for p in of(events, ev.ActionProposed) if p.by == BY_TAKEOVER]
    assert [p.index for p in theirs] == [3, 4, 5, 6]
    assert [outcomes[1, p.index].status for p in theirs] == ["executed", "executed", "refused", "executed"]
    decisions = {(d.turn, d.index): d for d in of(events, ev.DecisionMade)}
    assert decisions[1, 4].by == BY_TAKEOVER and decisions[1, 4].operator == OPERATOR
    assert decisions[1, 4].note == "approved by being done"
    assert decisions[1, 5].by == "policy" and decisions[1, 5].decision == "reject"
    # each input that ran is followed by its screen
    screens = [s for s in of(events, ev.ScreenCaptured) if s.index in (3, 4, 6) and s.turn == 1]
    assert len(screens) == 3
    assert [p.private for p in of(events, ev.TakeoverPrivate)] == [True, False]
    (ended,) = of(events, ev.TakeoverEnded)
    assert ended.actions == 4 and ended.screen
    assert ended.told == (
        "The person supervising this run took control of the desktop and did 3 actions: click at (250, 182); "
        "click at (550, 182); plus 1 action in a private stretch, not described. 1 action of theirs did not "
        "run. They handed control back: the screenshot shows the desktop now. Continue the task from here."
    )
    # what the model heard next: its results, then the account (and nothing more the turn after)
    assert agent.notes == [ended.told, ""]
    assert PHRASE not in (result.path / "audit.jsonl").read_text()
    typed = theirs[1].action
    # the proposal has the length; typed in a private stretch, the text has no hash on record at all
    assert typed["text_len"] == len(PHRASE) and "text_sha256" not in typed
    final = [t for t in of(events, ev.Typed) if t.index == theirs[1].index][-1]
    assert (final.text_len, final.text_sha256) == (len(PHRASE), "")
    report = verify_run(result.path)
    assert report.finding is None and report.sealed


def test_a_takeover_between_two_actions_stops_the_rest_of_the_batch(tmp_path: Path) -> None:
    desktop = SimDesktop()
    holder: dict[str, Supervisor] = {}

    def first(_desktop: SimDesktop, action: Action) -> None:
        if action.point == (250, 182) and "asked" not in holder:
            holder["asked"] = holder["sup"]
            assert holder["sup"].take_over() is None

    desktop.before_action = first
    turns = [{"actions": [FIELD, {"type": "wait"}, {"type": "wait"}]}]
    sup, events, agent = make_supervisor(tmp_path, turns, desktop=desktop, operator=OPERATOR)
    holder["sup"] = sup

    def on_event(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.TakeoverStarted):
            threading.Thread(target=sup.hand_back, daemon=True).start()

    sup.subscribe(on_event)
    result = sup.run()
    assert result.status == "failed", result.reason  # nothing typed: the sim form's verifier fails it
    statuses = [(o.index, o.status, o.message) for o in of(events, ev.Outcome)]
    assert statuses[0][1] == "executed"
    assert statuses[1] == (1, "not_executed", MSG_TAKEN_OVER)
    assert statuses[2][1] == "not_executed"
    (ended,) = of(events, ev.TakeoverEnded)
    assert ended.told.startswith("The person supervising this run took control of the desktop and did nothing")
    assert agent.notes == [ended.told]


def test_a_hand_back_before_the_takeover_began_cancels_it(tmp_path: Path) -> None:
    sup, events, _agent = make_supervisor(tmp_path, [{"actions": [{"type": "wait"}]}])
    assert sup.take_over() is None
    assert sup.take_over() is not None  # asked already
    sup.hand_back()
    result = sup.run()
    # the run went on as if nothing was asked (the sim form's verifier fails it: nothing was typed)
    assert of(events, ev.TakeoverStarted) == [] and result.status == "failed"
    assert "ending" in (sup.take_over() or "")


def test_the_kill_switch_ends_a_takeover_sealed(tmp_path: Path) -> None:
    turns = [{"actions": [FIELD, {"type": "type", "text": "x"}]}]
    sup, events, _agent = make_supervisor(tmp_path, turns, approver=TakingOver(), operator=OPERATOR)
    sup.approver.supervisor = sup  # type: ignore[union-attr]

    def on_event(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.TakeoverStarted):
            threading.Thread(target=lambda: sup.kill(by="human (TUI)"), daemon=True).start()

    sup.subscribe(on_event)
    result = sup.run()
    assert result.status == "killed" and result.seal
    assert of(events, ev.TakeoverEnded) == []
    report = verify_run(result.path)
    assert report.finding is None and report.sealed


def test_inputs_are_refused_unless_the_desktop_is_taken_over(tmp_path: Path) -> None:
    sup, _events, _agent = make_supervisor(tmp_path, [])
    assert sup.takeover_input(Action(Kind.CLICK, point=(1, 1))) == "the desktop is not taken over"


@pytest.mark.parametrize(
    ("done", "told"),
    [
        ([], "and did nothing on it."),
        ([Done(Action(Kind.TYPE, text="abc"), True)], "and did 1 action: type 3 characters."),
        ([Done(Action(Kind.TYPE, text="pw"), True, private=True)], "did 1 action, 1 action in a private stretch,"),
        ([Done(Action(Kind.CLICK, point=(1000, 700)), True)], "did 1 action: click at (500, 350)."),
    ],
)
def test_what_the_model_is_told(done: list[Done], told: str) -> None:
    note = takeover_note(done, Scaling(Size(1024, 720), Size(512, 360)))
    assert told in note and "pw" not in note


def test_a_long_takeover_is_told_in_a_bounded_sentence() -> None:
    done = [Done(Action(Kind.CLICK, point=(i, i)), True) for i in range(500)]
    note = takeover_note(done, Scaling.identity(Size(1024, 720)))
    assert "and 480 more" in note and len(note) < 1200


# ---------------------------------------------------------------------------------------------------
# What each vendor's adapter sends at hand-back (the real SDKs, talking to the loopback model server)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_each_adapter_sends_the_account_after_the_results_with_the_screen_now(tmp_path: Path, vendor: str) -> None:
    from model_server import (
        ANTHROPIC_PATH,
        OPENAI_PATH,
        ModelServer,
        anthropic_message,
        computer_call,
        message,
        openai_response,
        text_block,
        tool_use,
    )

    from cua_tui.agents.anthropic_agent import AnthropicAgent
    from cua_tui.agents.openai_agent import OpenAIAgent
    from cua_tui.core.policy import Policy
    from cua_tui.core.rundir import RunDir
    from cua_tui.core.supervisor import RunConfig

    with ModelServer() as server:
        agent: Any
        if vendor == "openai":
            path = OPENAI_PATH
            server.script(
                path,
                openai_response(computer_call("call_1", {"type": "type", "text": "wrong"})),
                openai_response(message("done")),
            )
            agent = OpenAIAgent("sk-test-not-a-key", base_url=server.openai_base_url, timeout=5.0, max_retries=1)
        else:
            path = ANTHROPIC_PATH
            server.script(
                path,
                anthropic_message(tool_use("toolu_1", "type", text="wrong")),
                anthropic_message(text_block("done"), stop_reason="end_turn"),
            )
            agent = AnthropicAgent("sk-ant-test", base_url=server.anthropic_base_url, timeout=5.0, max_retries=1)
        desktop = SimDesktop()
        config = RunConfig(
            task="t", backend="sim", agent=agent.name, model=agent.model, screen=desktop.size,
            policy=Policy.default(), operator=OPERATOR,
        )  # fmt: skip
        approver = TakingOver()
        sup = Supervisor(config, desktop, agent, approver, RunDir.create(tmp_path / "runs"))
        approver.supervisor = sup
        events: list[ev.Event] = []
        sup.subscribe(lambda s: events.append(s.event))

        def on_event(stamped: ev.Stamped) -> None:
            if isinstance(stamped.event, ev.TakeoverStarted):

                def feed() -> None:
                    sup.takeover_input(Action(Kind.CLICK, point=(250, 182)))
                    sup.hand_back()

                threading.Thread(target=feed, daemon=True).start()

        sup.subscribe(on_event)
        sup.run()
        bodies = server.bodies(path)
    (ended,) = of(events, ev.TakeoverEnded)
    assert "did 1 action: click at (250, 182)" in ended.told
    if vendor == "openai":
        items = bodies[1]["input"]
        assert items[0]["type"] == "computer_call_output"  # the screen now, for the call
        assert items[-2]["content"][0]["text"].startswith("What happened to your last computer actions:")
        assert MSG_TAKEN_OVER in items[-2]["content"][0]["text"]
        assert items[-1] == {"role": "user", "content": [{"type": "input_text", "text": ended.told}]}
    else:
        content = bodies[1]["messages"][-1]["content"]
        result = content[0]
        assert result["type"] == "tool_result" and result["is_error"] is True
        assert result["content"][0]["text"] == MSG_TAKEN_OVER
        assert content[1]["type"] == "image"  # the screen now
        assert content[2] == {"type": "text", "text": ended.told}


# ---------------------------------------------------------------------------------------------------
# Replay, export and re-run (issue 24, point 4)
# ---------------------------------------------------------------------------------------------------
def _taken_run(tmp_path: Path) -> Any:
    turns: list[dict[str, Any]] = [
        {"actions": [FIELD, {"type": "type", "text": "wrong"}]},
        {"actions": [{"type": "wait"}]},
    ]
    inputs: list[Action | bool] = [
        Action(Kind.CLICK, point=(250, 182)),
        Action(Kind.TYPE, text=PHRASE),
        Action(Kind.CLICK, point=(550, 182)),
    ]
    result, _events, _agent = run(tmp_path, turns, inputs)
    assert result.status == "passed", result.reason
    return result


def test_replay_and_the_html_export_show_the_takeover_as_its_own_stretch(tmp_path: Path) -> None:
    from cua_tui.core import describe
    from cua_tui.core.runlog import RunReader
    from cua_tui.core.timeline import TAKEOVER, build
    from cua_tui.export import html as html_export
    from cua_tui.export import open_run

    result = _taken_run(tmp_path)
    with RunReader(result.path) as reader:
        steps = build(reader.poll()).steps
    theirs = [s for s in steps if s.by_reviewer]
    assert [s.index for s in theirs] == [2, 3, 4] and all(TAKEOVER in s.flags for s in theirs)
    assert all(s.takeover_number == 1 for s in theirs) and not any(s.by_reviewer for s in steps[:2])
    panel = "".join(text for text, _role in describe.step_panel(theirs[0], len(steps)))
    assert f"by       {BY_TAKEOVER} #1 · {OPERATOR}" in panel
    last = "".join(text for text, _role in describe.step_panel(theirs[-1], len(steps)))
    assert "told     at hand-back the model heard: The person supervising this run took control" in last
    with open_run(result.path) as opened:
        page = html_export.render(opened)
    assert f"Takeover #1: the desktop was {OPERATOR}'s (before the model&#x27;s next turn)" in page
    assert len(re.findall(r'class="step [^"]*flag-takeover', page)) == 3 and "told at hand-back" in page


def test_a_re_run_from_the_exported_script_replays_the_reviewers_actions(tmp_path: Path) -> None:
    from cua_tui.agents.script import Script
    from cua_tui.export import open_run
    from cua_tui.export import script as script_export

    result = _taken_run(tmp_path / "first")
    with open_run(result.path) as opened:
        exported = script_export.build(opened)
    turns = exported.data["turns"]
    assert [t.get("text", "")[:40] for t in turns][1] == script_export.TAKEOVER_TEXT[:40]
    assert [a["type"] for a in turns[1]["actions"]] == ["click", "type", "click"]
    assert turns[1]["call_id"] == "takeover_1_replayed"
    texts = {text_sha256("wrong"): "wrong", text_sha256(PHRASE): PHRASE}
    script = Script.from_data(exported.data, texts=texts)

    class Second:
        """The re-run's reviewer: rejects the model's typing, approves the replayed actions."""

        def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
            answer = Answer.REJECT if request.call_id != "takeover_1_replayed" else Answer.APPROVE
            return Ruling(answer, "human (TUI)", human=True)

    from cua_tui.agents.script import ScriptAgent
    from cua_tui.core.policy import Policy
    from cua_tui.core.rundir import RunDir
    from cua_tui.core.supervisor import RunConfig

    desktop = SimDesktop()
    policy = Policy.default()
    config = RunConfig(task="t", backend="sim", agent="script", model=None, screen=desktop.size, policy=policy)
    again = Supervisor(config, desktop, ScriptAgent(script), Second(), RunDir.create(tmp_path / "again")).run()
    assert again.status == "passed", again.reason


def test_an_input_off_the_screen_or_of_a_kind_no_terminal_gives_is_refused_on_record(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [{"actions": [FIELD, {"type": "type", "text": "x"}]}]
    inputs: list[Action | bool] = [
        Action(Kind.CLICK, point=(5000, 10)),
        Action(Kind.WAIT, duration_ms=100),
        Action(Kind.CLICK, point=(250, 182)),
    ]
    _result, events, _agent = run(tmp_path, turns, inputs)
    theirs = [p.index for p in of(events, ev.ActionProposed) if p.by == BY_TAKEOVER]
    outcomes = {o.index: o.status for o in of(events, ev.Outcome)}
    assert [outcomes[i] for i in theirs] == ["refused", "refused", "executed"]
    verdicts = {v.index: v for v in of(events, ev.PolicyVerdict)}
    assert "outside the 1024x720 screen" in verdicts[theirs[0]].reason
    assert verdicts[theirs[1]].reason == "a wait is not an input of a takeover"


# ---------------------------------------------------------------------------------------------------
# Typing stretches (issue 34, point 7): the keys typed one after another are one action on record, each
# character sent as it comes; a pause (on the run's clock), another input or a refused character ends it
# ---------------------------------------------------------------------------------------------------
class Clock:
    """The run's clock, moved by the test: a stretch's pause passes when the test says so. It counts its
    readings: the run reads it each time it finds no input waiting, so a test can wait for the run to idle."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.reads = 0
        self.read = threading.Condition()

    def __call__(self) -> float:
        with self.read:
            self.reads += 1
            self.read.notify_all()
            return self.now

    def idle(self) -> None:
        """Wait until the run has looked at the clock again (with nothing to do: the test sends nothing)."""
        with self.read:
            seen = self.reads
            assert self.read.wait_for(lambda: self.reads > seen + 1, timeout=20), "the run never idled"


class Driven:
    """A run taken over at its first decision, driven from the test: inputs fed, events awaited."""

    def __init__(self, tmp_path: Path, *, policy: Any = None, desktop: SimDesktop | None = None) -> None:
        from cua_tui.agents.script import Script, ScriptAgent
        from cua_tui.core.policy import Policy
        from cua_tui.core.rundir import RunDir
        from cua_tui.core.supervisor import RunConfig

        self.clock = Clock()
        self.desktop = desktop or SimDesktop()
        self.received: list[Action] = []  # what reached the desktop, in order
        self.desktop.before_action = lambda _desktop, action: self.reached(action)
        turns: list[dict[str, Any]] = [
            {"actions": [FIELD, {"type": "type", "text": "wrong"}]},
            {"actions": [{"type": "wait"}]},
        ]
        config = RunConfig(
            task="t", backend="sim", agent="script", model=None, screen=self.desktop.size,
            policy=policy or Policy.default(), operator=OPERATOR,
        )  # fmt: skip
        approver = TakingOver()
        agent = ScriptAgent(Script.from_data({"turns": turns, "final_text": "done"}))
        self.sup = Supervisor(
            config, self.desktop, agent, approver, RunDir.create(tmp_path / "runs"), fsync=False, clock=self.clock
        )
        approver.supervisor = self.sup
        self.agent = agent
        self.events: list[ev.Event] = []
        self.changed = threading.Condition()
        self.sup.subscribe(self._on_event)
        self.thread = threading.Thread(target=self.sup.run, daemon=True)
        self.thread.start()
        self.until(lambda: bool(self.of(ev.TakeoverStarted)), "the takeover")

    def reached(self, action: Action) -> None:
        with self.changed:
            self.received.append(action)
            self.changed.notify_all()

    def _on_event(self, stamped: ev.Stamped) -> None:
        with self.changed:
            self.events.append(stamped.event)
            self.changed.notify_all()

    def until(self, predicate: Any, what: str) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout=20), f"never: {what}"

    def of(self, kind: type[ev.Event]) -> list[Any]:
        return of(list(self.events), kind)

    def type(self, text: str) -> None:
        for character in text:
            assert self.sup.takeover_input(Action(Kind.TYPE, text=character)) is None

    def press(self, action: Action) -> None:
        assert self.sup.takeover_input(action) is None

    def theirs(self) -> list[ev.ActionProposed]:
        return [p for p in self.of(ev.ActionProposed) if p.by == BY_TAKEOVER]

    def typed_so_far(self, index: int) -> int:
        """How many characters of the stretch ``index`` are on record."""
        lengths = [t.text_len for t in self.of(ev.Typed) if t.index == index]
        proposed: list[int] = [(p.action or {})["text_len"] for p in self.theirs() if p.index == index]
        return (lengths or proposed or [0])[-1]

    def sent(self) -> str:
        return "".join(a.text for a in self.received if a.kind is Kind.TYPE and a.text != "wrong")

    def outcome(self, index: int) -> list[ev.Outcome]:
        return [o for o in self.of(ev.Outcome) if o.index == index and o.turn == 1]

    def hand_back(self) -> Any:
        self.sup.hand_back()
        self.thread.join(timeout=30)
        assert self.sup.result is not None
        return self.sup.result


def test_sixteen_characters_typed_are_one_action_one_outcome_one_screen(tmp_path: Path) -> None:
    run = Driven(tmp_path)
    text = PHRASE[:16]
    for n, character in enumerate(text, 1):
        # typed as a person types (slower than the run): each reaches the desktop as it comes, on record first
        run.type(character)
        run.until(lambda n=n: run.sent() == text[:n], f"character {n} on the desktop")
        assert run.typed_so_far(2) == n
        run.clock.idle()
    assert [a.text for a in run.received if a.kind is Kind.TYPE] == list(text)
    assert run.outcome(2) == []  # no pause yet on the run's clock: the stretch goes on
    run.clock.now += 1.0
    run.until(lambda: bool(run.outcome(2)), "the stretch's outcome")
    result = run.hand_back()
    assert [p.index for p in run.theirs()] == [2]
    (outcome,) = run.outcome(2)
    assert (outcome.status, outcome.message) == ("executed", "OK")
    assert len([s for s in run.of(ev.ScreenCaptured) if s.turn == 1 and s.index == 2]) == 1
    typed = run.of(ev.Typed)
    # a length a character after the first; at the end the whole text's length and its one SHA-256
    assert [t.text_len for t in typed] == [*range(2, 17), 16]
    assert [t.text_sha256 for t in typed] == [""] * 15 + [text_sha256(text)]
    log = (result.path / "audit.jsonl").read_text()
    records = [json.loads(line) for line in log.splitlines()]
    stretch = [r for r in records if r.get("index") == 2 and r.get("turn") == 1]
    # proposal, verdict, decision, intent, one typed record a character after the first, the whole
    # text's, outcome, screen
    assert [r["kind"] for r in stretch] == ["proposal", "verdict", "decision", "executing", *["typed"] * 16,
                                            "outcome", "screen"]  # fmt: skip
    assert text not in json.dumps(records)
    # no hash of a part of it: each would give the text away a character at a time
    assert not [n for n in range(1, len(text)) if text_sha256(text[:n]) in log]
    (ended,) = run.of(ev.TakeoverEnded)
    assert "did 1 action: type 16 characters." in ended.told and run.agent.notes[0] == ended.told
    report = verify_run(result.path)
    assert report.finding is None and report.sealed

    from cua_tui.core.runlog import RunReader
    from cua_tui.core.timeline import build

    with RunReader(result.path) as reader:
        steps = [s for s in build(reader.poll()).steps if s.by_reviewer]
    (step,) = steps
    assert step.proposal.summary == "type 16 characters" and step.proposal.action is not None
    assert (step.proposal.action["text_len"], step.proposal.action["text_sha256"]) == (16, text_sha256(text))


def test_max_text_length_counts_the_whole_stretch(tmp_path: Path) -> None:
    from cua_tui.core.policy import Policy
    from cua_tui.core.takeover import TYPING_STOPPED

    run = Driven(tmp_path, policy=Policy.default().with_limits(max_text_length=5))
    run.type("abcdefgh")
    run.press(Action(Kind.KEYPRESS, chord="Tab"))  # ends the window in which the rest is not sent
    run.type("xy")
    run.press(Action(Kind.CLICK, point=(550, 182)))
    run.until(lambda: len(run.theirs()) == 4 and bool(run.outcome(5)), "every input handled")
    run.hand_back()
    # five characters went; the sixth was refused and ended the stretch; g and h were not sent
    assert run.sent() == "abcdexy"
    kinds = [(p.action or {})["kind"] for p in run.theirs()]
    assert kinds == ["type", "keypress", "type", "click"]
    assert [o.status for i in (2, 3, 4, 5) for o in run.outcome(i)] == ["executed"] * 4
    (note,) = [n.message for n in run.of(ev.Note) if n.message.startswith(TYPING_STOPPED)]
    assert note.startswith(f"{TYPING_STOPPED} 5 characters: typed text of 6 characters exceeds the cap of 5")
    assert run.typed_so_far(2) == 5 and run.typed_so_far(4) == 2
    (ended,) = run.of(ev.TakeoverEnded)
    assert "type 5 characters; press Tab; type 2 characters; click at" in ended.told


def test_a_stretch_refused_at_its_first_character_is_one_refused_action(tmp_path: Path) -> None:
    from cua_tui.core.policy import Policy

    # the model's click is the decision the takeover answers; typing is blocked for everyone
    blocked = Policy.from_toml('version = 1\nname = "no typing"\n[actions]\nconfirm = ["click"]\nblock = ["type"]\n')
    run = Driven(tmp_path, policy=blocked)
    run.type("secret")
    run.press(Action(Kind.CLICK, point=(550, 182)))
    run.until(lambda: len(run.theirs()) == 2 and bool(run.outcome(3)), "every input handled")
    run.hand_back()
    assert run.sent() == ""
    assert [o.status for o in run.outcome(2)] == ["refused"] and run.of(ev.Typed) == []
    (ended,) = run.of(ev.TakeoverEnded)
    assert "did 1 action: click at (550, 182). 1 action of theirs did not run." in ended.told


def test_a_key_that_is_not_a_character_or_a_click_ends_the_stretch(tmp_path: Path) -> None:
    run = Driven(tmp_path)
    run.type("abc")
    run.press(Action(Kind.KEYPRESS, chord="BackSpace"))
    run.type("de")
    run.press(Action(Kind.CLICK, point=(250, 182)))
    run.until(lambda: bool(run.outcome(5)), "the click's outcome")
    run.hand_back()
    kinds = [(p.index, (p.action or {})["kind"]) for p in run.theirs()]
    assert kinds == [(2, "type"), (3, "keypress"), (4, "type"), (5, "click")]
    # each stretch's outcome and screen come before the next input is proposed
    order = [(type(e).__name__, getattr(e, "index", None)) for e in run.events if getattr(e, "turn", 1) == 1]
    assert order.index(("Outcome", 2)) < order.index(("ScreenCaptured", 2)) < order.index(("ActionProposed", 3))
    assert order.index(("ScreenCaptured", 4)) < order.index(("ActionProposed", 5))
    assert (run.typed_so_far(2), run.typed_so_far(4)) == (3, 2)
    arrived = [a.kind for a in run.received]
    runs = [k for n, k in enumerate(arrived) if n == 0 or arrived[n - 1] is not k]
    assert runs[:5] == [Kind.CLICK, Kind.TYPE, Kind.KEYPRESS, Kind.TYPE, Kind.CLICK] and run.sent() == "abcde"


def test_a_pause_on_the_runs_clock_ends_the_stretch(tmp_path: Path) -> None:
    run = Driven(tmp_path)
    run.type("ab")
    run.until(lambda: run.sent() == "ab", "ab on the desktop")
    run.clock.idle()
    run.clock.now += 0.5
    run.clock.idle()
    run.type("c")
    run.until(lambda: run.sent() == "abc", "c on the desktop")
    run.clock.idle()
    run.clock.now += 0.99  # less than a pause since c (1.49 s since a): d belongs to the same stretch
    run.clock.idle()
    run.type("d")
    run.until(lambda: run.sent() == "abcd", "d on the desktop")
    run.clock.idle()
    assert run.outcome(2) == []
    run.clock.now += 1.0
    run.until(lambda: bool(run.outcome(2)), "the pause ends the stretch")
    run.type("e")
    run.until(lambda: run.sent() == "abcde", "e on the desktop")
    run.hand_back()  # which ends that one
    assert [p.index for p in run.theirs()] == [2, 3] and [len(run.outcome(i)) for i in (2, 3)] == [1, 1]
    assert run.sent() == "abcde"
    (ended,) = run.of(ev.TakeoverEnded)
    assert "did 2 actions: type 4 characters; type 1 characters." in ended.told


def test_a_crash_mid_stretch_leaves_the_typed_part_on_record(tmp_path: Path) -> None:
    """What a crash leaves is the log as it stands when a character reaches the desktop (lines are written
    before): copied at that moment, it verifies, and its last record of the stretch counts that character."""
    import shutil

    from cua_tui.core.runlog import RunReader

    copies: list[tuple[Path, int]] = []
    desktop = SimDesktop()
    run = Driven(tmp_path, desktop=desktop)
    typed = {"n": 0}

    def crash_here(_desktop: SimDesktop, action: Action) -> None:
        run.reached(action)
        if action.kind is Kind.TYPE and action.text != "wrong":
            typed["n"] += len(action.text)
            if typed["n"] >= 5 and not copies:
                copy = tmp_path / "crashed"
                shutil.copytree(run.sup.rundir.path, copy)
                copies.append((copy, typed["n"]))

    desktop.before_action = crash_here
    for n, character in enumerate("abcdefgh", 1):
        run.type(character)
        run.until(lambda n=n: run.sent() == "abcdefgh"[:n], f"character {n} on the desktop")
        run.clock.idle()
    run.hand_back()
    ((copy, reached),) = copies
    report = verify_run(copy)
    assert report.finding is None and not report.sealed
    with RunReader(copy) as reader:
        events = [s.event for s in reader.poll()]
    theirs = [e for e in events if isinstance(e, ev.ActionProposed) and e.by == BY_TAKEOVER]
    assert len(theirs) == 1 and not [e for e in events if isinstance(e, ev.Outcome) and e.index == 2]
    lengths = [(e.text_len, e.text_sha256) for e in events if isinstance(e, ev.Typed)]
    first = theirs[0].action or {}
    # how much was typed is on record; no hash of it (the stretch did not end)
    last = lengths[-1] if lengths else (first["text_len"], "")
    assert last == (reached, "") and "text_sha256" not in first


def test_the_kill_switch_mid_stretch_closes_it_as_typed(tmp_path: Path) -> None:
    run = Driven(tmp_path)
    run.type("abc")
    run.until(lambda: run.sent() == "abc", "abc on the desktop")
    run.type("d")  # its record is written once abc is typed
    run.until(lambda: run.typed_so_far(2) == 4, "d on record")
    run.sup.kill(by="human (TUI)")
    run.thread.join(timeout=30)
    result = run.sup.result
    assert result is not None and result.status == "killed"
    assert [(o.status, o.message) for o in run.outcome(2)] == [("executed", "OK")]
    # the stretch's one hash is of what was on record as typed (d: under way when the kill came)
    final = run.of(ev.Typed)[-1]
    assert run.sent() in ("abc", "abcd") and (final.text_len, final.text_sha256) == (4, text_sha256("abcd"))
    report = verify_run(result.path)
    assert report.finding is None and report.sealed


def test_a_one_time_code_typed_in_a_private_stretch_leaves_no_hash_of_it(tmp_path: Path) -> None:
    """A private stretch keeps its text's length only: the SHA-256 of a six-digit code is the code (a million
    guesses), and one of each prefix would give away any text a character at a time."""
    run = Driven(tmp_path)
    code = "482913"
    run.sup.takeover_private(True)
    run.until(lambda: bool(run.of(ev.TakeoverPrivate)), "the private stretch")
    for n, character in enumerate(code, 1):
        run.type(character)
        run.until(lambda n=n: run.sent() == code[:n], f"digit {n} on the desktop")
        run.clock.idle()
    run.sup.takeover_private(False)
    result = run.hand_back()
    log = (result.path / "audit.jsonl").read_text()
    assert not [n for n in range(1, len(code) + 1) if text_sha256(code[:n]) in log]
    typed = run.of(ev.Typed)
    assert typed and typed[-1].text_len == len(code) and {t.text_sha256 for t in typed} == {""}
    assert verify_run(result.path).finding is None
