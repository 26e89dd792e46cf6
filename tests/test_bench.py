"""The shipped benchmark. The speed gate (``python -m bench --quick --check``: every suite with a
baseline, in one child process) holds each ratio of ours to its same-run baseline to its target and
reports sane numbers; the gate's arithmetic fails a ratio that falls short; the replay suite's smoke.
Absolute times are reported, never asserted."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lanes import BESIDE_S

from bench import __main__ as bench
from bench import check
from bench.common import SIZES

ROOT = Path(__file__).resolve().parents[1]

LATENCY = ("n", "median_us", "p90_us", "mean_us", "min_us", "max_us")
RATE = ("runs", "best_s", "median_s", "best_eps", "median_eps")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_latency(stats: dict[str, Any], where: str) -> None:
    for key in LATENCY:
        assert _positive(stats.get(key)), f"{where}.{key} = {stats.get(key)!r}"
    assert stats["min_us"] <= stats["median_us"] <= stats["p90_us"] <= stats["max_us"], where


# ---------------------------------------------------------------------------------------------------
# The gate, once, on the real desktops, the cwsandbox service and the Docker engine
# ---------------------------------------------------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.engine
@pytest.mark.alone  # it measures: the machine's first call (what else runs steps aside to nice 19)
@pytest.mark.timeout(420)
def test_the_speed_gate_holds_every_ratio_to_its_target_and_every_suite_reports_sane_numbers(
    tmp_path: Path,
) -> None:
    out = tmp_path / "gate.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--check", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "GRPC_VERBOSITY": "ERROR"},
    )
    print(proc.stdout)  # the figures of this run, in the test's report
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    gate = proc.stdout[proc.stdout.index("speed targets: ") :].splitlines()  # after the full report
    verdicts = [line for line in gate if line.split(" ", 1)[0] in check.CHECKED_SUITES]
    gated = [t for t in check.TARGETS if t.suite in check.CHECKED_SUITES]  # replay's only when named
    assert len(verdicts) == len(gated) and all(line.endswith(" pass") for line in verdicts), verdicts
    assert f"{len(gated)} targets: {len(gated)} pass, 0 fail, 0 not run" in proc.stdout
    for words in ("seed audit()", "verify_run", "xdotool click 1 + scrot", "desktop.perform(click)", "Sixel path"):
        assert words in proc.stdout, words  # the full report comes first
    for words in ("extraction: ScreenReader.read, nothing cached", "Docker backend vs local desktop", "reproduce:"):
        assert words in proc.stdout, words
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["quick"] is True and data["suite"] == "check" and _positive(data["elapsed_s"]) and data["command"]
    assert [(v["suite"], v["passed"]) for v in data["check"]] == [(t.suite, True) for t in gated]
    assert data["targets"]["action_median_us_nofsync"] == 1000.0 and data["targets"]["verify_eps"] == 200000.0
    _core_is_sane(data)
    _local_is_sane(data)
    _tui_is_sane(data["tui"])
    _ocr_is_sane(data["ocr"])
    _cwsandbox_is_sane(data["cwsandbox"])
    for key in ("start_s", "click_ms", "type_ms"):
        sides = data["docker"][key]
        assert set(sides) == {"local", "docker", "docker_exec"} and all(v > 0 for v in sides.values())


def _core_is_sane(data: dict[str, Any]) -> None:
    sup = data["supervisor"]
    for name in ("micro_nofsync", "micro_fsync"):
        _check_latency(sup[name], name)
        assert sup[name]["records_per_action"] == 4 and sup[name]["listener_events"] > 0
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
    ratios = ("ratio_target_nofsync", "ratio_target_fsync", "ratio_target_e2e_nofsync", "ratio_seed_full_fsync")
    assert all(_positive(sup[name]) for name in ratios)
    ver = data["verify"]
    assert ver["events"] == 10_000 and 200 <= ver["avg_line_bytes"] <= 400
    assert ver["bytes"] == round(ver["avg_line_bytes"] * ver["events"])
    for name in ("ours", "naive"):
        assert all(_positive(ver[name][key]) for key in RATE), name
        assert ver[name]["best_s"] <= ver[name]["median_s"] and ver[name]["best_eps"] >= ver[name]["median_eps"]
    assert all(_positive(ver[name]) for name in ("target_eps", "ratio_target", "generate_s"))


def _local_is_sane(data: dict[str, Any]) -> None:
    """The seeds' subprocesses vs ours on one real local desktop, and the typing check before them."""
    assert data["targets"]["local_screenshot_median_ms"] == 25.0
    loc = data["local"]
    n = loc["samples"]
    assert n == SIZES["local_samples"][1] and loc["warmup"] >= 1  # a quick run's samples
    assert loc["screen"] == "1024x720" and loc["lab"] == "form" and str(loc["display"]).startswith(":")
    assert loc["text_chars"] == len(loc["text"]) == 20 and loc["seed_type_delay_ms"] == 25
    assert _positive(loc["start_s"]) and _positive(loc["fresh_after_s"])
    for step in ("screenshot", "click", "type"):
        entry = loc[step]
        for way in ("ours", "seed"):
            _check_latency(entry[way], f"local.{step}.{way}")
            assert entry[way]["n"] == n and _positive(entry[way]["png_bytes"])
            if step != "screenshot":
                assert isinstance(entry[way]["fresh"], int) and 0 <= entry[way]["fresh"] <= n
        assert _positive(entry["ratio_target"]) and isinstance(entry["met"], bool)
    assert loc["click"]["target_speedup"] == 3.0 and loc["type"]["target_speedup"] == 5.0
    assert isinstance(loc["stale"], list)
    typed = loc["typing_check"]
    assert typed["phrase"] == "cua-tui verified" and typed["rounds"] >= 1
    assert typed["intact"] == typed["rounds"] and typed["verify_passed"] is True


def _tui_is_sane(tui: dict[str, Any]) -> None:
    assert tui["pane_cells"] == [100, 40]
    for key in (
        "ours_ui_thread",
        "ours_worker_conversion",
        "textual_image_halfcell_ui_thread",
        "sixel_ui_thread",
        "sixel_worker_conversion",
        "sixel_encoded_on_ui_thread",
    ):
        assert tui[key]["n"] >= 1 and 0 < tui[key]["median_ms"] <= tui[key]["p90_ms"] + 1e-9, key


def _ocr_is_sane(ocr: dict[str, Any]) -> None:
    """A real injection-lab page read as text: the notice word for word, against the 1.5 s target."""
    assert ocr["target_s"] == 1.5 and ocr["screen"] == "1024x720" and ocr["lab"] == "injection"
    assert ocr["notice_read"] is True and ocr["words"] > 20
    for key in ("extraction", "cli_default_threads", "cached_lookup"):
        stats = ocr[key]
        assert stats["n"] >= 3 and 0 < stats["min_us"] <= stats["median_us"] <= stats["max_us"], key
    assert ocr["ratio_target"] == pytest.approx(1.5e6 / ocr["extraction"]["median_us"])
    assert ocr["met"] is (ocr["extraction"]["median_us"] <= 1.5e6)


def _cwsandbox_is_sane(result: dict[str, Any]) -> None:
    """Both ways through the real client and the local service, interleaved, at 0 and 30 ms each way."""
    assert [d["delay_ms"] for d in result["delays"]] == [0, 30]
    for cw in result["delays"]:
        assert cw["ours_requests"] == 1.0 and cw["tutorial_requests"] == 4.0
        assert _positive(cw["ours_ms"]) and _positive(cw["tutorial_ms"]) and cw["ours_png_kb"] > 5
        assert all(_positive(cw["parts_ms"][k]) for k in ("round_trip", "transfer", "input", "settle", "encode"))
        assert cw["exec_paths"] == ["direct"]  # the path a real run takes
    far = result["delays"][1]
    # 30 ms injected each way: our one request cannot take less than 60 ms, the tutorial's four 240 (lower
    # bounds, which a busy machine only makes easier to meet; the ratios are the gate's)
    assert far["ours_ms"] >= 60 and far["tutorial_ms"] >= 240
    # stdin costs a request a round trip more: the client waits for the exec's ready frame before sending it
    assert far["request_in_argv_ms"] >= 60 and far["request_on_stdin_ms"] >= 120


# ---------------------------------------------------------------------------------------------------
# The gate's arithmetic and exit status
# ---------------------------------------------------------------------------------------------------
def test_a_ratio_below_its_floor_fails_a_count_must_be_met_and_a_suite_not_run_is_said() -> None:
    results = {
        "supervisor": {"ratio_seed_audit": 1.49, "ratio_seed_full": 0.75},  # floors 1.50 and 0.75
        "verify": {"ratio_vs_naive": 9.0},
        "cwsandbox": {
            "delays": [
                {"delay_ms": 0, "requests_ratio": 3.99, "latency_ratio": 1.5},
                {"delay_ms": 30, "requests_ratio": 4.0, "latency_ratio": 2.25},
            ]
        },
    }
    verdicts = check.evaluate(results, ("core", "cwsandbox", "docker"), {"docker": "cannot run here: no engine"})
    by_what = {v.target.what: v for v in verdicts}
    assert not by_what["audit: 4 x AuditWriter.append vs 4 x seed audit()"].passed
    assert by_what["whole action (parse, policy, 4 appends, dispatch) vs 4 x seed audit()"].passed
    assert not by_what["requests per step: the tutorial's vs ours"].passed  # a count: no margin
    assert by_what["click + screenshot, 30 ms each way: the tutorial's vs ours"].passed  # 3.0 x 0.75
    assert [v.passed for v in verdicts if v.target.suite == "docker"] == [False] * 4
    report = check.render(verdicts)
    assert "FAIL (below 1.50x)" in report and "FAIL (below 4.00x)" in report and "exact" in report
    assert report.count("NOT RUN: cannot run here: no engine") == 4
    assert report.splitlines()[-1] == f"{len(verdicts)} targets: {len(verdicts) - 6} pass, 2 fail, 4 not run"
    assert check.status(verdicts) == 1
    assert check.status([v for v in verdicts if v.passed or v.measured is None]) == 2
    assert check.status([v for v in verdicts if v.passed]) == 0


@pytest.mark.beside  # the ratios it holds are held to nothing: on the CPU the other parts leave
def test_the_gate_on_a_real_core_run_exits_1_when_a_target_is_above_the_measured_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real quick core run in this process, one target raised past any machine and the core's others held
    to nothing (this test runs beside the suite's other tests, where a real ratio may dip below its target;
    the speed gate holds them, alone): the gate exits 1 and names that target alone."""

    def held(t: check.Target) -> check.Target:
        if t.suite != "core":
            return t
        return dataclasses.replace(t, target=1000.0 if t.what.startswith("audit:") else 0.0)

    raised = tuple(held(t) for t in check.TARGETS)
    monkeypatch.setattr(check, "TARGETS", raised)
    out = tmp_path / "core.json"
    assert bench.main(["core", "--quick", "--check", "--json", str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    (failed,) = [line for line in lines if "FAIL" in line]
    assert failed.startswith("core       audit: 4 x AuditWriter.append") and "FAIL (below 750.00x)" in failed
    assert lines[-1] == "3 targets: 2 pass, 1 fail, 0 not run"
    report = json.loads(out.read_text())
    assert [v["passed"] for v in report["check"]] == [False, True, True]
    # the miss was measured once more before it counted, its first figure kept
    (first,) = [v for k, v in report["measured_again"]["core"].items() if k.startswith("audit:")]
    assert 0 < first < 750


def test_bench_rejects_an_unknown_suite_and_a_check_of_a_suite_without_baseline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench.main(["nonsense"])
    assert exit_.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert bench.main(["runs", "--quick", "--check"]) == 2
    assert "the runs suite has no baseline" in capsys.readouterr().err


@pytest.mark.long
@pytest.mark.terminal
def test_quick_replay_benchmark_writes_sane_json(tmp_path: Path) -> None:
    """The replay suite opens a real sim run and two grown from it in the real replay screen, each in a
    process of its own: first screen, steps, the log read and the chain verified, peak RSS; then the two
    longer ones with `cua-tui replay` in a real terminal."""
    out = tmp_path / "replay.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "replay", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "move one step, median (ms)" in proc.stdout and "peak RSS (MB)" in proc.stdout
    rows = json.loads(out.read_text(encoding="utf-8"))["replay"]["rows"]
    assert [row["length"] for row in rows] == [40, 80, 320]
    for row in rows:
        assert row["steps"] == row["length"]  # every step was read and counted
        assert row["chain"] == "intact"  # grown runs verify: the chain is written, not patched
        for key in ("first_screen_s", "read_s", "verified_s", "peak_rss_mb", "log_mb"):
            assert _positive(row[key]), key
        assert len(row["step_ms"]) == 12 and all(_positive(ms) for ms in row["step_ms"])
    assert rows[2]["log_mb"] > 3 * rows[1]["log_mb"]  # grown, not copied
    terminal = json.loads(out.read_text(encoding="utf-8"))["replay"]["terminal"]
    assert [row["length"] for row in terminal] == [80, 320]
    assert all(len(row["step_ms_read"]) == 6 and _positive(row["peak_rss_mb"]) for row in terminal)
    assert "Replay in a terminal, as a person meets it" in proc.stdout


@pytest.mark.beside  # times reported, never held: on the CPU the other parts leave
def test_quick_runs_benchmark_lists_real_runs_each_verified(tmp_path: Path) -> None:
    """The runs suite copies a real sim run into runs directories and times the real command over them:
    the baseline, the first listing and the next ones, each a process of its own."""
    out = tmp_path / "runs.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "runs", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BESIDE_S,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ours, next listings (unchanged runs remembered)" in proc.stdout
    result = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert [row["runs"] for row in result["rows"]] == [10, 60]
    for row in result["rows"]:
        for key in ("baseline_s", "first_s", "again_s"):
            assert _positive(row[key]), key
    assert result["run_lines"] > 100 and result["run_screens"] >= 1


@pytest.mark.long
@pytest.mark.terminal
@pytest.mark.timeout(240)
def test_the_replay_suite_times_the_replay_in_a_real_terminal(tmp_path: Path) -> None:
    """The replay suite's terminal part at a tiny length: `cua-tui replay` launched in tmux, its first screen,
    steps while the log is read and once it is, and the replay process's own peak memory, each figure
    sane; the report puts the two runs side by side and the gate measures every replay target from them."""
    from bench.replay import grow_run, in_terminal, make_run, terminal_report

    real = make_run(tmp_path / "real", 20)
    runs = [(20, real), (60, grow_run(real, tmp_path / "grown", 60))]
    rows = [in_terminal(path, steps, 3, tmp_path, launches=1) for steps, path in runs]
    for (steps, _path), row in zip(runs, rows, strict=True):
        assert row["length"] == steps
        assert 0 < row["first_screen_s"] < row["read_s"] and row["first_screen_all_s"] == [row["first_screen_s"]]
        assert len(row["step_ms_reading"]) == len(row["step_ms_read"]) == 3 and 0 <= row["reading"] <= 3
        assert all(_positive(ms) for ms in row["step_ms_reading"] + row["step_ms_read"])
        assert 30 < row["peak_rss_mb"] < 1000  # a Python process running Textual, not the benchmark's own
    lines = terminal_report(rows)
    assert lines[2].split()[:2] == ["20", "60"] and any(line.startswith("peak RSS of the replay") for line in lines)
    verdicts = check.evaluate({"replay": {"terminal": rows}}, ("replay",), {})
    assert [v.target.suite for v in verdicts] == ["replay"] * 5
    assert all(v.measured is not None and _positive(v.measured) for v in verdicts)
    # the longer run 1.6 times slower a step and heavier, its peak over 150 MB: those four targets fail
    short, long = rows
    slower = {
        **long,
        "step_ms_reading": [ms * 1.6 for ms in short["step_ms_reading"]],
        "step_ms_read": [ms * 1.6 for ms in short["step_ms_read"]],
        "peak_rss_mb": max(151.0, short["peak_rss_mb"] * 1.6),
    }
    failed = check.evaluate({"replay": {"terminal": [short, slower]}}, ("replay",), {})
    assert [v.passed for v in failed][:4] == [False] * 4 and check.status(failed) == 1
    assert "no margin" in check.render(failed)


@pytest.mark.beside  # times reported, never held: on the CPU the other parts leave
def test_quick_team_benchmark_answers_each_request_once_and_every_chain_agrees(tmp_path: Path) -> None:
    """The team suite on a throwaway PostgreSQL server: 24 sim runs by two worker processes, three headless
    analysts racing on the same requests; then the same runs in one process, for the comparison; and 6 runs
    answered by one analyst as another sees them."""
    out = tmp_path / "team.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "team", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BESIDE_S,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    team = json.loads(out.read_text(encoding="utf-8"))["team"]
    assert team["runs"] == 24 and team["statuses"] == {"passed": 24}
    assert team["answered_twice"] == 0 and team["answers_lost"] == 0
    assert team["verified_intact"] == team["sealed"] == 24 and team["database_and_chains_agree"]
    # every request answered by exactly one of the three, whoever won each race
    assert team["answers_by_analysts"] == team["requests"] == 24 and team["ok"]
    assert team["worker_exit_codes"] == [0, 0] and not team["worker_errors"]
    assert _positive(team["answer_to_execution_ms_p99"]) and _positive(team["claims_per_s"])
    assert team["in_process"]["passed"] == 24 and _positive(team["in_process"]["answer_to_execution_ms_p99"])
    # two analysts: bob answers what is on alice's screen; his answer reaches it, as the fleet TUI reads it
    seen = team["seen"]
    assert seen["answered_by_bob"] == seen["answers_seen"] == seen["requests_shown"] == 6
    assert _positive(seen["answer_seen_by_another_ms_p99"]) and _positive(seen["posted_to_shown_ms_p99"])
    assert "answer to execution p50" in proc.stdout and "bob's answer on alice's screen" in proc.stdout


def test_a_local_ratio_measured_again_is_the_fastest_against_the_fastest() -> None:
    """The gate's second look at a missed local ratio takes each way's fastest sample (the load beside the
    suite disturbs the median); the first look, the median, as always."""
    entry = {"speedup_vs_seed": 3.5, "speedup_fastest": 5.2}
    local = {"screenshot": {"speedup_vs_seed": 4.0, "speedup_fastest": 4.0}, "click": entry, "type": entry}
    first = check.evaluate({"local": local}, ("local",), {})
    again = check.evaluate({"local": local, "measured_again": {"local": {}}}, ("local",), {})
    typed = "type 20 chars + screenshot: perform(type) vs xdotool type + scrot"
    assert [(v.measured, v.passed) for v in first if v.target.what == typed] == [(3.5, False)]
    assert [(v.measured, v.passed) for v in again if v.target.what == typed] == [(5.2, True)]
