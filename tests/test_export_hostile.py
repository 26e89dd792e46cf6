"""Damaged and hostile run directories through every export: a one-line answer and the documented exit code
(1 tampered but written, 2 nothing to export), never a traceback, a hang or a read outside the run.

The damaged directories come from ``export_runs.DAMAGED`` (switch to tests/hostile_runs.py's corpus there).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cli_batch import batch
from export_runs import DAMAGED, bomb_png, sim_run

from cua_tui.export import html as html_export
from cua_tui.export import open_run

FORMATS = ("--html", "--gif", "--webp", "--script")
SUFFIX = {"--html": "html", "--gif": "gif", "--webp": "webp", "--script": "json"}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sim_run(tmp_path_factory.mktemp("good") / "runs")


def damaged(good_run: Path, tmp_path: Path, name: str) -> Path:
    copy = tmp_path / good_run.name
    shutil.copytree(good_run, copy)
    DAMAGED[name][0](copy)
    return copy


def exported(
    folder: Path, runs: dict[str, Path], flags: tuple[str, ...]
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    """``cua-tui export RUN`` of every run of ``runs``, in one child (each bounded in time: a FIFO that got
    opened would hang it, and the test would say which), each format to ``out/N/x.<suffix>``."""
    commands: list[list[str | Path]] = []
    outs: dict[str, Path] = {}
    for name, run in runs.items():
        outs[name] = folder / "out" / str(len(outs))
        outs[name].mkdir(parents=True)
        commands.append(["export", run, *(a for f in flags for a in (f, outs[name] / f"x.{SUFFIX[f]}"))])
    answers = batch(folder / "batch", commands, env={"CUA_TUI_RUNS_DIR": str(folder / "runs")})
    return {
        name: (outs[name], subprocess.CompletedProcess(answer.argv, *answer.answered()))
        for name, answer in zip(runs, answers, strict=True)
    }


@pytest.fixture(scope="module")
def damaged_exports(
    good_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]]]:
    folder = tmp_path_factory.mktemp("damaged")
    return exported(folder, {name: damaged(good_run, folder / str(n), name) for n, name in enumerate(DAMAGED)}, FORMATS)


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_run_gets_one_line_and_its_exit_code(
    damaged_exports: dict[str, tuple[Path, subprocess.CompletedProcess[str]]], name: str
) -> None:
    expected = DAMAGED[name][1]
    outs, proc = damaged_exports[name]
    assert proc.returncode == expected, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    problem = [line for line in proc.stderr.splitlines() if line.startswith(("Error:", "TAMPERED"))]
    assert len(problem) == 1, proc.stderr
    written = sorted(p.name for p in outs.iterdir())
    assert written == (sorted(f"x.{s}" for s in SUFFIX.values()) if expected == 1 else [])


def test_a_refused_screen_is_named_never_decoded_never_followed(good_run: Path, tmp_path: Path) -> None:
    run = damaged(good_run, tmp_path, "symlinked screen")
    with open_run(run) as opened:
        page = html_export.render(opened)
    assert "root:x:0:0" not in page  # /etc/passwd was not read through the link
    assert "a symbolic link" in page
    bomb = tmp_path / "bomb"
    shutil.copytree(good_run, bomb)
    target = sorted((bomb / "screens").iterdir())[0]
    target.write_bytes(bomb_png())
    with open_run(bomb) as opened:
        screen = opened.screen(target.name[:-4])
    assert screen.png is None and "altered" in screen.refused  # its hash no longer matches its name


def test_a_bomb_whose_name_is_its_hash_is_refused_from_its_header(good_run: Path, tmp_path: Path) -> None:
    import hashlib

    run = tmp_path / "r"
    shutil.copytree(good_run, run)
    data = bomb_png()
    sha = hashlib.sha256(data).hexdigest()
    (run / "screens" / f"{sha}.png").write_bytes(data)
    with open_run(run) as opened:
        screen = opened.screen(sha)
    assert screen.png is None and "40000 x 40000" in screen.refused


WEIRD = [None, [], {}, "x", -1, 10**30, 1.5, True, [[1, 2]], {"a": 1}, "<b>"]
RECORDS: list[tuple[str, dict[str, object]]] = [
    (
        "screen",
        {"sha256": "a" * 64, "width": 1024, "height": 720, "bytes": 1, "turn": 0, "step": 0, "purpose": "initial"},
    ),
    ("model_turn", {"turn": 1, "text": "t", "calls": 1, "actions": 1}),
    ("safety_checks", {"turn": 1, "call_id": "c", "checks": [{"id": "i", "code": "c", "message": "m"}]}),
    ("proposal", {"turn": 1, "index": 0, "call_id": "c", "action": {"kind": "click", "x": 1, "y": 2}, "summary": "s"}),
    ("verdict", {"turn": 1, "index": 0, "verdict": "allow", "reason": "r", "rule": "x"}),
    ("decision", {"turn": 1, "index": 0, "decision": "approve", "by": "human", "note": "n"}),
    ("egress", {"host": "h", "port": 1, "method": "GET", "allowed": False, "reason": "r"}),
    ("outcome", {"turn": 1, "index": 0, "call_id": "c", "status": "executed", "message": "OK", "duration_ms": 1.0}),
    ("turn_refused", {"turn": 2, "actions": 5, "reason": "r"}),
    ("kill", {"by": "b", "during": "d"}),
    ("verification", {"verifier": "v", "passed": True, "detail": "d"}),
]


@pytest.mark.beside  # computes and measures nothing: on the CPU the other parts leave
def test_records_of_any_shape_never_crash_an_export(tmp_path: Path) -> None:
    """A chain recomputed over fields of the wrong type (what a forger without the key can write): every
    export either renders it or says in one line that it cannot."""
    import random

    from runlogs import UNSIGNED, write_run

    from cua_tui.export import RunUnusable, animation
    from cua_tui.export import script as script_export

    rng = random.Random(1)
    for i in range(80):
        records = [(kind, dict(fields)) for kind, fields in RECORDS]
        for _ in range(4):
            _kind, fields = rng.choice(records)
            fields[rng.choice(list(fields))] = rng.choice(WEIRD)
        folder = write_run(tmp_path / str(i), None, records, signed=UNSIGNED)
        try:
            with open_run(folder) as run:
                html_export.render(run)
                animation.render(run, "gif")
                script_export.encode(script_export.build(run).data)
        except RunUnusable as exc:
            assert "\n" not in str(exc)


# ---------------------------------------------------------------------------------------------------
# The shared corpus (tests/hostile_runs.py): the same list verify, runs and replay are tested against
# ---------------------------------------------------------------------------------------------------
from hostile_runs import ALL, Case, pristine_run  # noqa: E402  (the shared corpus, below the local cases)


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def corpus_exports(
    corpus_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, subprocess.CompletedProcess[str]] | str]:
    """Every case made, then exported to HTML and a script in one child; a case this machine cannot make
    (a device without mknod) maps to why."""
    folder = tmp_path_factory.mktemp("corpus-exports")
    runs: dict[str, Path] = {}
    why: dict[str, tuple[Path, subprocess.CompletedProcess[str]] | str] = {}
    for number, case in enumerate(ALL):
        try:
            runs[case.name] = case.build(corpus_run, folder / str(number) / "runs", folder / str(number) / "outside")
        except pytest.skip.Exception as exc:
            why[case.name] = str(exc)
    return {**why, **exported(folder, runs, ("--html", "--script"))}


@pytest.mark.parametrize("case", ALL, ids=str)
def test_export_answers_every_case_of_the_shared_corpus(
    case: Case, corpus_exports: dict[str, tuple[Path, subprocess.CompletedProcess[str]] | str]
) -> None:
    answer = corpus_exports[case.name]
    if isinstance(answer, str):
        pytest.skip(answer)
    outs, proc = answer
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    written = sorted(p.name for p in outs.iterdir())
    if proc.returncode == 2:  # nothing to export: one line, nothing written
        assert written == [] and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    else:  # written whole; a run verify does not call intact is exported as what it is, said once
        assert written == ["x.html", "x.json"]
        assert proc.returncode == (0 if case.exit == 0 else 1), (proc.returncode, case.exit, proc.stderr)
        if case.exit:
            assert "TAMPERED" in (outs / "x.html").read_text() or "UNUSABLE" in (outs / "x.html").read_text().upper()
    assert "root:x:0:0" not in "".join(p.read_text(errors="replace") for p in outs.iterdir())  # nothing outside
