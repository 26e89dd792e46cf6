"""Take over the form lab from a terminal (issue 24, point 6): the demo on the real local desktop (Xvfb and
Chromium) in tmux. At the typing decision ``T`` takes the desktop; an SGR mouse sequence sent to the pane
clicks the phrase field through the desktop pane; passthrough sends the phrase typed as keys to the tmux
pane, ctrl+] leaves it; another SGR click on the pane presses Verify; ``T`` hands back. The lab passes on
its server's evidence, with the person's actions in the audit log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_tmux_demo import Tmux, decision, demo_command

from cua_tui.core.actions import text_sha256
from cua_tui.desktops.sim import PHRASE

pytestmark = [pytest.mark.e2e, pytest.mark.terminal, pytest.mark.timeout(240)]

SCREEN = (1024, 720)
FIELD = (280, 240)  # the form lab's phrase field (its script clicks there)
VERIFY = (120, 320)  # and its Verify button


def picture(screen: str) -> tuple[int, int, int, int]:
    """The desktop picture's place on the terminal: first column and row, width and height in cells."""
    lines = screen.splitlines()
    rows = [i for i, line in enumerate(lines) if "▀▀▀▀▀▀▀▀▀▀" in line]
    top = rows[0]
    run = max(re.finditer("▀+", lines[top]), key=lambda m: len(m.group()))
    return run.start(), top, len(run.group()), len(rows)


def cell_of(place: tuple[int, int, int, int], point: tuple[int, int]) -> tuple[int, int]:
    """The terminal cell (1-based, as SGR mouse reports count) whose pixel is ``point``, in the whole view."""
    left, top, width, height = place
    col = int(point[0] * width / SCREEN[0])
    row = int(point[1] * height * 2 / SCREEN[1]) // 2
    return left + col + 1, top + row + 1


def click(tmux: Tmux, cell: tuple[int, int]) -> None:
    """A left click at ``cell`` as the terminal reports it (SGR 1006): a press, then a release."""
    col, row = cell
    tmux.keys("-l", f"\x1b[<0;{col};{row}M")
    tmux.keys("-l", f"\x1b[<0;{col};{row}m")


def test_the_form_lab_is_taken_over_typed_by_the_person_and_handed_back(tmp_path: Path) -> None:
    tmux = Tmux(demo_command(tmp_path, "--lab", "form"), width=160, height=48)
    try:
        tmux.wait_for(lambda s: decision(s) == (1, 2) and "AWAITING YOUR DECISION" in s, "the typing decision", 90)
        tmux.keys("T")
        screen = tmux.wait_for(lambda s: "YOU HAVE THE DESKTOP" in s, "the desktop taken over", 30)
        place = picture(screen)
        assert place[2] > 60 and place[3] > 20, screen
        click(tmux, cell_of(place, FIELD))
        tmux.keys("p")
        tmux.wait_for(lambda s: "PASSTHROUGH" in s, "passthrough", 10)
        tmux.keys("-l", PHRASE)
        tmux.keys("C-]")
        tmux.wait_for(lambda s: "PASSTHROUGH" not in s, "passthrough left", 10)
        click(tmux, cell_of(place, VERIFY))
        # the person's actions run in order, each followed by its screen, before the hand-back
        tmux.wait_for(lambda s: "Verified" in s or "verified" in s.lower(), "the page after Verify", 60)
        tmux.keys("T")
        screen = tmux.wait_for(lambda s: "status: passed" in s, "the run to pass after the hand-back", 90)
        tmux.keys("q")
        screen = tmux.wait_for(lambda s: "EXIT=" in s, "the demo to exit", 30)
        assert "EXIT=0" in screen, screen
    finally:
        tmux.close()
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "audit.jsonl").is_file()]
    audit = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
    theirs = [r for r in audit if r["kind"] == "proposal" and r.get("by") == "human (takeover)"]
    kinds = [r["action"]["kind"] for r in theirs]
    # the phrase typed in passthrough is one typing stretch: one action (issue 34, point 7)
    assert kinds == ["click", "type", "click"], kinds
    typed = [r for r in audit if r["kind"] == "typed" and r["index"] == theirs[1]["index"]]
    stretch = typed[-1] if typed else theirs[1]["action"]
    assert (stretch["text_len"], stretch["text_sha256"]) == (len(PHRASE), text_sha256(PHRASE))
    for record, point in ((theirs[0], FIELD), (theirs[-1], VERIFY)):
        # the whole-screen view at 160x48: within half a cell (6 px across, 11 down) of the point aimed at
        assert abs(record["action"]["x"] - point[0]) <= 6 and abs(record["action"]["y"] - point[1]) <= 11
    decided = [r for r in audit if r["kind"] == "decision" and r["by"] == "human (takeover)"]
    assert len(decided) == len(theirs) and all(r["operator"] for r in decided)
    # typed text as its length only in the proposal, and once as length and SHA-256 when the stretch
    # ended: no hash of any part of it (the phrase itself is on the page, and in the model's words)
    assert all(set(r["action"]) == {"kind", "text_len"} for r in theirs[1:-1])
    log = (run_dir / "audit.jsonl").read_text()
    assert not [n for n in range(1, len(PHRASE)) if text_sha256(PHRASE[:n]) in log]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "passed" and result["verified"] is True
