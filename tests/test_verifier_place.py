"""A verdict says who vouched for it (issue 20, point 7): every verdict records where its verifier ran (the
controller, or inside the sandbox) and as which OS user, in the audit event and result.json, and `run`,
`runs`, the headless lines and the HTML export say it. Runs recorded before the field read as unknown and
still verify.

The in-controller verdicts come from real runs (the one builder, the sim desktop, the real command line);
a sandbox's verdict and an older run are written by hand the way the supervisor writes them (as the
verifier's tests write their runs), since no backend of this checkout records a sandbox's verdict yet."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from verdict_runs import LAB, SANDBOX, recorded

from cua_tui.build import RunOptions, build_run
from cua_tui.cli import main
from cua_tui.cli.session import end_line
from cua_tui.core import describe
from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.ending import checked_by
from cua_tui.core.events import RunStatus
from cua_tui.core.ports import Verification, VerifierPlace, process_user
from cua_tui.core.runlog import event_of
from cua_tui.core.supervisor import RunResult
from cua_tui.export import html as html_export
from cua_tui.export.source import open_run

FORM = [
    {
        "actions": [
            {"type": "click", "x": 250, "y": 182},
            {"type": "type", "text": "cua-tui verified"},
            {"type": "click", "x": 550, "y": 182},
        ]
    }
]


def invoke(*args: str, home: Path) -> tuple[int, str]:
    env = {"CUA_TUI_CONFIG": str(home / "no-config.toml")}
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def runs_json(runs: Path, home: Path) -> dict[str, dict[str, Any]]:
    code, out = invoke("runs", "--runs-dir", str(runs), "--json", home=home)
    assert code == 0, out
    return {entry["id"]: entry for entry in json.loads(out)}


def runs_rows(runs: Path, home: Path) -> dict[str, str]:
    code, out = invoke("runs", "--runs-dir", str(runs), home=home)
    assert code == 0, out
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["STATUS", "RECORD", "RUN"] and "  CHECKED IN  " in header
    return {re.split(r"\s{2,}", row)[2]: row for row in rows}


def export(folder: Path) -> str:
    with open_run(folder) as run:
        return html_export.render(run)


# ---------------------------------------------------------------------------------------------------
# The field and its safe default
# ---------------------------------------------------------------------------------------------------
def test_a_verdict_claims_no_place_unless_its_adapter_says_one() -> None:
    """An adapter that does not say where its verdict came from (a remote backend not updated yet) gets
    one that reads as unknown, never as the controller's."""
    verdict = Verification(True, "done", "lab:form (server-side)")
    assert (verdict.where, verdict.user) == (VerifierPlace.UNKNOWN, "")
    judged = verdict.in_controller()
    assert (judged.where, judged.user) == (VerifierPlace.CONTROLLER, process_user())
    assert (judged.passed, judged.detail, judged.verifier) == (True, "done", "lab:form (server-side)")


def test_the_event_round_trips_and_an_older_record_reads_as_unknown() -> None:
    done = ev.VerificationDone(LAB, True, "ok", VerifierPlace.SANDBOX, "root")
    record = {"kind": "verification", **done.to_record()}
    assert record["where"] == "sandbox" and record["user"] == "root"
    assert event_of(json.loads(json.dumps(record))) == done
    older = event_of({"kind": "verification", "verifier": LAB, "passed": True, "detail": "ok"})
    assert isinstance(older, ev.VerificationDone)
    assert (older.where, older.user) == (VerifierPlace.UNKNOWN, "")
    assert checked_by(older) == f"checked by {LAB} in a place not recorded"
    # a place of the wrong JSON type is no verdict's place: the record reads as a note saying so
    assert isinstance(event_of({**record, "where": 1}), ev.Note)


# ---------------------------------------------------------------------------------------------------
# A real run: the sim's form server is in the controller's process
# ---------------------------------------------------------------------------------------------------
def test_a_run_records_the_controller_and_its_user_in_the_event_and_result_json(tmp_path: Path) -> None:
    run = build_run(
        RunOptions(
            backend="sim",
            agent=None,
            script={"turns": FORM, "final_text": "done"},
            runs_dir=tmp_path / "runs",
            decisions="approve",
            fsync=False,
        )
    )
    result = run.run()
    assert result.status == RunStatus.PASSED
    (line,) = [json.loads(x) for x in (run.path / "audit.jsonl").read_text().splitlines() if '"verification"' in x]
    assert (line["verifier"], line["where"], line["user"]) == ("sim form server", "controller", process_user())
    saved = json.loads((run.path / "result.json").read_text())
    assert saved["verifier"] == {"name": "sim form server", "where": "controller", "user": process_user()}
    assert result.verification is not None and result.verification.where == VerifierPlace.CONTROLLER
    checked = f"checked by sim form server in the controller, as {process_user()}"
    assert end_line(result) == f"status: passed · {result.reason} · {checked}"
    assert f'<p class="checked">{checked}: passed · {result.reason}</p>' in export(run.path)


# ---------------------------------------------------------------------------------------------------
# A sandbox's verdict, an older run, a hostile one: every view says who vouched
# ---------------------------------------------------------------------------------------------------
def test_a_verdict_from_inside_the_sandbox_reads_as_the_sandboxs_word_everywhere(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    folder = recorded(runs, "20261201-000000-aaaaaa", {**SANDBOX, "user": "root"})
    assert verify_run(folder).code is VerifyExit.INTACT
    checked = f"checked by {LAB} inside the sandbox, as root"
    # headless: the event's line
    with open_run(folder) as run:
        (done,) = run.events(ev.VerificationDone)
    line = f"{checked}: passed · the form server recorded the phrase"
    assert describe.event_line(done) == line
    # `run`'s end line
    result = RunResult("r", folder, RunStatus.PASSED, SANDBOX["detail"], True, 1, 0, 0, {}, done)
    assert end_line(result) == f"status: passed · {SANDBOX['detail']} · {checked}"
    # `runs`: the CHECKED IN column and the --json key
    row = runs_rows(runs, tmp_path)["20261201-000000-aaaaaa"]
    assert row.startswith("passed  intact  ") and "  sandbox, as root  the form server" in row
    entry = runs_json(runs, tmp_path)["20261201-000000-aaaaaa"]
    assert entry["verifier"] == {"name": LAB, "where": "sandbox", "user": "root"}
    # the export: marked, not a footnote
    assert f"<strong>{checked}</strong>: passed" in export(folder)


def test_a_run_recorded_before_the_field_verifies_and_reads_as_not_recorded(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    older = {"verifier": LAB, "passed": True, "detail": "the form server recorded the phrase"}
    folder = recorded(runs, "20261201-000000-bbbbbb", older, result_verifier=None)
    assert verify_run(folder).code is VerifyExit.INTACT
    code, out = invoke("verify", str(folder), home=tmp_path)
    assert code == 0 and "intact" in out
    assert runs_json(runs, tmp_path)["20261201-000000-bbbbbb"]["verifier"] == {
        "name": None,
        "where": "unknown",
        "user": None,
    }
    assert "  not recorded  the form server" in runs_rows(runs, tmp_path)["20261201-000000-bbbbbb"]
    assert f"<strong>checked by {LAB} in a place not recorded</strong>" in export(folder)


@pytest.mark.parametrize(
    ("said", "where"),
    [
        ({"name": LAB, "where": "controller\x1b[2J", "user": "root"}, "unknown"),  # not a place this version knows
        ("controller", "unknown"),  # not an object
        ({"name": LAB, "where": "sandbox", "user": "r\x1b]52;c;SGk=\x07t"}, "sandbox"),
    ],
)
def test_a_hostile_verifier_in_result_json_is_never_the_controller(tmp_path: Path, said: Any, where: str) -> None:
    runs = tmp_path / "runs"
    recorded(runs, "20261201-000000-cccccc", {**SANDBOX, "user": "root"}, result_verifier=said)
    entry = runs_json(runs, tmp_path)["20261201-000000-cccccc"]
    assert entry["verifier"]["where"] == where
    row = runs_rows(runs, tmp_path)["20261201-000000-cccccc"]
    assert "\x1b" not in row and "\x07" not in row
    assert ("not recorded" if where == "unknown" else "sandbox, as r␛]52;c;SGk=␇t") in row
    assert "controller" not in row


def test_a_hostile_place_or_user_in_the_log_is_shown_literally_and_never_as_the_controller(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    hostile = {**SANDBOX, "where": "controller ", "user": "root\x1b[2J"}
    folder = recorded(runs, "20261201-000000-dddddd", hostile)
    with open_run(folder) as run:
        (done,) = run.events(ev.VerificationDone)
    assert checked_by(done) == f"checked by {LAB} in a place not recorded"
    sandboxed = ev.VerificationDone(LAB, True, "ok", VerifierPlace.SANDBOX, "root\x1b[2J")
    assert checked_by(sandboxed) == f"checked by {LAB} inside the sandbox, as root␛[2J"
