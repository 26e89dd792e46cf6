"""`cua-tui verify` (by path and by run id) and `cua-tui runs` (table and --json) against every case of
the shared corpus of hostile and damaged run directories (tests/hostile_runs.py): a clear one-line
answer and the documented exit code, never a traceback, a hang (each bounded by a timeout), unbounded
memory (children under a memory ceiling, their peak checked) or a read outside the run directory (the
cases that link outside would verify "intact", or block on a FIFO, if a link were followed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_batch import Answer, batch
from click.testing import CliRunner
from hostile_runs import ALL, Case, check_answer, cli, pristine_run

from cua_tui.cli import main
from cua_tui.cli.runs import HEADER

pytestmark = pytest.mark.timeout(60)
CONTROLS = "\x1b\x07\x9b\r"


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory.mktemp("corpus"))


def made(case: Case, corpus_run: Path, tmp_path: Path) -> Path:
    return case.build(corpus_run, tmp_path / "runs", tmp_path / "outside")


def invoke(args: list[str], tmp_path: Path, runs_dir: Path) -> Any:
    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(runs_dir)}
    result = CliRunner().invoke(main, args, env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture(scope="module")
def verified(corpus_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Answer | str]:
    """Every case made, then `cua-tui verify RUN` for each in one child under the memory ceiling (each
    answer bounded in time and memory as a child of its own would be); a case this machine cannot make
    (a device without mknod) maps to why."""
    folder = tmp_path_factory.mktemp("verified")
    runs: dict[str, Path] = {}
    why: dict[str, Answer | str] = {}
    for number, case in enumerate(ALL):
        try:
            runs[case.name] = case.build(corpus_run, folder / str(number) / "runs", folder / str(number) / "out")
        except pytest.skip.Exception as exc:
            why[case.name] = str(exc)
    answers = batch(folder / "batch", [["verify", run] for run in runs.values()], ceiling=True)
    return {**why, **dict(zip(runs, answers, strict=True))}


@pytest.mark.parametrize("case", ALL, ids=str)
def test_verify_by_path(case: Case, corpus_run: Path, verified: dict[str, Answer | str]) -> None:
    answer = verified[case.name]
    if isinstance(answer, str):
        pytest.skip(answer)
    check_answer(*answer.checked(), case.exit, case.fragments(corpus_run))


@pytest.mark.parametrize("case", ALL, ids=str)
def test_verify_by_run_id_answers_as_by_path(case: Case, corpus_run: Path, tmp_path: Path) -> None:
    run = made(case, corpus_run, tmp_path)
    by_path = invoke(["verify", str(run)], tmp_path, run.parent)
    for arg in (run.name, run.name[:15]):  # the id as `runs` lists it, and a unique beginning of it
        by_id = invoke(["verify", arg], tmp_path, run.parent)
        assert (by_id.exit_code, by_id.stdout, by_id.stderr) == (by_path.exit_code, by_path.stdout, by_path.stderr)
    check_answer(by_path.exit_code, by_path.stdout, by_path.stderr, case.exit, case.fragments(corpus_run))


def table_rows(out: str) -> dict[str, dict[str, str]]:
    """Each row's cells by column, read at the header's column starts (a name may hold a space: CHECKED
    IN), keyed by the run's id."""
    header, *rows = out.splitlines()
    names = re.split(r" {2,}", header.strip())
    assert names == list(HEADER), header
    starts = [header.index(name) for name in names]
    ends = [*starts[1:], None]
    table = [{n: row[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)} for row in rows]
    return {cells["RUN"]: cells for cells in table}


@pytest.mark.parametrize("case", ALL, ids=str)
def test_runs_shows_the_case_as_a_row(case: Case, corpus_run: Path, tmp_path: Path) -> None:
    run = made(case, corpus_run, tmp_path)
    good = tmp_path / "runs" / "20261201-235959-aaaaaa"
    Case("pristine", lambda _run, _out: None, 0).build(corpus_run, good.parent, tmp_path / "o2", name=good.name)
    table = invoke(["runs", "--runs-dir", str(run.parent)], tmp_path, run.parent)
    assert table.exit_code == 0 and table.stderr == ""
    assert not any(c in table.stdout for c in CONTROLS), repr(table.stdout)
    rows = table_rows(table.stdout)
    assert set(rows) == {run.name, good.name}
    assert rows[run.name]["RECORD"] == case.cell, rows[run.name]
    assert rows[good.name]["RECORD"] == "intact"
    listed = invoke(["runs", "--runs-dir", str(run.parent), "--json"], tmp_path, run.parent)
    assert listed.exit_code == 0
    by_id = {item["id"]: item for item in json.loads(listed.stdout)}
    assert by_id[run.name]["verified"] == case.verified
    assert by_id[good.name]["verified"] == "intact"
    if case.exit:
        assert by_id[run.name]["decisions"] is None  # a chain that does not verify counts nothing
        assert by_id[run.name]["verify_summary"]


def test_runs_over_the_whole_corpus_in_one_child(corpus_run: Path, tmp_path: Path) -> None:
    """Every case side by side in one runs directory, listed by the real command in a child process under
    the memory ceiling: bounded time and memory for the lot, one row (one object) per case."""
    runs = tmp_path / "runs"
    expected: dict[str, Case] = {}
    for number, case in enumerate(ALL):
        name = f"20261201-{number:06d}-cccccc"
        try:
            case.build(corpus_run, runs, tmp_path / "outside" / str(number), name=name)
        except pytest.skip.Exception:
            continue  # a case this machine cannot make (a device without mknod)
        expected[name] = case
    code, out, err = cli(tmp_path, "runs", "--runs-dir", runs, cpu=10.0)
    assert code == 0 and err == ""
    assert not any(c in out for c in CONTROLS), repr(out)
    rows = table_rows(out)
    assert set(rows) == set(expected)
    for name, case in expected.items():
        assert rows[name]["RECORD"] == case.cell, (case.name, rows[name])
    code, out, err = cli(tmp_path, "runs", "--runs-dir", runs, "--json", cpu=10.0)
    assert code == 0 and err == ""
    assert {item["id"]: item["verified"] for item in json.loads(out)} == {n: c.verified for n, c in expected.items()}
