"""The UI-thread benchmark runs and reports sane numbers (timings are reported, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_tui_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "tui.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench.tui", "--frames", "4", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "UI-thread time per new 1024x720 frame" in proc.stdout
    data = json.loads(out.read_text())
    assert data["pane_cells"] == [100, 40]
    assert "Sixel path" in proc.stdout
    keys = ("ours_ui_thread", "ours_worker_conversion", "textual_image_halfcell_ui_thread")
    sixel = ("sixel_ui_thread", "sixel_worker_conversion", "sixel_encoded_on_ui_thread")
    for key in (*keys, *sixel):
        assert data[key]["n"] >= 1
        assert 0 < data[key]["median_ms"] <= data[key]["p90_ms"] + 1e-9


def test_resize_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "resize.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench.resize", "--resizes", "4", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Resize to redrawn picture" in proc.stdout and "target <= 150 ms" in proc.stdout
    data = json.loads(out.read_text())
    assert data["resizes"] == 4 and data["target_ms"] == 150.0
    # at least the 50 ms settle: a figure below it would mean the measurement did not wait for the redraw
    assert 50 <= data["median_ms"] <= data["max_ms"]
