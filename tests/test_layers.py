"""The layers of DESIGN.md, checked by machines: the core stays free of UI and vendor imports, every
import-linter contract in pyproject.toml holds (so a future ``tui -> desktops`` import fails the suite),
the package, the benchmarks and the tests type-check under ``mypy --strict``."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from lanes import BESIDE_S

FORBIDDEN = ("textual", "textual_image", "rich", "openai", "anthropic", "cwsandbox", "docker", "grpc", "pytesseract")
CORE = Path(__file__).resolve().parents[1] / "cua_tui" / "core"


def test_core_imports_no_ui_or_vendor_package() -> None:
    # every module, those of subpackages (core/audit/) too, as a dotted name under cua_tui.core
    modules = sorted(
        ".".join(p.relative_to(CORE).with_suffix("").parts) for p in CORE.rglob("*.py") if p.stem != "__init__"
    )
    code = (
        "import sys\n"
        + "".join(f"import cua_tui.core.{m}\n" for m in modules)
        + f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"cua_tui.core pulled in: {out.stdout.strip()}"
    assert len(modules) >= 8


def test_core_sources_do_not_import_ui_or_vendor_packages() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from") and words[1].split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(CORE)}:{number}: {line.strip()}")
    assert not offenders


ROOT = CORE.parents[1]


@pytest.mark.beside  # static: on the CPU the other parts leave
def test_every_import_linter_contract_holds() -> None:
    """The whole architecture (pyproject.toml [tool.importlinter]): layers, the pure core, the TUI on the
    core alone. ``lint-imports`` exits non-zero and names the import when a contract breaks."""
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT, timeout=BESIDE_S)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-1000:]
    assert "0 broken" in out.stdout


@pytest.mark.beside  # static: on the CPU the other parts leave
@pytest.mark.long
def test_the_package_the_benchmarks_and_the_tests_type_check_strictly() -> None:
    """cua_tui, bench/ and tests/, as pyproject.toml's [tool.mypy] says: strict, in one run (the tests import
    most of the package, which one run reads once); a failure names how many errors each file has, then the
    first of them."""
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental"], capture_output=True, text=True, cwd=ROOT, timeout=BESIDE_S
    )
    errors = [line for line in out.stdout.splitlines() if ": error: " in line]
    per_file = Counter(line.split(":", 1)[0] for line in errors)
    summary = "\n".join(f"{count:4} {path}" for path, count in per_file.most_common())
    assert out.returncode == 0 and not errors, f"{summary}\n\n" + "\n".join(errors[:40]) + out.stderr[-1000:]
    assert "Success" in out.stdout


def test_the_command_line_starts_without_the_heavy_modules() -> None:
    """``cua-tui --help`` must start fast: importing the command line loads no UI, no SDK and not even the
    run machinery (each command imports what it needs when it runs)."""
    code = (
        "import sys, cua_tui.cli\n"
        "heavy = ('textual', 'rich', 'openai', 'anthropic', 'cwsandbox', 'PIL', 'cua_tui.build',"
        " 'cua_tui.core.supervisor', 'cua_tui.core.audit', 'cua_tui.tui')\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith(heavy))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"importing cua_tui.cli pulled in: {out.stdout.strip()}"
