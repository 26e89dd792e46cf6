"""What an export shows is what its verdict checked (issue 34, point 2): the exports verify the run, then
read its log again; a log changed in between (in place, same size, time put back) is exported as TAMPERED,
never as the intact run it no longer is. The run is real (the one builder on the sim desktop)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from export_runs import sim_run

from cua_tui.cli import main
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.export import open_run
from cua_tui.export import source as source_module

BLOCK, ALLOW = b'"verdict":"block","reason":"a system key', b'"verdict":"allow","reason":"a system key'


def edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    info, data = path.stat(), path.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1
    with path.open("r+b") as fh:
        fh.write(data.replace(old, new))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


@pytest.fixture
def edited_after_verify(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``verify_run`` as the exports call it, the log edited right after it answers (the race an
    attacker with write access to the run wins)."""
    reports: list[Any] = []

    def verify_then_edit(folder: Any, key: Any = None) -> Any:
        report = verify_run(folder, key)
        reports.append(report)
        edit_in_place(Path(folder.path) / "audit.jsonl", BLOCK, ALLOW)
        return report

    monkeypatch.setattr(source_module, "verify_run", verify_then_edit)
    return reports


def test_a_log_changed_after_the_export_verified_it_is_exported_tampered(
    tmp_path: Path, edited_after_verify: list[Any]
) -> None:
    path = sim_run(tmp_path / "runs")
    with open_run(path) as run:
        assert edited_after_verify and run.tampered
        assert run.report.code == VerifyExit.TAMPERED and "changed after it was verified" in run.report.summary


def test_a_log_read_as_verified_is_exported_intact(tmp_path: Path) -> None:
    path = sim_run(tmp_path / "runs")
    with open_run(path) as run:
        assert not run.tampered and run.report.code == VerifyExit.INTACT


@pytest.mark.parametrize("form", ["--html", "--atif", "--script", "--gif"])
def test_every_export_says_tampered(tmp_path: Path, edited_after_verify: list[Any], form: str) -> None:
    path = sim_run(tmp_path / "runs")
    out = tmp_path / "out.file"
    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}
    result = CliRunner().invoke(main, ["export", str(path), form, str(out)], env=env, catch_exceptions=False)
    assert edited_after_verify and result.exit_code == 1, result.output
    assert "TAMPERED: line" in result.output and "the log changed after it was verified" in result.output
