"""The human's hand at a glance in every review (issue 35, point 1): the HTML report's timeline (read back
with html.parser from the file ``export --html`` wrote), replay's step panel and the ATIF trajectory say
what ran, that a reviewer changed it and what the model proposed; a takeover is one marked stretch; a
decision made with one key for a fleet group, by a deadline or on a soft budget says so. Real runs
(tests/hand_runs.py)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from atif_schema import Trajectory
from click.testing import CliRunner
from hand_runs import (
    CORRECTED,
    OPERATOR,
    PHRASE,
    PROPOSED,
    budget_and_deadline_run,
    edited_run,
    grouped_runs,
    taken_over_run,
)

from cua_tui.cli import main
from cua_tui.core import describe
from cua_tui.core.hand import hand
from cua_tui.core.timeline import Step
from cua_tui.export import animation, open_run


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Cell:
    text: str = ""
    classes: set[str] = field(default_factory=set)  # of every element inside it

    @property
    def hows(self) -> set[str]:
        """How its decisions were made, as marked (``how-group``, ...)."""
        return {name.removeprefix("how-") for name in self.classes if name.startswith("how-")}


@dataclass
class Row:
    classes: set[str]
    cells: list[Cell] = field(default_factory=list)

    def cell(self, name: str) -> Cell:
        """A cell by its column's heading."""
        return self.cells[COLUMNS.index(name)]


@dataclass
class Body:
    """A ``<tbody>`` of the timeline: the model's rows, or one takeover's (its heading row first)."""

    attrs: dict[str, str]
    rows: list[Row] = field(default_factory=list)


COLUMNS = ["step", "turn", "action (what ran)", "verdict", "decided", "outcome", ""]


class Report(HTMLParser):
    """The timeline table of an exported report, and each step's title (its ``<h3>``), as a reader sees
    them: text and the classes that mark it."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.bodies: list[Body] = []
        self.headings: list[str] = []
        self.titles: dict[int, Cell] = {}  # step number -> its title
        self._table = self._head = False
        self._cell: Cell | None = None
        self._section = 0
        self._title: Cell | None = None
        self.feed(document)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {k: v or "" for k, v in attrs}
        classes = set(named.get("class", "").split())
        if tag == "table" and "timeline" in classes:
            self._table = True
        elif self._table and tag == "thead":
            self._head = True
        elif self._table and tag == "tbody":
            self.bodies.append(Body(named))
        elif self._table and tag == "tr" and not self._head:
            self.bodies[-1].rows.append(Row(classes))
        elif self._table and tag in ("td", "th") and not self._head:
            self._cell = Cell()
            self.bodies[-1].rows[-1].cells.append(self._cell)
        elif tag == "section" and named.get("id", "").startswith("step-"):
            self._section = int(named["id"].removeprefix("step-"))
        elif tag == "h3" and self._section and self._section not in self.titles:
            self._title = self.titles[self._section] = Cell()
        for cell in (self._cell, self._title):
            if cell is not None:
                cell.classes |= classes

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = False
        elif tag == "thead":
            self._head = False
        elif tag in ("td", "th"):
            self._cell = None
        elif tag == "h3":
            self._title = None
        elif tag == "section":
            self._section = 0

    def handle_data(self, data: str) -> None:
        if self._table and self._head:
            self.headings.append(data)
        for cell in (self._cell, self._title):
            if cell is not None:
                cell.text += data

    def rows(self) -> list[Row]:
        return [row for body in self.bodies for row in body.rows if "stretch" not in row.classes]

    def step(self, number: int) -> Row:
        (row,) = [r for r in self.rows() if r.cells[0].text == str(number)]
        return row


def exported(run: Path, tmp_path: Path) -> tuple[str, Report]:
    """``cua-tui export RUN --html`` (exit 0), the file as written and its timeline."""
    out = tmp_path / f"{run.name}.html"
    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(run.parent)}
    result = CliRunner().invoke(main, ["export", str(run), "--html", str(out)], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    document = out.read_text(encoding="utf-8")
    report = Report(document)
    assert report.headings == COLUMNS[:-1]
    return document, report


def atif_of(run: Path, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{run.name}.json"
    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(run.parent)}
    result = CliRunner().invoke(main, ["export", str(run), "--atif", str(out)], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(out.read_bytes())
    Trajectory.model_validate(data)
    return data


def steps(run: Path) -> list[Step]:
    with open_run(run) as opened:
        return opened.timeline.steps


def panel(step: Step, total: int) -> str:
    """Replay's step panel as its text."""
    return "".join(text for text, _role in describe.step_panel(step, total))


def cua(obj: dict[str, Any]) -> Any:
    return obj["extra"]["cua_tui"]


def calls(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [call for step in data["steps"] for call in step.get("tool_calls", [])]


# --------------------------------------------------------------------------------------------------
# An edited step: what ran, marked edited, the proposal beside it
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def edited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return edited_run(tmp_path_factory.mktemp("edited"))


def test_an_edited_row_and_title_show_what_ran_marked_edited_with_the_proposal_beside_it(
    edited: Path, tmp_path: Path
) -> None:
    document, report = exported(edited, tmp_path)
    assert PROPOSED not in document and CORRECTED not in document  # typed text: length and hash only
    typing = report.step(2)
    action = typing.cell("action (what ran)")
    ran = f"type {len(CORRECTED)} characters (sha256 {sha(CORRECTED)[:16]}…"
    proposed = f"proposed: type {len(PROPOSED)} characters (sha256 {sha(PROPOSED)[:16]}…"
    assert action.text.startswith(ran) and "edited" in action.classes and "edited" in typing.classes
    assert action.text.index(ran) < action.text.index("edited") < action.text.index(proposed)
    assert typing.cell("decided").hows == {"person"} and f"approved by {OPERATOR}" in typing.cell("decided").text
    title = report.titles[2]
    assert title.text.startswith(f"Step 2 · turn 1 · action 2 — {ran}") and proposed in title.text
    assert "edited" in title.classes
    # the steps nobody changed say nothing of an edit
    for number in (1, 3):
        row = report.step(number)
        assert "edited" not in row.cell("action (what ran)").classes and "proposed" not in row.cells[2].text
    # the detail: the full hashes of both, what ran first
    assert document.index(f"SHA-256 <code>{sha(CORRECTED)}</code>") < document.index(sha(PROPOSED))


def test_replay_and_atif_say_the_same_of_an_edited_step(edited: Path, tmp_path: Path) -> None:
    clicked, typing, verify = steps(edited)
    said = panel(typing, 3)
    action = f"action   type {len(CORRECTED)} characters (sha256 {sha(CORRECTED)[:16]}…"
    assert said.index(action) < said.index(f"EDITED by {OPERATOR} before it ran\nproposed type {len(PROPOSED)}")
    assert f"proposed type {len(PROPOSED)} characters (sha256 {sha(PROPOSED)[:16]}…" in said
    assert "EDITED" not in panel(clicked, 3) and "EDITED" not in panel(verify, 3)
    data = atif_of(edited, tmp_path)
    assert PROPOSED not in json.dumps(data) and CORRECTED not in json.dumps(data)
    call = calls(data)[1]
    # the call's arguments stay the model's (a trajectory is what the agent did); what ran is beside them
    assert call["arguments"] == {"kind": "type", "text_len": len(PROPOSED), "text_sha256": sha(PROPOSED)}
    facts = cua(call)
    assert facts["summary"] == f"type {len(PROPOSED)} characters"
    assert facts["edited"] == {
        "by": OPERATOR,
        "ran": {"kind": "type", "text_len": len(CORRECTED), "text_sha256": sha(CORRECTED)},
        "ran_summary": f"type {len(CORRECTED)} characters",
    }
    assert [d["how"] for d in facts["decisions"]] == ["person"]
    assert "edited" not in cua(calls(data)[0]) and "edited" not in cua(calls(data)[2])


# --------------------------------------------------------------------------------------------------
# A takeover: one marked stretch
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return taken_over_run(tmp_path_factory.mktemp("taken"))


def test_a_takeover_is_one_marked_stretch_of_the_timeline(taken: Path, tmp_path: Path) -> None:
    document, report = exported(taken, tmp_path)
    assert PHRASE not in document
    stretches = [body for body in report.bodies if "takeover" in body.attrs.get("class", "").split()]
    (stretch,) = stretches  # one, holding every action of the reviewer's and nothing else
    assert stretch.attrs["id"] == "takeover-1"
    head, *theirs = stretch.rows
    assert "stretch" in head.classes and head.cells[0].text.startswith(f"Takeover #1 · {OPERATOR} had the desktop")
    assert "2 action(s), the reviewer's own, not the model's" in head.cells[0].text
    # the typing stretch is one row: its whole length and the whole text's hash, then the click
    assert [row.cell("action (what ran)").text for row in theirs] == [
        f"type {len(PHRASE)} characters (sha256 {sha(PHRASE)[:16]}…, never stored)",
        "click at (550, 182)",
    ]
    assert all(row.cell("decided").text == f"takeover done by {OPERATOR} at the desktop" for row in theirs)
    outside = [row for body in report.bodies if body is not stretch for row in body.rows]
    assert not any("takeover" in row.cells[-1].text for row in outside)  # no reviewer's row outside it
    # the model's typing it stopped says how it was decided, in its own row before the stretch
    stopped = report.step(2)
    assert stopped in outside and stopped.cell("decided").hows == {"takeover"}
    assert stopped.cell("decided").text == f"takeover not run: {OPERATOR} took the desktop instead"


def test_replay_and_atif_mark_the_takeover(taken: Path, tmp_path: Path) -> None:
    line = steps(taken)
    theirs = [step for step in line if hand(step).takeover]
    assert [step.number for step in theirs] == [2, 3]
    for step in theirs:
        assert "· takeover #1, the reviewer's own \n" in panel(step, len(line))
    assert "[takeover] reject by human (TUI)" in panel(line[1], len(line))
    data = atif_of(taken, tmp_path)
    (stretch,) = [s for s in data["steps"] if cua(s)["kind"] == "takeover"]
    assert cua(stretch)["takeover"] == 1
    assert [a["arguments"]["kind"] for a in cua(stretch)["actions"]] == ["type", "click"]
    assert cua(stretch)["actions"][0]["arguments"]["text_sha256"] == sha(PHRASE)
    assert [d["how"] for d in cua(calls(data)[1])["decisions"]] == ["takeover"]


# --------------------------------------------------------------------------------------------------
# Decisions a group, a deadline or a budget made
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], str]:
    return grouped_runs(tmp_path_factory.mktemp("grouped"))


def test_a_decision_answered_for_a_fleet_group_says_so_in_the_row(
    grouped: tuple[list[Path], str], tmp_path: Path
) -> None:
    runs, group = grouped
    assert len(runs) == 3
    for run in runs:
        _document, report = exported(run, tmp_path)
        decided = report.step(2).cell("decided")
        assert decided.hows == {"group"}
        assert decided.text == f"group approved by {OPERATOR} with one key for 3 runs (group {group})"
        for number in (1, 3):  # allowed by the policy: nobody was asked
            assert report.step(number).cell("decided").text == "policy approved by policy"
    line = steps(runs[0])
    said = panel(line[1], 3)
    assert "decision [group] approve by " in said and f"one of 3 runs answered with one key (group {group})" in said
    (typing,) = [c for c in calls(atif_of(runs[0], tmp_path)) if c["arguments"]["kind"] == "type"]
    (decision,) = cua(typing)["decisions"]
    assert decision["how"] == "group" and decision["group"] == {"id": group, "size": 3}


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return budget_and_deadline_run(tmp_path_factory.mktemp("timed"))


def test_a_budget_and_a_deadline_say_so_in_the_row(timed: Path, tmp_path: Path) -> None:
    _document, report = exported(timed, tmp_path)
    decided = report.step(2).cell("decided")
    assert decided.hows == {"budget", "deadline"}
    assert decided.text == (
        f"budget soft budget crossed: go on, answered by {OPERATOR}"
        "deadline rejected by its deadline (2 s): nobody answered in time"
    )
    assert report.step(2).cell("outcome").text == "declined"
    said = panel(steps(timed)[1], 2)
    assert "decision [budget] approve by human (TUI) (budget)" in said
    assert "decision [deadline] reject by deadline (2 s)" in said
    (typing,) = [c for c in calls(atif_of(timed, tmp_path)) if c["arguments"]["kind"] == "type"]
    assert [d["how"] for d in cua(typing)["decisions"]] == ["budget", "deadline"]


def test_the_film_strip_captions_say_it_too(edited: Path, timed: Path) -> None:
    with open_run(edited) as opened:
        _initial, clicked, typing, _verify = animation._shots(opened)
    assert f"type {len(CORRECTED)} characters · EDITED · executed" in typing.caption
    assert "EDITED" not in clicked.caption
    assert typing.action == {"kind": "type", "text_len": len(CORRECTED), "text_sha256": sha(CORRECTED)}
    with open_run(timed) as opened:
        assert "type 1 characters · budget · deadline · not run: declined" in animation._shots(opened)[2].caption
