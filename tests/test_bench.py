"""The shipped benchmark runs and reports sane numbers. Timing targets are reported, never asserted here."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

LATENCY = ("n", "median_us", "p90_us", "mean_us", "min_us", "max_us")
RATE = ("runs", "best_s", "median_s", "best_eps", "median_eps")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_latency(stats: dict[str, Any], where: str) -> None:
    for key in LATENCY:
        assert _positive(stats.get(key)), f"{where}.{key} = {stats.get(key)!r}"
    assert stats["min_us"] <= stats["median_us"] <= stats["p90_us"] <= stats["max_us"], where


def test_quick_benchmark_writes_sane_json(tmp_path: Path) -> None:
    out = tmp_path / "results" / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "verify_run" in proc.stdout and "seed audit()" in proc.stdout
    data = json.loads(out.read_text(encoding="utf-8"))

    assert data["quick"] is True and data["suite"] == "core"
    assert _positive(data["elapsed_s"]) and data["command"]
    assert data["targets"] == {"action_median_us_nofsync": 1000.0, "verify_eps": 200000.0}

    sup = data["supervisor"]
    for name in ("micro_nofsync", "micro_fsync"):
        _check_latency(sup[name], name)
        assert sup[name]["records_per_action"] == 4
        assert sup[name]["listener_events"] > 0
        for stage in ("parse", "classify", "emit4"):
            _check_latency(sup[name]["stages"][stage], f"{name}.{stage}")
    assert sup["micro_nofsync"]["fsync"] is False and sup["micro_fsync"]["fsync"] is True
    for name in ("ours_audit4_nofsync", "seed_audit4"):
        _check_latency(sup[name], name)
        assert 100 < sup[name]["avg_line_bytes"] < 1000
    for name in ("e2e_nofsync", "e2e_fsync"):
        e2e = sup[name]
        _check_latency(e2e, name)
        _check_latency(e2e["per_action_run"], f"{name}.per_action_run")
        assert e2e["intact"] is True
        assert e2e["statuses"] == {"executed": e2e["actions_per_run"] * e2e["runs"]}
        assert e2e["records_per_action"] >= 4  # proposal, verdict, decision, outcome at least
    for name in (
        "ratio_target_nofsync",
        "ratio_target_fsync",
        "ratio_target_e2e_nofsync",
        "ratio_seed_audit",
        "ratio_seed_full",
        "ratio_seed_full_fsync",
    ):
        assert _positive(sup[name]), name

    ver = data["verify"]
    assert ver["events"] == 10_000
    assert 200 <= ver["avg_line_bytes"] <= 400
    assert ver["bytes"] == round(ver["avg_line_bytes"] * ver["events"])
    for name in ("ours", "naive"):
        for key in RATE:
            assert _positive(ver[name][key]), f"verify.{name}.{key}"
        assert ver[name]["best_s"] <= ver[name]["median_s"]
        assert ver[name]["best_eps"] >= ver[name]["median_eps"]
    for name in ("target_eps", "ratio_target", "ratio_vs_naive", "generate_s"):
        assert _positive(ver[name]), name


def test_bench_rejects_an_unknown_suite() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench", "nonsense"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "invalid choice" in proc.stderr


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_quick_local_benchmark_writes_sane_json(tmp_path: Path) -> None:
    """The seeds' subprocesses vs ours on one real local desktop (Xvfb + Chromium, installed by the suite)."""
    out = tmp_path / "results" / "local.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench", "local", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "xdotool click 1 + scrot" in proc.stdout and "desktop.perform(click)" in proc.stdout
    assert "reproduce:" in proc.stdout
    data = json.loads(out.read_text(encoding="utf-8"))

    assert data["quick"] is True and data["suite"] == "local"
    assert _positive(data["elapsed_s"]) and data["command"]
    assert "supervisor" not in data and "verify" not in data
    assert data["targets"]["local_screenshot_median_ms"] == 25.0
    assert data["targets"]["local_click_speedup"] == 3.0
    assert data["targets"]["local_type_speedup"] == 5.0

    loc = data["local"]
    n = loc["samples"]
    assert n == 5 and loc["warmup"] >= 1
    assert loc["screen"] == "1024x720" and loc["lab"] == "form"
    assert str(loc["display"]).startswith(":")
    assert loc["text_chars"] == len(loc["text"]) == 20
    assert loc["seed_type_delay_ms"] == 25
    assert _positive(loc["start_s"]) and _positive(loc["fresh_after_s"])
    for step in ("screenshot", "click", "type"):
        entry = loc[step]
        for way in ("ours", "seed"):
            _check_latency(entry[way], f"local.{step}.{way}")
            assert entry[way]["n"] == n
            assert _positive(entry[way]["png_bytes"]), f"local.{step}.{way}.png_bytes"
            if step != "screenshot":
                assert isinstance(entry[way]["fresh"], int) and 0 <= entry[way]["fresh"] <= n
        for key in ("speedup_vs_seed", "ratio_target"):
            assert _positive(entry[key]), f"local.{step}.{key}"
        assert isinstance(entry["met"], bool)
    assert loc["screenshot"]["target_ms"] == 25.0
    assert loc["click"]["target_speedup"] == 3.0 and loc["type"]["target_speedup"] == 5.0
    assert isinstance(loc["stale"], list)
    check = loc["typing_check"]
    assert check["phrase"] == "cua-tui verified"
    assert check["rounds"] >= 1 and check["intact"] == check["rounds"]
    assert check["verify_passed"] is True


def test_quick_replay_benchmark_writes_sane_json(tmp_path: Path) -> None:
    """The replay suite opens real sim runs in the real replay screen: first screen, one step, peak heap."""
    out = tmp_path / "replay.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench", "replay", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "move one step: panes and frame redrawn" in proc.stdout
    replay = json.loads(out.read_text(encoding="utf-8"))["replay"]
    assert replay["short_steps"] == 100 and replay["long_steps"] == 300
    for key in ("first_screen_s", "step_ms_median", "step_ms_p90", "long_peak_heap_mb", "long_first_screen_s"):
        assert _positive(replay[key]), key
    assert replay["step_samples"] >= 25  # 30 moves in quick, every tenth a jump
    assert 0 < replay["long_cached_screens"] <= 12  # screens are fetched lazily and only a few are kept


@pytest.mark.e2e
def test_quick_cwsandbox_benchmark_counts_one_request_per_step_against_four(tmp_path: Path) -> None:
    """The cwsandbox suite runs both ways through the real client and the local service, interleaved."""
    out = tmp_path / "cw.json"
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.bench", "cwsandbox", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GRPC_VERBOSITY": "ERROR"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text(encoding="utf-8"))["cwsandbox"]
    assert [d["delay_ms"] for d in result["delays"]] == [0, 30]
    for cw in result["delays"]:
        assert cw["ours_requests"] == 1.0 and cw["tutorial_requests"] == 4.0
        assert cw["requests_ratio"] == 4.0 and _positive(cw["latency_ratio"])
        assert _positive(cw["ours_ms"]) and _positive(cw["tutorial_ms"]) and cw["ours_png_kb"] > 5
        assert all(_positive(cw["parts_ms"][k]) for k in ("round_trip", "transfer", "input", "settle", "encode"))
        assert cw["exec_paths"] == ["direct"]  # the path a real run takes
    zero, far = result["delays"]
    # an injected 30 ms each way costs our one request about 60 ms and the tutorial's four about 240
    assert far["ours_ms"] - zero["ours_ms"] > 50 and far["tutorial_ms"] - zero["tutorial_ms"] > 200
    # stdin costs a request a round trip more: the client waits for the exec's ready frame before sending it
    assert far["request_on_stdin_ms"] - far["request_in_argv_ms"] > 50
