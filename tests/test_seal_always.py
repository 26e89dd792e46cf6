"""Issue #20 point 9: every ending writes its seal.

Text UTF-8 cannot carry (a lone surrogate: valid JSON in a model's reply or a script, and what Python makes
of a command-line argument or a path that is not UTF-8) is recorded with each lone surrogate as its visible
escape wherever a run file is written, so such a run is sealed like any other. A run whose seal cannot be
written says so in one line and exits non-zero, never ``finished`` with 0. Every case runs the real command
line in a subprocess and ``cua-tui verify`` on what it left.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cua_tui.core.actions import text_sha256
from cua_tui.core.audit import AuditWriter, encode_record, verify_run
from cua_tui.core.rundir import RunDir, write_json_atomic

pytestmark = pytest.mark.timeout(120)

NOT_UTF8 = os.fsdecode(b"\xff")  # what Python makes of the byte 0xff in argv or a path: "\udcff"


@dataclass
class Ended:
    code: int
    stdout: str
    stderr: str

    @property
    def last_lines(self) -> list[str]:
        """The run's end line and its directory (the next steps follow them)."""
        lines = self.stderr.splitlines()
        end = max((i for i, line in enumerate(lines) if line.startswith("status: ")), default=len(lines) - 2)
        return lines[end : end + 2]


def cua(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Ended:
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", *map(str, args)],
        capture_output=True,
        timeout=100,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    return Ended(proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))


def settings_env(tmp_path: Path) -> dict[str, str]:
    """No settings file of the user's: each run gets the defaults."""
    return {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")}


def script(tmp_path: Path, data: dict[str, Any], name: str = "s.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="ascii")  # json.dumps writes a lone surrogate as \ud800
    return path


def dry_run(tmp_path: Path, script_path: Path, *extra: str | Path, runs: Path | None = None) -> tuple[Ended, Path]:
    runs = runs or tmp_path / "runs"
    ended = cua(
        "run",
        "--headless",
        "--backend",
        "dry",
        "--agent",
        f"script:{script_path}",
        "--runs-dir",
        runs,
        *extra,
        env=settings_env(tmp_path),
    )
    made = [p for p in runs.iterdir() if not p.name.startswith(".")] if runs.exists() else []
    assert len(made) == 1, (made, ended.stderr)
    return ended, made[0]


def assert_sealed(run_dir: Path, tmp_path: Path) -> dict[str, Any]:
    """result.json is there with its seal, nothing of the ending is left behind, and verify says so."""
    names = sorted(p.name for p in run_dir.iterdir())
    assert ".reserve" not in names and not [n for n in names if n.endswith(".tmp")], names
    result: dict[str, Any] = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    checked = cua("verify", run_dir, env=settings_env(tmp_path))
    assert checked.code == 0, checked.stderr
    report = verify_run(run_dir)
    assert report.intact and report.sealed, report.summary
    assert report.events == result["seal"]["events"]
    for name in ("run.json", "result.json", "audit.jsonl", "transcript.jsonl"):
        (run_dir / name).read_bytes().decode("utf-8")  # strict UTF-8, every file of the run
    return result


def audit(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "audit.jsonl").read_text(encoding="utf-8").splitlines()]


# ---------------------------------------------------------------------------------------------------
# Lone surrogates: recorded literally, the run sealed
# ---------------------------------------------------------------------------------------------------
def test_a_lone_surrogate_in_the_final_text_ends_sealed_and_exits_0(tmp_path: Path) -> None:
    """The issue's case: `"final_text": "\\ud800"` ended `finished`, exit 0, with no result.json."""
    ended, run_dir = dry_run(tmp_path, script(tmp_path, {"turns": [], "final_text": "\ud800"}))
    assert ended.code == 0, ended.stderr
    assert ended.last_lines[0] == "status: finished · the agent finished; no independent verifier for this task"
    result = assert_sealed(run_dir, tmp_path)
    assert result["status"] == "finished" and result["final_text"] == "\\ud800"
    assert [r["final_text"] for r in audit(run_dir) if r["kind"] == "run_ended"] == ["\\ud800"]


def test_lone_surrogates_in_every_field_of_a_script_reach_the_records_escaped(tmp_path: Path) -> None:
    """Model text, typed text (recorded as length + SHA-256), a key, an action kind, a field name, a safety
    check's code and message: the run goes on as with any other text and is sealed."""
    typed = "a\ud800b"
    data = {
        "turns": [
            {"text": "look \udfff here", "actions": [{"type": "type", "text": typed}]},
            {"actions": [{"type": "keypress", "keys": ["ctrl+\udc80"]}]},
            {"actions": [{"type": "bogus\ud800"}]},
            {"actions": [{"type": "click", "x": 5, "y": 5, "\ud801": 1}]},
            {
                "actions": [{"type": "wait"}],
                "pending_safety_checks": [{"id": "sc1", "code": "malicious_instructions", "message": "beware \udbff"}],
            },
        ],
        "final_text": "done \ud83d\ude00 \ud800",  # a pair written as two escapes is one character in JSON
    }
    ended, run_dir = dry_run(tmp_path, script(tmp_path, data), "--on-confirm", "approve")
    assert ended.code == 0, ended.stderr
    result = assert_sealed(run_dir, tmp_path)
    assert result["final_text"] == "done \U0001f600 \\ud800"
    records = audit(run_dir)
    line = (run_dir / "audit.jsonl").read_text(encoding="utf-8")
    assert "\ud800" not in line and typed not in line  # never a surrogate, never the typed text itself
    turns = [r["text"] for r in records if r["kind"] == "model_turn"]
    assert turns[0] == "look \\udfff here"
    proposed = next(r for r in records if r["kind"] == "proposal" and r["turn"] == 1)
    assert proposed["action"]["text_len"] == 3
    # The rule for typed text's hash: its code points as UTF-8, a lone surrogate as its own three bytes.
    assert proposed["action"]["text_sha256"] == hashlib.sha256(b"a\xed\xa0\x80b").hexdigest() == text_sha256(typed)
    outcomes = {r["turn"]: (r["status"], r["message"]) for r in records if r["kind"] == "outcome"}
    assert outcomes[1][0] == "executed"
    assert outcomes[2][0] == outcomes[3][0] == outcomes[4][0] == "refused"
    reasons = " ".join(str(r.get("reason", "")) for r in records if r["kind"] == "verdict")
    assert "\\udc80" in reasons and "bogus\\ud800" in reasons and "\\ud801" in reasons
    checks = next(r for r in records if r["kind"] == "safety_checks")
    assert checks["checks"][0]["message"] == "beware \\udbff"
    transcript = (run_dir / "transcript.jsonl").read_text(encoding="utf-8")
    assert "look \\\\udfff here" in transcript and typed not in transcript


def test_command_line_text_and_paths_that_are_not_utf8_are_recorded_escaped(tmp_path: Path) -> None:
    """The task, the policy file's path and the runs directory come from argv, where a byte that is not
    UTF-8 becomes a lone surrogate: run.json and result.json are written all the same. (An operator's name
    is refused at entry unless it is ASCII letters, digits and . - _ @: see the last lines.)"""
    folder = tmp_path / f"pol{NOT_UTF8}"
    folder.mkdir()
    policy = folder / "p.toml"
    policy.write_text('name = "plain"\n')
    runs = tmp_path / f"runs{NOT_UTF8}"
    data = {"turns": [{"actions": [{"type": "type", "text": "hi"}]}], "final_text": "done"}
    ended, run_dir = dry_run(
        tmp_path,
        script(tmp_path, data),
        "--task",
        f"fill {NOT_UTF8}",
        "--policy",
        policy,
        "--on-confirm",
        "approve",
        runs=runs,
    )
    assert ended.code == 0, ended.stderr
    assert_sealed(run_dir, tmp_path)
    info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert info["task"] == "fill \\udcff"
    assert info["policy"]["source"] == str(policy).replace(NOT_UTF8, "\\udcff")
    started = next(r for r in audit(run_dir) if r["kind"] == "run_started")
    assert started["task"] == "fill \\udcff"
    refused = cua("run", "--headless", "--backend", "dry", "--operator", f"ann{NOT_UTF8}", env=settings_env(tmp_path))
    assert refused.code == 2 and "(U+DCFF)" in refused.stderr and "Traceback" not in refused.stderr


def test_a_surrogate_escape_in_a_policy_file_is_refused_at_its_line(tmp_path: Path) -> None:
    """TOML cannot carry a lone surrogate: the policy file is refused before a run directory exists."""
    policy = tmp_path / "p.toml"
    policy.write_text('name = "ok"\ndescription = "x\\ud800"\n')
    runs = tmp_path / "runs"
    agent = f"script:{script(tmp_path, {'turns': [], 'final_text': 'x\ud800'})}"
    ended = cua(
        "run", "--headless", "--backend", "dry", "--agent", agent, "--policy", policy, "--runs-dir", runs,
        env=settings_env(tmp_path),
    )  # fmt: skip
    assert ended.code == 2
    (line,) = ended.stderr.splitlines()
    assert line.startswith("Error: ") and f"{policy}, line 2" in line and "Traceback" not in ended.stderr
    assert not runs.exists() or not list(runs.iterdir())


def test_a_fleet_from_a_tasks_file_whose_path_is_not_utf8_writes_its_manifest_and_seals_each_run(
    tmp_path: Path,
) -> None:
    folder = tmp_path / f"suite{NOT_UTF8}"
    folder.mkdir()
    script(folder, {"turns": [], "final_text": "over \ud800"})
    tasks = folder / "tasks.toml"
    tasks.write_text(
        'version = 1\nname = "suite"\n'
        '[[tasks]]\nname = "one"\ntask = "first"\nagent = "script:s.json"\n'
        '[[tasks]]\nname = "two"\ntask = "second"\nagent = "script:s.json"\n'
    )
    runs = tmp_path / "runs"
    ended = cua(
        "fleet", "--tasks", tasks, "--backend", "dry", "--headless", "--runs-dir", runs, env=settings_env(tmp_path)
    )
    assert ended.code == 0, ended.stderr
    manifest = json.loads((runs / "fleet.json").read_text(encoding="utf-8"))
    (fleet,) = manifest["fleets"].values()
    assert fleet["tasks_file"] == str(tasks).replace(NOT_UTF8, "\\udcff")
    assert [(r["task"], r["status"], r["intact"]) for r in fleet["runs"]] == [
        ("one", "finished", True),
        ("two", "finished", True),
    ]
    for entry in fleet["runs"]:
        result = assert_sealed(runs / entry["run_id"], tmp_path)
        assert result["final_text"] == "over \\ud800"
        info = json.loads((runs / entry["run_id"] / "run.json").read_text(encoding="utf-8"))
        assert "\\udcff" in info["agent"]


def test_a_surrogate_escape_in_a_tasks_file_is_refused_at_its_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.toml"
    tasks.write_text('version = 1\n[[tasks]]\nname = "t"\ntask = "do \\udc00 it"\n')
    runs = tmp_path / "runs"
    ended = cua(
        "fleet", "--tasks", tasks, "--backend", "dry", "--headless", "--runs-dir", runs, env=settings_env(tmp_path)
    )
    assert ended.code == 2
    (line,) = ended.stderr.splitlines()
    assert line.startswith("Error: ") and "line 4" in line and "Traceback" not in ended.stderr
    assert not runs.exists() or not list(runs.iterdir())


# ---------------------------------------------------------------------------------------------------
# The one encoder of run files, under the supervisor's callers
# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Nested:
    title: str
    words: tuple[str, ...]


def test_the_encoder_of_run_files_never_fails_on_text_in_any_shape() -> None:
    """Keys, tuples, dataclasses (msgspec encodes them natively: the fallback must reach inside too)."""
    value = {"k\ud800": [Nested("page \udfff", ("ocr \ud800", "ok"))], "fine": "é"}
    assert json.loads(encode_record(value)) == {
        "k\\ud800": [{"title": "page \\udfff", "words": ["ocr \\ud800", "ok"]}],
        "fine": "é",
    }
    plain = {"a": "é", "b": [1, 2.5, None, True]}
    assert encode_record(plain) == json.dumps(plain, ensure_ascii=False, separators=(",", ":")).encode()


def test_run_json_result_json_and_the_sandbox_id_take_any_text(tmp_path: Path) -> None:
    rundir = RunDir.create(tmp_path / "runs")
    rundir.write_run_json({"task": "t\ud800", "nested": Nested("x\udc00", ())})
    assert json.loads(rundir.run_json.read_text(encoding="utf-8"))["nested"]["title"] == "x\\udc00"
    rundir.write_sandbox_id("sb-\ud800")
    assert rundir.sandbox_id.read_text(encoding="utf-8") == "sb-\\ud800\n"
    writer = AuditWriter(rundir.audit, rundir.run_id, fsync=False)
    writer.append("egress", {"host": "h\ud800.example", "port": 443, "method": "CONNECT", "allowed": False})
    writer.append("screen_text", {"title": "t\udfff", "words": [Nested("w\ud800", ("\udbff",))]})
    seal = writer.seal()
    rundir.write_result({"status": "finished", "reason": "r\ud800", "seal": seal})
    report = verify_run(rundir.path, check_screens=False)
    assert report.intact and report.sealed, report.summary


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.mkdir()  # a folder in the way: the rename fails, as on a full or read-only file system
    with pytest.raises(OSError) as failed:
        write_json_atomic(target, {"a": 1})
    assert failed.value.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


# ---------------------------------------------------------------------------------------------------
# A seal that cannot be written: one line, exit non-zero, never "finished" with 0
# ---------------------------------------------------------------------------------------------------
TYPING = {"turns": [{"actions": [{"type": "type", "text": "hello"}]}], "final_text": "done"}

# An approver command that, at the run's one decision, does something to the run directory and rejects.
APPROVER = """\
import json, os, subprocess, sys
sys.stdin.read()
runs = os.environ["SEAL_TEST_RUNS"]
(run,) = [os.path.join(runs, n) for n in os.listdir(runs) if not n.startswith(".")]
how = os.environ["SEAL_TEST_HOW"]
if how == "folder":  # result.json cannot be written: a folder stands at its path
    os.mkdir(os.path.join(run, "result.json"))
elif how == "read-only":  # the run directory becomes read-only (files already open keep writing)
    subprocess.run(["mount", "--bind", run, run], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", run], check=True)
print(json.dumps({"decision": "reject"}))
"""


def broken_seal_run(tmp_path: Path, how: str) -> tuple[Ended, Path]:
    approver = tmp_path / "approver.py"
    approver.write_text(APPROVER)
    runs = tmp_path / "runs"
    runs.mkdir()
    ended = cua(
        "run", "--headless", "--backend", "dry", "--agent", f"script:{script_file(tmp_path)}", "--runs-dir", runs,
        "--on-confirm", f"approver:{sys.executable} {approver}",
        env={**settings_env(tmp_path), "SEAL_TEST_RUNS": str(runs), "SEAL_TEST_HOW": how},
    )  # fmt: skip
    (run_dir,) = runs.iterdir()
    return ended, run_dir


def script_file(tmp_path: Path) -> Path:
    path = tmp_path / "typing.json"
    path.write_text(json.dumps(TYPING))
    return path


def assert_unsealed_ending(ended: Ended, run_dir: Path, why: str) -> None:
    assert ended.code == 1, ended.stderr
    assert "Traceback" not in ended.stderr
    status = ended.last_lines[0]
    assert status == (
        f"status: error · storage: could not write result.json: {why} "
        "(while ending: the agent finished; no independent verifier for this task)"
    )
    assert not (run_dir / "result.json").is_file()
    assert [r["kind"] for r in audit(run_dir)][-1] == "run_ended"  # what was recorded is whole


def test_a_result_json_that_cannot_be_written_is_an_error_exit_1(tmp_path: Path) -> None:
    ended, run_dir = broken_seal_run(tmp_path, "folder")
    assert_unsealed_ending(ended, run_dir, "Is a directory")
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    assert not (run_dir / ".reserve").exists()
    checked = cua("verify", run_dir, env=settings_env(tmp_path))
    assert checked.code == 1 and checked.stderr.startswith("TAMPERED: result.json: a directory")


def test_a_run_directory_that_turned_read_only_is_an_error_exit_1(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    made = subprocess.run(["mount", "--bind", str(probe), str(probe)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {made.stderr.decode(errors='replace').strip()}")
    subprocess.run(["umount", str(probe)], check=True)
    ended, run_dir = broken_seal_run(tmp_path, "read-only")
    try:
        assert_unsealed_ending(ended, run_dir, "Read-only file system")
        checked = cua("verify", run_dir, env=settings_env(tmp_path))
        assert checked.stdout.startswith("intact prefix, UNSEALED:") and "(interrupted)" in checked.stdout
        report = verify_run(run_dir)
        assert report.intact and not report.sealed, report.summary
    finally:
        subprocess.run(["umount", "-l", str(run_dir)], check=False)
