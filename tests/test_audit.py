"""The audit log (DESIGN.md, "Run directory contract"): the writer's chain, real runs, and the verifier's
verdict on every kind of tampering — the exact code, the first bad line and what was done to it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from runlogs import ABSENT, UNSIGNED, action_records, interrupted_turn, write_run

from cua_tui.core.approvers import FixedApprover
from cua_tui.core.audit import (
    GENESIS,
    AuditClosed,
    AuditKey,
    AuditKeyError,
    AuditWriter,
    checkpoint_message,
    seal_message,
    verify_run,
)
from cua_tui.core.events import ENVELOPE
from cua_tui.core.ports import Answer
from cua_tui.core.rundir import write_json_atomic

SECRET = "hunter2-secret"
ENVELOPE_KEYS = ("seq", "ts", "run", "kind", "prev")
OUTCOME_STATUSES = {"executed", "declined", "refused", "failed", "not_executed", "stale"}

# click the field, type a secret (needs approval), then a blocked system key combination
TURNS: list[dict[str, Any]] = [
    {
        "actions": [
            {"type": "click", "x": 250, "y": 182},
            {"type": "type", "text": SECRET},
            {"type": "keypress", "keys": ["ctrl", "alt", "delete"]},
        ]
    }
]


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------
def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_lines(run_dir: Path) -> list[bytes]:
    """audit.jsonl as lines without their newlines (every line of a finished run ends with one)."""
    data = (run_dir / "audit.jsonl").read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


def write_lines(run_dir: Path, lines: list[bytes]) -> None:
    (run_dir / "audit.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_lines(run_dir)]


def encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()


def read_result(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return data


def write_result(run_dir: Path, data: dict[str, Any]) -> None:
    (run_dir / "result.json").write_text(json.dumps(data, indent=2))


def rechain(run_dir: Path, edit: Callable[[list[dict[str, Any]]], object]) -> None:
    """Edit the records, then recompute every seq and prev and the seal's count and head consistently
    (keeping whatever signature the seal had): what a forger without the key can do."""
    recs = records(run_dir)
    edit(recs)
    prev = GENESIS
    out = []
    for seq, rec in enumerate(recs):
        rec["seq"], rec["prev"] = seq, prev
        line = encode(rec)
        out.append(line)
        prev = sha(line)
    write_lines(run_dir, out)
    result = read_result(run_dir)
    result["seal"]["events"], result["seal"]["head"] = len(out), prev
    write_result(run_dir, result)


def line_of(run_dir: Path, predicate: Callable[[dict[str, Any]], bool]) -> int:
    """The 1-based line number of the first record matching predicate."""
    for number, rec in enumerate(records(run_dir), start=1):
        if predicate(rec):
            return number
    raise AssertionError("no such record")


def tampered(report: Any, *fragments: str) -> None:
    assert report.code == 1, report.summary
    assert report.summary.startswith("TAMPERED: "), report.summary
    for fragment in fragments:
        assert fragment in report.summary, f"{fragment!r} not in {report.summary!r}"


@pytest.fixture(scope="module")
def hmac_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AuditKey]:
    path = tmp_path_factory.mktemp("keys") / "audit.key"
    path.write_bytes(b"correct horse battery staple, kept outside the run\n")
    return path, AuditKey.load(path)


@pytest.fixture(scope="module")
def ed_keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("ed25519")
    private = ed25519.Ed25519PrivateKey.generate()
    priv_path, pub_path = folder / "audit.pem", folder / "audit.pub.pem"
    priv_path.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    pub_path.write_bytes(
        private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return priv_path, pub_path


def real_run(folder: Path, key: AuditKey | None) -> Path:
    sup, _events, _agent = make_supervisor(
        folder, TURNS, approver=FixedApprover(Answer.APPROVE), audit_key=key, task="audit test"
    )
    result = sup.run()
    assert result.seal["events"] > 20
    return result.path


@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory, hmac_key: tuple[Path, AuditKey]) -> Path:
    """One real run, sealed and signed with the HMAC key; tests tamper with copies of it."""
    return real_run(tmp_path_factory.mktemp("sealed"), hmac_key[1])


@pytest.fixture
def run_copy(sealed_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / sealed_run.name
    shutil.copytree(sealed_run, target)
    return target


@pytest.fixture(scope="module")
def ed_run(tmp_path_factory: pytest.TempPathFactory, ed_keys: tuple[Path, Path]) -> Path:
    return real_run(tmp_path_factory.mktemp("ed-sealed"), AuditKey.load(ed_keys[0]))


# ---------------------------------------------------------------------------------------------------
# 1. The writer
# ---------------------------------------------------------------------------------------------------
def test_writer_chains_exact_line_bytes_from_genesis(tmp_path: Path) -> None:
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1", fsync=False, clock=lambda: 1234.56789012)
    returned = [writer.append("note", {"message": f"m{i}", "n": i, "text": "é ☃"}) for i in range(5)]
    writer.close()
    lines = read_lines(tmp_path)
    assert len(lines) == 5
    prev = GENESIS
    for i, line in enumerate(lines):
        rec = json.loads(line)
        assert list(rec)[:5] == list(ENVELOPE_KEYS)
        assert set(ENVELOPE_KEYS) <= set(rec)
        assert rec["seq"] == i
        assert rec["prev"] == prev
        assert rec["run"] == "run-1"
        assert rec["kind"] == "note"
        assert rec["ts"] == 1234.56789
        assert rec["n"] == i and rec["message"] == f"m{i}"
        assert returned[i] == (i, sha(line))
        prev = sha(line)
    assert json.loads(lines[0])["prev"] == "0" * 64
    assert writer.head == prev and writer.seq == 5


def test_envelope_keys_are_the_documented_ones() -> None:
    assert tuple(ENVELOPE) == ENVELOPE_KEYS


@pytest.mark.parametrize("key", ENVELOPE_KEYS)
def test_payload_key_colliding_with_envelope_is_refused(tmp_path: Path, key: str) -> None:
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1", fsync=False)
    writer.append("note", {"message": "first"})
    before = (tmp_path / "audit.jsonl").read_bytes()
    with pytest.raises(ValueError, match="collides"):
        writer.append("note", {"message": "x", key: "forged"})
    assert (tmp_path / "audit.jsonl").read_bytes() == before  # nothing half-written
    seq, _ = writer.append("note", {"message": "after"})
    assert seq == 1  # the refused record did not consume a seq
    writer.close()
    assert [r["seq"] for r in records(tmp_path)] == [0, 1]


def test_every_line_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_fsync = os.fsync  # the os module the audit writer reads

    def fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1")
    for i in range(3):
        writer.append("note", {"message": str(i)})
        assert len(calls) == i + 1  # synced before append returns
    writer.seal()
    assert len(calls) == 4
    calls.clear()
    unsynced = AuditWriter(tmp_path / "other.jsonl", "run-2", fsync=False)
    unsynced.append("note", {"message": "x"})
    assert calls == []
    unsynced.close()


def test_append_after_seal_raises_and_seal_is_stable(tmp_path: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    key = hmac_key[1]
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1", fsync=False)
    for i in range(3):
        writer.append("note", {"message": str(i)})
    seal = writer.seal(key)
    assert seal["events"] == 3
    assert seal["head"] == sha(read_lines(tmp_path)[-1])
    assert seal["signature"]["algorithm"] == "hmac-sha256"
    assert seal["signature"]["key_id"] == key.key_id
    assert key.check(seal_message("run-1", 3, seal["head"]), seal["signature"]["value"])
    before = (tmp_path / "audit.jsonl").read_bytes()
    with pytest.raises(AuditClosed):
        writer.append("note", {"message": "late"})
    assert (tmp_path / "audit.jsonl").read_bytes() == before
    assert writer.seal(key) == seal  # sealing again changes nothing
    assert "signature" not in writer.seal()


def test_append_after_close_raises(tmp_path: Path) -> None:
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1", fsync=False)
    writer.append("note", {"message": "x"})
    writer.close()
    with pytest.raises(AuditClosed):
        writer.append("note", {"message": "y"})


def test_writer_is_thread_safe(tmp_path: Path) -> None:
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1", fsync=False)
    threads_n, per_thread = 8, 200
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                writer.append("note", {"thread": t, "i": i})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    seal = writer.seal()
    lines = read_lines(tmp_path)
    assert len(lines) == threads_n * per_thread == seal["events"]
    prev = GENESIS
    for seq, line in enumerate(lines):
        rec = json.loads(line)
        assert rec["seq"] == seq and rec["prev"] == prev
        prev = sha(line)
    assert prev == seal["head"]
    seen = Counter((r["thread"], r["i"]) for r in map(json.loads, lines))
    assert len(seen) == threads_n * per_thread and set(seen.values()) == {1}
    # each thread's own records stay in order
    for t in range(threads_n):
        assert [r["i"] for r in map(json.loads, lines) if r["thread"] == t] == list(range(per_thread))
    write_json_atomic(tmp_path / "result.json", {"status": "finished", "seal": seal})
    report = verify_run(tmp_path)
    assert report.code == 0, report.summary
    assert report.events == threads_n * per_thread


# ---------------------------------------------------------------------------------------------------
# 2. A real run
# ---------------------------------------------------------------------------------------------------
def test_real_run_is_intact_and_never_stores_typed_text(run_script: Callable[..., Any]) -> None:
    run = run_script(TURNS, approver=FixedApprover(Answer.APPROVE))
    report = verify_run(run.path)
    assert report.code == 0, report.summary
    assert report.summary.startswith("intact: ")
    assert "sealed" in report.summary and "unsigned" in report.summary
    assert report.events == run.result.seal["events"] == len(run.audit())
    assert not report.problems
    assert report.ended == run.result.status == "failed"  # the run_ended record's, read in the one walk

    # the type action was approved and executed, so the secret reached the desktop ...
    assert (1, 1, "executed", "OK") in run.outcomes()
    assert run.desktop.app.values.get("phrase") == SECRET
    # ... but no file of the run directory holds it (screenshots show it, as the screen did)
    secret = SECRET.encode()
    checked = 0
    for path in sorted(run.path.rglob("*")):
        if not path.is_file() or (path.parent.name == "screens" and path.suffix == ".png"):
            continue
        data = path.read_bytes()
        assert secret not in data, f"typed text stored in {path.name}"
        assert SECRET.encode("utf-16-le") not in data
        checked += 1
    assert checked >= 4  # run.json, audit.jsonl, transcript.jsonl, result.json
    audit_text = (run.path / "audit.jsonl").read_text()
    typed = [r["action"] for r in run.audit() if r["kind"] == "proposal" and r["action"]["kind"] == "type"]
    assert len(typed) == 1
    assert typed[0]["text_len"] == len(SECRET)
    assert typed[0]["text_sha256"] == sha(SECRET.encode())
    assert "text" not in typed[0]
    assert sha(SECRET.encode()) in audit_text


def test_every_proposal_has_exactly_one_outcome(run_script: Callable[..., Any]) -> None:
    turns = [
        *TURNS,
        # a declined type halts the batch: the click after it is answered "not executed"
        {"actions": [{"type": "type", "text": "second"}, {"type": "click", "x": 10, "y": 10}]},
    ]
    answers = iter([Answer.APPROVE, Answer.REJECT])

    class Scripted(FixedApprover):
        def decide(self, request: Any, cancel: threading.Event) -> Any:
            self.answer = next(answers)
            return super().decide(request, cancel)

    run = run_script(turns, approver=Scripted(Answer.APPROVE))
    recs = run.audit()
    proposals = [(r["turn"], r["index"]) for r in recs if r["kind"] == "proposal"]
    outcomes = [r for r in recs if r["kind"] == "outcome"]
    assert len(proposals) == 5
    assert Counter((o["turn"], o["index"]) for o in outcomes) == Counter(proposals)
    for o in outcomes:
        assert {"turn", "index", "status", "message"} <= set(o)
        assert o["status"] in OUTCOME_STATUSES and isinstance(o["message"], str) and o["message"]
    statuses = [(o["turn"], o["index"], o["status"]) for o in outcomes]
    assert statuses == [
        (1, 0, "executed"),
        (1, 1, "executed"),
        (1, 2, "refused"),
        (2, 0, "declined"),
        (2, 1, "not_executed"),
    ]
    assert [o["message"] for o in outcomes if o["status"] == "executed"] == ["OK", "OK"]
    # each outcome comes after its own proposal
    proposal_seq = {(r["turn"], r["index"]): r["seq"] for r in recs if r["kind"] == "proposal"}
    for o in outcomes:
        assert proposal_seq[o["turn"], o["index"]] < o["seq"]
    assert verify_run(run.path).code == 0


# ---------------------------------------------------------------------------------------------------
# 3. Tampering with a sealed, signed run
# ---------------------------------------------------------------------------------------------------
MIDDLE = 10  # a 1-based line in the middle of the ~29-line log


def test_untouched_copy_is_intact(run_copy: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    report = verify_run(run_copy, hmac_key[1])
    assert report.code == 0, report.summary
    assert "signature verified" in report.summary
    assert report.sealed and report.signed and report.signature_checked
    unkeyed = verify_run(run_copy)
    assert unkeyed.code == 0
    assert "signature not checked" in unkeyed.summary
    assert any("--key" in note for note in unkeyed.notes)


def test_edited_field_in_middle_line(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    number = line_of(run_copy, lambda r: r["kind"] == "outcome" and r["status"] == "refused")
    assert 2 < number < len(lines) - 2
    edited = lines[number - 1].replace(b'"status":"refused"', b'"status":"executed"')
    assert edited != lines[number - 1]
    json.loads(edited)  # still valid JSON
    lines[number - 1] = edited
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {number}: edited")


@pytest.mark.parametrize("field", ["ts", "kind", "run", "message_added"])
def test_edited_envelope_or_payload_field_names_that_line(run_copy: Path, field: str) -> None:
    lines = read_lines(run_copy)
    rec = json.loads(lines[MIDDLE - 1])
    if field == "ts":
        rec["ts"] += 1.0
    elif field == "kind":
        rec["kind"] = "note"
    elif field == "run":
        rec["run"] = "20200101-000000-abcdef"
    else:
        rec["extra"] = "added"
    lines[MIDDLE - 1] = encode(rec)
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {MIDDLE}: edited")


def test_edited_first_line(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    lines[0] = lines[0].replace(b'"task":"audit test"', b'"task":"something else"')
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), "line 1: edited")


def test_edited_run_field_of_first_line(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    rec = json.loads(lines[0])
    rec["run"] = "20200101-000000-abcdef"
    lines[0] = encode(rec)
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), "line 1: edited")


@pytest.mark.parametrize("where", ["middle", "last"])
def test_edited_prev_field_names_the_edited_line(run_copy: Path, where: str) -> None:
    lines = read_lines(run_copy)
    number = MIDDLE if where == "middle" else len(lines)
    rec = json.loads(lines[number - 1])
    rec["prev"] = "1" * 64
    lines[number - 1] = encode(rec)
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {number}: edited")


def test_edited_last_line(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    assert json.loads(lines[-1])["kind"] == "run_ended"
    lines[-1] = lines[-1].replace(b'"status":"failed"', b'"status":"passed"')
    assert b'"status":"passed"' in lines[-1]
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {len(lines)}: edited")


@pytest.mark.parametrize("count", [1, 2])
def test_deleted_middle_lines(run_copy: Path, count: int) -> None:
    lines = read_lines(run_copy)
    del lines[MIDDLE - 1 : MIDDLE - 1 + count]
    write_lines(run_copy, lines)
    what = "1 line deleted" if count == 1 else f"{count} lines deleted"
    tampered(verify_run(run_copy), f"line {MIDDLE}: ", what)


def test_deleted_first_line(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    write_lines(run_copy, lines[1:])
    tampered(verify_run(run_copy), "line 1: ", "deleted")


def _forged(lines: list[bytes], number: int) -> bytes:
    """A forged record that looks right where it is inserted: the next seq and the previous line's hash."""
    run_id = json.loads(lines[0])["run"]
    prev = GENESIS if number == 1 else sha(lines[number - 2])
    return encode({"seq": number - 1, "ts": 1.0, "run": run_id, "kind": "note", "prev": prev, "message": "forged"})


@pytest.mark.parametrize("number", [1, MIDDLE])
def test_inserted_forged_line_with_correct_looking_seq_and_prev(run_copy: Path, number: int) -> None:
    lines = read_lines(run_copy)
    lines.insert(number - 1, _forged(lines, number))
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {number}: inserted")


def test_inserted_line_with_wrong_seq_and_prev(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    run_id = json.loads(lines[0])["run"]
    junk = encode({"seq": 999, "ts": 1.0, "run": run_id, "kind": "note", "prev": "ab" * 32, "message": "x"})
    lines.insert(MIDDLE - 1, junk)
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {MIDDLE}: inserted")


def test_inserted_line_from_another_run(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    forged = json.loads(_forged(lines, MIDDLE))
    forged["run"] = "20200101-000000-abcdef"
    lines.insert(MIDDLE - 1, encode(forged))
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {MIDDLE}: inserted")


@pytest.mark.parametrize("first,second", [(MIDDLE, MIDDLE + 1), (1, 2), (MIDDLE, MIDDLE + 3), (MIDDLE, MIDDLE + 2)])
def test_swapped_lines(run_copy: Path, first: int, second: int) -> None:
    lines = read_lines(run_copy)
    lines[first - 1], lines[second - 1] = lines[second - 1], lines[first - 1]
    write_lines(run_copy, lines)
    report = verify_run(run_copy)
    tampered(report, f"line {first}: ", "reordered")
    assert "inserted" not in report.summary


def test_swapped_last_two_lines(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    lines[-1], lines[-2] = lines[-2], lines[-1]
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {len(lines) - 1}: ", "reordered")


@pytest.mark.parametrize("cut", [1, 3])
def test_truncated_sealed_run(run_copy: Path, cut: int) -> None:
    lines = read_lines(run_copy)
    write_lines(run_copy, lines[:-cut])
    tampered(verify_run(run_copy), "truncated", f"records {len(lines)} events, the log has {len(lines) - cut}")


def test_truncated_to_nothing(run_copy: Path) -> None:
    (run_copy / "audit.jsonl").write_bytes(b"")
    tampered(verify_run(run_copy), "truncated")


def test_line_appended_after_seal(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    run_id = json.loads(lines[0])["run"]
    extra = encode({"seq": len(lines), "ts": 2.0, "run": run_id, "kind": "note", "prev": sha(lines[-1])})
    write_lines(run_copy, [*lines, extra])
    tampered(verify_run(run_copy), f"line {len(lines) + 1}: appended after", f"sealed at {len(lines)} events")


@pytest.mark.parametrize(
    "extra", [b'{"kind":"note"}\n', b"garbage\n", b'{"seq": 1', b"\n"], ids=["record", "garbage", "partial", "blank"]
)
def test_junk_appended_after_seal(run_copy: Path, extra: bytes) -> None:
    lines = read_lines(run_copy)
    with open(run_copy / "audit.jsonl", "ab") as fh:
        fh.write(extra)
    tampered(verify_run(run_copy), f"line {len(lines) + 1}: appended after")


@pytest.mark.parametrize("junk", [b"{not json", b"", b"[1, 2, 3]", b'"text"', b"\xff\xfe"])
def test_line_replaced_with_invalid_json(run_copy: Path, junk: bytes) -> None:
    lines = read_lines(run_copy)
    lines[MIDDLE - 1] = junk
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {MIDDLE}: not a valid JSON record")


def test_line_without_envelope(run_copy: Path) -> None:
    lines = read_lines(run_copy)
    rec = json.loads(lines[MIDDLE - 1])
    del rec["prev"]
    lines[MIDDLE - 1] = encode(rec)
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {MIDDLE}: missing seq, ")


def test_sealed_last_line_cut_in_the_middle(run_copy: Path) -> None:
    data = (run_copy / "audit.jsonl").read_bytes()
    (run_copy / "audit.jsonl").write_bytes(data[:-20])
    tampered(verify_run(run_copy), f"line {data.count(b'\n')}: incomplete line")


def test_seal_head_changed(run_copy: Path) -> None:
    result = read_result(run_copy)
    result["seal"]["head"] = "f" * 64
    write_result(run_copy, result)
    tampered(verify_run(run_copy), "head")


@pytest.mark.parametrize("events", [-1, +1])
def test_seal_count_changed(run_copy: Path, events: int) -> None:
    result = read_result(run_copy)
    result["seal"]["events"] += events
    write_result(run_copy, result)
    report = verify_run(run_copy)
    tampered(report, "truncated" if events > 0 else "appended after")


@pytest.mark.parametrize(
    "content", [b"{not json", b"", b"[]", b'{"status": "passed"}', b'{"seal": {"events": "29", "head": 1}}']
)
def test_result_json_broken_or_without_seal(run_copy: Path, content: bytes) -> None:
    (run_copy / "result.json").write_bytes(content)
    tampered(verify_run(run_copy), "result.json")


def _screen_line(run_dir: Path) -> tuple[int, str]:
    """A screenshot referenced by a screen event, and the first line that references it."""
    recs = records(run_dir)
    shas = [r["sha256"] for r in recs if r["kind"] == "screen"]
    target = shas[-1]
    return line_of(run_dir, lambda r: r["kind"] == "screen" and r["sha256"] == target), target


def test_missing_screenshot(run_copy: Path) -> None:
    number, target = _screen_line(run_copy)
    (run_copy / "screens" / f"{target}.png").unlink()
    tampered(verify_run(run_copy), f"line {number}: screenshot {target[:12]}", "missing")
    assert verify_run(run_copy, check_screens=False).code == 0


def test_altered_screenshot(run_copy: Path) -> None:
    number, target = _screen_line(run_copy)
    png = run_copy / "screens" / f"{target}.png"
    data = bytearray(png.read_bytes())
    data[len(data) // 2] ^= 0x01
    png.write_bytes(bytes(data))
    tampered(verify_run(run_copy), f"line {number}: screenshot {target[:12]}", "altered")


def test_every_screen_event_has_its_png(run_copy: Path) -> None:
    shas = {r["sha256"] for r in records(run_copy) if r["kind"] == "screen"}
    stored = {p.stem for p in (run_copy / "screens").glob("*.png")}
    assert shas == stored
    for name in stored:
        assert sha((run_copy / "screens" / f"{name}.png").read_bytes()) == name


def _flip_refusal(recs: list[dict[str, Any]]) -> None:
    for rec in recs:
        if rec["kind"] == "outcome" and rec["status"] == "refused":
            rec["status"], rec["message"] = "executed", "OK"
            return
    raise AssertionError("no refused outcome")


def test_recomputed_chain_passes_without_key_but_fails_the_hmac_signature(
    run_copy: Path, hmac_key: tuple[Path, AuditKey]
) -> None:
    rechain(run_copy, _flip_refusal)
    plain = verify_run(run_copy)
    assert plain.code == 0, plain.summary  # without the key a consistent forgery cannot be told apart
    assert "signature not checked" in plain.summary
    tampered(verify_run(run_copy, hmac_key[1]), "signature does not match")


def test_recomputed_chain_after_deletion_fails_the_signature(run_copy: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    rechain(run_copy, lambda recs: recs.pop(MIDDLE - 1))
    assert verify_run(run_copy).code == 0
    tampered(verify_run(run_copy, hmac_key[1]), "signature")


def test_ed25519_signed_run_verifies_with_public_and_private_key(ed_run: Path, ed_keys: tuple[Path, Path]) -> None:
    priv, pub = ed_keys
    public = AuditKey.load(pub)
    assert not public.can_sign and AuditKey.load(priv).can_sign
    assert public.key_id == AuditKey.load(priv).key_id
    seal = read_result(ed_run)["seal"]
    assert seal["signature"]["algorithm"] == "ed25519" and seal["signature"]["key_id"] == public.key_id
    for key in (public, AuditKey.load(priv)):
        report = verify_run(ed_run, key)
        assert report.code == 0, report.summary
        assert "signature verified" in report.summary


def test_recomputed_chain_fails_the_ed25519_signature(ed_run: Path, ed_keys: tuple[Path, Path], tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(ed_run, copy)
    rechain(copy, _flip_refusal)
    assert verify_run(copy).code == 0
    tampered(verify_run(copy, AuditKey.load(ed_keys[1])), "signature does not match")


def test_removed_signature_with_key(run_copy: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    result = read_result(run_copy)
    del result["seal"]["signature"]
    write_result(run_copy, result)
    assert verify_run(run_copy).code == 0  # an unsigned seal is fine when nobody asks
    tampered(verify_run(run_copy, hmac_key[1]), "not signed", "signature removed")


@pytest.mark.parametrize(
    "value", ["0" * 64, "", "é" * 64, "zz", "\x00"], ids=["zeros", "empty", "non-ascii", "not-hex", "nul"]
)
def test_forged_signature_value(run_copy: Path, hmac_key: tuple[Path, AuditKey], value: str) -> None:
    result = read_result(run_copy)
    result["seal"]["signature"]["value"] = value
    write_result(run_copy, result)
    tampered(verify_run(run_copy, hmac_key[1]), "signature")


def test_signature_of_another_run_does_not_fit(
    run_copy: Path, ed_run: Path, hmac_key: tuple[Path, AuditKey], tmp_path: Path
) -> None:
    # a valid seal+signature copied from elsewhere does not fit this log
    other = tmp_path / "other"
    shutil.copytree(ed_run, other)
    result = read_result(run_copy)
    result["seal"]["signature"] = read_result(other)["seal"]["signature"]
    write_result(run_copy, result)
    tampered(verify_run(run_copy, hmac_key[1]), "signature")


def test_wrong_key(run_copy: Path, tmp_path: Path, ed_keys: tuple[Path, Path]) -> None:
    other = tmp_path / "other.key"
    other.write_bytes(b"a different secret of enough length")
    tampered(verify_run(run_copy, AuditKey.load(other)), "signature")
    tampered(verify_run(run_copy, AuditKey.load(ed_keys[1])), "signature", "ed25519")


def test_non_string_run_id_in_recomputed_chain_is_tampered_not_a_crash(
    run_copy: Path, hmac_key: tuple[Path, AuditKey]
) -> None:
    def numeric_run(recs: list[dict[str, Any]]) -> None:
        for rec in recs:
            rec["run"] = 5

    rechain(run_copy, numeric_run)
    tampered(verify_run(run_copy, hmac_key[1]), "line 1: ")
    tampered(verify_run(run_copy), "line 1: ")


# ---------------------------------------------------------------------------------------------------
# 4. Unsealed (interrupted) runs
# ---------------------------------------------------------------------------------------------------
def test_unsealed_run_verifies_as_prefix(run_copy: Path) -> None:
    n = len(read_lines(run_copy))
    (run_copy / "result.json").unlink()
    report = verify_run(run_copy)
    assert report.code == 0, report.summary
    assert "UNSEALED" in report.summary and f"{n} events" in report.summary
    assert not report.sealed and report.events == n


def test_unsealed_run_with_cut_last_line(run_copy: Path) -> None:
    (run_copy / "result.json").unlink()
    data = (run_copy / "audit.jsonl").read_bytes()
    n = data.count(b"\n")
    (run_copy / "audit.jsonl").write_bytes(data[:-30])  # the last line loses its end and its newline
    report = verify_run(run_copy)
    assert report.code == 0, report.summary
    assert "UNSEALED" in report.summary
    assert report.events == n - 1
    assert any(f"line {n}: incomplete last line" in note for note in report.notes), report.notes


def test_unsealed_run_with_tampered_middle_line(run_copy: Path) -> None:
    (run_copy / "result.json").unlink()
    lines = read_lines(run_copy)
    number = next(n for n in range(MIDDLE, len(lines)) if b'"turn":1' in lines[n - 1])
    lines[number - 1] = lines[number - 1].replace(b'"turn":1', b'"turn":7', 1)
    write_lines(run_copy, lines)
    tampered(verify_run(run_copy), f"line {number}: edited")


def test_unsealed_run_with_deleted_line_and_cut_tail(run_copy: Path) -> None:
    (run_copy / "result.json").unlink()
    lines = read_lines(run_copy)
    del lines[MIDDLE - 1]
    data = b"".join(line + b"\n" for line in lines)
    (run_copy / "audit.jsonl").write_bytes(data[:-10])
    tampered(verify_run(run_copy), f"line {MIDDLE}: ", "deleted")


def test_interrupted_writer_without_seal(tmp_path: Path) -> None:
    writer = AuditWriter(tmp_path / "audit.jsonl", "run-1", fsync=False)
    for i in range(4):
        writer.append("note", {"message": str(i)})
    writer.close()
    report = verify_run(tmp_path)
    assert report.code == 0 and "UNSEALED" in report.summary and report.events == 4
    assert report.ended is None  # no run_ended record: the record says no end


@pytest.mark.parametrize(
    ("status", "ended"),
    [
        ("killed", "killed"),
        ("passed", "passed"),
        ("limit", "limit"),
        ("passed\x1b]52;c;SGVsbG8=\x07", None),  # not a word the table could show as a status
        ("passé", None),
        ("passed, says the log", None),
        ("p" * 33, None),
        (7, None),
        (["passed"], None),
        (None, None),
    ],
    ids=str,
)
def test_the_walk_reads_the_status_of_the_run_ended_record(tmp_path: Path, status: Any, ended: str | None) -> None:
    """The run's end as the sealed record gives it (`runs` shows it over result.json's, which the seal does
    not cover); anything but a short ASCII word is no status."""
    run = write_run(tmp_path / "run", None, action_records(1), signed=UNSIGNED, ended=status)
    report = verify_run(run)
    assert report.code == 0 and report.sealed, report.summary
    assert report.ended == ended


# ---------------------------------------------------------------------------------------------------
# 5. Unusable input and keys
# ---------------------------------------------------------------------------------------------------
def test_nonexistent_path_is_unusable(tmp_path: Path) -> None:
    report = verify_run(tmp_path / "nope")
    assert report.code == 2 and "not a run directory" in report.summary


def test_directory_without_audit_log_is_unusable(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text("{}")
    report = verify_run(tmp_path)
    assert report.code == 2 and "no audit.jsonl" in report.summary


def test_file_instead_of_directory_is_unusable(run_copy: Path) -> None:
    report = verify_run(run_copy / "audit.jsonl")
    assert report.code == 2 and "not a run directory" in report.summary


def test_audit_log_that_is_a_directory_is_unusable(tmp_path: Path) -> None:
    (tmp_path / "audit.jsonl").mkdir()
    assert verify_run(tmp_path).code == 2


def test_key_loading_errors(tmp_path: Path) -> None:
    with pytest.raises(AuditKeyError, match="cannot read"):
        AuditKey.load(tmp_path / "missing.key")
    with pytest.raises(AuditKeyError, match="cannot read"):
        AuditKey.load(tmp_path)  # a directory
    short = tmp_path / "short.key"
    short.write_bytes(b"too short\n")
    with pytest.raises(AuditKeyError, match="16 bytes"):
        AuditKey.load(short)
    garbage = tmp_path / "garbage.pem"
    garbage.write_bytes(b"-----BEGIN PUBLIC KEY-----\nnot base64 at all\n-----END PUBLIC KEY-----\n")
    with pytest.raises(AuditKeyError, match="not a usable PEM"):
        AuditKey.load(garbage)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_path = tmp_path / "ec.pem"
    ec_path.write_bytes(
        ec_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    with pytest.raises(AuditKeyError, match="Ed25519"):
        AuditKey.load(ec_path)


def test_hmac_key_ignores_surrounding_whitespace(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"0123456789abcdef-secret")
    b.write_bytes(b"0123456789abcdef-secret\n")
    ka, kb = AuditKey.load(a), AuditKey.load(b)
    assert ka.algorithm == "hmac-sha256" and ka.key_id == kb.key_id
    assert kb.check(b"message", ka.sign(b"message"))
    assert "secret" not in repr(ka)


def test_a_screen_event_whose_hash_is_not_a_hash_is_tampering(tmp_path: Path) -> None:
    """A forged `screen` record must not make the verifier open paths outside screens/."""
    run = tmp_path / "20261130-000000-abcdef"
    run.mkdir()
    writer = AuditWriter(run / "audit.jsonl", run.name, fsync=False)
    writer.append("note", {"message": "hi"})
    writer.append("screen", {"sha256": "../../../etc/passwd", "width": 1, "height": 1})
    writer.close()
    report = verify_run(run)
    assert report.code == 1
    assert "line 2: edited (a screen event without a valid sha256)" in report.summary


# ---------------------------------------------------------------------------------------------------
# 6. Signed runs cannot be silently truncated: run_started names the key, checkpoints sign the prefix
# ---------------------------------------------------------------------------------------------------
def cut(run_dir: Path, keep: int) -> None:
    """What an attacker (or a crash) leaves: the first ``keep`` lines, no result.json."""
    write_lines(run_dir, read_lines(run_dir)[:keep])
    (run_dir / "result.json").unlink(missing_ok=True)


def not_verified(report: Any, *fragments: str) -> None:
    assert report.code == 1, report.summary
    assert report.summary.startswith("NOT VOUCHED FOR: "), report.summary
    for fragment in fragments:
        assert fragment in report.summary, f"{fragment!r} not in {report.summary!r}"


@pytest.fixture
def signed_log(tmp_path: Path, hmac_key: tuple[Path, AuditKey]) -> Path:
    """A sealed, signed run of about 920 events: checkpoints at events 256, 512 and 768."""
    return write_run(tmp_path / "20261201-000000-5167ed", hmac_key[1], action_records(70))


def test_checkpoint_message_is_the_documented_bytes() -> None:
    assert checkpoint_message("r-1", 256, "ab" * 32) == b"cua-tui checkpoint v1\nr-1\n256\n" + b"ab" * 32
    assert checkpoint_message("r", 1, "h") != seal_message("r", 1, "h")  # one can never stand for the other


def test_signed_run_with_checkpoints_verifies(signed_log: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    recs = records(signed_log)
    checkpoints = [r for r in recs if r["kind"] == "checkpoint"]
    assert [c["events"] for c in checkpoints] == [256, 512, 768] == [c["seq"] for c in checkpoints]
    report = verify_run(signed_log, hmac_key[1])
    assert report.code == 0, report.summary
    assert "signature verified" in report.summary and report.checkpoint == 768 and report.run_signed
    unkeyed = verify_run(signed_log)
    assert unkeyed.code == 0 and "signed (signature not checked)" in unkeyed.summary


def test_ed25519_checkpoints_verify_with_the_public_key(tmp_path: Path, ed_keys: tuple[Path, Path]) -> None:
    run = write_run(tmp_path / "r", AuditKey.load(ed_keys[0]), action_records(30))
    cut(run, 300)
    not_verified(verify_run(run, AuditKey.load(ed_keys[1])), "signed up to checkpoint at event 256 of 300")


@pytest.mark.parametrize(
    "keep,covered",
    [(600, "signed up to checkpoint at event 512 of 600"), (513, "at event 512 of 513"), (100, "no signed checkpoint")],
)
def test_signed_run_cut_short_and_unsealed_fails_with_the_key(
    signed_log: Path, hmac_key: tuple[Path, AuditKey], keep: int, covered: str
) -> None:
    """The attack: delete result.json, cut audit.jsonl. Without the key it is an unsealed prefix (as an
    interrupted run is), with a note; with the key it fails, saying how much a signature still covers."""
    cut(signed_log, keep)
    plain = verify_run(signed_log)
    assert plain.code == 0 and "UNSEALED" in plain.summary
    assert "signed run without a seal: truncation cannot be ruled out; check with --key" in plain.notes
    report = verify_run(signed_log, hmac_key[1])
    not_verified(report, "signed run without a seal", covered)
    assert report.checkpoint == (None if keep < 257 else 512 if keep > 512 else 256)


def test_forged_checkpoint_signature_is_tampering_at_its_line(
    signed_log: Path, hmac_key: tuple[Path, AuditKey]
) -> None:
    def forge(recs: list[dict[str, Any]]) -> None:
        recs[512]["signature"]["value"] = "0" * 64

    rechain(signed_log, forge)
    report = verify_run(signed_log, hmac_key[1])
    tampered(report, "line 513: the checkpoint's signature does not match")
    assert report.notes == ["signed up to checkpoint at event 256 of 512"]  # the prefix before it still holds
    cut(signed_log, 600)  # and unsealed: still that line, not "not verified"
    tampered(verify_run(signed_log, hmac_key[1]), "line 513: the checkpoint's signature does not match")


@pytest.mark.parametrize("field", ["events", "head", "signature", "key_id"])
def test_checkpoint_edited_and_rechained_is_tampering_without_a_key(signed_log: Path, field: str) -> None:
    def edit(recs: list[dict[str, Any]]) -> None:
        cp = recs[256]
        if field == "events":
            cp["events"] = 255
        elif field == "head":
            cp["head"] = "0" * 64
        elif field == "signature":
            del cp["signature"]
        else:
            cp["signature"]["key_id"] = "0" * 16

    rechain(signed_log, edit)
    expected = "does not match the chain" if field in ("events", "head") else "without a signature by the run's key"
    tampered(verify_run(signed_log), "line 257: edited (", expected)


def test_checkpoint_in_a_run_recorded_unsigned_is_tampering(tmp_path: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    run = write_run(tmp_path / "r", hmac_key[1], action_records(30))
    rechain(run, lambda recs: recs[0].update(signed=None))
    tampered(verify_run(run), "line 257: edited (a signed checkpoint in a run that run_started records as unsigned)")


def test_a_key_other_than_run_started_names_is_a_clear_error(
    signed_log: Path, tmp_path: Path, ed_keys: tuple[Path, Path]
) -> None:
    other = tmp_path / "other.key"
    other.write_bytes(b"another secret, long enough for HMAC")
    report = verify_run(signed_log, AuditKey.load(other))
    tampered(
        report, "the signatures are not by this key", f"the key given is hmac-sha256 key {AuditKey.load(other).key_id}"
    )
    tampered(verify_run(signed_log, AuditKey.load(ed_keys[1])), "signature", "ed25519", "wrong --key")
    cut(signed_log, 600)  # unsealed too: the key question comes first
    tampered(verify_run(signed_log, AuditKey.load(other)), "the signatures are not by this key")


def test_seal_signature_removed_from_a_signed_run_is_flagged_loudly_without_a_key(
    signed_log: Path, hmac_key: tuple[Path, AuditKey]
) -> None:
    """Without the key nothing proves it (a forger could rewrite run_started too): a loud warning, and
    `verify --key` fails the run."""
    result = read_result(signed_log)
    del result["seal"]["signature"]
    write_result(signed_log, result)
    report = verify_run(signed_log)
    assert report.code == 0
    assert any(n.startswith("WARNING: the seal is not signed, but run_started says") for n in report.notes)
    tampered(verify_run(signed_log, hmac_key[1]), "not signed")


def test_seal_signed_in_a_run_recorded_unsigned_is_tampering(tmp_path: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    run = write_run(tmp_path / "r", hmac_key[1], action_records(3), signed=UNSIGNED)
    result = read_result(run)
    result["seal"]["signature"] = {"algorithm": "hmac-sha256", "key_id": hmac_key[1].key_id, "value": "0" * 64}
    write_result(run, result)
    tampered(verify_run(run), "the seal is signed, but run_started says the run is unsigned")


def test_seal_signed_by_another_key_than_run_started_names(signed_log: Path) -> None:
    result = read_result(signed_log)
    result["seal"]["signature"]["key_id"] = "0" * 16
    write_result(signed_log, result)
    tampered(verify_run(signed_log), "the seal's signature names another key than run_started")


@pytest.mark.parametrize("signed", [UNSIGNED, ABSENT])
def test_unsigned_interrupted_run_is_a_prefix_but_no_key_vouches_for_it(
    tmp_path: Path, hmac_key: tuple[Path, AuditKey], signed: str
) -> None:
    run = write_run(tmp_path / "r", None, action_records(3), signed=signed, seal=False)
    report = verify_run(run)
    assert report.code == 0 and "UNSEALED" in report.summary
    assert not any("--key" in note for note in report.notes)
    assert report.run_signed is (False if signed == UNSIGNED else None)
    not_verified(verify_run(run, hmac_key[1]), "no seal and is not signed")


def test_unsigned_sealed_run_with_a_key_is_tampering(tmp_path: Path, hmac_key: tuple[Path, AuditKey]) -> None:
    run = write_run(tmp_path / "r", None, action_records(3), signed=UNSIGNED)
    assert verify_run(run).code == 0
    tampered(verify_run(run, hmac_key[1]), "the seal is not signed, but a key was given")


@pytest.mark.parametrize(
    "value",
    [{"algorithm": "rsa", "key_id": "0" * 16}, {"algorithm": "hmac-sha256", "key_id": "xyz"}, "yes", 1, []],
    ids=["algorithm", "key-id", "string", "number", "list"],
)
def test_malformed_signed_field_is_tampering(tmp_path: Path, value: Any) -> None:
    run = write_run(tmp_path / "r", None, action_records(1), signed=UNSIGNED)
    rechain(run, lambda recs: recs[0].update(signed=value))
    tampered(verify_run(run), "line 1: edited (run_started's signed field is malformed)")


def test_checkpoints_cost_little(tmp_path: Path, ed_keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An Ed25519 key is parsed once, not at every checkpoint (a 100,000-event run has 390 of them)."""
    key = AuditKey.load(ed_keys[0])
    run = write_run(tmp_path / "r", key, action_records(120), every=16)
    assert len([r for r in records(run) if r["kind"] == "checkpoint"]) > 50
    loads: list[int] = []
    real = serialization.load_pem_private_key

    def load(*args: Any, **kwargs: Any) -> Any:
        loads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(serialization, "load_pem_private_key", load)
    report = verify_run(run, key)
    assert report.code == 0 and report.signature_checked, report.summary
    assert len(loads) <= 2  # once for the checkpoints, at most once more for the seal


# ---------------------------------------------------------------------------------------------------
# 7. Crash consistency: the intent to execute, and exactly one outcome per proposal
# ---------------------------------------------------------------------------------------------------
def test_interrupted_run_names_unknown_and_unexecuted_actions(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", None, interrupted_turn(), signed=UNSIGNED, seal=False)
    report = verify_run(run)
    assert report.code == 0 and "UNSEALED" in report.summary
    assert report.unknown_outcomes == [(2, 1)]
    assert report.not_executed == [(2, 2)]
    assert "turn 2, action 2: outcome unknown (interrupted)" in report.notes
    assert "turn 2, action 3: not executed (interrupted)" in report.notes


def test_interrupted_write_of_the_outcome_leaves_it_unknown(tmp_path: Path) -> None:
    recs = interrupted_turn()
    recs.append(("outcome", {"turn": 2, "index": 1, "status": "executed", "message": "OK"}))
    run = write_run(tmp_path / "r", None, recs, signed=UNSIGNED, seal=False)
    data = (run / "audit.jsonl").read_bytes()
    (run / "audit.jsonl").write_bytes(data[:-25])  # the outcome's line lost its end
    report = verify_run(run)
    assert report.code == 0 and report.unknown_outcomes == [(2, 1)]


def test_log_without_intent_records_cannot_tell_unexecuted_from_unknown(tmp_path: Path) -> None:
    """Logs written before intent records existed (no "signed" in run_started): every open action is unknown."""
    recs = [r for r in interrupted_turn() if r[0] != "executing"]
    run = write_run(tmp_path / "r", None, recs, signed=ABSENT, seal=False)
    report = verify_run(run)
    assert report.code == 0 and report.unknown_outcomes == [(2, 1), (2, 2)] and report.not_executed == []


def test_many_open_actions_give_bounded_notes(tmp_path: Path) -> None:
    recs = [("proposal", {"turn": 1, "index": i, "call_id": "c", "action": None}) for i in range(50)]
    report = verify_run(write_run(tmp_path / "r", None, recs, signed=UNSIGNED, seal=False))
    assert len(report.not_executed) == 50 and len(report.notes) == 21
    assert report.notes[-1] == "... and 30 more actions without an outcome"


def _sealed_with(tmp_path: Path, recs: list[tuple[str, dict[str, Any]]]) -> Path:
    return write_run(tmp_path / "r", None, recs, signed=UNSIGNED)


def test_sealed_run_with_an_action_handed_over_but_no_outcome_is_tampering(tmp_path: Path) -> None:
    run = _sealed_with(tmp_path, interrupted_turn())
    number = line_of(run, lambda r: r["kind"] == "executing" and r["turn"] == 2 and r["index"] == 1)
    tampered(verify_run(run), f"line {number}: turn 2, action 2 was handed to the desktop, but the sealed log")


def test_sealed_run_with_a_proposal_without_outcome_is_tampering(tmp_path: Path) -> None:
    recs = [r for r in action_records(2) if not (r[0] == "outcome" and r[1]["turn"] == 2 and r[1]["index"] == 2)]
    recs = [r for r in recs if not (r[0] == "executing" and r[1]["turn"] == 2 and r[1]["index"] == 2)]
    run = _sealed_with(tmp_path, recs)
    number = line_of(run, lambda r: r["kind"] == "proposal" and r["turn"] == 2 and r["index"] == 2)
    tampered(verify_run(run), f"line {number}: turn 2, action 3 was proposed, but the sealed log has no outcome")


@pytest.mark.parametrize(
    "extra,message",
    [
        (
            ("outcome", {"turn": 1, "index": 0, "status": "executed", "message": "OK"}),
            "an outcome for turn 1, action 1",
        ),
        (
            ("outcome", {"turn": 9, "index": 0, "status": "executed", "message": "OK"}),
            "an outcome for turn 9, action 1",
        ),
        (("executing", {"turn": 9, "index": 0, "call_id": "c"}), "executing turn 9, action 1"),
        (("executing", {"turn": 1, "index": 0, "call_id": "c"}), "executing turn 1, action 1"),
        (("proposal", {"turn": "1", "index": 0, "call_id": "c"}), "a proposal record without an integer turn"),
        (("outcome", {"turn": 1, "status": "executed"}), "an outcome record without an integer turn"),
    ],
    ids=[
        "second-outcome",
        "outcome-without-proposal",
        "executing-without-proposal",
        "executing-after-outcome",
        "string-turn",
        "no-index",
    ],
)
def test_outcome_accounting_broken_is_tampering_sealed_or_not(
    tmp_path: Path, extra: tuple[str, dict[str, Any]], message: str
) -> None:
    for seal in (True, False):
        run = write_run(tmp_path / f"r{seal}", None, [*action_records(1), extra], signed=UNSIGNED, seal=seal)
        number = len(action_records(1)) + 2
        tampered(verify_run(run), f"line {number}: edited ({message}")


def test_second_proposal_before_its_outcome_is_tampering(tmp_path: Path) -> None:
    recs = action_records(1)
    recs.insert(2, ("proposal", {"turn": 1, "index": 0, "call_id": "c1", "action": None}))
    tampered(verify_run(_sealed_with(tmp_path, recs)), "line 4: edited (a second proposal for turn 1, action 1")


def test_real_interrupted_run_shows_its_open_actions(run_copy: Path) -> None:
    """A real run whose last outcome was lost (the controller died before writing it)."""
    lines = read_lines(run_copy)
    last = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "outcome")
    rec = json.loads(lines[last])
    write_lines(run_copy, lines[:last])
    (run_copy / "result.json").unlink()
    report = verify_run(run_copy)
    assert report.code == 0, report.summary
    assert (rec["turn"], rec["index"]) in report.unknown_outcomes + report.not_executed
    assert any(f"turn {rec['turn']}, action {rec['index'] + 1}: " in note for note in report.notes)
