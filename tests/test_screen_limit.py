"""Recorded screens are checked against the run's own screen size (issue 20, point 3): a run of 1024 x 720
whose 13 screens are real PNGs of 10,000 x 4,000 (120 KB each on disk, 160 MB each once decoded; the chain
recomputed, so verify calls it intact) is exported as GIF, WebP and HTML, and its screens are read as text,
without one of them being decoded: each is refused from its header, marked so in place of its picture, and
said once on stderr. The commands run in a child under a memory ceiling, their peak memory (VmHWM) and CPU
time checked: before the check, the GIF export of this run took 7.1 s of CPU and 359 MB here (18 s in the
issue's report)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from hostile_runs import cli
from PIL import Image
from screen_bombs import CLAIM, COUNT, SCREEN, oversized_run

from cua_tui.core import imaging
from cua_tui.core.audit import verify_run
from cua_tui.export import animation, open_run
from cua_tui.export import html as html_export

REFUSED = f"the PNG claims {CLAIM[0]} x {CLAIM[1]} pixels, more than the run's screen ({SCREEN[0]} x {SCREEN[1]})"
EXPORT_CPU_S = 2.0  # the export's own CPU time (0.5 s measured); a decode of the 13 screens took 7 s


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = oversized_run(tmp_path_factory.mktemp("oversized") / "runs")
    assert verify_run(path).code == 0  # intact: only the run's own screen size gives these screens away
    return path


def refused_grey(pixel: Any) -> bool:
    """The background of a refused frame (32, 32, 32), give or take WebP's lossy coding."""
    return all(abs(channel - 32) <= 4 for channel in pixel)


def screens(run: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((run / "screens").iterdir())]


def test_the_run_limit_is_its_recorded_screen(run: Path) -> None:
    with open_run(run) as opened_run:
        assert opened_run.limit == imaging.ScreenLimit(*SCREEN)
        assert set(opened_run.sizes.values()) == {CLAIM}  # what the forged records claim


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_the_film_strip_refuses_every_screen_before_decoding(run: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"strip.{fmt}"
    code, stdout, stderr = cli(tmp_path, "export", run, f"--{fmt}", out, cpu=EXPORT_CPU_S)  # memory, time bounded
    assert code == 0 and stdout == "", stderr
    warning = next(line for line in stderr.splitlines() if line.startswith("warning: "))
    assert (
        warning.startswith(f"warning: {COUNT} screenshot(s) not shown, each marked as refused") and REFUSED in warning
    )
    with Image.open(out) as strip:
        # the initial screen, then one frame per step: each one says why (n_frames: only multi-frame
        # images have it)
        assert getattr(strip, "n_frames", 1) == COUNT
        for number in range(COUNT):
            strip.seek(number)
            assert refused_grey(strip.convert("RGB").getpixel((400, 100)))  # no picture where it was


def test_the_exports_never_hand_a_screen_to_the_decoder(run: Path, opened: list[Any]) -> None:
    with open_run(run) as opened_run:
        page = html_export.render(opened_run)
        animation.render(opened_run, "gif")
        refused = opened_run.refused()
    assert opened == []
    assert len(refused) == COUNT and {screen.refused for screen in refused} == {REFUSED}
    assert page.count(REFUSED.replace("'", "&#x27;")) >= COUNT  # each frame marked, in the page's own escaping
    assert "data:image/png" not in page  # nothing embedded for a browser to decode


def test_the_html_export_says_so_once(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    code, _stdout, stderr = cli(tmp_path, "export", run, "--html", out)
    assert code == 0, stderr
    warnings = [line for line in stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: {COUNT} screenshot(s) not shown")
    assert warnings[0].endswith(f": {REFUSED})")


def test_ocr_refuses_each_screen_before_decoding(run: Path, opened: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from cua_tui.ocr import OcrFailed, ScreenReader

    def no_engine(self: ScreenReader, image: Any) -> dict[str, Any]:
        raise AssertionError("the engine was handed a refused screen")

    monkeypatch.setattr(ScreenReader, "_engine", no_engine)
    reader = ScreenReader()
    with open_run(run) as opened_run:
        limit = opened_run.limit
    for png in screens(run):
        with pytest.raises(OcrFailed) as refused:
            reader.read(png, hashlib.sha256(png).hexdigest(), limit=limit)
        assert str(refused.value) == f"screenshot not read: {REFUSED}"
    assert opened == []


def test_a_screen_within_the_run_is_still_exported(tmp_path: Path) -> None:
    """A run's own 1024 x 720 screens are drawn as before."""
    path = oversized_run(tmp_path / "runs", claim=(1024, 720), count=2)
    with open_run(path) as opened_run:
        data = animation.render(opened_run, "gif")
        assert opened_run.refused() == []
    with Image.open(io.BytesIO(data)) as strip:
        strip.seek(1)
        assert not refused_grey(strip.convert("RGB").getpixel((400, 100)))  # a picture, not a refusal
