"""The fleet at any size, through a real terminal (issue 35, point 3): `cua-tui fleet --backend sim` in tmux at
80x24, 100x30 and 160x48, two runs typing, one a text of exactly 160 characters and one of 230. Read off the
terminal with capture-pane as a person reads it, each decision panel shows what its y approves: the action,
the run, and the typed text whole (160) or its first 160 characters and "70 more: enter reads all" (230).
Each is then approved with y, and each run's record says the y went to the text that was shown."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from test_tmux_demo import Tmux, cua_tui_shell

pytestmark = [pytest.mark.terminal, pytest.mark.timeout(180)]

SHOWN_CHARS = 160
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]


def words(length: int) -> str:
    text = " ".join(WORDS * 20)[:length]
    return text[:-1] + "z" if text.endswith(" ") else text


TEXTS = {"exact": words(SHOWN_CHARS), "long": "x" + words(229)}


def flat(text: str) -> str:
    return " ".join(text.split())


def panel(screen: str) -> str:
    """The decision panel's words (the lines inside its heavy border), as one line."""
    return flat(" ".join(line.strip().strip("┃") for line in screen.splitlines() if line.startswith("┃")))


def asking(screen: str) -> str | None:
    """The task whose typing the panel shows, once its whole action is on it."""
    body = panel(screen)
    for task, text in TEXTS.items():
        if f"run {task} · run " in body and f"action type {len(text)} characters" in body and "y approve" in body:
            return task
    return None


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_fleet_panel_shows_what_y_approves_at_every_size_in_tmux(tmp_path: Path, size: tuple[int, int]) -> None:
    assert TEXTS["long"][SHOWN_CHARS] != " "  # a text cut at 160 cannot pass for one cut at 161
    tasks = tmp_path / "tasks.toml"
    body = 'version = 1\nname = "sizes"\n\n'
    for task, text in TEXTS.items():
        script = tmp_path / f"{task}.json"
        turn = {"actions": [{"type": "click", "x": 250, "y": 182}, {"type": "type", "text": text}]}
        script.write_text(json.dumps({"turns": [turn], "final_text": "done"}))
        body += f'[[tasks]]\nname = "{task}"\ntask = "type the text"\nagent = "script:{script}"\n\n'
    tasks.write_text(body)
    runs = tmp_path / "runs"
    command = cua_tui_shell(tmp_path, "fleet", "--tasks", str(tasks), "--backend", "sim", "--runs-dir", str(runs))
    tmux = Tmux(command, width=size[0], height=size[1])
    narrow = size[0] < 100
    answered: list[str] = []
    try:
        for _ in TEXTS:
            screen = tmux.wait_for(
                lambda s: asking(s) not in (None, *answered) and (not narrow or "not shown at this size" in s),
                "the next typing decision",
                60,
            )
            asked = asking(screen)
            assert asked is not None
            task = asked
            text, shown = TEXTS[task], panel(screen)
            assert flat(text[:SHOWN_CHARS]) in shown, screen
            if len(text) > SHOWN_CHARS:
                assert flat(text[: SHOWN_CHARS + 1]) not in shown, screen
                assert f"{len(text) - SHOWN_CHARS} more: enter reads all" in shown, screen
            else:
                assert "more:" not in shown, screen
            assert ("screen not shown at this size" in shown) is narrow, screen
            tmux.answer("y")  # once the panel has been on screen for its input guard
            answered.append(task)

            def left(s: str, task: str = task) -> bool:
                return asking(s) != task

            tmux.wait_for(left, f"{task}'s decision to leave the panel", 20)
        tmux.wait_for(lambda s: "Every run ended." in s, "every run to end", 60)
        tmux.keys("q")
        tmux.wait_for(lambda s: "EXIT=" in s, "the fleet command to exit", 60)
    finally:
        tmux.close()

    (manifest,) = json.loads((runs / "fleet.json").read_text())["fleets"].values()
    for entry in manifest["runs"]:
        log = records(runs / entry["run_id"])
        (decision,) = [r for r in log if r["kind"] == "decision" and r["by"] != "policy"]
        assert (decision["decision"], decision["by"]) == ("approve", "human (TUI)"), decision
        # what the y approved is the text its panel showed: the SHA-256 the proposal recorded
        (proposal,) = [r for r in log if r["kind"] == "proposal" and r["index"] == decision["index"]]
        assert proposal["action"]["text_sha256"] == hashlib.sha256(TEXTS[entry["task"]].encode()).hexdigest()
        # no screen was shown where the terminal had no room for it, and the record says so
        assert (decision["screen"] == "") is narrow, decision
