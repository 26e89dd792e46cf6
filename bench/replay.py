"""Suite ``replay``: opening a long run, moving one step, and the memory a 10,000-step run costs, in the
real replay app; and the same as a person meets it, ``cua-tui replay`` in a real terminal (tmux), a run of
10,000 steps beside one of 100,000. ``python -m bench replay [--quick] [--check]``;
docs/benchmarks.md, "replay".
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import log, sim_run
from .tmux import Terminal

SIZE = (160, 48)
FIRST_SCREEN_TARGET_S = 1.0
STEP_TARGET_MS = 50.0
MEMORY_TARGET_MB = 150.0
# in the terminal: the longer run's step and peak memory at most this many times the shorter run's
FLAT_TARGET = 1.5
# what the pane shows of the step under way (core/describe.step_panel's title)
_STEP = "STEP {} of"
# a person glances at each step before the next key: meanwhile the background work goes on, and the key
# meets a process busy with it
GLANCE_S = 0.2


def make_run(folder: Path, steps: int) -> Path:
    """A passed-through sim run of ``steps`` actions that change the screen (clicks and scrolls)."""
    actions: list[dict[str, Any]] = []
    for i in range(steps):
        if i % 2:
            actions.append({"type": "scroll", "x": 500, "y": 400, "scroll_x": 0, "scroll_y": 100 if i % 4 else -100})
        else:
            actions.append({"type": "click", "button": "left", "x": 60 + (i * 37) % 880, "y": 60 + (i * 53) % 600})
    turns = [{"text": f"turn {n + 1}", "actions": actions[i : i + 5]} for n, i in enumerate(range(0, steps, 5))]
    limits = {"max_turns": len(turns) + 2, "max_steps": steps + 10, "deadline": 24 * 3600}
    run, result = sim_run(folder, turns, "replay benchmark", **limits)
    if result.steps != steps:
        raise RuntimeError(f"the generated run has {result.steps} steps, not {steps}: {result.reason}")
    return Path(run.path)


def grow_run(source: Path, root: Path, steps: int) -> Path:
    """A run of ``steps`` steps grown from a real sim run: its turns repeated, renumbered, written through
    the real audit writer and sealed, its screens shared (hard links), so that a 100,000-step run takes
    seconds to make rather than the quarter of an hour the sim desktop would take. It verifies intact."""
    from cua_tui.core.audit import AuditWriter
    from cua_tui.core.rundir import RunDir, write_json_atomic

    records = [json.loads(line) for line in (source / "audit.jsonl").read_bytes().splitlines()]
    turns = [i for i, r in enumerate(records) if r["kind"] == "model_turn" and r.get("actions")]
    if not turns:
        raise ValueError(f"{source}: no turn with actions to repeat")
    # each turn from the phase before its model_turn; the run's head and tail as they are
    starts = [i - 1 for i in turns]
    final = next(i - 1 for i, r in enumerate(records) if r["kind"] == "model_turn" and not r.get("actions"))
    blocks = [records[a:b] for a, b in zip(starts, [*starts[1:], final], strict=True)]
    per_block = [sum(r["kind"] == "proposal" for r in block) for block in blocks]
    rundir = RunDir.create(root)
    shutil.rmtree(rundir.path / "screens", ignore_errors=True)
    (rundir.path / "screens").mkdir()
    for png in (source / "screens").iterdir():
        os.link(png, rundir.path / "screens" / png.name)
    writer = AuditWriter(rundir.audit, rundir.run_id, fsync=False)

    def write(record: dict[str, Any], turn: int = 0, step: int = 0) -> None:
        payload = {k: v for k, v in record.items() if k not in ("seq", "ts", "run", "kind", "prev")}
        if turn and isinstance(payload.get("turn"), int):
            payload["turn"] += turn
        if step and isinstance(payload.get("step"), int) and payload["step"]:
            payload["step"] += step
        writer.append(record["kind"], payload)

    for record in records[: starts[0]]:
        write(record)
    made = turn = 0
    while made < steps:
        for block, count in zip(blocks, per_block, strict=True):
            if made + count > steps:
                break
            base_turn = turn - block[1]["turn"] + 1
            for record in block:
                write(record, base_turn, made - _first_step(block) + 1)
            made, turn = made + count, turn + 1
        else:
            continue
        break
    last_turn = turn + 1
    for record in records[final:]:
        if record["kind"] == "model_turn":
            record = {**record, "turn": last_turn}
        elif record["kind"] == "run_ended":
            record = {**record, "turns": last_turn, "steps": made, "executed": made}
        write(record)
    seal = writer.seal()
    info = json.loads((source / "run.json").read_bytes())
    write_json_atomic(rundir.path / "run.json", {**info, "run_id": rundir.run_id})
    result = json.loads((source / "result.json").read_bytes())
    counts = {"turns": last_turn, "steps": made, "executed": made, "events": seal["events"]}
    write_json_atomic(rundir.result_json, {**result, "run_id": rundir.run_id, "counts": counts, "seal": seal})
    return rundir.path


def _first_step(block: list[dict[str, Any]]) -> int:
    """The step number the block's first outcome records (its steps are numbered from there)."""
    return next((r["step"] for r in block if r["kind"] == "outcome" and isinstance(r.get("step"), int)), 1)


def _app(path: Path) -> Any:
    from cua_tui.core.runlog import RunReader
    from cua_tui.ocr import ScreenReader
    from cua_tui.tui.replay import chain_state, replay_app

    # as `cua-tui replay` opens it: the chain verified in the background
    return replay_app(RunReader(path), lambda: chain_state(path), screen_reader=ScreenReader())


async def _until(pilot: Any, condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the replay did not get there")
        await pilot.pause(0.001)


async def _move(pilot: Any, screen: Any, key: str) -> float:
    """Press ``key``; the milliseconds from its handler until the new frame was painted (the App's own time)."""
    serial, redraws = screen.desktop.serial, len(screen.redraw_ms)
    await pilot.press(key)
    await _until(pilot, lambda: screen.desktop.serial > serial and len(screen.redraw_ms) > redraws)
    return float(screen.redraw_ms[-1])


async def _measure(path: Path, moves: int) -> dict[str, Any]:
    """Open the run as `cua-tui replay` does; step through it while the log is still read in the
    background, then at its end once everything is read and verified."""
    import textual.app  # noqa: F401 - the App's own imports are not the run's cost (as in a warm process)

    from cua_tui.tui import replay  # noqa: F401

    started, clock = time.perf_counter(), time.monotonic()
    app = _app(path)
    screen: Any = app.main
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: bool(screen.desktop.settled))
        first = time.perf_counter() - started
        early = [await _move(pilot, screen, "right") for _ in range(moves)]
        await _until(pilot, lambda: screen.index.done, timeout=600)
        read = screen.index.done_at - clock
        await _until(pilot, lambda: screen.chain.state != "verifying", timeout=600)
        verified = screen.verified_at - clock
        await _move(pilot, screen, "end")
        late = [await _move(pilot, screen, "left") for _ in range(moves)]
        await _move(pilot, screen, "home")
        steps, state = len(screen.steps), screen.chain.state
    screen.reader.close()
    return {
        "first_screen_s": first,
        "read_s": read,
        "verified_s": verified,
        "step_ms": sorted(early + late),
        "step_ms_reading": sorted(early),
        "step_ms_read": sorted(late),
        "steps": steps,
        "chain": state,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _in_child(path: Path, moves: int) -> dict[str, Any]:
    """``_measure`` in a process of its own, so that its peak RSS is the replay's alone."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.replay", str(path), str(moves)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    if out.returncode:
        raise RuntimeError(f"the replay measurement failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def replay_command() -> list[str]:
    """How a person starts the replay: the installed ``cua-tui`` beside this Python, else the module."""
    binary = Path(sys.executable).parent / "cua-tui"
    return [str(binary)] if binary.exists() else [sys.executable, "-m", "cua_tui.cli"]


def in_terminal(
    path: Path, steps: int, moves: int, home: Path, launches: int = 3, glance: float = GLANCE_S
) -> dict[str, Any]:
    """``cua-tui replay PATH`` in a real terminal (tmux, 160x48), timed as a person meets it. The first
    screen: from the command launched to the pane showing the first step with its picture (the median of
    ``launches``, each in a tmux of its own). A step: from the key sent to the pane showing the next step,
    as tmux got the output (bench/tmux.py), each key ``glance`` seconds after the step before it showed;
    ``moves`` steps while the log is still read and verified in the background, then, once the banner says
    it is read and intact, ``moves`` from its last step back. The peak RSS of the replay's own process
    (VmHWM) at the end. ``home``: a folder for the command's (empty) settings."""
    settings = {"CUA_TUI_CONFIG": str(home / "no-config.toml"), "XDG_CONFIG_HOME": str(home / "config")}
    command = shlex.join(["env", "-u", "COLUMNS", "-u", "LINES", *(f"{k}={v}" for k, v in settings.items())])
    command = f"exec {command} {shlex.join([*replay_command(), 'replay', str(path)])}"

    def launch(term: Terminal) -> tuple[int, float]:
        launched = time.monotonic()
        term.run(command)
        first = term.wait(lambda text: _STEP.format(1) in text and text.count("▀") > 1000, "the first step", 60)
        pid = term.pid()  # the replay itself (exec'd by the pane's shell), not a shell around it
        if b"replay" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            raise RuntimeError(f"the pane's process {pid} is not the replay")
        return pid, first.changed - launched

    def step(term: Terminal, key: str, number: int) -> tuple[float, bool]:
        time.sleep(glance)
        sent = term.keys(key)
        shot = term.wait(lambda text: _STEP.format(number) in text, f"step {number}", 120)
        return (shot.changed - sent) * 1000, _reading(shot.text)

    firsts = []
    for _ in range(launches - 1):
        term = Terminal(*SIZE)
        try:
            firsts.append(launch(term)[1])
        finally:
            term.close()
    term = Terminal(*SIZE)
    try:
        pid, first = launch(term)
        launched = time.monotonic() - first
        early = [step(term, "Right", number) for number in range(2, moves + 2)]
        done = term.wait(lambda text: _read_and_intact(text, steps), "the log read and verified intact", 900)
        step(term, "End", steps)
        late = [step(term, "Left", number) for number in range(steps - 1, steps - 1 - moves, -1)]
        peak = _peak_rss_mb(pid)
    finally:
        term.close()
    return {
        "length": steps,
        "first_screen_s": statistics.median([*firsts, first]),
        "first_screen_all_s": [*firsts, first],
        "read_s": done.changed - launched,
        "step_ms_reading": sorted(ms for ms, _reading in early),
        "reading": sum(reading for _ms, reading in early),  # of the early steps, shown while still reading
        "step_ms_read": sorted(ms for ms, _reading in late),
        "peak_rss_mb": peak,
    }


def _banner(text: str) -> str:
    """The pane's first two rows: the banner, wrapped or not."""
    return " ".join(text.split("\n", 2)[:2])


def _reading(text: str) -> bool:
    return "reading the log" in _banner(text)


def _read_and_intact(text: str, steps: int) -> bool:
    """The banner no longer reads the log and says the record is intact; the step panel counts every step."""
    return not _reading(text) and "intact" in _banner(text).lower() and f" of {steps} " in text


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def run(tmp: Path, quick: bool) -> dict[str, Any]:
    """The suite: runs of 1,000, 10,000 and 100,000 steps (a real sim run, and two grown from it), each
    opened, stepped through and read to its end in a process of its own; smaller with quick."""
    lengths = (40, 80, 320) if quick else (1000, 10000, 100000)
    moves = 6 if quick else 30
    log(f"replay: generating a {lengths[0]:,}-step sim run")
    real = make_run(tmp / "replay-real", lengths[0])
    paths = [real]
    for steps in lengths[1:]:
        log(f"replay: growing it to {steps:,} steps")
        paths.append(grow_run(real, tmp / f"replay-{steps}", steps))
    rows = []
    for steps, path in zip(lengths, paths, strict=True):
        log(f"replay: opening the {steps:,}-step run")
        row = _in_child(path, moves)
        disk = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        rows.append(
            {**row, "length": steps, "log_mb": (path / "audit.jsonl").stat().st_size / 2**20, "dir_mb": disk / 2**20}
        )
    terminal = []
    for steps, path in zip(lengths[1:], paths[1:], strict=True):
        log(f"replay: the {steps:,}-step run in a terminal (tmux), as a person meets it")
        terminal.append(in_terminal(path, steps, moves, tmp, launches=1 if quick else 3))
    return {"rows": rows, "terminal": terminal}


def _p90(samples: list[float]) -> float:
    return samples[max(0, int(len(samples) * 0.9) - 1)]


def report(r: dict[str, Any]) -> list[str]:
    """The suite's lines for the benchmark report: the three lengths side by side, each against its target."""
    rows = r["rows"]
    width = 14

    def line(label: str, cells: list[str], target: str = "") -> str:
        return f"{label:<34}" + "".join(f"{c:>{width}}" for c in cells) + f"{target:>14}"

    out = [
        "Replay: runs of " + ", ".join(f"{row['length']:,}" for row in rows) + " steps (160x48, headless; "
        "each opened in a process of its own)",
        "-" * 100,
        line("measurement", [f"{row['length']:,} steps" for row in rows], "target"),
        line("audit log (MB)", [f"{row['log_mb']:.1f}" for row in rows]),
        line("first screen shown (ms)", [f"{row['first_screen_s'] * 1000:.0f}" for row in rows], "< 1,000"),
        line("  ratio to the target", [f"{FIRST_SCREEN_TARGET_S / row['first_screen_s']:.2f}x" for row in rows]),
        line("move one step, median (ms)", [f"{statistics.median(row['step_ms']):.1f}" for row in rows], "< 50"),
        line("  p90", [f"{_p90(row['step_ms']):.1f}" for row in rows]),
        line("  median while the log is read", [f"{statistics.median(row['step_ms_reading']):.1f}" for row in rows]),
        line("  median once it is read", [f"{statistics.median(row['step_ms_read']):.1f}" for row in rows]),
        line("  ratio to the target", [f"{STEP_TARGET_MS / statistics.median(row['step_ms']):.2f}x" for row in rows]),
        line("log read to its end, after open (s)", [f"{row['read_s']:.1f}" for row in rows]),
        line("chain verified, after open (s)", [f"{row['verified_s']:.1f}  " + row["chain"][:3] for row in rows]),
        line("peak RSS (MB)", [f"{row['peak_rss_mb']:.0f}" for row in rows], "< 150"),
        line("  ratio to the target", [f"{MEMORY_TARGET_MB / row['peak_rss_mb']:.2f}x" for row in rows]),
        "Steps are timed from the key's handler until the new frame was painted, half of them while the log",
        "is still read in the background and half at its end; the chain is verified in the background.",
        "Before (the whole log held and folded at open, verified first): a 10,000-step run took 5.5 s to",
        "show its first screen, with 51 MB of Python heap (docs/benchmarks.md, replay).",
        "-" * 100,
    ]
    if r.get("terminal"):
        out += terminal_report(r["terminal"])
    return out


def terminal_report(rows: list[dict[str, Any]]) -> list[str]:
    """The terminal measurement: the shorter run and the longer side by side, the longer over the shorter."""
    short, long = rows

    def line(label: str, key: str, unit: float = 1.0, target: str = "", fmt: str = ".0f") -> str:
        a, b = _figure(short, key) * unit, _figure(long, key) * unit
        return f"{label:<42}{a:>12{fmt}}{b:>12{fmt}}{f'{b / a:.2f}x':>10}  {target}"

    head = f"{'':<42}{short['length']:>12,}{long['length']:>12,}{'ratio':>10}  target"
    return [
        f"Replay in a terminal, as a person meets it: `cua-tui replay RUN` in tmux at {SIZE[0]}x{SIZE[1]}",
        "-" * 100,
        head,
        line(
            f"first screen, median of {len(short['first_screen_all_s'])} launches (ms)",
            "first_screen_s",
            1000,
            "< 1,000 ms",
        ),
        line(
            "step while the log is read, median (ms)", "step_ms_reading", fmt=".1f", target=f"ratio <= {FLAT_TARGET}x"
        ),
        f"{'  of them shown while still reading':<42}{short['reading']:>12}{long['reading']:>12}",
        line("step once it is read, median (ms)", "step_ms_read", fmt=".1f", target=f"ratio <= {FLAT_TARGET}x"),
        line("log read and verified, after launch (s)", "read_s", fmt=".1f"),
        line("peak RSS of the replay process (MB)", "peak_rss_mb", target=f"ratio <= {FLAT_TARGET}x, < 150 MB"),
        "A step: from the key sent until tmux got the output that shows the next step (medians of "
        f"{len(short['step_ms_read'])} a side);",
        "peak RSS: the replay process's VmHWM. `python -m bench replay --check` holds these.",
        "-" * 100,
    ]


def _figure(row: dict[str, Any], key: str) -> float:
    """A row's figure: a median for the lists of steps."""
    value = row[key]
    return float(statistics.median(value)) if isinstance(value, list) else float(value)


def flat(key: str) -> Callable[[dict[str, Any]], float]:
    """The gate's measure of flatness: the shorter run's figure over the longer's (at least 1 / FLAT_TARGET)."""

    def measure(results: dict[str, Any]) -> float:
        short, long = results["replay"]["terminal"]
        return _figure(short, key) / _figure(long, key)

    return measure


def under(key: str, target: float) -> Callable[[dict[str, Any]], float]:
    """The gate's measure of an absolute target: the target over the worst run's figure (at least 1)."""

    def measure(results: dict[str, Any]) -> float:
        return target / max(_figure(row, key) for row in results["replay"]["terminal"])

    return measure


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_measure(Path(sys.argv[1]), int(sys.argv[2])))))
