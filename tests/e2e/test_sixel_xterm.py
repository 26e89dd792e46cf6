"""End to end through a real graphics terminal: `cua-tui demo` in xterm's VT340 mode (Sixel) under Xvfb.

xterm runs on an X display of its own (Xvfb picks a free number with ``-displayfd``, the way the local
desktop's X server does). In the same xterm, first the probe the CLI uses (``graphics_widget()``, i.e.
textual-image's terminal probe) must pick Sixel (``SixelPane``) and ``cell_pixels()`` the real cell size,
then the demo runs on the local backend (form lab, scripted turns) to its second decision, the Verify
click, whose target is marked. After ``z`` (the whole screen instead of the framed target), a screenshot
of the xterm window must show, in the desktop pane, the screenshot the run directory holds for that
moment.

The similarity measure: normalised cross-correlation (NCC) of band-pass greyscale images (a difference of
Gaussians, sigma 1 minus sigma 4, amplified 4x and so clipped at +-32 grey levels: text strokes and edges
count, flat areas do not, and a page's strong bars do not outweigh its words), between the pane and the
run's PNG scaled to the pane, with the marker's neighbourhood left out. The threshold is ``MATCH`` (0.7):
the real pane scores about 0.99 here (the worker's picture, through Sixel's 256-colour palette; 0.9 when
textual-image still scaled it a second time); the same picture as half-blocks (8x17-pixel cells, two
pixels a cell) about 0.1, a blank pane 0, a different page (the same page mirrored) about 0.36; the real
half-block path drawn by this xterm scored 0.59 at the best box the search could find. The three synthetic negatives are
scored inside the test, so a measure that could not tell them apart fails it. Besides the picture: the
marker's magenta is on the target, and around the field the pane is closer to the screen after typing
than to the one before (the pane shows the screen of that decision, not an older one).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageChops, ImageFilter
from xvfb import Xvfb

pytestmark = [pytest.mark.e2e, pytest.mark.terminal, pytest.mark.timeout(120)]

COLS, ROWS = 160, 48
MATCH = 0.7  # band-pass NCC a pane must reach; every negative must stay below it
MARKER_BOX = 24  # pixels left out around the marked target (the marker plus the band-pass's reach)


# --------------------------------------------------------------------------------------------------------
# The measure
# --------------------------------------------------------------------------------------------------------
def band(img: Image.Image) -> Image.Image:
    """Greyscale band-pass: blur(sigma 1) - blur(sigma 4), times 4, centred on 128 (so clipped at +-32
    grey levels: the strong edges of a page's bars do not outweigh its text strokes)."""
    grey = img.convert("L")
    return ImageChops.subtract(
        grey.filter(ImageFilter.GaussianBlur(1)), grey.filter(ImageFilter.GaussianBlur(4)), 0.25, 128
    )


def ncc(a: Image.Image, b: Image.Image, skip: tuple[int, int, int, int] | None = None) -> float:
    """Normalised cross-correlation of two greyscale images of one size, leaving out the box ``skip``."""
    assert a.size == b.size and a.mode == b.mode == "L"
    rows_a, rows_b = [], []
    width = a.width
    da, db = a.tobytes(), b.tobytes()
    for y in range(a.height):
        ra, rb = da[y * width : (y + 1) * width], db[y * width : (y + 1) * width]
        if skip is not None and skip[1] <= y < skip[3]:
            x0, x1 = max(0, skip[0]), min(width, skip[2])
            ra, rb = ra[:x0] + ra[x1:], rb[:x0] + rb[x1:]
        rows_a.append(ra)
        rows_b.append(rb)
    va, vb = b"".join(rows_a), b"".join(rows_b)
    n = len(va)
    sa, sb = sum(va), sum(vb)
    cov = sum(map(int.__mul__, va, vb)) - sa * sb / n
    var_a = sum(map(int.__mul__, va, va)) - sa * sa / n
    var_b = sum(map(int.__mul__, vb, vb)) - sb * sb / n
    return cov / (var_a * var_b) ** 0.5 if var_a > 0 and var_b > 0 else 0.0


def _coarse_ncc(a: Image.Image, b: Image.Image) -> float:
    """NCC from Pillow's C statistics (the product rounded to 8 bits): good enough to find the pane."""
    from PIL import ImageStat

    sa, sb = ImageStat.Stat(a), ImageStat.Stat(b)
    if sa.stddev[0] < 1 or sb.stddev[0] < 1:
        return 0.0
    eab = ImageStat.Stat(ImageChops.multiply(a, b)).mean[0] * 255
    return (eab - sa.mean[0] * sb.mean[0]) / (sa.stddev[0] * sb.stddev[0])


def locate(
    window: Image.Image, png: Image.Image, origin: tuple[int, int], cell: tuple[int, int]
) -> tuple[int, int, int, int]:
    """Where the picture is: the box (x, y, w, h) in the window screenshot that best matches the PNG.

    A Sixel image starts at a cell's corner and the pane fits the picture to whole cells, so the search
    runs over cell corners (the left and upper part of the window) and widths in whole cells, coarse at
    1/8 scale on greyscale, then refined pixel by pixel (terminals round the origin) on the band-pass."""
    grey, ref = window.convert("L"), png.convert("L")
    cw, ch = cell
    # the desktop pane takes more than a third of the terminal's width (a smaller box is not the pane)
    widths = range(cw * (COLS // 3), min(ref.width, cw * COLS) + 1, cw * 2)
    corners = [(origin[0] + cw * i, origin[1] + ch * j) for i in range(COLS // 8) for j in range(ROWS // 4)]
    _, x, y, w = search(grey, ref, 8, widths, corners)
    # then on the band-pass at half scale, every second pixel around that corner, widths in whole cells
    near = [(x + dx, y + dy) for dx in range(-cw, cw + 1, 2) for dy in range(-ch // 2, ch // 2 + 1, 2)]
    _, x, y, w = search(band(grey), ref, 2, range(w - 2 * cw, w + 2 * cw + 1, cw), near, filtered=True)
    # and pixel by pixel at full scale
    near = [(x + dx, y + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
    _, x, y, w = search(band(grey), ref, 1, range(w, w + 1), near, filtered=True)
    return x, y, w, round(w * ref.height / ref.width)


def search(
    grey: Image.Image,
    ref: Image.Image,
    scale: int,
    widths: range,
    corners: list[tuple[int, int]],
    *,
    filtered: bool = False,
) -> tuple[float, int, int, int]:
    """The best (score, x, y, width) of ``ref`` scaled to each width and placed at each corner of ``grey``
    (full-scale coordinates), compared at 1/``scale``. ``filtered``: ``grey`` is band-passed, and so is the
    reference once scaled to each width (as the pane's picture is scaled first, then seen)."""
    small = grey.resize((grey.width // scale, grey.height // scale), Image.Resampling.BOX) if scale > 1 else grey
    best = (-2.0, 0, 0, 0)
    for w in widths:
        h = round(w * ref.height / ref.width)
        tw, th = round(w / scale), round(h / scale)
        tpl = band(ref.resize((w, h), Image.Resampling.BILINEAR)) if filtered else ref
        tpl = tpl.resize((tw, th), Image.Resampling.BOX)
        for x, y in corners:
            sx, sy = round(x / scale), round(y / scale)
            if 0 <= sx <= small.width - tw and 0 <= sy <= small.height - th:
                best = max(best, (_coarse_ncc(small.crop((sx, sy, sx + tw, sy + th)), tpl), x, y, w))
    return best


def as_halfblocks(picture: Image.Image, cell: tuple[int, int]) -> Image.Image:
    """What the same pane shows on the half-block path: one cell per ``cell`` pixels, two pixels a cell."""
    cols, rows = max(1, picture.width // cell[0]), max(1, round(picture.height / cell[1]))
    return picture.resize((cols, rows * 2), Image.Resampling.BOX).resize(picture.size, Image.Resampling.NEAREST)


# --------------------------------------------------------------------------------------------------------
# The display, the terminal, the screenshot
# --------------------------------------------------------------------------------------------------------
class Display(Xvfb):
    """An Xvfb of our own, with the xterm on it."""

    def __init__(self, size: tuple[int, int] = (1600, 1000)) -> None:
        super().__init__(size)

    def grab(self, box: tuple[int, int, int, int]) -> Image.Image:
        import mss

        with mss.MSS(display=self.name) as grabber:
            shot = grabber.grab({"left": box[0], "top": box[1], "width": box[2], "height": box[3]})
        return Image.frombytes("RGB", shot.size, shot.rgb)

    def xterm_window(self) -> tuple[int, int, int, int]:
        """The xterm's top-level window: x, y, width, height (no window manager: it is the root's child)."""
        from Xlib import display

        d = display.Display(self.name)
        try:
            for child in d.screen().root.query_tree().children:
                wm_class = child.get_wm_class()
                if wm_class and "XTerm" in wm_class:
                    g = child.get_geometry()
                    return g.x, g.y, g.width, g.height
        finally:
            d.close()
        raise AssertionError("no xterm window on the display")


def audit(runs: Path) -> list[dict[str, Any]]:
    for path in runs.glob("*/audit.jsonl"):
        # only whole lines: the run may be writing the last one as it is read
        return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line.strip()]
    return []


def wait_for(condition: Any, what: str, timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_sixel_picture_in_xterm_matches_the_runs_screenshot(tmp_path: Path) -> None:
    for tool in ("xterm", "Xvfb", "xdotool"):
        assert shutil.which(tool), f"{tool} is not installed (bash scripts/setup.sh test installs it)"
    runs, probe_out = tmp_path / "runs", tmp_path / "probe.json"
    binary = Path(sys.executable).parent / "cua-tui"
    cli = [str(binary)] if binary.exists() else [sys.executable, "-m", "cua_tui.cli"]
    # The probe the CLI runs before the App, in the same terminal, then the demo itself.
    probe = (
        "import json, sys\n"
        "from cua_tui.tui.app import graphics_widget\n"
        "from textual_image import renderable\n"
        "from cua_tui.tui.graphics import SixelPane, cell_pixels\n"
        "widget, cell = graphics_widget(), cell_pixels()\n"
        "json.dump({'renderable': renderable.Image.__module__, 'widget': widget and widget.__qualname__,"
        " 'sixel_widget': widget is SixelPane, 'cell': list(cell)}, open(sys.argv[1], 'w'))\n"
    )
    script = (
        f"{shlex.join([sys.executable, '-c', probe, str(probe_out)])} && "
        f"exec {shlex.join([*cli, 'demo', '--runs-dir', str(runs)])}"
    )
    display = Display()
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX", "TERM")}
    env |= {
        "DISPLAY": display.name,
        "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    xterm = None
    try:
        xterm = subprocess.Popen(
            # -ti vt340: xterm answers the primary device attributes as a VT340, with 4 (Sixel) among
            # them, which is what textual-image's probe looks for; the cell size comes from the pixel
            # fields of the tty's window size, which xterm fills. 256 colour registers: what the encoder uses.
            [
                "xterm",
                "-ti",
                "vt340",
                "-xrm",
                "XTerm*numColorRegisters: 256",
                "-fa",
                "DejaVu Sans Mono",
                "-fs",
                "10",
                "-geometry",
                f"{COLS}x{ROWS}",
                "-e",
                "sh",
                "-c",
                script,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # 1. The probe picked Sixel and the real cell size.
        found = json.loads(wait_for(lambda: probe_out.exists() and probe_out.read_text(), "the probe", 20))
        assert found["renderable"] == "textual_image.renderable.sixel", found  # the probe's own pick
        assert found["sixel_widget"] and found["widget"] == "SixelPane", found
        wx, wy, ww, wh = wait_for(lambda: _window(display), "the xterm window", 10)
        cell = (ww // COLS, wh // ROWS)
        assert tuple(found["cell"]) == cell, (found, (ww, wh))
        origin = ((ww - cell[0] * COLS) // 2, (wh - cell[1] * ROWS) // 2)  # xterm's inner border

        # 2. The demo to its second decision: y to the typing (sent as real key presses through XTEST).
        wait_for(lambda: sum(r["kind"] == "decision_requested" for r in audit(runs)) >= 1, "the first decision")

        def answered() -> bool:
            return any(r["kind"] == "decision" and r.get("by") != "policy" for r in audit(runs))

        # y until the first decision records it: the input guard ignores keys for 1.0 s from when the decision's
        # screenshot is painted, which on a loaded machine comes well after its record. Only the first can
        # take it: the second is not asked before the first is answered, and its own guard ignores a late y.
        deadline = time.monotonic() + 40
        while not answered():
            assert time.monotonic() < deadline, "the first decision never took a y"
            subprocess.run(["xdotool", "mousemove", str(wx + ww // 2), str(wy + wh // 2), "key", "y"],
                           env=env, check=True, timeout=10)  # fmt: skip
            with contextlib.suppress(AssertionError):
                wait_for(answered, "the y recorded", 3.0)
        rows = wait_for(
            lambda: (r := audit(runs)) and sum(e["kind"] == "decision_requested" for e in r) >= 2 and r,
            "the second decision",
        )
        asked = [i for i, r in enumerate(rows) if r["kind"] == "decision_requested"][1]
        shown = [r for r in rows[:asked] if r["kind"] == "screen"][-1]  # the screen at that decision
        proposal = next(
            r
            for r in rows
            if r["kind"] == "proposal" and (r["turn"], r["index"]) == (rows[asked]["turn"], rows[asked]["index"])
        )
        target = (proposal["action"]["x"], proposal["action"]["y"])
        png = Image.open(next(runs.glob(f"*/screens/{shown['sha256']}.png"))).convert("RGB")

        # The screen shown at the first decision: the pane must show the new one, not keep that one.
        earlier_sha = [r for r in rows[:asked] if r["kind"] == "screen"][-2]["sha256"]
        earlier = Image.open(next(runs.glob(f"*/screens/{earlier_sha}.png"))).convert("RGB")
        changed = ImageChops.difference(earlier, png).getbbox()  # the phrase typed into the field
        assert changed is not None

        # 3. At a decision the pane frames the target (magnified, with an overview inset); z shows the whole
        # screen, which is what is compared here. Then screenshots of the xterm window until the pane shows
        # that picture (Sixel draws in a moment), with the marker on the target.
        time.sleep(0.5)
        subprocess.run(["xdotool", "key", "z"], env=env, check=True, timeout=10)
        last: dict[str, Any] = {}

        def judged() -> dict[str, Any] | None:
            window = display.grab((wx, wy, ww, wh))
            window.save(tmp_path / "last-window.png")  # for a failing run's eyes
            box = locate(window, png, origin, cell)
            pane = window.crop((box[0], box[1], box[0] + box[2], box[1] + box[3]))
            ref = png.resize(pane.size, Image.Resampling.BILINEAR)
            tx, ty = _in_pane(target, png, box)
            x0, y0 = _in_pane(changed[:2], png, box)
            x1, y1 = _in_pane(changed[2:], png, box)
            field = (x0 - 4, y0 - 4, x1 + 4, y1 + 4)
            then = earlier.resize(pane.size, Image.Resampling.BILINEAR)
            last.update(
                box=box,
                pane=pane,
                ref=ref,
                score=ncc(band(pane), band(ref), _skip(target, png, box)),
                marker=magenta(pane.crop((tx - 8, ty - 8, tx + 9, ty + 9))),
                marker_in_png=magenta(ref.crop((tx - 8, ty - 8, tx + 9, ty + 9))),
                field_now=ncc(band(pane.crop(field)), band(ref.crop(field))),
                field_then=ncc(band(pane.crop(field)), band(then.crop(field))),
            )
            ok = (
                last["score"] >= MATCH
                and last["marker"] >= 8
                and last["field_now"] > last["field_then"]
                and box[2] >= cell[0] * COLS // 3
            )
            return last if ok else None

        try:
            wait_for(judged, f"the desktop pane to show the run's PNG (band-pass NCC >= {MATCH}) and the marker", 20)
        except AssertionError as exc:
            keep = Path(tempfile.mkdtemp(prefix="cua-tui-sixel-failure-"))
            shutil.copy(tmp_path / "last-window.png", keep / "window.png")
            png.save(keep / "expected.png")
            numbers = {k: v for k, v in last.items() if isinstance(v, (int, float, tuple))}
            raise AssertionError(f"{exc}; last {numbers}; the window and the expected PNG: {keep}") from None
        box, pane, ref, score = last["box"], last["pane"], last["ref"], last["score"]
        # the marker is frames.py's, not the page's
        assert last["marker_in_png"] == 0, last["marker_in_png"]

        # 4. The measure tells the wrong pictures apart, at the same place and size.
        skip = _skip(target, png, box)
        negatives = {
            "half-blocks": as_halfblocks(ref, cell),
            "blank": Image.new("RGB", pane.size, (0, 0, 0)),
            "another page": ref.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        }
        scores = {name: ncc(band(img), band(ref), skip) for name, img in negatives.items()}
        assert all(s < MATCH for s in scores.values()), (score, scores)
        assert score > max(scores.values()) + 0.2, (score, scores)
        print(
            f"sixel pane {box}: band-pass NCC {score:.3f} (threshold {MATCH}); "
            + ", ".join(f"{name} {value:.3f}" for name, value in scores.items())
            + f"; field now {last['field_now']:.3f} vs before typing {last['field_then']:.3f}"
            + f"; marker px {last['marker']}"
        )

        # 6. The kill switch, then q: the run ends killed and sealed.
        subprocess.run(["xdotool", "key", "k"], env=env, check=True, timeout=10)
        result = wait_for(lambda: next(runs.glob("*/result.json"), None), "result.json", 30)
        assert json.loads(result.read_text())["status"] == "killed"
        time.sleep(0.3)
        subprocess.run(["xdotool", "key", "q"], env=env, check=True, timeout=10)
        xterm.wait(20)
    finally:
        if xterm is not None and xterm.poll() is None:
            xterm.terminate()
            try:
                xterm.wait(10)
            except subprocess.TimeoutExpired:
                xterm.kill()
        display.close()


def magenta(img: Image.Image) -> int:
    """Pixels of the marker's magenta (frames.MARKER, 255/0/200, after Sixel's 256-colour palette)."""
    data = img.convert("RGB").tobytes()
    return sum(1 for i in range(0, len(data), 3) if data[i] > 180 and data[i + 1] < 100 and data[i + 2] > 120)


def _window(display: Display) -> tuple[int, int, int, int] | None:
    try:
        return display.xterm_window()
    except AssertionError:
        return None


def _in_pane(point: tuple[int, int], png: Image.Image, box: tuple[int, int, int, int]) -> tuple[int, int]:
    return round(point[0] * box[2] / png.width), round(point[1] * box[3] / png.height)


def _skip(point: tuple[int, int], png: Image.Image, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    x, y = _in_pane(point, png, box)
    return (x - MARKER_BOX, y - MARKER_BOX, x + MARKER_BOX, y + MARKER_BOX)
