"""Suite 3 ("local"): the local desktop, the seeds' subprocesses (xdotool, scrot) against ours, on one real
Xvfb + openbox + Chromium."""

from __future__ import annotations

import gc
import io
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cua_tui.core.actions import Action, parse_openai
from cua_tui.core.geometry import Scaling

from .common import SCREEN, log, pn, summarize_ns

if TYPE_CHECKING:
    from cua_tui.labs.form import FormLab

# median of desktop.screenshot() (PNG bytes in memory)
TARGET_LOCAL_SHOT_MS = 25.0
# click + fresh screenshot: times faster than xdotool click + scrot
TARGET_LOCAL_CLICK_X = 3.0
# typing 20 characters + fresh screenshot: times faster than xdotool type + scrot
TARGET_LOCAL_TYPE_X = 5.0
# the seeds' way; the desktop's own programs come from missing_programs()
LOCAL_TOOLS = ("xdotool", "scrot")
LOCAL_TEXT = "The quick brown fox!"  # 20 characters, shifted ones included
SEED_TYPE_DELAY_MS = 25
# nothing of the form lab's page there: a click blurs the field
BLANK_POINT = (760, 600)
# pause after each untimed preparation step, so every timed step starts on a quiet screen
LOCAL_IDLE_S = 0.05
# a frame is "fresh" when it equals the screen this long after the step returned
FRESH_AFTER_S = 0.15
LOCAL_WARMUP = 1


def local_missing() -> list[str]:
    """Programs the ``local`` suite needs and this machine lacks."""
    from cua_tui.desktops.local import missing_programs

    return [*missing_programs(), *(name for name in LOCAL_TOOLS if shutil.which(name) is None)]


class LocalBenchError(RuntimeError):
    """The local suite cannot measure (the seeds' tools cannot reach the display)."""


class SeedWay:
    """The seeds' executor: one subprocess per step against the same display, the screenshot through a file."""

    def __init__(self, display: str, cookie: Path | None, shot_path: Path) -> None:
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": display}
        self.cookie = cookie
        self.path = shot_path
        self.auth = "server-interpreted localuser (no cookie)"

    def _run(self, argv: list[str]) -> None:
        subprocess.run(argv, env=self.env, check=True, stdin=subprocess.DEVNULL, capture_output=True)

    def connect(self) -> None:
        """Probe both tools; if the server refuses them without the cookie, give them the desktop's cookie."""
        try:
            self._run(["xdotool", "getmouselocation"])
            self.screenshot()
        except subprocess.CalledProcessError as exc:
            if self.cookie is None or not self.cookie.exists():
                raise LocalBenchError(f"{exc.cmd[0]} cannot reach the display: {exc.stderr!r}") from None
            self.env["XAUTHORITY"] = str(self.cookie)
            self.auth = "the desktop's xauth cookie"
            self._run(["xdotool", "getmouselocation"])
            self.screenshot()

    def screenshot(self) -> bytes:
        """``scrot -o FILE``, then the file read back."""
        self._run(["scrot", "-o", str(self.path)])
        return self.path.read_bytes()

    def click(self, x: int, y: int) -> bytes:
        """``xdotool mousemove X Y click 1``, then a screenshot."""
        self._run(["xdotool", "mousemove", str(x), str(y), "click", "1"])
        return self.screenshot()

    def type(self, text: str) -> bytes:
        """``xdotool type --delay 25``, then a screenshot."""
        self._run(["xdotool", "type", "--delay", str(SEED_TYPE_DELAY_MS), "--", text])
        return self.screenshot()


def _changed_box(png_a: bytes, png_b: bytes) -> list[int] | None:
    """The bounding box [x0, y0, x1, y1] of the pixels that differ between two screenshots, None if equal."""
    from PIL import Image, ImageChops

    with Image.open(io.BytesIO(png_a)) as a, Image.open(io.BytesIO(png_b)) as b:
        box = ImageChops.difference(a.convert("RGB"), b.convert("RGB")).getbbox()
    return list(box) if box else None


def bench_local(tmp: Path, n: int, checks: int) -> dict[str, Any]:
    """One LocalDesktop with the form lab; the seeds' way and ours timed sample by sample, alternately first."""
    from cua_tui.desktops.local import LocalDesktop
    from cua_tui.desktops.target import Target
    from cua_tui.labs.form import FormLab

    acts = _Actions.parse()
    lab = FormLab()
    desktop = LocalDesktop(SCREEN, Target(lab))
    try:
        t0 = pn()
        desktop.start()
        start_s = (pn() - t0) / 1e9
        assert desktop.display is not None and desktop.workspace is not None
        seed = SeedWay(desktop.display, desktop.workspace / "run" / "xauth", tmp / "seed-shot.png")
        seed.connect()
        typing_check = _typing_check(desktop, lab, acts, checks)
        samples = _sample(desktop, seed, acts, n)
    finally:
        desktop.stop()
    out: dict[str, Any] = {
        "display": desktop.display,
        "screen": f"{SCREEN.width}x{SCREEN.height}",
        "lab": "form",
        "start_s": start_s,
        "samples": n,
        "warmup": LOCAL_WARMUP,
        "text": LOCAL_TEXT,
        "text_chars": len(LOCAL_TEXT),
        "seed_type_delay_ms": SEED_TYPE_DELAY_MS,
        "seed_auth": seed.auth,
        "fresh_after_s": FRESH_AFTER_S,
        "stale": samples.stale,
        "typing_check": typing_check,
    }
    out.update(samples.summary())
    return out


@dataclass(frozen=True)
class _Actions:
    """The actions the suite performs on the form lab's page, parsed once."""

    field: tuple[int, int]
    click_field: Action
    blur: Action
    type_text: Action
    type_phrase: Action
    click_verify: Action
    select_all: Action
    backspace: Action

    @classmethod
    def parse(cls) -> _Actions:
        """Parse every action through ``parse_openai``, as a model's would be."""
        from cua_tui.labs.form import INPUT, PHRASE, VERIFY

        scaling = Scaling.identity(SCREEN)

        def click(x: int, y: int) -> Action:
            return parse_openai({"type": "click", "button": "left", "x": x, "y": y}, scaling)

        fx, fy = INPUT.center
        acts = cls(
            field=(fx, fy),
            click_field=click(fx, fy),
            blur=click(*BLANK_POINT),
            type_text=parse_openai({"type": "type", "text": LOCAL_TEXT}, scaling),
            type_phrase=parse_openai({"type": "type", "text": PHRASE}, scaling),
            click_verify=click(*VERIFY.center),
            select_all=parse_openai({"type": "keypress", "keys": ["ctrl", "a"]}, scaling),
            backspace=parse_openai({"type": "keypress", "keys": ["BackSpace"]}, scaling),
        )
        assert len(acts.type_text.text) == 20
        return acts


def _prep(desktop: Any, *actions: Action) -> None:
    """Untimed steps through our own session, then a short idle."""
    for action in actions:
        desktop.perform(action)
    time.sleep(LOCAL_IDLE_S)


def _stale_box(desktop: Any, png: bytes) -> list[int] | None:
    """Where the frame differs from the screen a little later (None: the step's screenshot was fresh)."""
    time.sleep(FRESH_AFTER_S)
    return _changed_box(png, desktop.screenshot().png)


def _typing_check(desktop: Any, lab: FormLab, acts: _Actions, checks: int) -> dict[str, Any]:
    """Correctness first: typing at full speed (no delay) must arrive intact. The lab's server records
    a proof only for the exact phrase; count one new proof and no wrong attempt per round."""
    from cua_tui.labs.form import PHRASE

    log(f"local: typing check, {checks} round(s) of {PHRASE!r} + Verify through desktop.perform")
    intact = 0
    for _ in range(checks):
        _prep(desktop, acts.click_field, acts.select_all, acts.backspace)
        with lab.lock:
            proofs, wrong = len(lab.proofs), lab.wrong_attempts
        desktop.perform(acts.type_phrase)
        desktop.perform(acts.click_verify)
        now_proofs, now_wrong = proofs, wrong
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            with lab.lock:
                now_proofs, now_wrong = len(lab.proofs), lab.wrong_attempts
            if (now_proofs, now_wrong) != (proofs, wrong):
                break
            time.sleep(0.01)
        intact += int(now_proofs == proofs + 1 and now_wrong == wrong)
    verification = desktop.verify()
    assert verification is not None
    return {
        "phrase": PHRASE,
        "rounds": checks,
        "intact": intact,
        "verify_passed": verification.passed,
        "verify_detail": verification.detail,
    }


_WAYS = ("seed", "ours")
_STEPS = ("screenshot", "click", "type")


@dataclass
class _Samples:
    """Times and PNG sizes per (way, step), how many step frames were fresh, and where the others differed."""

    times: dict[tuple[str, str], list[int]] = field(default_factory=lambda: {(w, s): [] for w in _WAYS for s in _STEPS})
    sizes: dict[tuple[str, str], list[int]] = field(default_factory=lambda: {(w, s): [] for w in _WAYS for s in _STEPS})
    fresh: dict[tuple[str, str], int] = field(
        default_factory=lambda: {(w, s): 0 for w in _WAYS for s in ("click", "type")}
    )
    stale: list[dict[str, Any]] = field(default_factory=list)

    def add(self, way: str, step: str, elapsed_ns: int, png: bytes) -> None:
        """One timed step and the size of the PNG it returned."""
        self.times[way, step].append(elapsed_ns)
        self.sizes[way, step].append(len(png))

    def summary(self) -> dict[str, Any]:
        """One entry per step: both ways' statistics, the speedup and the target it is held to."""
        out: dict[str, Any] = {}
        for step in _STEPS:
            entry: dict[str, Any] = {}
            for way in _WAYS:
                stats = summarize_ns(self.times[way, step])
                stats["png_bytes"] = statistics.median(self.sizes[way, step])
                if step != "screenshot":
                    stats["fresh"] = self.fresh[way, step]
                entry[way] = stats
            entry["speedup_vs_seed"] = entry["seed"]["median_us"] / entry["ours"]["median_us"]
            # the fastest sample of each way against the other's: the least disturbed by a load beside them
            entry["speedup_fastest"] = entry["seed"]["min_us"] / entry["ours"]["min_us"]
            out[step] = entry
        shot, click, typed = out["screenshot"], out["click"], out["type"]
        shot["target_ms"] = TARGET_LOCAL_SHOT_MS
        shot["ratio_target"] = TARGET_LOCAL_SHOT_MS * 1000 / shot["ours"]["median_us"]
        shot["met"] = shot["ratio_target"] >= 1
        for entry, target in ((click, TARGET_LOCAL_CLICK_X), (typed, TARGET_LOCAL_TYPE_X)):
            entry["target_speedup"] = target
            entry["ratio_target"] = entry["speedup_vs_seed"] / target
            entry["met"] = entry["speedup_vs_seed"] >= target
        return out


def _sample(desktop: Any, seed: SeedWay, acts: _Actions, n: int) -> _Samples:
    """LOCAL_WARMUP + n rounds; in each, both ways click the (blurred) field, type into it and take a
    screenshot, which way goes first alternating."""
    fx, fy = acts.field

    def foreign(step: Callable[[], bytes]) -> bytes:
        # xdotool's input is not our session's: what it changes says nothing of our waits
        desktop.foreign_input()
        return step()

    ways: dict[str, dict[str, Callable[[], bytes]]] = {
        "seed": {
            "click": lambda: foreign(lambda: seed.click(fx, fy)),
            "type": lambda: foreign(lambda: seed.type(LOCAL_TEXT)),
            "screenshot": seed.screenshot,
        },
        "ours": {
            "click": lambda: desktop.perform(acts.click_field).frame.png,
            "type": lambda: desktop.perform(acts.type_text).frame.png,
            "screenshot": lambda: desktop.screenshot().png,
        },
    }
    samples = _Samples()
    log(f"local: {LOCAL_WARMUP} warm-up + {n} samples, the seeds' way and ours interleaved")
    for i in range(LOCAL_WARMUP + n):
        record = i >= LOCAL_WARMUP
        for way in ("seed", "ours") if i % 2 == 0 else ("ours", "seed"):
            do = ways[way]
            # click: the field is blurred first (untimed), so the click visibly focuses it
            _prep(desktop, acts.blur)
            for step in ("click", "type"):  # typing goes into the field the click focused
                gc.collect()
                t1 = pn()
                png = do[step]()
                t2 = pn()
                if record:
                    samples.add(way, step, t2 - t1, png)
                    box = _stale_box(desktop, png)
                    if box is None:
                        samples.fresh[way, step] += 1
                    else:
                        samples.stale.append({"way": way, "step": step, "sample": i - LOCAL_WARMUP, "box": box})
                else:
                    time.sleep(FRESH_AFTER_S)
            _prep(desktop, acts.select_all, acts.backspace)  # the field never overflows
            gc.collect()
            t1 = pn()
            png = do["screenshot"]()
            t2 = pn()
            if record:
                samples.add(way, "screenshot", t2 - t1, png)
    return samples
