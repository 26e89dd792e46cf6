"""The shipped drill library is what scripts/drill_library.py records (issue 41, point 3): one scene of each
sort, recorded again here on the real local desktop (Xvfb + Chromium), matches the shipped drill."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from cua_tui.labs import SHIPPED_DRILLS

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
# a click reached after approved requests, and a typing drill (its caret may blink in one screen, not the other)
SCENES = ("download-mirror-2", "password-3")


def entries(folder: Path) -> dict[str, dict[str, object]]:
    return {e["id"]: e for e in json.loads((folder / "drills.json").read_text())["drills"]}


def test_the_script_records_the_shipped_drills(tmp_path: Path) -> None:
    out = tmp_path / "drills"
    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "drill_library.py"), "--out", str(out), *SCENES],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    assert "2 drills" in made.stdout
    shipped, again = entries(SHIPPED_DRILLS), entries(out)
    for scene in SCENES:
        assert again[scene] == shipped[scene], scene
        with Image.open(SHIPPED_DRILLS / f"{scene}.png") as a, Image.open(out / f"{scene}.png") as b:
            assert a.size == b.size == (1024, 720)
            diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).convert("L").point(lambda v: v > 16)
            changed = sum(diff.histogram()[1:])
        # the same page in the same place: at most a caret and antialiasing differ
        assert changed < 0.005 * 1024 * 720, (scene, changed)
