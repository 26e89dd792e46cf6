"""core/threads.GiveWay: background work waits while the thread a person watches holds it, goes on when it
lets go or when the hold lapses; a paced read of a log (a replay's background verification) waits between
its blocks, and reads smaller blocks."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cua_tui.core import safeio
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.safeio import RunFolder
from cua_tui.core.threads import GiveWay, give_way, paced


def _in_thread(work: GiveWay, done: threading.Event) -> threading.Thread:
    def wait() -> None:
        work.wait()
        done.set()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_a_hold_keeps_the_work_waiting_until_it_is_let_go() -> None:
    way, done = GiveWay(lapse=30.0), threading.Event()
    way.wait()  # nothing holds it: at once
    way.hold()
    assert way.held
    thread = _in_thread(way, done)
    assert not done.wait(0.3)  # held
    way.go()
    assert done.wait(5) and not way.held and way.waits == 1
    thread.join(5)


def test_a_hold_let_go_later_lets_the_work_go_then() -> None:
    """A step's frame painted lets the work go a moment later (its output still being written)."""
    way, done = GiveWay(lapse=30.0), threading.Event()
    way.hold()
    went: list[float] = []

    def work() -> None:
        way.wait()
        went.append(time.monotonic())
        done.set()

    threading.Thread(target=work, daemon=True).start()
    started = time.monotonic()
    way.go(after=0.3)
    # when the work went, as its thread saw it (a loaded machine may pause this one past the 0.3 s)
    assert done.wait(5) and 0.25 <= went[0] - started < 5 and not way.held


def test_a_hold_lapses_when_nothing_lets_it_go() -> None:
    way, done = GiveWay(lapse=0.3), threading.Event()
    way.hold()
    started = time.monotonic()
    _in_thread(way, done).join(5)
    assert done.is_set() and time.monotonic() - started >= 0.25 and not way.held


def test_only_work_inside_paced_gives_way() -> None:
    way = GiveWay(lapse=30.0)
    way.hold()
    assert give_way() is False  # not paced: never waits
    seen: list[bool] = []

    def paced_work() -> None:
        with paced(way):
            seen.append(give_way())  # waits until let go
        seen.append(give_way())  # outside again

    thread = threading.Thread(target=paced_work, daemon=True)
    thread.start()
    time.sleep(0.2)
    assert seen == []
    way.go()
    thread.join(5)
    assert seen == [True, False]


def test_a_paced_verification_reads_small_blocks_and_waits_while_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verifier's pass over a log, paced: no block is read while the way is held, each block is a paced
    one's, and the verdict is the one an unpaced pass gives."""
    from export_runs import TURNS, sim_run

    from bench.replay import grow_run

    source = sim_run(tmp_path / "runs", [{"text": f"turn {n}", "actions": TURNS[0]["actions"]} for n in range(4)])
    run = grow_run(source, tmp_path / "grown", 1500)
    assert (run / "audit.jsonl").stat().st_size > 4 * safeio._PACED_BLOCK
    sizes: list[int] = []
    real = safeio._pread

    def spy(fd: int, name: str, offset: int, size: int = safeio._BLOCK) -> bytes:
        sizes.append(size)
        return real(fd, name, offset, size)

    monkeypatch.setattr(safeio, "_pread", spy)
    plain = verify_run(run)
    assert plain.code == VerifyExit.INTACT and set(sizes) == {safeio._BLOCK}
    sizes.clear()
    way = GiveWay(lapse=30.0)
    way.hold()
    verdicts = []

    def verify() -> None:
        with paced(way):
            verdicts.append(verify_run(run))

    thread = threading.Thread(target=verify, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert sizes == [] and verdicts == []  # held before its first block
    way.go()
    thread.join(30)
    assert [v.head for v in verdicts] == [plain.head] and verdicts[0].code == VerifyExit.INTACT
    assert len(sizes) > 4 and set(sizes) == {safeio._PACED_BLOCK}
    with RunFolder.open(run) as folder, folder.lines("audit.jsonl") as reader:
        assert sum(len(lines) for lines, _marks in reader.blocks()) == plain.events  # the same lines, unpaced
