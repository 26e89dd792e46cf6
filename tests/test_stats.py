"""The analyst's own record (issue 25, point 5): each decision a person makes records how long it was on
screen and the input guard in force; ``cua-tui stats`` reports per operator over a runs folder made by real
supervisor runs; the pace check warns once after a run of fast approvals."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import make_supervisor

from cua_tui.cli import main
from cua_tui.core.ports import Answer, DecisionRequest, Ruling
from cua_tui.core.stats import Pace, RunSamples, Sample, operator_stats

TYPING = {"actions": [{"type": "click", "button": "left", "x": 250, "y": 182}, {"type": "type", "text": "x"}]}


class Person:
    """Answers each request in turn with ``(answer, shown_ms)``, as the TUI's handshake records a person."""

    def __init__(self, *answers: tuple[Answer, int]) -> None:
        self.answers = list(answers)

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        answer, shown = self.answers.pop(0) if self.answers else (Answer.REJECT, 5000)
        return Ruling(answer, "human (TUI)", human=True, shown_ms=shown, guard_ms=1000)


def supervised(runs: Path, operator: str, *answers: tuple[Answer, int]) -> None:
    sup, _events, _agent = make_supervisor(
        runs / operator.replace("@", "-"), [TYPING] * len(answers), approver=Person(*answers), operator=operator
    )
    sup.run()


def stats(runs: Path, *args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["stats", "--runs-dir", str(runs), "--json", *args])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def test_the_figures_over_runs_per_operator() -> None:
    runs = [
        RunSamples((Sample("a", "approve", 400, 1000), Sample("a", "approve", 2000, 1000)), 1800.0),
        RunSamples((Sample("a", "approve", 800, 1000), Sample("b", "reject", 9000, 1000)), 1800.0),
        RunSamples((Sample("a", "reject", 6000, 1000), Sample("a", "approve", None, None)), None),
    ]
    a, b = operator_stats(runs)
    assert (a.operator, a.counts.decisions, a.counts.approvals, a.counts.rejections, a.runs) == ("a", 5, 4, 1, 3)
    assert a.longest_approval_streak == 3  # it runs on across runs, as attention does
    assert (a.median_ms, a.p10_ms) == (1400, 400)
    assert a.under_a_second == 0.5 and a.within_guard == 2
    assert a.per_hour == 5 / 1.0  # two runs of half an hour; the third's length is unknown
    assert (b.counts.decisions, b.counts.rejections, b.longest_approval_streak, b.under_a_second) == (1, 1, 0, 0.0)


def test_the_pace_check_warns_once_after_a_run_of_fast_approvals() -> None:
    pace = Pace(count=3, fast_ms=2000)
    said = [pace.answered("approve", 500) for _ in range(5)]
    assert said[:2] == [None, None] and said[2] is not None and said[3:] == [None, None]
    assert "3 approvals in a row, each within 2 s of being shown" in said[2]
    assert pace.answered("reject", 100) is None  # a reject starts the count again
    assert [pace.answered("approve", 100) for _ in range(3)][-1] is not None
    assert pace.answered("approve", 2500) is None  # so does a slow approval


def test_stats_over_a_runs_folder_of_real_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    supervised(runs, "alice@desk-7", (Answer.APPROVE, 300), (Answer.APPROVE, 700), (Answer.REJECT, 4000))
    supervised(runs, "bob@desk-9", (Answer.APPROVE, 2500))
    folders = [p for p in runs.rglob("audit.jsonl")]
    assert len(folders) == 2
    # the records carry what the person had
    records = [json.loads(x) for x in folders[0].read_text().splitlines()]
    line = next(r for r in records if r["kind"] == "decision" and r["operator"])
    assert line["shown_ms"] is not None and line["guard_ms"] == 1000
    # each operator's runs are in a folder of their own here; stats reads one folder
    (alice,) = stats(runs / "alice-desk-7" / "runs")
    assert (alice["operator"], alice["decisions"], alice["approvals"], alice["rejections"]) == ("alice@desk-7", 3, 2, 1)
    assert (alice["median_ms"], alice["p10_ms"], alice["longest_approval_streak"]) == (700, 300, 2)
    assert alice["under_a_second"] == round(2 / 3, 3) and alice["decisions_per_hour"] > 0
    assert stats(runs / "alice-desk-7" / "runs", "--operator", "bob@desk-9") == []
    assert stats(runs / "alice-desk-7" / "runs", "--since", "2999-01-01") == []
    table = CliRunner().invoke(main, ["stats", "--runs-dir", str(runs / "bob-desk-9" / "runs")])
    assert table.exit_code == 0
    header, row = table.stdout.splitlines()
    assert header.split()[:3] == ["OPERATOR", "DECISIONS", "APPROVED"] and row.split()[:3] == ["bob@desk-9", "1", "1"]


def test_a_hostile_operator_name_is_shown_literally(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    supervised(runs, "\x1b[31mmallory\x1b]0;owned\x07", (Answer.APPROVE, 300))
    (folder,) = [p for p in runs.iterdir()]
    table = CliRunner().invoke(main, ["stats", "--runs-dir", str(folder / "runs")])
    assert table.exit_code == 0 and "\x1b" not in table.stdout and "␛[31mmallory" in table.stdout


@pytest.mark.parametrize("command", ["stats", "runs"])
@pytest.mark.parametrize("folder", ["missing", "file", "empty"])
def test_a_runs_folder_named_must_be_one_and_an_empty_one_says_so(tmp_path: Path, folder: str, command: str) -> None:
    path = tmp_path / "runs"
    if folder == "file":
        path.write_text("not a folder")
    elif folder == "empty":
        path.mkdir()
    result = CliRunner().invoke(main, [command, "--runs-dir", str(path)])
    if folder == "empty":
        said = "no decisions made by a person in" if command == "stats" else "no runs in"
        assert result.exit_code == 0 and result.stdout == f"{said} {path}\n"
    elif folder == "missing":
        # a typo in --runs-dir is not "no runs": the folder named, and where it comes from otherwise
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"Error: {path}: no such runs directory; --runs-dir names the folder of run directories (default: "
            "CUA_TUI_RUNS_DIR, else the settings' runs_dir)\n"
        )
    else:
        assert result.exit_code == 2 and "not a runs directory" in result.output


def test_the_default_folder_not_made_yet_reads_no_runs_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("CUA_TUI_RUNS_DIR", str(tmp_path / "not-yet"))
    for command in ("stats", "runs"):
        result = CliRunner().invoke(main, [command])
        assert (result.exit_code, result.stdout) == (0, f"no runs yet in {tmp_path / 'not-yet'}\n"), command


# ---------------------------------------------------------------------------------------------------
# `runs` and `stats` count the same decisions the same way (core/decisions.py)
# ---------------------------------------------------------------------------------------------------
FIELD = {"type": "click", "button": "left", "x": 250, "y": 182}


class TakesOverFirst:
    """Takes the desktop at the first request (as ``T`` does), then approves; as a person, timed."""

    def __init__(self) -> None:
        self.supervisor: Any = None
        self.asked = 0

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.asked += 1
        if self.asked == 1:
            assert self.supervisor.take_over() is None
            return Ruling(Answer.REJECT, "human (TUI)", human=True, takeover=True, shown_ms=3000, guard_ms=1000)
        return Ruling(Answer.APPROVE, "human (TUI)", human=True, shown_ms=2000, guard_ms=1000)


def test_runs_and_stats_count_a_takeover_as_what_it_is(tmp_path: Path) -> None:
    from cua_tui.core import events as ev
    from cua_tui.core.actions import Action, Kind
    from cua_tui.desktops.sim import PHRASE

    approver = TakesOverFirst()
    turns = [{"actions": [FIELD, {"type": "type", "text": "wrong words"}]}, {"actions": [FIELD, TYPING["actions"][1]]}]
    sup, _events, _agent = make_supervisor(tmp_path, turns, approver=approver, operator="alice@desk-7")
    approver.supervisor = sup
    mine = [Action(Kind.CLICK, point=(250, 182)), Action(Kind.TYPE, text=PHRASE), Action(Kind.CLICK, point=(550, 182))]

    def hand(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.TakeoverStarted):

            def feed() -> None:
                for action in mine:
                    assert sup.takeover_input(action) is None
                sup.hand_back()

            threading.Thread(target=feed, daemon=True).start()

    sup.subscribe(hand)
    assert sup.run().status == "passed"  # the person typed the phrase and clicked Verify
    runs = tmp_path / "runs"
    (alice,) = stats(runs)
    # one request taken over (not a rejection), one approved; the person's own three actions apart
    assert (alice["decisions"], alice["approvals"], alice["rejections"]) == (2, 1, 0)
    assert (alice["takeovers"], alice["takeover_actions"], alice["median_ms"]) == (1, 3, 2500)
    listed = CliRunner().invoke(main, ["runs", "--runs-dir", str(runs), "--json"])
    (run,) = json.loads(listed.stdout)
    assert run["decisions"] == alice["decisions"]  # the same decisions, counted the same way
    table = CliRunner().invoke(main, ["stats", "--runs-dir", str(runs)]).stdout.splitlines()
    assert table[0].split()[:7] == ["OPERATOR", "DECISIONS", "APPROVED", "REJECTED", "TAKEOVERS", "OWN", "ACTIONS"]
    assert table[1].split()[:6] == ["alice@desk-7", "2", "1", "0", "1", "3"]


@pytest.mark.parametrize(
    ("decision", "by", "note", "counted"),
    [
        ("approve", "human (TUI)", "", "approve"),
        ("reject", "human (TUI)", "the reviewer took control of the desktop instead (T)", "takeover"),
        ("reject", "human (TUI)", "too risky", "reject"),
        ("approve", "human (takeover)", "approved by being done", "takeover_action"),
        ("reject", "headless rule: reject", "", "reject"),
        ("reject", "deadline (30 s)", "", "reject"),
        ("kill", "approver command", "", "kill"),
        ("reject", "policy", "blocked", None),  # nobody was asked
        ("approve", "grant #2 (given by alice@desk-7)", "typing", None),  # the `a` that granted it counted once
        ("maybe", "human (TUI)", "", None),  # a hostile log's values count as nothing
        (["approve"], {"by": 1}, None, None),
    ],
)
def test_what_a_decision_counts_as(decision: Any, by: Any, note: Any, counted: str | None) -> None:
    from cua_tui.core.decisions import counted_as

    assert counted_as(decision, by, note) == counted
