"""`cua-tui runs` over a hostile runs folder (issue 8, points 2, 6 and 10): every run directory is read
through safeio, every cell is shown literally (no terminal escapes from a directory name or a file), a
hostile run is a row saying so, and an interrupted run counts its actions whose outcome is unknown."""

from __future__ import annotations

import calendar
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import make_supervisor
from runlogs import UNSIGNED, interrupted_turn, write_run

from cua_tui.build import RunOptions, build_run
from cua_tui.cli import main
from cua_tui.cli.runs import (
    HEADER,
    JSON_KEYS,
    RunEntry,
    fleet_cell,
    fleet_forms,
    hidden_note,
    layout,
    parse_since,
    table,
)
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.ports import Answer
from cua_tui.core.rundir import new_run_id

OSC52 = "\x1b]52;c;SGVsbG8=\x07"  # a clipboard write, if a terminal ever received it raw
TURNS = [{"actions": [{"type": "click", "x": 250, "y": 182}]}]


def runs_cli(runs: Path, tmp_path: Path) -> tuple[int, list[str], str]:
    """`cua-tui runs` in a child process: a hang is a timeout, unbounded memory hits the ceiling."""
    limit = 1536 * 1024**2
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", "runs", "--runs-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
        env={
            **os.environ,
            "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
        },
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not any(c in proc.stdout for c in "\x1b\x07\x9b\r"), repr(proc.stdout)
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def rows_by_name(lines: list[str]) -> dict[str, dict[str, str]]:
    """Each row's cells by column, keyed by its RUN cell."""
    header, *rows = lines
    assert named(header) == list(HEADER)
    return {cells(header, row)["RUN"]: cells(header, row) for row in rows}


def named(header: str) -> list[str]:
    """The column names of a header line (CHECKED IN is two words)."""
    return [name.replace("_", " ") for name in header.replace("CHECKED IN", "CHECKED_IN").split()]


def cells(header: str, row: str) -> dict[str, str]:
    """A table row cut at the header's column starts."""
    names = named(header)
    starts = [header.index(name) for name in names] + [None]
    return {name: row[a:b].strip() for name, a, b in zip(names, starts, starts[1:], strict=False)}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sup, _events, _agent = make_supervisor(
        tmp_path_factory.mktemp("runs-cli"), TURNS, approver=FixedApprover(Answer.APPROVE), task="a real task"
    )
    return sup.run().path


# the sim form filled in: a run its verifier passes
PASSING = [
    {
        "actions": [
            {"type": "click", "x": 250, "y": 182},
            {"type": "type", "text": "cua-tui verified"},
            {"type": "click", "x": 550, "y": 182},
        ]
    }
]


@pytest.fixture(scope="module")
def passed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sup, _events, _agent = make_supervisor(
        tmp_path_factory.mktemp("passed"), PASSING, approver=FixedApprover(Answer.APPROVE), task="a passing task"
    )
    run = sup.run()
    assert run.status == "passed"
    return run.path


def copy(real_run: Path, runs: Path, name: str) -> Path:
    target = runs / name
    shutil.copytree(real_run, target)
    return target


def test_escapes_in_a_directory_name_a_task_and_a_status_are_shown_literally(real_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    hostile = copy(real_run, runs, f"20261201-000000-aaaaaa{OSC52}")
    set_json(hostile / "result.json", status=f"passed{OSC52}")
    set_json(hostile / "run.json", task=f"task{OSC52}\r")
    # the same claim on a record that no longer vouches for the run: the claim is the STATUS
    tampered = copy(hostile, runs, "20261201-000001-aaaaaa")
    log = (tampered / "audit.jsonl").read_bytes().replace(b'"turn":1', b'"turn":7', 1)
    (tampered / "audit.jsonl").write_bytes(log)
    code, lines, _ = runs_cli(runs, tmp_path)
    assert code == 0
    rows = rows_by_name(lines)
    row = rows["20261201-000000-aaaaaa␛]52;c;SGVsbG8=␇"]
    assert row["TASK"] == "task␛]52;c;SGVsbG8=␇␍"
    # the seal covers the log, not result.json: the record's own end is the status, the edit the reason
    assert row["RECORD"] == "intact" and row["STATUS"] == "failed"
    assert row["REASON"] == "result.json says passed␛]52;c;SGVsbG8=␇; the re…"  # cut to its 48
    claim = rows["20261201-000001-aaaaaa"]
    assert claim["RECORD"] == "TAMPERED" and claim["STATUS"] == "claimed: passed␛]52;c;SGV…"
    assert claim["REASON"].startswith("the form server has no submission")  # result.json's own
    code, out, _ = invoke("runs", "--runs-dir", runs, "--json")
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    by_id = {item["id"]: item for item in json.loads(out)}
    item = by_id[f"20261201-000000-aaaaaa{OSC52}"]
    assert (item["status"], item["reason"]) == ("failed", f"result.json says passed{OSC52}; the record says failed")
    assert by_id["20261201-000001-aaaaaa"]["status"] == f"passed{OSC52}"


def test_the_cache_key_is_made_in_the_config_folder_and_a_shared_one_is_refused_in_one_line(
    real_run: Path, tmp_path: Path
) -> None:
    """Issue 34, point 2: the key that authenticates the cache is the user's (config folder, 0600), never in
    the cache folder; one another user could read is not used, every run is verified and the note says so."""
    runs = tmp_path / "runs"
    copy(real_run, runs, "20261201-000000-aaaaaa")
    code, lines, err = runs_cli(runs, tmp_path)
    key = tmp_path / "config" / "cua-tui" / "cache-key"
    assert code == 0 and not err and key.stat().st_mode & 0o777 == 0o600
    key.chmod(0o644)
    code, again, err = runs_cli(runs, tmp_path)
    assert code == 0 and again == lines
    assert err.count("\n") == 1 and "has mode 0644, not 0600" in err and "every run is verified" in err


def test_hostile_run_directories_are_rows_never_a_hang_or_a_traceback(real_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    outside = tmp_path / "outside"
    outside.mkdir()
    good = copy(real_run, runs, "20261201-000001-aaaaaa")
    zero = copy(real_run, runs, "20261201-000002-aaaaaa")
    (zero / "result.json").unlink()
    (zero / "result.json").symlink_to("/dev/zero")
    fifo = copy(real_run, runs, "20261201-000003-aaaaaa")
    (fifo / "audit.jsonl").unlink()
    os.mkfifo(fifo / "audit.jsonl")
    screens = copy(real_run, runs, "20261201-000004-aaaaaa")
    shutil.move(screens / "screens", outside / "screens")
    (screens / "screens").symlink_to(outside / "screens")
    odd = copy(real_run, runs, "20261201-000005-aaaaaa")
    set_json(odd / "result.json", counts=5, verified="yes", status={"nested": [1]})
    copy(real_run, outside, "elsewhere")
    (runs / "20261201-000006-aaaaaa").symlink_to(outside / "elsewhere")  # a run's name, but a link
    (runs / "fleet.json").write_text("{}")  # not a run: not listed
    (runs / "notes").mkdir()
    code, lines, _ = runs_cli(runs, tmp_path)
    assert code == 0
    rows = rows_by_name(lines)
    assert set(rows) == {good.name, zero.name, fifo.name, screens.name, odd.name, "20261201-000006-aaaaaa"}
    assert rows[good.name]["RECORD"] == "intact"
    assert rows[zero.name]["RECORD"] == "TAMPERED" and rows[zero.name]["STATUS"] == "?"
    assert rows[fifo.name]["RECORD"] == "unusable"
    assert rows[screens.name]["RECORD"] == "TAMPERED"
    assert rows[odd.name]["RECORD"] == "intact" and rows[odd.name]["STATUS"] == "failed"  # the record's end
    assert rows[odd.name]["REASON"].startswith('result.json says {"nested": [1]}; the record')
    assert rows["20261201-000006-aaaaaa"]["RECORD"] == "unusable"


def test_interrupted_run_counts_its_unknown_outcomes(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs / "20261201-000000-bbbbbb", None, interrupted_turn(), signed=UNSIGNED, seal=False)
    code, lines, _ = runs_cli(runs, tmp_path)
    assert code == 0
    (row,) = rows_by_name(lines).values()
    assert row["RECORD"] == "unsealed, 1 unknown"
    assert row["STATUS"] == "unfinished"  # no result.json: nothing claimed


# ---------------------------------------------------------------------------------------------------
# Issue 10: columns, newest first, filters, --json, decisions, fitting a terminal, 200 runs
# ---------------------------------------------------------------------------------------------------
# an approver command that kills the run at its first decision
KILL = """approver:printf '{"decision": "kill"}'"""


def built_run(runs: Path, decisions: str, task: str, *, turns: list[dict[str, Any]] | None = None) -> Path:
    """A real run made by the one builder on the sim desktop (typing needs a decision: the headless rule);
    without ``turns`` it types a wrong phrase and never submits it: it fails, unless a decision kills it."""
    script = {"turns": turns or [{"actions": [{"type": "click", "x": 250, "y": 182}, {"type": "type", "text": "x"}]}]}
    options = RunOptions(
        backend="sim",
        agent=None,
        task=task,
        script={**script, "final_text": "done"},
        runs_dir=runs,
        decisions=decisions,
        fsync=False,
    )
    return build_run(options).run().path


def set_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def invoke(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three runs started one, two and five days ago (ids and run.json agree) that ended passed (the form
    filled in), failed (a wrong phrase, rejected) and killed (by an approver command); their sealed records say so."""
    runs = tmp_path_factory.mktemp("three") / "runs"
    now = time.time()
    for days, decisions, turns, status in (
        (5, KILL, None, "killed"),
        (1, "approve", PASSING, "passed"),
        (2, "reject", None, "failed"),
    ):
        path = built_run(runs, decisions, f"task {days}", turns=turns)
        assert json.loads((path / "result.json").read_text())["status"] == status
        started = now - days * 86400
        run_id = new_run_id(started)
        # what the seal does not cover, moved in time; the status stays the run's own
        set_json(path / "run.json", started_at=started)
        set_json(path / "result.json", ended_at=started + 75.5, reason=f"reason {days}")
        path.rename(runs / run_id)
    return runs


def test_columns_newest_first_with_duration_agent_reason_and_decisions(three_runs: Path) -> None:
    code, out, _ = invoke("runs", "--runs-dir", three_runs)
    assert code == 0
    header, *lines = out.splitlines()
    assert named(header) == list(HEADER) and header.startswith("STATUS  RECORD  RUN ")  # how each ended, first
    rows = [cells(header, line) for line in lines]
    assert [r["TASK"] for r in rows] == ["task 1", "task 2", "task 5"]  # newest first
    assert [r["STATUS"] for r in rows] == ["passed", "failed", "killed"]
    assert [r["REASON"] for r in rows] == ["reason 1", "reason 2", "reason 5"]
    assert {r["DURATION"] for r in rows} == {"1m 15s"}  # 75.5 s
    for row, item in zip(rows, json.loads(invoke("runs", "--runs-dir", three_runs, "--json")[1]), strict=True):
        assert row["RUN"] == item["id"]
        assert row["STARTED"] == time.strftime("%Y-%m-%d %H:%M", time.localtime(item["started_at"]))  # local
    first = rows[0]
    assert (first["BACKEND"], first["AGENT"], first["STEPS"], first["DECISIONS"]) == ("sim", "script", "3", "1")
    assert first["RECORD"] == "intact" and first["CHECKED IN"].startswith("controller, as ")


def test_json_has_stable_keys_and_plain_values(three_runs: Path) -> None:
    code, out, _ = invoke("runs", "--runs-dir", three_runs, "--json")
    assert code == 0
    data = json.loads(out)
    assert [tuple(item) for item in data] == [JSON_KEYS] * 3
    assert [item["task"] for item in data] == ["task 1", "task 2", "task 5"]
    first = data[0]
    assert first["status"] == "passed" and first["verified"] == "intact" and first["decisions"] == 1
    assert first["steps"] == 3 and first["duration_seconds"] == 75.5 and first["model"] is None
    assert first["started_at_iso"].endswith("+00:00") and first["ended_at_iso"].endswith("+00:00")
    assert datetime.fromisoformat(first["started_at_iso"]).timestamp() == pytest.approx(first["started_at"], abs=1e-3)
    assert first["verify_summary"].startswith("intact: ") and first["unknown_outcomes"] == 0
    assert Path(first["path"]).name == first["id"]
    failed, killed = data[1:]
    assert failed["status"] == "failed" and failed["decisions"] == 1  # a rejection is a decision too
    assert killed["status"] == "killed" and killed["decisions"] == 1  # and a kill
    assert [item["reason"] for item in data] == ["reason 1", "reason 2", "reason 5"]  # result.json's: it agrees


@pytest.mark.parametrize(
    ("args", "tasks"),
    [
        (("--status", "passed"), ["task 1"]),
        (("--status", "PASSED", "--status", "killed"), ["task 1", "task 5"]),
        (("--status", "unfinished"), []),
        (("--since", "36h"), ["task 1"]),
        (("--since", "3d"), ["task 1", "task 2"]),
        (("--since", "1w", "--status", "failed"), ["task 2"]),
        (("--since", "90m"), []),
    ],
)
def test_status_and_since_filter(three_runs: Path, args: tuple[str, ...], tasks: list[str]) -> None:
    code, out, _ = invoke("runs", "--runs-dir", three_runs, "--json", *args)
    assert code == 0
    assert [item["task"] for item in json.loads(out)] == tasks
    code, out, _ = invoke("runs", "--runs-dir", three_runs, *args)
    assert code == 0
    assert len(out.splitlines()) == (len(tasks) + 1 if tasks else 1)
    if not tasks:
        assert out.startswith("no runs in ") and "match the filters" in out


def test_since_takes_an_iso_date_or_time(three_runs: Path) -> None:
    data = json.loads(invoke("runs", "--runs-dir", three_runs, "--json")[1])
    middle = data[1]["started_at"]
    local = datetime.fromtimestamp(middle - 60).strftime("%Y-%m-%dT%H:%M")
    assert [i["task"] for i in json.loads(invoke("runs", "--runs-dir", three_runs, "--json", "--since", local)[1])] == [
        "task 1",
        "task 2",
    ]
    utc = datetime.fromtimestamp(middle + 60, UTC).isoformat(timespec="seconds")
    assert [i["task"] for i in json.loads(invoke("runs", "--runs-dir", three_runs, "--json", "--since", utc)[1])] == [
        "task 1"
    ]
    day = datetime.fromtimestamp(time.time() - 10 * 86400).strftime("%Y-%m-%d")
    assert len(json.loads(invoke("runs", "--runs-dir", three_runs, "--json", "--since", day)[1])) == 3


@pytest.mark.parametrize("bad", ["yesterday", "2h ago", "-3d", "2026-13-01", ""])
def test_a_bad_since_or_status_is_a_usage_error(three_runs: Path, bad: str) -> None:
    code, out, err = invoke("runs", "--runs-dir", three_runs, "--since", bad)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--since" in err
    code, _out, err = invoke("runs", "--runs-dir", three_runs, "--status", "sealed")
    assert code == 2 and "sealed" in err


def test_parse_since_relative_forms() -> None:
    now = 1_800_000_000.0
    assert parse_since("90s", now) == now - 90
    assert parse_since("30m", now) == now - 1800
    assert parse_since("2h", now) == now - 7200
    assert parse_since("3d", now) == now - 3 * 86400
    assert parse_since("1w", now) == now - 7 * 86400
    assert parse_since("1.5h", now) == now - 5400
    assert parse_since("2026-12-01T00:00:00+00:00") == datetime(2026, 12, 1, tzinfo=UTC).timestamp()


def test_json_values_from_a_hostile_run_are_plain_json(real_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    hostile = copy(real_run, runs, "20261201-000000-cccccc")
    set_json(hostile / "run.json", task=f"task{OSC52}\x9b31m\u202e", model=["not", "a", "name"], started_at="soon")
    set_json(hostile / "result.json", status=7, reason=None, counts={"steps": -3})
    code, out, _ = invoke("runs", "--runs-dir", runs, "--json")
    assert code == 0
    assert out.isascii() and "\x1b" not in out  # every control and every non-ASCII character escaped
    (item,) = json.loads(out)
    assert item["task"] == f"task{OSC52}\x9b31m\u202e"  # the exact text, for a script to judge
    assert item["model"] == '["not", "a", "name"]'
    # the sealed record's end is the status; result.json's number comes as its JSON text, in the reason
    assert item["status"] == "failed" and item["reason"] == "result.json says 7; the record says failed"
    (unchecked,) = json.loads(invoke("runs", "--runs-dir", runs, "--json", "--no-check")[1])
    assert unchecked["status"] == "7" and unchecked["reason"] is None  # nothing checked: result.json's claim
    assert item["started_at"] == calendar.timegm((2026, 12, 1, 0, 0, 0, 0, 0, 0))  # from the run id
    assert item["steps"] == 1  # counts.steps is not a count: the proposals the chain records
    code, out, _ = invoke("runs", "--runs-dir", runs)
    assert "\x1b" not in out and "\x9b" not in out and "\u202e" not in out
    assert "task␛]52;c;SGVsbG8=␇\\x9b31m\\u202e" in out


def test_decisions_count_every_decider_but_the_policy(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    turns = [
        {"actions": [{"type": "click", "x": 250, "y": 182}, {"type": "type", "text": "a"}]},
        {"actions": [{"type": "type", "text": "b"}, {"type": "keypress", "keys": ["ENTER"]}]},
    ]
    path = built_run(runs, "approve", "t", turns=turns)
    audit = [json.loads(line) for line in (path / "audit.jsonl").read_text().splitlines()]
    by = [r["by"] for r in audit if r["kind"] == "decision"]
    assert "policy" in by and len([b for b in by if b != "policy"]) == 3  # two typings and the Return
    (item,) = json.loads(invoke("runs", "--runs-dir", runs, "--json")[1])
    assert item["decisions"] == 3 and item["steps"] == 4
    _code, out, _ = invoke("runs", "--runs-dir", runs, "--json", "--no-check")
    (unchecked,) = json.loads(out)
    assert unchecked["verified"] is None and unchecked["decisions"] is None and unchecked["steps"] == 4


def test_the_table_fits_a_terminal_by_shrinking_task_and_reason() -> None:
    entry = RunEntry(
        "20261201-000000-dddddd",
        "/r",
        started_at=1.8e9,
        ended_at=1.8e9 + 3,
        task="t" * 200,
        backend="sim",
        agent="openai",
        model="gpt-5.6-sol",
        status="failed",
        reason="r" * 200,
        steps=3,
        decisions=1,
        verified="intact",
    )
    wide = table([entry])
    assert max(map(len, wide)) > 160 and "t" * 39 + "…" in wide[1]
    narrow = table([entry], width=160)  # every column: TASK, AGENT and REASON shrink, widest first
    assert max(map(len, narrow)) <= 160 and named(narrow[0]) == list(HEADER)
    row = cells(narrow[0], narrow[1])
    assert (row["STATUS"], row["RECORD"], row["STEPS"], row["DECISIONS"]) == ("failed", "intact", "3", "1")
    assert row["AGENT"].startswith("openai/gpt-5")
    lines, hidden = layout([entry], width=80)  # twelve columns cannot fit: the least needed ones go
    assert max(map(len, lines)) <= 80 and hidden and "BACKEND" in hidden
    assert named(lines[0]) == ["STATUS", "RECORD", "RUN", "TASK", "REASON"]
    row = cells(lines[0], lines[1])
    assert lines[1].startswith("failed  intact  20261201-000000-dddddd  ttt")
    assert row["TASK"] == "t" * 18 + "…" and row["REASON"] == "r" * 18 + "…"  # shrunk evenly, to fit
    for width in (60, 40, 20):  # too narrow even for what always stays: still no line wider
        tiny = table([entry], width=width)
        assert max(map(len, tiny)) <= width, (width, tiny)
        assert tiny[1].startswith("failed  intact  20261201-000000-dddddd"[: width - 1]), (width, tiny)


def entry_of(status: str, record: str | None, **more: Any) -> RunEntry:
    return RunEntry("20261201-000000-dddddd", "/r", task="a task", status=status, verified=record, **more)


@pytest.mark.parametrize(
    ("status", "record", "shown", "tone"),
    [
        ("passed", "intact", "passed", "good"),  # the one green
        ("failed", "intact", "failed", "bad"),
        ("killed", "intact", "killed", "bad"),
        ("finished", "intact", "finished", "plain"),  # no verifier: neither
        ("passed", "tampered", "claimed: passed", "claim"),
        ("passed", "unusable", "claimed: passed", "claim"),
        ("failed", "tampered", "claimed: failed", "claim"),
        ("passed", None, "claimed: passed", "claim"),  # --no-check: nothing vouches for it
        ("unfinished", "unsealed", "unfinished", "claim"),  # no result.json: nothing claimed
        ("?", "tampered", "?", "claim"),
    ],
)
def test_the_status_leads_and_is_a_claim_unless_the_record_vouches_for_it(
    status: str, record: str | None, shown: str, tone: str
) -> None:
    entry = entry_of(status, record)
    lines = table([entry], width=80)
    row = cells(lines[0], lines[1])
    assert lines[0].startswith("STATUS") and lines[1].startswith(shown + " ")  # how it ended, first
    assert row["STATUS"] == shown and row["RECORD"] == {"tampered": "TAMPERED", None: "-"}.get(record, record)
    assert entry.headline().tone == tone
    painted = layout([entry], width=80, colour=True)[0][1]
    colour = {"good": "green", "bad": "red", "claim": "yellow"}.get(tone)
    expected = shown if colour is None else click.style(shown, fg=colour, bold=tone != "good")
    assert painted.startswith(expected + " ")
    assert ("\x1b[32m" in painted) == (tone == "good")  # green only for a passed run on an intact, sealed record


def test_a_fleet_id_loses_fleet_then_its_date_then_its_time_never_its_tail() -> None:
    fleet = "fleet-20261206-202312-98570f"
    assert fleet_forms(fleet) == [fleet, "20261206-202312-98570f", "202312-98570f", "98570f"]
    assert fleet_cell(fleet, "checkout", 100) == f"{fleet}/checkout"
    assert fleet_cell(fleet, "checkout", 31) == "20261206-202312-98570f/checkout"
    assert fleet_cell(fleet, "checkout", 22) == "202312-98570f/checkout"
    assert fleet_cell(fleet, "checkout", 15) == "98570f/checkout"
    assert fleet_cell(fleet, "checkout-form-with-long-name", 20) == "98570f/checkout-for…"  # the name, last
    assert fleet_cell(fleet, None, 10) == "98570f"
    assert fleet_forms("my-own-fleet") == ["my-own-fleet", "…-fleet"]  # another shape: its last six stay
    assert fleet_cell("my-own-fleet", "a", 9) == "…-fleet/a"


def test_the_note_of_hidden_columns_fits_the_terminal() -> None:
    hidden = ["BACKEND", "DECISIONS", "STEPS", "CHECKED IN", "DURATION", "AGENT", "STARTED", "REASON"]
    for width in (200, 120, 80, 60, 40, 20, 8):
        note = hidden_note(hidden, width)
        assert len(note) <= width and note.startswith("note"), (width, note)
    assert hidden_note(hidden, 200).startswith("note: BACKEND, DECISIONS, STEPS")
    assert (
        hidden_note(["BACKEND"], 80) == "note: BACKEND hidden to fit 80 columns; --json or a wider terminal shows them"
    )


def on_a_terminal(
    runs: Path, tmp_path: Path, columns: int, *args: str, colours: bool = False
) -> tuple[list[str], list[str]]:
    """`cua-tui runs` in a child process whose stdout is a terminal of ``columns`` columns (a pty): its
    lines as drawn (colours taken out, unless ``colours``) and its stderr's."""
    import pty

    main_fd, child_fd = pty.openpty()
    env = {
        **os.environ,
        "COLUMNS": str(columns),
        "LINES": "40",
        "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    env.pop("NO_COLOR", None)
    with subprocess.Popen(
        [sys.executable, "-m", "cua_tui.cli", "runs", "--runs-dir", str(runs), *args],
        stdout=child_fd,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        os.close(child_fd)
        out = b""
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        err = proc.stderr.read() if proc.stderr is not None else b""
        assert proc.wait(timeout=60) == 0, err
    os.close(main_fd)
    text = out.decode() if colours else re.sub(r"\x1b\[[0-9;]*m", "", out.decode())
    return text.replace("\r\n", "\n").splitlines(), err.decode().splitlines()


def test_no_line_is_wider_than_an_80_column_terminal_and_a_fleet_keeps_its_task_names(
    passed_run: Path, tmp_path: Path
) -> None:
    """Issue 35, point 3: at 80 columns the table and its note fit; a fleet's runs keep their task's
    names, their fleet id shortened (`fleet-`, then the date, then the time dropped; its tail kept)."""
    runs = tmp_path / "runs"
    fleet = "fleet-20261206-202312-98570f"
    for n, name in enumerate(("checkout-form", "search")):
        path = copy(passed_run, runs, f"20261206-20231{n}-aaaaa{n}")
        set_json(path / "run.json", fleet=fleet, fleet_task=name, task="Fill in the checkout form " * 4)
    lines, err = on_a_terminal(runs, tmp_path, 80)
    assert lines and err and all(len(line) <= 80 for line in lines + err), [*lines, *err]
    assert named(lines[0]) == ["STATUS", "RECORD", "RUN", "TASK", "FLEET"]
    rows = [cells(lines[0], line) for line in lines[1:]]
    assert [row["FLEET"] for row in rows] == ["98570f/search", "98570f/checkout-form"]
    assert all(row["STATUS"] == "passed" and row["RECORD"] == "intact" for row in rows)
    assert err == ["note: 8 columns hidden to fit 80 columns; --json or a wider terminal shows them"]
    wide, err = on_a_terminal(runs, tmp_path, 300)  # room for everything: the fleet id whole
    assert not err and all(len(line) <= 300 for line in wide)
    assert [cells(wide[0], line)["FLEET"] for line in wide[1:]] == [f"{fleet}/search", f"{fleet}/checkout-form"]


def test_a_passed_run_is_green_only_while_its_record_is_intact(passed_run: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    copy(passed_run, runs, "20261201-000001-aaaaaa")
    broken = copy(passed_run, runs, "20261201-000002-aaaaaa")
    log = (broken / "audit.jsonl").read_bytes().replace(b'"turn":1', b'"turn":7', 1)
    (broken / "audit.jsonl").write_bytes(log)
    code, lines, _ = runs_cli(runs, tmp_path)  # not a terminal: no colour
    rows = rows_by_name(lines)
    assert code == 0 and rows["20261201-000002-aaaaaa"]["STATUS"] == "claimed: passed"
    assert rows["20261201-000002-aaaaaa"]["RECORD"] == "TAMPERED"
    assert rows["20261201-000001-aaaaaa"]["STATUS"] == "passed"
    entries = [
        entry_of("passed", "intact"),
        entry_of("passed", "tampered"),
    ]
    green, claim = layout(entries, 80, colour=True)[0][1:]
    assert green.startswith(click.style("passed", fg="green", bold=False))
    assert claim.startswith(click.style("claimed: passed", fg="yellow", bold=True))
    assert click.style("TAMPERED", fg="red", bold=True) in claim


def test_a_run_that_ended_failed_is_listed_failed_whatever_its_result_json_says(real_run: Path, tmp_path: Path) -> None:
    """result.json is not sealed: a run whose record ended failed, its result.json edited to say passed, is
    listed failed (red on a terminal, never green) on its intact record, the reason saying what result.json
    says; --status follows the record."""
    runs = tmp_path / "runs"
    edited = copy(real_run, runs, "20261201-000001-aaaaaa")
    assert json.loads((edited / "result.json").read_text())["status"] == "failed"
    set_json(edited / "result.json", status="passed")
    said = "result.json says passed; the record says failed"
    code, lines, _ = runs_cli(runs, tmp_path)
    (row,) = rows_by_name(lines).values()
    assert code == 0 and (row["STATUS"], row["RECORD"], row["REASON"]) == ("failed", "intact", said)
    code, out, _ = invoke("runs", "--runs-dir", runs, "--json")
    (item,) = json.loads(out)
    assert code == 0 and (item["status"], item["verified"], item["reason"]) == ("failed", "intact", said)
    assert json.loads(invoke("runs", "--runs-dir", runs, "--json", "--status", "passed")[1]) == []
    assert [i["id"] for i in json.loads(invoke("runs", "--runs-dir", runs, "--json", "--status", "failed")[1])] == [
        edited.name
    ]
    painted, _err = on_a_terminal(runs, tmp_path, 200, colours=True)
    assert painted[1].startswith(click.style("failed", fg="red", bold=True) + " ")
    assert "\x1b[32m" not in painted[1] and "passed" not in painted[1].split("result.json says")[0]


def test_200_runs_are_listed_quickly(real_run: Path, tmp_path: Path) -> None:
    """`runs` over 200 real run directories, each verified (chain, seal, screenshots): the figure for the
    README is measured by the same child process; here a generous bound for a loaded 2-core machine."""
    runs = tmp_path / "runs"
    for n in range(200):
        copy(real_run, runs, f"20261201-{n:06d}-eeeeee")
    started = time.perf_counter()
    code, lines, _ = runs_cli(runs, tmp_path)
    took = time.perf_counter() - started
    assert code == 0 and len(lines) == 201
    rows = [cells(lines[0], line) for line in lines[1:]]
    assert all(row["RECORD"] == "intact" for row in rows)
    assert rows[0]["RUN"] == "20261201-000199-eeeeee"  # newest first (by start time, then id)
    assert took < 20, f"{took:.1f} s for 200 runs"
