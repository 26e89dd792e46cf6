"""core/runlog: a run directory's audit log read back as the same stamped events the live run emitted,
incrementally (so a run still being written can be followed), and never failing on a damaged line."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cua_tui.build import RunOptions, build_run
from cua_tui.core import events as ev
from cua_tui.core.runlog import RunLog, event_of
from cua_tui.core.safeio import RunFolder

FIELD = (250, 182)
VERIFY = (550, 182)
TURN = {
    "text": "filling the form",
    "actions": [
        {"type": "click", "button": "left", "x": FIELD[0], "y": FIELD[1]},
        {"type": "type", "text": "cua-tui verified"},
        {"type": "click", "button": "left", "x": VERIFY[0], "y": VERIFY[1]},
    ],
}


def real_run(tmp_path: Path) -> tuple[Path, list[ev.Stamped]]:
    live: list[ev.Stamped] = []
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": [TURN], "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions="approve",
            listeners=(live.append,),
            fsync=False,
        )
    )
    run.run()
    return run.path, live


def test_a_run_read_back_is_the_stream_it_emitted(tmp_path: Path) -> None:
    path, live = real_run(tmp_path)
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        back = list(log)
    assert [s.seq for s in back] == [s.seq for s in live]
    assert [s.head for s in back] == [s.head for s in live]
    assert [s.event for s in back] == [s.event for s in live]  # memory-only fields do not compare
    lines = (path / "audit.jsonl").read_bytes().split(b"\n")[:-1]
    assert [s.head for s in back] == [hashlib.sha256(line).hexdigest() for line in lines]


def test_following_reads_only_new_complete_lines(tmp_path: Path) -> None:
    path, _live = real_run(tmp_path)
    data = (path / "audit.jsonl").read_bytes()
    lines = data.split(b"\n")[:-1]
    growing = tmp_path / "growing"
    growing.mkdir()
    target = growing / "audit.jsonl"
    target.write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:10])  # a writer in the middle of line 4
    with RunFolder.open(growing) as folder, RunLog(folder) as log:
        first = log.poll()
        assert [s.seq for s in first] == [0, 1, 2]
        assert log.poll() == []
        with target.open("ab") as fh:
            fh.write(lines[3][10:] + b"\n" + lines[4] + b"\n")
        second = log.poll()
        assert [s.seq for s in second] == [3, 4]
        assert second[0].head == hashlib.sha256(lines[3]).hexdigest()


def test_damaged_lines_become_notes_and_reading_goes_on(tmp_path: Path) -> None:
    folder_path = tmp_path / "run"
    folder_path.mkdir()
    good = b'{"seq":2,"ts":1.0,"run":"r","kind":"note","prev":"x","message":"still read"}'
    (folder_path / "audit.jsonl").write_bytes(b'{"seq": 0, bad json\n' + b"\xff\xfe not utf-8\n" + good + b"\n")
    with RunFolder.open(folder_path) as folder, RunLog(folder) as log:
        back = list(log)
    assert [s.seq for s in back] == [0, 1, 2]
    assert all(isinstance(s.event, ev.Note) for s in back)
    assert "unreadable" in back[0].event.message and "unreadable" in back[1].event.message  # type: ignore[attr-defined]
    assert back[2].event == ev.Note("still read")


def test_an_over_long_line_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    folder_path = tmp_path / "run"
    folder_path.mkdir()
    good = b'{"seq":1,"ts":1.0,"run":"r","kind":"note","prev":"x","message":"after"}'
    (folder_path / "audit.jsonl").write_bytes(b"x" * (3 << 20) + b"\n" + good + b"\n")
    with RunFolder.open(folder_path) as folder, RunLog(folder, max_line=1 << 20) as log:
        back = list(log)
    assert [type(s.event) for s in back] == [ev.Note, ev.Note]
    assert "line cap" in back[0].event.message  # type: ignore[attr-defined]
    assert back[1].event == ev.Note("after")


def test_unknown_kinds_and_foreign_fields_are_notes_not_errors() -> None:
    assert event_of({"kind": "checkpoint", "events": 256}) == ev.Note("checkpoint record")
    assert event_of({"kind": 7}) == ev.Note("? record")
    assert isinstance(event_of({"kind": "outcome", "turn": 1}), ev.Note)  # required fields missing
    outcome = event_of(
        {"kind": "outcome", "turn": 1, "index": 0, "call_id": "c", "status": "executed", "message": "OK"}
    )
    assert isinstance(outcome, ev.Outcome) and outcome.message == "OK"


def test_the_timeline_groups_a_real_run_into_its_steps(tmp_path: Path) -> None:
    from cua_tui.core import timeline

    path, live = real_run(tmp_path)
    line = timeline.build(live)
    assert [(s.turn, s.index, s.kind) for s in line.steps] == [(1, 0, "click"), (1, 1, "type"), (1, 2, "click")]
    first, typed, verify = line.steps
    assert first.verdict is not None and first.verdict.verdict == "allow"
    assert [d.by for d in first.decisions] == ["policy"] and timeline.DECISION not in first.flags
    assert typed.verdict is not None and typed.verdict.verdict == "confirm"
    assert [d.by for d in typed.decisions] == ["headless rule: approve"] and timeline.DECISION in typed.flags
    assert all(s.outcome is not None and s.outcome.status == "executed" for s in line.steps)
    assert first.observed == first.before == line.first_screen
    assert typed.before == first.after and verify.before == typed.after  # each action's before is the last after
    assert first.after != typed.after
    assert line.ended is not None and line.ended.status in ("passed", "failed")
    assert line.turns() == [0]
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        again = timeline.build(list(log))
    assert [(s.first_seq, s.last_seq, s.before, s.after) for s in again.steps] == [
        (s.first_seq, s.last_seq, s.before, s.after) for s in line.steps
    ]
