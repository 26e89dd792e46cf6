"""Suite ``docker``: the Docker backend side by side with the local desktop, start time and step latency,
and the same container driven with one ``docker exec`` per request. How it is measured, and the figures:
docs/benchmarks.md, "docker".
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from .common import SCREEN, log

SIDES = ("local", "docker", "docker_exec")
TEXT = "The quick brown fox!"


def _desktop(side: str, tmp: Path) -> Any:
    from cua_tui.core.rundir import RunDir
    from cua_tui.desktops.docker import DockerDesktop, DockerSettings
    from cua_tui.desktops.local import LocalDesktop
    from cua_tui.desktops.target import Target
    from cua_tui.labs import get_lab

    if side == "local":
        return LocalDesktop(SCREEN, Target(get_lab("form")))
    transport = "exec" if side == "docker_exec" else "stream"
    desktop = DockerDesktop(SCREEN, Target(get_lab("form")), DockerSettings(transport=transport))
    desktop.bind_run(RunDir.create(tmp / "docker-bench-runs"))
    desktop.bind_events(lambda event: None)
    return desktop


def run(tmp: Path, samples: int, starts: int) -> dict[str, Any]:
    """Start times (``starts`` each) and ``samples`` clicks and typings per side, interleaved."""
    from cua_tui.core.ports import DesktopError
    from cua_tui.desktops.docker import DockerSettings
    from cua_tui.desktops.docker_engine import Engine

    problem = Engine().problem(DockerSettings().image)
    if problem:
        raise DesktopError(problem, fatal=True)
    start_s: dict[str, list[float]] = {side: [] for side in SIDES}
    kept: dict[str, Any] = {}
    try:
        _start(tmp, starts, start_s, kept)
        log(f"docker: start times { ({k: round(statistics.median(v), 2) for k, v in start_s.items()}) } s")
        log(f"docker: {samples} clicks and typings on each side, interleaved")
        click_ms, type_ms = _steps({side: kept[side] for side in SIDES}, samples)
    finally:
        for desktop in kept.values():
            desktop.stop()
    med = {
        name: {side: statistics.median(v) for side, v in values.items()}
        for name, values in (("start_s", start_s), ("click_ms", click_ms), ("type_ms", type_ms))
    }
    return {"samples": samples, "starts": starts, **med}


def _start(tmp: Path, starts: int, start_s: dict[str, list[float]], kept: dict[str, Any]) -> None:
    """Start and stop each side's desktop ``starts`` times, alternating the order, its seconds in
    ``start_s``; the last round's desktops are left running in ``kept`` (the caller stops them)."""
    for round_ in range(starts):
        for side in SIDES if round_ % 2 == 0 else reversed(SIDES):
            desktop = _desktop(side, tmp)
            t0 = time.perf_counter()
            desktop.start()
            start_s[side].append(time.perf_counter() - t0)
            # the last round's desktops are the ones sampled (idle meanwhile): three starts fewer
            if round_ == starts - 1:
                kept[side] = desktop
            else:
                desktop.stop()


def _steps(desktops: dict[str, Any], samples: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """``samples`` clicks and typings on each desktop, side after side, after one round warms up; their
    milliseconds per side."""
    from cua_tui.core.actions import Action, parse_openai
    from cua_tui.core.geometry import Scaling
    from cua_tui.labs.form import INPUT

    scaling = Scaling.identity(SCREEN)

    def act(data: dict[str, Any]) -> Action:
        return parse_openai(data, scaling)

    field = act({"type": "click", "button": "left", "x": INPUT.center[0], "y": INPUT.center[1]})
    select_all = act({"type": "keypress", "keys": ["ctrl", "a"]})
    typing = act({"type": "type", "text": TEXT})
    click_ms: dict[str, list[float]] = {side: [] for side in desktops}
    type_ms: dict[str, list[float]] = {side: [] for side in desktops}
    for i in range(samples + 1):
        # below the form: nothing a click there acts on
        x, y = 60 + (i * 71) % 900, 520 + (i * 13) % 150
        for side, desktop in desktops.items():
            t0 = time.perf_counter()
            desktop.perform(act({"type": "click", "button": "left", "x": x, "y": y}))
            t1 = time.perf_counter()
            desktop.perform(field)
            # the typing replaces the last one: the page redraws alike
            desktop.perform(select_all)
            t2 = time.perf_counter()
            desktop.perform(typing)
            t3 = time.perf_counter()
            if i:
                click_ms[side].append((t1 - t0) * 1000)
                type_ms[side].append((t3 - t2) * 1000)
    return click_ms, type_ms


def report(r: dict[str, Any]) -> list[str]:
    """The suite's lines: each side's medians, and the ratios baseline / ours (local / the side), as the
    report's other sections: above 1.00x would be faster than the local desktop."""
    names = {
        "local": "local (bubblewrap, baseline)",
        "docker": "docker: one attached exec (the backend)",
        "docker_exec": "docker: one docker exec per request",
    }
    lines = [
        f"Docker backend vs local desktop: median desktop start ({r['starts']} each) and step latency "
        f"(perform + the screenshot after it, {r['samples']} samples each, interleaved)",
        "-" * 110,
        f"{'desktop':<44}{'start':>10}{'ratio':>9}{'click':>12}{'ratio':>9}{'type 20 ch':>14}{'ratio':>9}",
    ]
    base = {k: r[k]["local"] for k in ("start_s", "click_ms", "type_ms")}
    for side in SIDES:
        lines.append(
            f"{names[side]:<44}{r['start_s'][side]:>9.2f}s{base['start_s'] / r['start_s'][side]:>8.2f}x"
            f"{r['click_ms'][side]:>10.1f}ms{base['click_ms'] / r['click_ms'][side]:>8.2f}x"
            f"{r['type_ms'][side]:>12.1f}ms{base['type_ms'] / r['type_ms'][side]:>8.2f}x"
        )
    lines += ["(ratios: the local desktop's time / the side's: below 1.00x is slower than local)", "-" * 110]
    return lines
