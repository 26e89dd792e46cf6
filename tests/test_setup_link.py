"""Set-up puts the entry point on PATH (issue 22, point 9): scripts/setup.sh's link step, run for real
against a folder of the test's own (CUA_TUI_BIN_DIR), from a copy of the checkout's set-up script whose
`.venv/bin/cua-tui` is this environment's entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"
ENTRY = Path(sys.executable).parent / "cua-tui"  # the installed entry point of the environment under test


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout as the link step sees it: scripts/setup.sh and an installed .venv/bin/cua-tui."""
    if not ENTRY.exists():
        pytest.skip(f"no installed entry point at {ENTRY}")
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SETUP, root / "scripts" / "setup.sh")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "cua-tui").symlink_to(ENTRY)
    return root


def link(checkout: Path, bin_dir: Path, *, on_path: bool = True) -> tuple[int, list[str]]:
    path = f"{bin_dir}:{os.environ['PATH']}" if on_path else os.environ["PATH"]
    proc = subprocess.run(
        ["bash", str(checkout / "scripts" / "setup.sh"), "link"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "CUA_TUI_BIN_DIR": str(bin_dir), "PATH": path},
    )
    assert proc.stdout == ""
    return proc.returncode, proc.stderr.splitlines()


def test_the_entry_point_is_linked_onto_path_in_one_line_and_runs(checkout: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # not there yet: made
    entry = checkout / ".venv" / "bin" / "cua-tui"
    code, lines = link(checkout, bin_dir)
    assert code == 0
    assert lines == [f"[setup] cua-tui is on PATH: {bin_dir}/cua-tui -> {entry}"]
    assert os.readlink(bin_dir / "cua-tui") == str(entry)
    found = shutil.which("cua-tui", path=str(bin_dir))
    version = subprocess.run([found or "", "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("cua-tui, version "), version.stderr

    again = link(checkout, bin_dir)  # idempotent: the same link, the same line
    assert again == (0, lines) and os.readlink(bin_dir / "cua-tui") == str(entry)
    assert sorted(p.name for p in bin_dir.iterdir()) == ["cua-tui"]

    code, lines = link(checkout, bin_dir, on_path=False)  # linked, but the folder is not on PATH: said
    assert code == 0 and len(lines) == 1
    assert f"but {bin_dir} is not on PATH: add it" in lines[0] and f"or run {entry}" in lines[0]


def test_a_link_of_another_checkout_is_ours_and_replaced(checkout: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cua-tui").symlink_to(tmp_path / "removed-checkout" / ".venv" / "bin" / "cua-tui")  # dangling
    code, lines = link(checkout, bin_dir)
    assert code == 0 and len(lines) == 1 and "is on PATH" in lines[0]
    assert os.readlink(bin_dir / "cua-tui") == str(checkout / ".venv" / "bin" / "cua-tui")


@pytest.mark.parametrize("foreign", ["file", "link"])
def test_a_file_or_link_that_is_not_ours_is_never_clobbered(checkout: Path, tmp_path: Path, foreign: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    there = bin_dir / "cua-tui"
    if foreign == "file":
        there.write_text("#!/bin/sh\necho someone else's cua-tui\n")
    else:
        there.symlink_to("/opt/pipx/venvs/cua-tui/bin/cua-tui")
    before = there.read_text() if foreign == "file" else os.readlink(there)
    code, lines = link(checkout, bin_dir)
    assert code == 0  # set-up goes on (the demo still runs from .venv/bin/cua-tui)
    assert len(lines) == 1 and lines[0].startswith(f"[setup] cua-tui: not linked, {there} ")
    assert "not ours" in lines[0] and f"run {checkout}/.venv/bin/cua-tui" in lines[0]
    assert (there.read_text() if foreign == "file" else os.readlink(there)) == before


def test_without_an_installed_environment_the_link_step_says_so(tmp_path: Path) -> None:
    root = tmp_path / "bare"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SETUP, root / "scripts" / "setup.sh")
    code, lines = link(root, tmp_path / "bin")
    assert code == 1 and len(lines) == 1 and "is not installed" in lines[0]
    assert not (tmp_path / "bin").exists()
