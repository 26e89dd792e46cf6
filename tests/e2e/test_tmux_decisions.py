"""The richer decisions through the real binary in a real terminal (issue 11): tmux drives `cua-tui run`.

- a resize from 160x48 to 80x24 and back at a decision: the pending row and AWAITING YOUR DECISION stay
  visible and the picture is redrawn for the new pane size (the half-block rows change width);
- ``a`` approves a scope: a second matching action is approved without asking, a non-matching one asked;
- ``n`` with a reason: the reason reaches the model's next request (the real OpenAI SDK in the binary,
  talking to the scripted model server on 127.0.0.1);
- a double tap of ``y`` approves only the decision it was meant for: the next one, painted a moment before
  the second ``y``, ignores it and says so (issue 22, point 2).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from model_server import OPENAI_PATH, ModelServer, computer_call, message, openai_response
from test_tmux_demo import Tmux, cua_tui_shell, decision

pytestmark = [pytest.mark.terminal, pytest.mark.timeout(180)]

FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}
OTHER = {"type": "click", "button": "left", "x": 250, "y": 400}


def run_command(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    runs = str(tmp_path / "runs")
    return cua_tui_shell(
        tmp_path, "run", "--backend", "sim", "--runs-dir", runs, "--operator", "alice@desk-7", *args, env=env
    )


def script(tmp_path: Path, turns: list[dict[str, Any]]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"turns": turns, "final_text": "done"}))
    return path


def audit(tmp_path: Path) -> list[dict[str, Any]]:
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "audit.jsonl").is_file()]
    return [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]


def picture_width(screen: str) -> int:
    """The widest run of half-block cells on a line: the desktop picture's width in cells."""
    return max((len(m) for m in re.findall("▀+", screen)), default=0)


def awaiting(screen: str) -> bool:
    return bool(decision(screen)) and "AWAITING YOUR DECISION" in screen


def test_a_resize_at_a_decision_keeps_it_in_view_and_redraws_the_picture(tmp_path: Path) -> None:
    turns = [{"actions": [FIELD, {"type": "type", "text": "typed"}, OTHER, OTHER, OTHER]}]
    tmux = Tmux(run_command(tmp_path, "--agent", f"script:{script(tmp_path, turns)}"), width=160, height=48)
    try:
        # the picture is drawn in a worker, a moment after the decision's panel on a loaded machine
        screen = tmux.wait_for(
            lambda s: awaiting(s) and picture_width(s) > 60, "the decision and its picture at 160x48"
        )
        wide = picture_width(screen)
        tmux.tmux("resize-window", "-t", tmux.session, "-x", "80", "-y", "24")
        # Each pane redraws for the new size on its own (the picture in a worker): wait for all of them.
        screen = tmux.wait_for(
            lambda s: len(s.splitlines()) <= 24 and 0 < picture_width(s) < wide and awaiting(s) and "▶" in s,
            "the picture redrawn narrower at 80x24, the decision and the pending row's marker in view",
            15,
        )
        assert all(len(line) <= 80 for line in screen.splitlines())
        narrow = picture_width(screen)
        tmux.tmux("resize-window", "-t", tmux.session, "-x", "160", "-y", "48")
        screen = tmux.wait_for(
            lambda s: picture_width(s) > narrow and awaiting(s) and "▶" in s,
            "the picture redrawn wide again, the pending row's marker in view",
            15,
        )
        assert abs(picture_width(screen) - wide) <= 1
        tmux.answer("y")
        tmux.wait_for(lambda s: "status: " in s, "the end of the run", 30)
        tmux.keys("q")
        tmux.wait_for(lambda s: "EXIT=" in s, "the exit", 30)
    finally:
        tmux.close()


def test_a_grants_a_scope_a_matching_action_is_not_asked_a_different_one_is(tmp_path: Path) -> None:
    turns = [
        {"actions": [FIELD, {"type": "type", "text": "first"}]},
        {"actions": [FIELD, {"type": "type", "text": "second"}]},
        {"actions": [OTHER, {"type": "type", "text": "third"}]},
    ]
    tmux = Tmux(run_command(tmp_path, "--agent", f"script:{script(tmp_path, turns)}"), width=160, height=48)
    try:
        screen = tmux.wait_for(awaiting, "the first typing decision")
        assert decision(screen) == (1, 2)
        assert "a approve this and all typing into the field clicked at" in screen  # the scope, shown first
        tmux.answer("a")
        screen = tmux.wait_for(lambda s: awaiting(s) and decision(s) != (1, 2), "the next decision")
        assert decision(screen) == (3, 2), "the matching typing of turn 2 was asked again"
        tmux.answer("y")
        tmux.wait_for(lambda s: "status: " in s, "the end of the run", 30)
        tmux.keys("q")
        tmux.wait_for(lambda s: "EXIT=" in s, "the exit", 30)
    finally:
        tmux.close()
    records = audit(tmp_path)
    grants = [r for r in records if r["kind"] == "grant"]
    assert len(grants) == 1 and grants[0]["by"] == "alice@desk-7"
    typed = [(r["turn"], r["by"]) for r in records if r["kind"] == "decision" and r["index"] == 1]
    assert typed == [(1, "human (TUI)"), (2, "grant #1 (given by alice@desk-7)"), (3, "human (TUI)")]


def test_a_reason_given_with_n_reaches_the_models_next_request(tmp_path: Path) -> None:
    with ModelServer() as server:
        server.script(
            OPENAI_PATH,
            openai_response(computer_call("call_1", FIELD, {"type": "type", "text": "secret words"})),
            openai_response(message("understood")),
        )
        command = run_command(
            tmp_path,
            "--agent",
            "openai",
            "--model",
            "gpt-5.6-sol",
            "--base-url",
            server.openai_base_url,
            "--task",
            "fill the form",
            env={"OPENAI_API_KEY": "sk-test-not-a-real-key"},
        )
        tmux = Tmux(command, width=160, height=48)
        try:
            screen = tmux.wait_for(awaiting, "the typing decision")
            assert decision(screen) == (1, 2) and "secret words" in screen
            tmux.answer("n")
            tmux.wait_for(lambda s: "a reason for the model" in s, "the reason box", 10)  # its own words
            tmux.keys("-l", "use the search box instead")
            tmux.keys("Enter")
            tmux.wait_for(lambda s: "status: " in s, "the end of the run", 30)
            tmux.keys("q")
            tmux.wait_for(lambda s: "EXIT=" in s, "the exit", 30)
        finally:
            tmux.close()
        bodies = server.bodies(OPENAI_PATH)
    assert len(bodies) == 2
    said = json.dumps(bodies[1]["input"])
    assert "Declined by the user. Do not retry this action." in said
    assert "The reviewer said: use the search box instead" in said
    decisions = [r for r in audit(tmp_path) if r["kind"] == "decision" and r["by"] != "policy"]
    assert decisions[0]["decision"] == "reject" and decisions[0]["note"] == "use the search box instead"
    assert decisions[0]["operator"] == "alice@desk-7"


@pytest.mark.alone
def test_a_double_tap_of_y_approves_only_the_first_decision(tmp_path: Path) -> None:
    turns = [{"actions": [FIELD, {"type": "type", "text": "first"}, {"type": "type", "text": "second"}]}]
    tmux = Tmux(run_command(tmp_path, "--agent", f"script:{script(tmp_path, turns)}"), width=160, height=48)
    try:
        screen = tmux.wait_for(awaiting, "the first typing decision")
        assert decision(screen) == (1, 2) and "first" in screen
        tmux.answer("y")
        # the second tap lands as the next decision appears (the sim types at once): sent as soon as it is
        # seen, well inside its 1 s input guard however long the first step took on a busy machine
        tmux.wait_for(lambda s: awaiting(s) and decision(s) == (1, 3), "the second decision", 15, poll=0.02)
        tmux.keys("y")
        # ignored within its guard, or held while its screenshot is still on its way to the pane
        screen = tmux.wait_for(
            lambda s: (
                awaiting(s)
                and decision(s) == (1, 3)
                and ("y ignored: this decision appeared" in s or "y held: this decision's" in s)
            ),
            "the second decision, the second y ignored and said so",
            15,
        )
        assert "after 1.0 s" in screen or "1.0 s after it is" in screen, screen  # the toast wraps its line
        tmux.answer("n")
        tmux.wait_for(lambda s: "a reason for the model" in s, "the reason box", 10)
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "status: " in s, "the end of the run", 30)
        tmux.keys("q")
        tmux.wait_for(lambda s: "EXIT=" in s, "the exit", 30)
    finally:
        tmux.close()
    records = audit(tmp_path)
    decided = [(r["index"], r["decision"]) for r in records if r["kind"] == "decision" and r["by"] == "human (TUI)"]
    assert decided == [(1, "approve"), (2, "reject")]  # the second y approved nothing
    asked = [r["index"] for r in records if r["kind"] == "decision_requested"]
    assert asked == [1, 2]


def test_a_run_whose_terminal_goes_away_at_a_decision_is_sealed_and_the_process_leaves(tmp_path: Path) -> None:
    """The terminal goes (its tmux session killed) while a lone run waits for a decision: the run is killed
    by SIGHUP and sealed, and the process leaves, even where Textual's shutdown blocks on its output to the
    vanished terminal (seen with the demos: such a process stayed for hours)."""
    turns = [{"actions": [FIELD, {"type": "type", "text": "typed"}]}]
    command = run_command(tmp_path, "--agent", f"script:{script(tmp_path, turns)}")
    # the run as the pane's own process: no shell around it
    tmux = Tmux(command.removesuffix("; echo EXIT=$?; sleep 30"), width=160, height=48)
    try:
        tmux.wait_for(awaiting, "the decision")
        (pid,) = [int(p) for p in tmux.tmux("list-panes", "-F", "#{pane_pid}").split()]
    finally:
        tmux.close()
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists(), "the run's TUI stayed after its terminal went away"
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if (p / "audit.jsonl").is_file()]
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["status"], result["reason"]) == ("killed", "killed by signal SIGHUP"), result
