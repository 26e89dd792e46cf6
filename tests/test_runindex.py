"""core/runindex: a run read back by offsets tells exactly what the whole log read at once tells.

Every step rebuilt from its turn's lines equals the step ``timeline.build`` makes from all the events; the
RunView at any line, folded from a checkpoint, equals the fold of every event before it; lines read again
by offset are the lines read the first time. Runs are real (the one builder on the sim desktop), one of
them grown to thousands of steps by the replay benchmark's own grower; the damaged ones are the shared
hostile corpus.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from export_runs import TURNS, sim_run
from hostile_runs import CASES, DAMAGED, Case, pristine_run

from cua_tui.bench.replay import grow_run
from cua_tui.core import events as ev
from cua_tui.core import runindex
from cua_tui.core import timeline as tl
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.run_view import RunView
from cua_tui.core.runindex import RunIndex
from cua_tui.core.runlog import RunLog, RunReader
from cua_tui.core.safeio import RunFolder


def _whole(path: Path) -> tuple[list, tl.Timeline]:
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        events = log.poll()
    return events, tl.build(events)


def _indexed(path: Path) -> tuple[RunReader, RunIndex]:
    reader = RunReader(path)
    index = RunIndex(reader.log)
    while index.advance():
        pass
    return reader, index


def _state(view: RunView) -> tuple:
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


def test_a_real_run_indexed_in_small_blocks_tells_the_same_story(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runindex, "CHECKPOINT_EVERY", 5)
    monkeypatch.setattr(runindex, "ADVANCE_BYTES", 700)  # a block ends in the middle of a line, often
    path = sim_run(tmp_path / "runs", TURNS * 3)
    events, _whole_line = _whole(path)
    _same_story(path, list(range(len(events) + 1)))


def test_a_grown_run_of_thousands_of_steps_tells_the_same_story(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(runindex, "TURNS_KEPT", 2)  # turns are forgotten and rebuilt, again and again
    source = sim_run(tmp_path / "runs", [{"text": f"turn {n}", "actions": TURNS[0]["actions"]} for n in range(4)])
    grown = grow_run(source, tmp_path / "grown", 3000)
    assert verify_run(grown).code == VerifyExit.INTACT
    index = _same_story(grown)
    assert index.count == 3000


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
