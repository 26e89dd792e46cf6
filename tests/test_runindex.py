"""core/runindex: a run read back by offsets tells exactly what the whole log read at once tells.

Every step rebuilt from its turn's lines equals the step ``timeline.build`` makes from all the events; the
RunView at any line, folded from a checkpoint, equals the fold of every event before it; lines read again
by offset are the lines read the first time. Runs are real (the one builder on the sim desktop), one of
them grown to thousands of steps by the replay benchmark's own grower; the damaged ones are the shared
hostile corpus.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest
from export_runs import TURNS, sim_run
from hostile_runs import CASES, DAMAGED, Case, pristine_run
from runlogs import UNSIGNED, action_records, write_run

from bench.replay import grow_run
from cua_tui.core import events as ev
from cua_tui.core import runindex
from cua_tui.core import timeline as tl
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.run_view import MAX_ROWS, RunView
from cua_tui.core.runindex import RunIndex
from cua_tui.core.runlog import RunLog, RunReader
from cua_tui.core.safeio import RunFolder


def _whole(path: Path) -> tuple[list[ev.Stamped], tl.Timeline]:
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        events = log.poll()
    return events, tl.build(events)


def _indexed(path: Path) -> tuple[RunReader, RunIndex]:
    reader = RunReader(path)
    index = RunIndex(reader.log)
    while index.advance():
        pass
    return reader, index


def _state(view: RunView) -> tuple[object, ...]:
    rows = [(a.index, a.kind, a.params, a.verdict, a.state, a.decided_by, a.edited) for a in view.actions.values()]
    return (view.seq, view.head, view.turn, view.steps, view.phase, view.detail, view.batch_turn, view.batch_text,
            rows, view.focused, view.pending, view.ended, view.verification, view.grants, view.takeover,
            view.attention.unseen, view.killed)  # fmt: skip


def _same_story(path: Path, uptos: list[int] | None = None) -> RunIndex:
    events, whole = _whole(path)
    reader, index = _indexed(path)
    with reader:
        assert index.done and index.lines == len(events)
        assert index.count == len(whole.steps)
        # backwards too: the turns rebuilt are not those the forward walk kept
        for number in [*range(index.count), *range(index.count - 1, -1, -1)]:
            assert index.step(number) == whole.steps[number], number
        assert index.turn_firsts() == whole.turns()
        for flag in (tl.DECISION, tl.REFUSAL, tl.ERROR, tl.EGRESS, tl.TAKEOVER):
            marked = [s.number for s in whole.steps if flag in s.flags]
            found: list[int] = []
            at: int | None = -1
            while at is not None and (at := index.find(flag, at, 1)) is not None:
                found.append(at)
            assert found == marked, flag
        assert index.events(0, len(events)) == events
        for upto in uptos if uptos is not None else sorted({0, 1, len(events) // 2, len(events)}):
            folded = RunView()
            for stamped in events[:upto]:
                folded.apply(stamped)
            assert _state(index.view(upto)) == _state(folded), upto
            assert _state(index.probe(upto)) == _state(folded), upto
        assert (index.timeline.started, index.timeline.ended) == (whole.started, whole.ended)
    return index


def test_a_real_run_indexed_in_small_blocks_tells_the_same_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runindex, "CHECKPOINT_EVERY", 5)
    monkeypatch.setattr(runindex, "ADVANCE_BYTES", 700)  # a block ends in the middle of a line, often
    path = sim_run(tmp_path / "runs", TURNS * 3)
    events, _whole_line = _whole(path)
    _same_story(path, list(range(len(events) + 1)))


@pytest.mark.beside  # computes and measures nothing: on the CPU the other parts leave
def test_a_grown_run_of_thousands_of_steps_tells_the_same_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runindex, "TURNS_KEPT", 2)  # turns are forgotten and rebuilt, again and again
    source = sim_run(tmp_path / "runs", [{"text": f"turn {n}", "actions": TURNS[0]["actions"]} for n in range(4)])
    grown = grow_run(source, tmp_path / "grown", 3000)
    assert verify_run(grown).code == VerifyExit.INTACT
    index = _same_story(grown)
    assert index.count == 3000


def test_what_comes_after_a_steps_outcome_is_still_rebuilt_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused egress and a takeover's account come after a step's outcome (the browser's own traffic
    between turns, a hand-back): they belong to that step, and its turn rebuilt alone still has them."""
    monkeypatch.setattr(runindex, "TURNS_KEPT", 1)
    records = action_records(3)
    at = next(i for i, (kind, _p) in enumerate(records) if kind == "model_turn" and _p["turn"] == 2)
    records[at:at] = [
        ("egress", {"host": "clients2.google.com", "port": 443, "method": "CONNECT", "allowed": False}),
        ("takeover", {"turn": 1, "by": "human", "operator": "alice", "where": "tui"}),
        ("takeover_ended", {"turn": 1, "actions": 0, "told": "the reviewer looked and handed back"}),
        ("egress", {"host": "evil.example", "port": 80, "method": "GET", "allowed": False, "reason": "not listed"}),
    ]
    path = write_run(tmp_path / "20261201-000000-abcdef", None, records, signed=UNSIGNED)
    _events, whole = _whole(path)
    last = whole.steps[2]
    assert len(last.refused_egress) == 2 and last.told  # the whole-log build: the turn's last step has them
    _same_story(path)


def test_a_turn_no_supervisor_writes_is_held_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited log can put any number of proposals in one turn: the index holds at most MAX_OPEN_STEPS of
    them whole; each part is rebuilt with its proposals, and nothing fails."""
    monkeypatch.setattr(runindex, "MAX_OPEN_STEPS", 4)
    path = write_run(tmp_path / "20261201-000000-abcdef", None, action_records(2, per_turn=10), signed=UNSIGNED)
    _events, whole = _whole(path)
    reader = RunReader(path)
    index = RunIndex(reader.log)
    with reader:
        while index.advance(300):
            assert len(index._open_steps()) <= 4
        assert index.count == len(whole.steps) == 20
        for number in range(index.count):
            step, same = index.step(number), whole.steps[number]
            assert (step.number, step.turn, step.index, step.first_seq, step.proposal) == (
                same.number, same.turn, same.index, same.first_seq, same.proposal)  # fmt: skip


def test_a_turn_of_thousands_of_proposals_costs_the_checkpoints_a_bounded_view(tmp_path: Path) -> None:
    """Each checkpoint is a copy of the run's view: a turn no supervisor writes (5,000 proposals) must not
    make every copy hold all of them."""
    path = write_run(tmp_path / "20261201-000000-abcdef", None, action_records(1, per_turn=5000), signed=UNSIGNED)
    reader, index = _indexed(path)
    with reader:
        assert index.count == 5000
        assert all(len(view.actions) <= MAX_ROWS for view in index._checkpoints)
        assert len(index._checkpoints) > 10 and len(index.view(index.lines).actions) == MAX_ROWS


def test_a_log_changed_after_it_was_read_shows_that_not_another_step(tmp_path: Path) -> None:
    path = sim_run(tmp_path / "runs", TURNS * 2)
    reader, index = _indexed(path)
    with reader:
        log = path / "audit.jsonl"
        log.write_bytes(log.read_bytes()[: log.stat().st_size // 3])  # cut while open
        late = index._turns[-1].first_step  # in the last turn the index let go of: rebuilt from the file
        assert "changed after it was read" in index.step(late).proposal.error
        assert index.step(0).proposal.turn == 1  # what is still there is still shown


def test_memory_holds_marks_not_events(tmp_path: Path) -> None:
    """What the index keeps grows by a mark per step and an offset per line: no event is held."""
    source = sim_run(tmp_path / "runs", [{"text": f"turn {n}", "actions": TURNS[0]["actions"]} for n in range(4)])
    reader, index = _indexed(grow_run(source, tmp_path / "grown", 2000))
    with reader:
        assert index.timeline.steps == index._open_steps() and len(index._open_steps()) <= 3  # only the open turn
        assert len(index._rebuilt) == 0
        index.step(5), index.step(1500)
        assert len(index._rebuilt) == 2
        assert len(index._checkpoints) == index.lines // runindex.CHECKPOINT_EVERY + 1


def test_a_run_still_being_written_is_indexed_as_it_grows(tmp_path: Path) -> None:
    path = sim_run(tmp_path / "runs")
    data = (path / "audit.jsonl").read_bytes()
    lines = data.split(b"\n")[:-1]
    growing = tmp_path / "growing"
    shutil.copytree(path, growing)
    (growing / "result.json").unlink()
    target = growing / "audit.jsonl"
    target.write_bytes(b"\n".join(lines[:10]) + b"\n" + lines[10][:7])  # a line half written
    reader, index = _indexed(growing)
    with reader:
        assert index.lines == 10 and index.done
        with target.open("ab") as fh:
            fh.write(lines[10][7:] + b"\n" + b"\n".join(lines[11:]) + b"\n")
        while index.advance():
            pass
        events, whole = _whole(path)
        assert index.lines == len(events) and index.count == len(whole.steps)
        assert [index.step(n) for n in range(index.count)] == whole.steps


def test_an_over_long_line_read_again_is_unreadable_again(tmp_path: Path) -> None:
    path = sim_run(tmp_path / "runs")
    log = path / "audit.jsonl"
    lines = log.read_bytes().split(b"\n")[:-1]
    record = json.loads(lines[3])
    record["padding"] = "x" * 3000
    log.write_bytes(b"\n".join([*lines[:3], json.dumps(record).encode(), *lines[4:]]) + b"\n")
    with RunFolder.open(path) as folder, RunLog(folder, max_line=2000) as first:
        events = first.poll()
        note = events[3].event
        assert isinstance(note, ev.Note) and "unreadable (longer than the line cap)" in note.message
        assert first.read(0, len(events)) == events


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("case", [*CASES, *DAMAGED], ids=str)
def test_every_damaged_run_indexes_as_the_whole_log_reads(case: Case, corpus_run: Path, tmp_path: Path) -> None:
    run = case.build(corpus_run, tmp_path / "runs", tmp_path / "out")
    try:
        RunReader(run).close()
    except Exception:  # the reader refuses it (a link, a FIFO, ...): replay says so, tested elsewhere
        return
    _same_story(run)


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Change bytes of a file without changing its size or modification time (as an attacker would)."""
    assert len(old) == len(new)
    info, data = path.stat(), path.read_bytes()
    assert data.count(old) == 1
    with path.open("r+b") as fh:
        fh.write(data.replace(old, new))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


BLOCK, ALLOW = b'"verdict":"block","reason":"a system key', b'"verdict":"allow","reason":"a system key'


def test_a_line_edited_after_it_was_read_is_never_shown_as_it_now_reads(tmp_path: Path) -> None:
    """Issue 34, point 2: a blocked step, edited in place to allow after the pass (same size, time put
    back), is rebuilt as changed, its view folds no line of the changed span, and its lines read again are
    notes saying so; the index says from which line."""
    path = sim_run(tmp_path / "runs")
    _events, whole = _whole(path)
    blocked = next(s for s in whole.steps if s.verdict is not None and s.verdict.verdict == "block")
    reader, index = _indexed(path)
    with reader:
        assert verify_run(path).code == VerifyExit.INTACT and index.confirm(index.lines, verify_run(path).head)
        assert index.untrusted is None
        _edit_in_place(path / "audit.jsonl", BLOCK, ALLOW)
        assert verify_run(path).code == VerifyExit.TAMPERED
        step = index.step(blocked.number)
        assert step.verdict is None and "changed after it was read" in (step.proposal.error or "")
        assert index.untrusted is not None and index.untrusted <= blocked.first_seq
        folded = index.view(blocked.last_seq + 1)
        assert all(row.verdict != "allow" or row.kind != "keypress" for row in folded.actions.values())
        lines = index.events(blocked.first_seq, blocked.last_seq + 1)
        assert all(isinstance(s.event, ev.Note) and "changed after it was read" in s.event.message for s in lines)
        # the turns before the edit still read as they were: their own kept hashes still hold
        assert index.step(0) == whole.steps[0]


def test_a_turn_rebuilt_before_the_edit_and_one_after_both_hold(tmp_path: Path) -> None:
    """The kept hash at each turn's end holds a turn read again alone; an edit in another turn changes
    nothing of it (the chain from the edit on is another turn's)."""
    path = sim_run(tmp_path / "runs", TURNS * 3)
    _events, whole = _whole(path)
    reader, index = _indexed(path)
    with reader:
        last_turn_first = index.turn_firsts()[-2]
        log = path / "audit.jsonl"
        lines = log.read_bytes().split(b"\n")
        seq = whole.steps[last_turn_first].first_seq
        _edit_in_place(log, lines[seq], lines[seq].replace(b'"summary":"drag', b'"summary":"DRAG'))
        assert index.step(0) == whole.steps[0] and index.untrusted is None  # before the edit: as read
        assert "changed after it was read" in (index.step(last_turn_first).proposal.error or "")
        assert index.untrusted is not None


def test_the_pass_is_held_to_the_head_verify_checked(tmp_path: Path) -> None:
    """The log verified and the log indexed are one: a head verify ended on that the index did not read
    (the log rewritten in between, its chain recomputed) marks every line untrusted, whenever it comes."""
    path = sim_run(tmp_path / "runs")
    report = verify_run(path)
    reader, index = _indexed(path)
    with reader:
        assert index.confirm(report.events, report.head) and index.untrusted is None
        assert not index.confirm(report.events, "f" * 64) and index.untrusted == 0
    # asked before the pass reaches the line: checked when it does
    reader = RunReader(path)
    index = RunIndex(reader.log)
    with reader:
        assert index.confirm(report.events, "e" * 64)  # not read yet
        while index.advance():
            pass
        assert index.untrusted == 0


def test_lines_appended_while_followed_must_chain_from_the_head_read(tmp_path: Path) -> None:
    """--follow: a line that arrives later must name the last line read; one that does not is untrusted
    from there, and nothing before it is."""
    path = sim_run(tmp_path / "runs")
    lines = (path / "audit.jsonl").read_bytes().split(b"\n")[:-1]
    growing = tmp_path / "growing"
    shutil.copytree(path, growing)
    (growing / "result.json").unlink()
    target = growing / "audit.jsonl"
    target.write_bytes(b"\n".join(lines[:20]) + b"\n")
    reader, index = _indexed(growing)
    with reader:
        assert index.untrusted is None
        record = json.loads(lines[20])
        record["prev"] = "0" * 64  # a line slipped in that does not name the line before
        with target.open("ab") as fh:
            fh.write(json.dumps(record, separators=(",", ":")).encode() + b"\n" + b"\n".join(lines[21:]) + b"\n")
        while index.advance():
            pass
        assert index.untrusted == 20
        assert index.step(0).verdict is not None  # the lines before still read, held to their kept hash


def test_a_verdict_on_more_lines_than_the_log_now_holds_is_not_this_log(tmp_path: Path) -> None:
    """Lines verify checked and the log no longer holds (cut, then rewritten with a chain of its own): the
    pass at its end without them vouches for nothing; lines written after the pass ended are read first."""
    path = sim_run(tmp_path / "runs")
    report = verify_run(path)
    log = path / "audit.jsonl"
    whole = log.read_bytes()
    log.write_bytes(b"\n".join(whole.split(b"\n")[:20]) + b"\n")
    reader, index = _indexed(path)
    with reader:
        assert not index.confirm(report.events, report.head) and index.untrusted == 0
    reader, index = _indexed(path)
    with reader:
        log.write_bytes(whole)  # the rest written after the pass ended (a run still going): as verified
        assert index.confirm(report.events, report.head) and index.untrusted is None
        assert index.lines == report.events


def test_step_keys_give_each_key_its_first_step_in_order_or_not() -> None:
    """A run proposes (turn, index) in increasing order (kept in arrays); an edited log may repeat one, go
    back, or name a negative or huge turn (kept aside): each key still answers its first step's number."""
    keys = runindex.StepKeys()
    order = [(1, 0), (1, 1), (2, 0), (1, 1), (0, 5), (-1, 0), (1 << 40, 2), (2, 0), (3, 0), (0, 5)]
    first: dict[tuple[int, int], int] = {}
    for number, key in enumerate(order):
        keys.add(key, number)
        first.setdefault(key, number)
    assert {key: keys.get(key) for key in first} == first
    assert keys.get((4, 0)) is None and keys.get((1, 2)) is None and keys.get((-1, 1)) is None
    assert len(keys) == len(first) and len(keys._odd) == 3  # (0, 5), (-1, 0) and the huge turn


def test_turns_give_back_each_turns_context_without_the_models_words() -> None:
    started = ev.TakeoverStarted(3, "human", "alice", "tui")
    contexts = [
        tl.Context(0, None, None, "first", None, 0),
        tl.Context(4, "a" * 64, "b" * 64, "second", started, 1),
        tl.Context(9, "b" * 64, "a" * 64, "third", None, 1),
    ]
    turns = runindex.Turns()
    for n, context in enumerate(contexts):
        turns.append(runindex.Turn(context.number, 10 * n, context, 10 * n - 1))
    assert len(turns) == 3 and turns.firsts() == [0, 4, 9] and turns.first_step(-1) == 9
    for n, context in enumerate(contexts):
        turn = turns[n]
        assert (turn.first_step, turn.first_seq, turn.text_seq) == (context.number, 10 * n, 10 * n - 1)
        assert turn.context == tl.Context(context.number, context.observed, context.latest, "", context.takeover,
                                          context.takeovers)  # fmt: skip
    assert turns[-1] == turns[2] and turns._names == ["a" * 64, "b" * 64]  # each name held once


@pytest.mark.beside  # counts bytes, not time: on the CPU the other parts leave
def test_the_index_holds_under_250_bytes_a_step_and_none_of_the_models_words(tmp_path: Path) -> None:
    """What the index keeps of a turn is where it begins, not what the model said there (read again with the
    turn): a run whose model wrote 3,000 characters a turn costs it about what a run of a few words a turn
    does (the checkpoints' views hold the turn's words at hand), and either under 250 bytes a step. A dict
    of every step's (turn, index) and a list of the turns' contexts, the words in them, held 460 bytes a
    step of the short run and 1,460 of the long one."""
    words = "w" * 3000
    steps = 1200  # 400 turns: the fixed costs weigh more a step than in a longer run, never less
    per_turn = len(TURNS[0]["actions"])

    def grown(text: str) -> Path:
        turns = [{"text": f"{text} {n}", "actions": TURNS[0]["actions"]} for n in range(4)]
        return grow_run(sim_run(tmp_path / f"runs-{len(text)}", turns), tmp_path / f"grown-{len(text)}", steps)

    def held(path: Path, text: str) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            reader, index = _indexed(path)
            gc.collect()
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        with reader:
            assert index.count == steps
            for number in (0, steps // 2, steps - 1):  # the words read again with the step's turn
                assert index.step(number).model_text.startswith(f"{text} "), number
        return size

    short, long = grown("turn"), grown(words)
    # the readers' own first-use caches, outside the figures: a short run's reading fills them as well
    _indexed(sim_run(tmp_path / "warm", TURNS))[0].close()
    small, large = held(short, "turn"), held(long, words)
    assert small < 250 * steps, small
    assert large - small < 0.1 * len(words) * (steps // per_turn), (small, large)  # each turn 3,000 characters
