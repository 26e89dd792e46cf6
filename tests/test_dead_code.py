"""No dead code in the package (issue 36): vulture at 60 % confidence and up over cua_tui/ finds nothing
beyond the frameworks' names (pyproject.toml [tool.vulture]) and vulture_whitelist.py, each entry of
which says why; and every whitelisted name still exists in cua_tui/, so the list cannot outlive its code."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from lanes import BESIDE_S

ROOT = Path(__file__).resolve().parents[1]
WHITELIST = ROOT / "vulture_whitelist.py"


@pytest.mark.beside  # static: on the CPU the other parts leave
def test_vulture_finds_no_dead_code() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["vulture"]
    assert config["min_confidence"] <= 60 and "cua_tui" in config["paths"]
    done = subprocess.run([sys.executable, "-m", "vulture"], cwd=ROOT, capture_output=True, text=True, timeout=BESIDE_S)
    assert done.returncode == 0 and not done.stdout, "vulture found (remove it, or whitelist it with why):\n" + (
        done.stdout + done.stderr
    )


def test_every_whitelisted_name_is_still_in_the_package() -> None:
    sources = "\n".join(p.read_text() for p in (ROOT / "cua_tui").rglob("*.py"))
    names = re.findall(r"\b_\.(\w+)", WHITELIST.read_text())
    assert len(names) >= 10
    stale = [name for name in names if not re.search(rf"\b{name}\b", sources)]
    assert not stale, f"vulture_whitelist.py names what cua_tui/ no longer has: {stale}"
