"""The verifier's typed results: each kind of tampering is a Finding of its kind, pointing at its line,
and the report's code and summary are rendered from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runlogs import action_records, write_run

from cua_tui.core.audit import (
    AuditClosed,
    AuditError,
    AuditKey,
    AuditKeyError,
    AuditWriteError,
    Finding,
    FindingKind,
    VerifyExit,
    verify_run,
)


@pytest.fixture
def key(tmp_path: Path) -> AuditKey:
    path = tmp_path / "audit.key"
    path.write_bytes(b"a secret kept outside the runs directory\n")
    return AuditKey.load(path)


def _lines(run: Path) -> list[bytes]:
    return (run / "audit.jsonl").read_bytes().splitlines(keepends=True)


def _write(run: Path, lines: list[bytes]) -> None:
    (run / "audit.jsonl").write_bytes(b"".join(lines))


def test_an_intact_run_has_no_finding(tmp_path: Path, key: AuditKey) -> None:
    run = write_run(tmp_path / "run", key, action_records(2))
    report = verify_run(run, key)
    assert report.code is VerifyExit.INTACT and report.finding is None and report.findings == []
    assert report.summary.startswith("intact: ")


@pytest.mark.parametrize(
    ("tamper", "kind", "line"),
    [
        ("edit", FindingKind.EDITED, 4),
        ("delete", FindingKind.DELETED, 4),
        ("swap", FindingKind.REORDERED, 4),
        ("truncate", FindingKind.TRUNCATED, None),
        ("append", FindingKind.APPENDED_AFTER_SEAL, None),
        ("garbage", FindingKind.MALFORMED_RECORD, 5),
    ],
)
def test_each_tampering_is_a_finding_of_its_kind(
    tmp_path: Path, tamper: str, kind: FindingKind, line: int | None
) -> None:
    run = write_run(tmp_path / "run", None, action_records(2), signed="unsigned")
    lines = _lines(run)
    if tamper == "edit":
        lines[3] = lines[3].replace(b'"index":1', b'"index":2')
    elif tamper == "delete":
        del lines[3]
    elif tamper == "swap":
        lines[3], lines[4] = lines[4], lines[3]
    elif tamper == "truncate":
        del lines[-1]
    elif tamper == "append":
        lines.append(lines[-1])
    else:
        lines[4] = b"not json\n"
    _write(run, lines)
    report = verify_run(run)
    finding = report.finding
    assert finding is not None and finding.kind is kind, report.summary
    if line is not None:
        assert finding.line == line
    assert report.code is VerifyExit.TAMPERED
    assert report.summary == f"TAMPERED: {finding}"
    assert report.problems == [str(f) for f in report.findings]


def test_screenshot_findings(tmp_path: Path) -> None:
    sha = "ab" * 32
    records = [("screen", {"sha256": sha, "width": 1, "height": 1, "bytes": 1, "turn": 0, "step": 0})]
    run = write_run(tmp_path / "run", None, records, signed="unsigned")
    assert verify_run(run).finding == Finding(
        FindingKind.SCREENSHOT_MISSING, f"screenshot {sha[:12]}… is missing from screens/", 2
    )
    (run / "screens").mkdir()
    (run / "screens" / f"{sha}.png").write_bytes(b"not the picture")
    assert verify_run(run).finding.kind is FindingKind.SCREENSHOT_ALTERED  # type: ignore[union-attr]


def test_signature_findings(tmp_path: Path, key: AuditKey) -> None:
    run = write_run(tmp_path / "run", key, action_records(1))
    result = json.loads((run / "result.json").read_text())
    result["seal"]["signature"]["value"] = "00" * 32
    (run / "result.json").write_text(json.dumps(result))
    assert verify_run(run, key).finding.kind is FindingKind.SIGNATURE_MISMATCH  # type: ignore[union-attr]
    del result["seal"]["signature"]
    (run / "result.json").write_text(json.dumps(result))
    assert verify_run(run, key).finding.kind is FindingKind.SIGNATURE_MISSING  # type: ignore[union-attr]


def test_unvouched_and_unusable_are_not_tampering(tmp_path: Path, key: AuditKey) -> None:
    run = write_run(tmp_path / "run", key, action_records(1), seal=False)
    report = verify_run(run, key)
    assert report.finding is not None and report.finding.kind is FindingKind.UNVOUCHED
    assert report.code is VerifyExit.TAMPERED and report.summary.startswith("NOT VOUCHED FOR: ")
    assert report.problems == []
    report = verify_run(tmp_path / "nowhere")
    assert report.finding is not None and report.finding.kind is FindingKind.UNUSABLE_INPUT
    assert report.code is VerifyExit.UNUSABLE and report.summary == str(report.finding) and report.problems == []


def test_the_errors_share_one_base_and_keep_their_builtin_ones() -> None:
    assert issubclass(AuditKeyError, AuditError) and issubclass(AuditKeyError, ValueError)
    assert issubclass(AuditWriteError, AuditError) and issubclass(AuditWriteError, OSError)
    assert issubclass(AuditClosed, AuditError) and issubclass(AuditClosed, RuntimeError)
