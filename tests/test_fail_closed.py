"""Issue 8, points 3, 4, 5 (the supervisor's part) and 9: records that cannot be written stop the run,
signed runs carry their key id and signed checkpoints, hostile text is recorded literally, floods of
actions are refused with one record, and the audit key must be private."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import pytest
from conftest import RunScript, make_supervisor

from cua_tui.core import events as ev
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.audit import (
    CHECKPOINT_EVERY,
    AuditKey,
    AuditKeyError,
    AuditWriteError,
    AuditWriter,
    checkpoint_message,
    verify_run,
)
from cua_tui.core.ports import Answer
from cua_tui.core.supervisor import MAX_ACTIONS_PER_TURN
from cua_tui.desktops.sim import PHRASE, SimDesktop

pytestmark = pytest.mark.timeout(60)

PHRASE_FIELD = (250, 182)
VERIFY = (550, 182)


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "x": point[0], "y": point[1]}


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------------------------------------------
# A small file system that fills up in the middle of a run
# ---------------------------------------------------------------------------------------------------
@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of the test's own (root can mount one; elsewhere the test cannot run)."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> int:
    """Write until the file system is full; return the bytes written."""
    written = 0
    with open(folder / "filler", "wb") as fh:
        chunk = b"\0" * 65536
        while True:
            try:
                written += fh.write(chunk)
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        with contextlib.suppress(OSError):
            for size in (4096, 512, 64, 1):
                while True:
                    fh.write(b"\0" * size)
                    fh.flush()
                    written += size
    return written


class FillingDesktop(SimDesktop):
    """A sim desktop whose file system fills up right after the n-th action reached the screen."""

    def __init__(self, folder: Path, after: int) -> None:
        super().__init__()
        self.folder = folder
        self.after = after
        self.performed: list[str] = []

    def perform(self, action):  # type: ignore[no-untyped-def]
        step = super().perform(action)
        self.performed.append(action.kind.value)
        if len(self.performed) == self.after:
            fill(self.folder)
        return step


def test_a_full_disk_mid_run_stops_execution_and_records_what_ran(small_fs: Path) -> None:
    """The screenshot after an action cannot be stored: that action is recorded executed (it reached the
    page), nothing further runs, the run ends error naming the failed write, and the log verifies."""
    desktop = FillingDesktop(small_fs, after=1)
    turns = [{"actions": [click(PHRASE_FIELD), click(VERIFY), click(PHRASE_FIELD)]}, {"actions": [click(VERIFY)]}]
    sup, events, _ = make_supervisor(small_fs, turns, desktop=desktop)
    result = sup.run()
    assert desktop.performed == ["click"]  # nothing after the failure executed
    assert result.status == "error"
    assert result.reason.startswith("storage: could not write ") and "No space left on device" in result.reason
    run = result.path
    outcomes = [(r["index"], r["status"]) for r in records(run) if r["kind"] == "outcome"]
    assert outcomes[0] == (0, "executed")  # the click that reached the page is on record as executed
    assert all(status != "executed" for _, status in outcomes[1:])
    assert [r["kind"] for r in records(run)][-1] == "run_ended"
    assert any(r["kind"] == "error" and r["where"] == "storage" for r in records(run))
    report = verify_run(run, check_screens=False)
    assert report.code == 0, report.summary  # the reserve left room to record and seal the ending
    assert json.loads((run / "result.json").read_text())["status"] == "error"
    assert not (run / ".reserve").exists()
    assert any(isinstance(e, ev.RunEnded) and e.status == "error" for e in events)


def test_when_not_even_the_ending_fits_the_log_stays_a_verifiable_unsealed_prefix(small_fs: Path) -> None:
    """With the reserve gone too, the run still ends error without a traceback; what is on disk is a
    whole chain (a partly written line is cut off) and verify reports an interrupted prefix."""
    desktop = FillingDesktop(small_fs, after=1)
    sup, _events, _ = make_supervisor(small_fs, [{"actions": [click(PHRASE_FIELD), click(VERIFY)]}], desktop=desktop)
    sup.rundir.release_reserve()
    result = sup.run()
    assert desktop.performed == ["click"]
    assert result.status == "error" and result.reason.startswith("storage: ")
    assert result.seal == {}
    assert not (result.path / "result.json").exists()
    report = verify_run(result.path, check_screens=False)
    assert report.code == 0 and "UNSEALED" in report.summary, report.summary
    assert (result.path / "audit.jsonl").read_bytes().endswith(b"\n")


def test_an_audit_line_that_cannot_be_written_is_cut_off_and_reported(tmp_path: Path) -> None:
    writer = AuditWriter(tmp_path / "audit.jsonl", "r1", fsync=False)
    writer.append("note", {"message": "one"})

    class Full:
        def __init__(self, fh: BinaryIO) -> None:
            self.fh = fh

        def write(self, data: bytes) -> int:
            self.fh.write(data[:10])  # a partial line reaches the file, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")

        def fileno(self) -> int:
            return self.fh.fileno()

        def tell(self) -> int:
            return self.fh.tell()

        def close(self) -> None:
            self.fh.close()

    writer._fh = Full(writer._fh)  # type: ignore[assignment]
    with pytest.raises(AuditWriteError, match=r"could not write audit\.jsonl: No space left on device"):
        writer.append("note", {"message": "two"})
    assert writer.seq == 1
    data = (tmp_path / "audit.jsonl").read_bytes()
    assert data.count(b"\n") == 1 and data.endswith(b"\n")


def test_run_json_that_cannot_be_written_ends_the_run_before_anything_starts(tmp_path: Path) -> None:
    desktop = SimDesktop()
    sup, _events, _ = make_supervisor(tmp_path, [{"actions": [click(PHRASE_FIELD)]}], desktop=desktop)

    def broken(data: dict[str, Any]) -> None:
        raise OSError(errno.EIO, "Input/output error")

    sup.rundir.write_run_json = broken  # type: ignore[method-assign]
    result = sup.run()
    assert result.status == "error" and result.reason == "storage: could not write run.json: Input/output error"
    assert desktop.executed == []


# ---------------------------------------------------------------------------------------------------
# Intent before execution
# ---------------------------------------------------------------------------------------------------
def test_every_executed_action_has_its_intent_on_record_first(run_script: RunScript) -> None:
    run = run_script(
        [{"actions": [click(PHRASE_FIELD), {"type": "type", "text": PHRASE}, click(VERIFY)]}],
        approver=FixedApprover(Answer.APPROVE),
    )
    recs = records(run.path)
    for i, rec in enumerate(recs):
        if rec["kind"] == "outcome" and rec["status"] == "executed":
            intents = [r for r in recs[:i] if r["kind"] == "executing" and r["index"] == rec["index"]]
            assert len(intents) == 1, rec
    assert sum(r["kind"] == "executing" for r in recs) == len(run.desktop.executed) == 3
    assert run.result.status == "passed"


# ---------------------------------------------------------------------------------------------------
# Hostile replies: text UTF-8 cannot carry, floods of actions
# ---------------------------------------------------------------------------------------------------
def test_lone_surrogates_in_model_text_are_recorded_literally_not_an_internal_error(run_script: RunScript) -> None:
    run = run_script(
        [{"text": "look \ud800 here \udfff", "actions": [click(PHRASE_FIELD)]}],
        final_text="done \ud83d\ude00 \ud800",
    )
    assert run.result.status == "failed" and "form server" in run.result.reason  # the verifier's verdict, no error
    turn = next(r for r in records(run.path) if r["kind"] == "model_turn")
    assert turn["text"] == "look \\ud800 here \\udfff"  # the lone surrogates, shown as their escapes
    ended = next(r for r in records(run.path) if r["kind"] == "run_ended")
    assert ended["final_text"] == "done \\ud83d\\ude00 \\ud800"
    transcript = (run.path / "transcript.jsonl").read_text(encoding="utf-8")
    assert json.loads(transcript.splitlines()[0])["text"] == "look \\ud800 here \\udfff"
    assert verify_run(run.path).code == 0


def test_a_flood_of_actions_in_one_turn_is_refused_with_one_record(run_script: RunScript) -> None:
    flood = [click(PHRASE_FIELD)] * 100_000
    started = time.monotonic()
    run = run_script([{"actions": flood}, {"actions": [click(PHRASE_FIELD)]}])
    elapsed = time.monotonic() - started
    assert run.desktop.executed[0].kind.value == "click" and len(run.desktop.executed) == 1  # only turn 2 ran
    recs = records(run.path)
    refused = [r for r in recs if r["kind"] == "turn_refused"]
    assert len(refused) == 1 and refused[0]["actions"] == 100_000
    assert f"cap of {MAX_ACTIONS_PER_TURN}" in refused[0]["reason"]
    assert not any(r["kind"] == "proposal" and r["turn"] == 1 for r in recs)
    assert len(recs) < 40 and (run.path / "audit.jsonl").stat().st_size < 30_000
    heard = run.agent.received[0][0].results
    assert len(heard) == 100_000 and {r.status.value for r in heard} == {"refused"}
    assert "nothing of this turn ran" in heard[0].message
    assert elapsed < 10
    assert verify_run(run.path).code == 0


def test_a_turn_at_the_cap_is_still_proposed_action_by_action(run_script: RunScript) -> None:
    run = run_script([{"actions": [{"type": "wait", "ms": 0}] * MAX_ACTIONS_PER_TURN}])
    recs = records(run.path)
    assert not any(r["kind"] == "turn_refused" for r in recs)
    assert sum(r["kind"] == "proposal" for r in recs) == MAX_ACTIONS_PER_TURN


# ---------------------------------------------------------------------------------------------------
# Signed runs: run_started names the key; checkpoints sign the chain as it grows
# ---------------------------------------------------------------------------------------------------
def private_key(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def test_a_signed_run_says_so_in_its_first_record_and_signs_checkpoints(tmp_path: Path) -> None:
    key = AuditKey.load(private_key(tmp_path / "k", b"s" * 32), for_signing=True)
    many = [{"actions": [{"type": "wait", "ms": 0}] * 50}] * 8  # well over CHECKPOINT_EVERY events
    sup, _events, _ = make_supervisor(tmp_path, many, audit_key=key)
    result = sup.run()
    recs = records(result.path)
    assert recs[0]["kind"] == "run_started"
    assert recs[0]["signed"] == {"algorithm": "hmac-sha256", "key_id": key.key_id}
    checkpoints = [r for r in recs if r["kind"] == "checkpoint"]
    assert len(checkpoints) == len(recs) // CHECKPOINT_EVERY >= 2
    lines = (result.path / "audit.jsonl").read_bytes().split(b"\n")
    for cp in checkpoints:
        assert cp["seq"] % CHECKPOINT_EVERY == 0 and cp["events"] == cp["seq"]
        assert cp["head"] == cp["prev"] == hashlib.sha256(lines[cp["seq"] - 1]).hexdigest()
        assert key.check(checkpoint_message(result.run_id, cp["events"], cp["head"]), cp["signature"]["value"])
    assert verify_run(result.path, key).code == 0


def test_an_unsigned_run_says_so_and_has_no_checkpoints(run_script: RunScript) -> None:
    run = run_script([{"actions": [{"type": "wait", "ms": 0}] * 50}] * 8)
    recs = records(run.path)
    assert recs[0]["signed"] is None
    assert not any(r["kind"] == "checkpoint" for r in recs)


# ---------------------------------------------------------------------------------------------------
# The audit key must be private to the controller
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_signing_key_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "audit.key"
    path.write_bytes(b"k" * 32)
    path.chmod(mode)
    with pytest.raises(AuditKeyError, match=r"readable by other users.*chmod 600"):
        AuditKey.load(path, for_signing=True)
    assert AuditKey.load(path).algorithm == "hmac-sha256"  # verifying with it is still possible


def test_a_signing_key_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to give the file away")
    path = private_key(tmp_path / "audit.key", b"k" * 32)
    os.chown(path, 65534, 65534)
    with pytest.raises(AuditKeyError, match="owned by uid 65534"):
        AuditKey.load(path, for_signing=True)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "huge"])
def test_a_key_path_that_is_not_a_small_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "audit.key"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"k" * (1 << 20))
    started = time.monotonic()
    with pytest.raises(AuditKeyError, match="cannot read it"):
        AuditKey.load(path)
    assert time.monotonic() - started < 5  # a read of the FIFO or /dev/zero would never end


@pytest.mark.parametrize(
    ("where", "mode", "message"),
    [("outside", 0o644, "readable by other users"), ("runs", 0o600, "inside the runs directory")],
)
def test_run_refuses_an_audit_key_others_could_read(tmp_path: Path, where: str, mode: int, message: str) -> None:
    from click.testing import CliRunner

    from cua_tui.cli import main

    runs = tmp_path / "runs"
    runs.mkdir()
    key = (runs if where == "runs" else tmp_path) / "audit.key"
    key.write_bytes(b"k" * 32)
    key.chmod(mode)
    script = tmp_path / "s.json"
    script.write_text('{"turns": []}')
    args = ["run", "--backend", "dry", "--agent", f"script:{script}", "--task", "t", "--headless",
            "--audit-key", str(key), "--runs-dir", str(runs)]  # fmt: skip
    outcome = CliRunner().invoke(main, args)
    assert outcome.exit_code == 2
    assert message in outcome.output
    assert [p.name for p in runs.iterdir()] == (["audit.key"] if where == "runs" else [])  # no run was made


# ---------------------------------------------------------------------------------------------------
# The isolation a desktop obtained is on record
# ---------------------------------------------------------------------------------------------------
class IsolatedSim(SimDesktop):
    isolation = {"namespaces": ["net", "pid"], "uid": 2100000007, "uid_per_run": True}


def test_the_isolation_a_desktop_obtained_goes_to_run_json_and_the_log(run_script: RunScript) -> None:
    run = run_script([{"actions": [click(PHRASE_FIELD)]}], desktop=IsolatedSim())
    info = json.loads((run.path / "run.json").read_text())
    assert info["isolation"] == IsolatedSim.isolation
    assert info["started_at_iso"].endswith("+00:00") and info["started_at"] > 0
    ready = [r for r in records(run.path) if r["kind"] == "desktop_ready"]
    assert len(ready) == 1 and ready[0]["isolation"] == IsolatedSim.isolation
    kinds = [r["kind"] for r in records(run.path)]
    assert kinds.index("desktop_ready") < kinds.index("screen")  # before the first screenshot


def test_a_desktop_without_isolation_info_records_none(run_script: RunScript) -> None:
    run = run_script([{"actions": [click(PHRASE_FIELD)]}])
    assert "isolation" not in json.loads((run.path / "run.json").read_text())
    assert not any(r["kind"] == "desktop_ready" for r in records(run.path))
