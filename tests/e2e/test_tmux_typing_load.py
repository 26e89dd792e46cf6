"""What a fast typist types under load is what is approved (issue 34, point 4): the real binary in tmux on
contended CPUs (the whole suite's other workers where they keep every CPU busy, else two busy Python
processes at nice 0 beside it), and bursts of keys sent as a terminal sends them. Each burst, once ``e``
has opened the editor, erases the proposed text with BackSpaces, types a new one and presses Enter, all at
once; another set rejects with a reason typed the same way (the keys typed right after ``e`` itself are
tests/tui/test_editor.py's). Every approved text (its SHA-256 in the audit log) and every reason must
equal what was typed.

Textual runs a bound key (BackSpace, Enter) only once it has bubbled up to the App, while a letter goes in
at once: under load the BackSpaces ran after the phrase and ate its end (tui/literal.py says how it is
kept in order now)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from test_tmux_decisions import audit, awaiting, run_command, script
from test_tmux_demo import Tmux, decision

from cua_tui.core.actions import text_sha256

# long: started first in its part, while the part still keeps the CPUs busy
pytestmark = [pytest.mark.terminal, pytest.mark.long, pytest.mark.timeout(420)]

FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}
EDITS = 30
REASONS = 10
PROPOSED = "proposed text 0123"
GUARD_S = 0.5  # 18 characters: 19 BackSpaces erase it


BUSY = 0.8  # of every CPU's time, over a second: the machine is contended already


def cpu_busy(seconds: float = 1.0) -> float:
    """The share of all the CPUs' time spent busy (not idle, not waiting on I/O) over ``seconds``."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as stat:
            ticks = [int(v) for v in stat.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


@pytest.fixture
def busy() -> Iterator[None]:
    """Contended CPUs for the test's length: the suite's other workers where they already keep the CPUs
    busy (the whole suite runs this test in its first part, on four workers beside the desktops' three),
    else two Python processes spinning at nice 0."""
    share = cpu_busy()
    spin = "import time\nend = time.monotonic() + 400\nwhile time.monotonic() < end: pass"
    procs = [] if share >= BUSY else [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
    print(
        f"CPUs {share:.0%} busy before the test: {'the other tests are' if not procs else 'two spinners are'} the load"
    )
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)


def open_with(tmux: Tmux, key: str, shown: str) -> None:
    """Press ``key`` once the decision has been seen for its guard, again should the guard (which starts
    when the decision's screenshot is painted, a moment after its panel on a loaded machine) ignore it,
    until ``shown`` is on screen."""
    for _ in range(20):
        time.sleep(max(0.0, tmux.seen_at + GUARD_S + 0.1 - time.monotonic()))
        tmux.keys(key)
        try:
            tmux.wait_for(lambda s: shown in s, shown, 2, poll=0.05)
            return
        except AssertionError:
            continue
    raise AssertionError(f"{key} never opened {shown!r}")


def asked(which: tuple[int, int], screen: str) -> bool:
    return awaiting(screen) and decision(screen) == which


def typed_text(n: int) -> str:
    # letters that are our keys elsewhere (y, n, k, a, e, t) among them: here they are the text's
    return f"cua-tui verified {n:02d} yank"


def reason_text(n: int) -> str:
    return f"not now {n:02d}: ask the analyst"


def test_bursts_of_backspaces_and_text_then_enter_are_approved_as_typed(tmp_path: Path, busy: None) -> None:
    turns: list[dict[str, Any]] = [{"actions": [FIELD, {"type": "type", "text": PROPOSED}]}]
    turns += [{"actions": [{"type": "type", "text": PROPOSED}]} for _ in range(EDITS + REASONS - 1)]
    # the shortest input guard the settings allow (0.5 s): the bursts, not the guard, are what is tested
    config = tmp_path / "settings.toml"
    config.write_text(f"decision_guard_s = {GUARD_S}\n")
    agent = f"script:{script(tmp_path, turns)}"
    command = run_command(tmp_path, "--max-turns", "50", "--agent", agent, env={"CUA_TUI_CONFIG": str(config)})
    tmux = Tmux(command, width=160, height=48)
    try:
        for n in range(EDITS + REASONS):
            turn = n + 1
            index = 2 if n == 0 else 1
            tmux.wait_for(partial(asked, (turn, index)), f"decision {turn}", 60)
            if n < EDITS:
                # e once its guard has passed (a key before is ignored, and said), then the burst at once
                open_with(tmux, "e", f"EDIT · turn {turn}")
                # a few more than there are characters: an e pressed again as the editor opened is a letter
                tmux.keys(*["BSpace"] * (len(PROPOSED) + 4))
                tmux.keys("-l", typed_text(n))
                tmux.keys("Enter")
            else:
                open_with(tmux, "n", "Reject · a reason")
                tmux.keys("-l", "wrong words")
                tmux.keys(*["BSpace"] * (len("wrong words") + 3))
                tmux.keys("-l", reason_text(n))
                tmux.keys("Enter")
        tmux.wait_for(lambda s: "status: " in s, "the end of the run", 60)
        tmux.keys("q")
        tmux.wait_for(lambda s: "EXIT=" in s, "the exit", 30)
    finally:
        tmux.close()
    records = audit(tmp_path)
    made = [r for r in records if r["kind"] == "decision" and r["by"] == "human (TUI)"]
    assert len(made) == EDITS + REASONS, json.dumps(made)[:2000]
    for n, record in enumerate(made):
        if n < EDITS:
            assert record["decision"] == "approve", record
            ran = record["edited"]["ran"]
            assert (ran["text_len"], ran["text_sha256"]) == (len(typed_text(n)), text_sha256(typed_text(n))), (
                f"burst {n}: approved {ran['text_len']} characters, typed {len(typed_text(n))}"
            )
        else:
            assert record["decision"] == "reject" and record["note"] == reason_text(n), record
    assert not [r for r in records if r["kind"] == "killed"]
