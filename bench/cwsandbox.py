"""Suite ``cwsandbox``: requests and latency per step in a CoreWeave sandbox, ours (one exec) against the
tutorial's four requests, through the real client and the local service (tests/fakes/cwsandbox_local.py).
How it is measured, and the figures: docs/benchmarks.md, "cwsandbox".
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import log

if TYPE_CHECKING:
    from cua_tui.desktops.cwsandbox import CWSandboxDesktop

# a credential for the local service (it checks nothing; the client sends it as any)
KEY = "bench-key"


def _tutorial_sandbox(settings: Any, tries: int = 3) -> Any:
    """A sandbox running a bare X server, as the tutorial's container does, on a display number no other X
    server holds. An X server answering there may still be another's (the sandbox's own then failed to
    start): the sandbox must be running its own, else it is tried again on another number."""
    import cwsandbox

    for _ in range(tries):
        display = _free_display()
        sandbox = cwsandbox.Sandbox.run(
            "sh",
            "-c",
            f"exec Xvfb :{display} -screen 0 1024x720x24 -nolisten tcp",
            environment_variables={"DISPLAY": f":{display}"},
            tags=["cua-tui-bench"],
            **settings.client_options(),
        )
        try:
            sandbox.wait(timeout=60)
            answered = _x_answers(sandbox)
            time.sleep(0.2)  # an X server that lost its display number to another has exited by now
            if answered and sandbox.get_status() == cwsandbox.SandboxStatus.RUNNING:
                return sandbox
        except cwsandbox.exceptions.SandboxError:
            pass  # its X server exited (the number was taken after all), and the sandbox with it
        sandbox.stop(missing_ok=True).result()
    raise RuntimeError(f"the tutorial's X server did not start on a display of its own in {tries} tries")


def _x_answers(sandbox: Any, timeout: float = 30.0) -> bool:
    """Whether an X server answers on the sandbox's display within ``timeout``."""
    deadline = time.monotonic() + timeout
    while sandbox.exec(["xdpyinfo"], timeout_seconds=10).result().returncode != 0:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _free_display(low: int = 170, high: int = 400) -> int:
    """A display number with no X server's lock file or socket on this machine, at random (the local desktops
    take theirs from :90 up)."""
    numbers = list(range(low, high))
    random.shuffle(numbers)
    for number in numbers:
        if not Path(f"/tmp/.X{number}-lock").exists() and not Path(f"/tmp/.X11-unix/X{number}").exists():
            return number
    raise RuntimeError(f"no free X display number between :{low} and :{high - 1}")


def _tutorial_step(sandbox: Any, x: int, y: int, shot: str) -> bytes:
    sandbox.exec(["xdotool", "mousemove", str(x), str(y), "click", "1"], timeout_seconds=10).result()
    sandbox.exec(["scrot", "-o", shot], timeout_seconds=10).result()
    png: bytes = sandbox.read_file(shot).result()
    sandbox.exec(["rm", "-f", shot], timeout_seconds=10).result()
    return png


# one way, injected by the service: none, and a CoreWeave region away from the controller
DELAYS_MS = (0, 30)
PARTS = ("input", "settle", "encode")


def run(tmp: Path, samples: int) -> dict[str, Any]:
    """``samples`` clicks on each side, interleaved, at each injected delay: requests and milliseconds per
    step, and our step broken down (the helper's own measures of its parts; the rest is the round trip)."""
    return {"samples": samples, "delays": [_at_delay(tmp / f"d{d}", samples, d) for d in DELAYS_MS]}


@dataclass
class _Samples:
    """Per step, each side's ("ours", "tutorial") milliseconds, requests and PNG bytes, and the parts of
    ours as the helper and the wire measured them."""

    times: dict[str, list[float]] = field(default_factory=lambda: {"ours": [], "tutorial": []})
    requests: dict[str, list[int]] = field(default_factory=lambda: {"ours": [], "tutorial": []})
    sizes: dict[str, list[int]] = field(default_factory=lambda: {"ours": [], "tutorial": []})
    parts: dict[str, list[float]] = field(
        default_factory=lambda: {name: [] for name in (*PARTS, "helper", "to_reply", "transfer")}
    )


def _at_delay(tmp: Path, samples: int, delay_ms: int) -> dict[str, Any]:
    import cwsandbox

    from cua_tui.core.geometry import Size
    from cua_tui.core.rundir import RunDir
    from cua_tui.desktops.cwsandbox import CWSandboxDesktop, SandboxSettings
    from cua_tui.desktops.target import Target
    from cua_tui.labs import get_lab
    from tests.fakes.cwsandbox_local import HOST_IMAGE, LocalService

    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    cwsandbox.disable_signal_handlers()
    with LocalService(tmp / "cw-service", delay=delay_ms / 1000) as service:
        settings = SandboxSettings(base_url=service.base_url, api_key=KEY, image=HOST_IMAGE)
        ours = CWSandboxDesktop(Size(1024, 720), Target(get_lab("form")), settings)
        ours.bind_run(RunDir.create(tmp / "cw-runs"))
        ours.bind_events(lambda event: None)
        log(f"cwsandbox: {delay_ms} ms each way: starting our desktop in a sandbox of the local service")
        ours.start()
        theirs = _tutorial_sandbox(settings)
        shot = str(tmp / "cw-service" / "tutorial-shot.png")
        log(f"cwsandbox: {samples} clicks each, ours and the tutorial's interleaved")
        try:
            sampled = _interleaved(ours, theirs, service.service, samples, shot)
            paths = sorted(set(service.service.paths()))
            carried = _argv_or_stdin(theirs, samples)
        finally:
            ours.stop()
            theirs.stop(missing_ok=True).result()
    return {"delay_ms": delay_ms, **_figures(sampled), "exec_paths": paths, **carried}


def _interleaved(ours: CWSandboxDesktop, theirs: Any, service: Any, samples: int, shot: str) -> _Samples:
    """``samples`` clicks on each side, one of ours then one of the tutorial's, after one pair warms up;
    ``service`` counts the requests."""
    from cua_tui.core.actions import Action, Kind
    from cua_tui.labs.form import INPUT

    from .local import BLANK_POINT, LOCAL_IDLE_S

    out = _Samples()
    # As the local desktop's benchmark does (bench/local.py): each timed click focuses the form's
    # field (a visible change, so the settle ends once the page is quiet) after an untimed click
    # elsewhere blurred it.
    x, y = INPUT.center
    for i in range(samples + 1):
        ours.perform(Action(Kind.CLICK, point=BLANK_POINT))
        time.sleep(LOCAL_IDLE_S)
        before = service.count()
        t0 = time.perf_counter()
        result = ours.perform(Action(Kind.CLICK, point=(x, y)))
        t1 = time.perf_counter()
        middle = service.count()
        png = _tutorial_step(theirs, x, y, shot)
        t2 = time.perf_counter()
        after = service.count()
        if i:
            out.times["ours"].append((t1 - t0) * 1000)
            out.times["tutorial"].append((t2 - t1) * 1000)
            out.requests["ours"].append(middle - before)
            out.requests["tutorial"].append(after - middle)
            out.sizes["ours"].append(len(result.frame.png))
            out.sizes["tutorial"].append(len(png))
            for name in out.parts:
                out.parts[name].append({**ours.timing, **ours.wire_timing}.get(name, float("nan")))
    return out


def _figures(sampled: _Samples) -> dict[str, Any]:
    """Medians and means of the samples, our step broken down, and the ratios tutorial / ours."""
    med = {side: statistics.median(values) for side, values in sampled.times.items()}
    part_ms = {name: statistics.median(values) for name, values in sampled.parts.items()}
    requests, sizes = sampled.requests, sampled.sizes
    return {
        "ours_ms": med["ours"],
        "tutorial_ms": med["tutorial"],
        "parts_ms": {
            **{n: part_ms[n] for n in PARTS},
            # the exec's way there and back, its start and the relay: all but the helper's work and
            # the reply
            "round_trip": part_ms["to_reply"] - part_ms["helper"],
            "transfer": part_ms["transfer"],
            # after the reply came: its checks in the controller (shape, lengths, the PNG decoded
            # and checked)
            "checks": med["ours"] - part_ms["to_reply"] - part_ms["transfer"],
        },
        "ours_requests": statistics.mean(requests["ours"]),
        "tutorial_requests": statistics.mean(requests["tutorial"]),
        "ours_png_kb": statistics.median(sizes["ours"]) / 1024,
        "tutorial_png_kb": statistics.median(sizes["tutorial"]) / 1024,
        "latency_ratio": med["tutorial"] / med["ours"],
        "requests_ratio": statistics.mean(requests["tutorial"]) / statistics.mean(requests["ours"]),
    }


def _argv_or_stdin(sandbox: Any, samples: int) -> dict[str, float]:
    """What carrying a step's request costs, ``request_in_argv_ms`` and ``request_on_stdin_ms``: in the
    exec's argv, or on its stdin (the client waits for the exec's ready frame before it sends stdin), the
    same request echoed back, interleaved."""
    request = json.dumps({"op": "perform", "action": {"kind": "type", "text": "x" * 40}, "armor": True})
    times: dict[str, list[float]] = {"request_in_argv_ms": [], "request_on_stdin_ms": []}
    for i in range(samples + 1):
        t0 = time.perf_counter()
        sandbox.exec(["sh", "-c", 'printf "%s\\n" "$1"', "bench", request], timeout_seconds=10).result()
        t1 = time.perf_counter()
        process = sandbox.exec(["head", "-n", "1"], timeout_seconds=10, stdin=True)
        process.stdin.writeline(request).result()
        process.stdin.close().result()
        echoed = process.result()
        t2 = time.perf_counter()
        if echoed.stdout.strip() != request:
            raise RuntimeError("the stdin exec did not echo the request")
        if i:
            times["request_in_argv_ms"].append((t1 - t0) * 1000)
            times["request_on_stdin_ms"].append((t2 - t1) * 1000)
    return {way: statistics.median(values) for way, values in times.items()}


def report(r: dict[str, Any]) -> list[str]:
    """The suite's lines for the benchmark report."""
    lines = [
        f"CoreWeave sandboxes: one click + the screenshot after it, {r['samples']} samples each, interleaved "
        "(real cwsandbox client, local service, a delay injected each way)",
        "-" * 110,
        f"{'way':<58}{'requests/step':>15}{'median':>12}{'PNG':>10}{'ratio':>12}",
    ]
    for d in r["delays"]:
        parts = d["parts_ms"]
        lines += [
            f"delay {d['delay_ms']} ms each way; execs took the {' and '.join(d['exec_paths'])} path",
            f"{'  ours: one exec, the resident helper answers header + PNG':<58}{d['ours_requests']:>15.2f}"
            f"{d['ours_ms']:>10.1f}ms{d['ours_png_kb']:>8.0f}kB",
            f"{'    round trip (and the exec start, the relay)':<58}{'':>15}{parts['round_trip']:>10.1f}ms",
            f"{'    transfer (the reply, as it streams in)':<58}{'':>15}{parts['transfer']:>10.1f}ms",
            f"{'    checks of the reply in the controller (PNG decoded)':<58}{'':>15}{parts['checks']:>10.1f}ms",
            f"{'    input (the click, in the helper)':<58}{'':>15}{parts['input']:>10.1f}ms",
            f"{'    settle and screenshot (waiting for the page)':<58}{'':>15}{parts['settle']:>10.1f}ms",
            f"{'    encode (PNG)':<58}{'':>15}{parts['encode']:>10.1f}ms",
            f"{'  the tutorial: xdotool exec, scrot exec, read_file, rm exec':<58}{d['tutorial_requests']:>15.2f}"
            f"{d['tutorial_ms']:>10.1f}ms{d['tutorial_png_kb']:>8.0f}kB",
            f"{'  ratio (tutorial / ours)':<58}{d['requests_ratio']:>14.2f}x{'':>12}{'':>10}"
            f"{d['latency_ratio']:>11.2f}x",
            f"{'  a request in the exec argv / on its stdin (echoed)':<58}{'':>15}"
            f"{d['request_in_argv_ms']:>10.1f}ms / {d['request_on_stdin_ms']:.1f}ms",
        ]
    return [*lines, "-" * 110]
