"""The HTML export as a reader sees it, in the real Chromium the local desktop uses (headless, no network).

Chromium runs on the file:// URL with every request, loopback included, sent to a counting proxy started
here. Four checks: the DOM (``--dump-dom``) holds the steps, verdicts and decisions, and hostile strings as
text, never as elements; the screenshot shows the frames' own pixels inside their borders (the images
loaded); the verbose log carries no console message (a CSP violation or a script error would be one); and
the proxy saw no request from the page. A control page first proves that each of those checks can fail.

Chromium is started as the binary itself (not Debian's wrapper, whose defaults load remote extensions and
Google API keys). Even so it contacts a few Google hosts on its own at start (component and account
checks, see REFERENCE.md): those requests are named in ``CHROMIUM_OWN`` and told apart from the page's.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from export_runs import HOSTILE_TASK, sim_run
from PIL import Image, ImageChops, ImageStat

from cua_tui.export import html as html_export
from cua_tui.export import open_run

pytestmark = pytest.mark.e2e
CHROMIUM_OWN = ("update.googleapis.com", "accounts.google.com", "clients2.google.com")
BORDER = bytes(int(html_export.FRAME_BORDER[i : i + 2], 16) for i in (1, 3, 5))
WIDTH, HEIGHT = 1100, 2600


class CountingProxy:
    """A loopback listener that records the first line of every connection (``CONNECT host:443`` or
    ``GET http://host/...``) and answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)  # close() does not wake a blocked accept(): poll, so the thread ends
        self.requests: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.requests.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
                except OSError:
                    self.requests.append("?")

    def from_page(self) -> list[str]:
        return [r for r in self.requests if not any(host in r for host in CHROMIUM_OWN)]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def chromium(page: Path, tmp: Path, proxy: CountingProxy, *mode: str) -> subprocess.CompletedProcess[str]:
    binary = "/usr/lib/chromium/chromium" if Path("/usr/lib/chromium/chromium").exists() else shutil.which("chromium")
    assert binary, "chromium is installed by scripts/setup.sh"
    profile = tmp / f"profile-{len(list(tmp.iterdir()))}"
    args = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate",
        f"--proxy-server=http://127.0.0.1:{proxy.port}",
        "--proxy-bypass-list=<-loopback>",
        "--enable-logging=stderr",
        "--v=1",
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        f"--window-size={WIDTH},{HEIGHT}",
        *mode,
        page.as_uri(),
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def frames(shot: Image.Image) -> list[tuple[int, int, int, int]]:
    """The boxes inside each frame's 2-pixel border: a top border is a run of 200+ border-coloured pixels,
    and the frame goes down its left edge; frames side by side share their top row."""
    data, stride = shot.tobytes(), shot.width * 3
    run, colour = BORDER * 200, tuple(BORDER)
    found: list[tuple[int, int, int, int]] = []
    y = 0
    while y < shot.height:
        row = data[y * stride : (y + 1) * stride]
        lowest, at = y, row.find(run)
        while at >= 0:
            if at % 3:
                at = row.find(run, at + 1)
                continue
            left = right = at // 3
            while right + 1 < shot.width and shot.getpixel((right + 1, y)) == colour:
                right += 1
            bottom = y
            while bottom + 1 < shot.height and shot.getpixel((left, bottom + 1)) == colour:
                bottom += 1
            if bottom - y > 50:
                found.append((left + 2, y + 2, right - 1, bottom - 1))
                lowest = max(lowest, bottom)
            at = row.find(run, (right + 1) * 3)
        y = lowest + 1
    return found


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("export-chromium")
    run = sim_run(tmp / "runs")
    with open_run(run) as opened:
        (tmp / "run.html").write_text(html_export.render(opened), encoding="utf-8")
    return tmp / "run.html", run


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A control page with an inline style its CSP forbids and an image from the network: both show."""
    page = tmp_path / "control.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="style-src \'none\'">'
        '</head><body><p style="color:red">x</p><img src="http://203.0.113.9/pixel.png"></body></html>'
    )
    proxy = CountingProxy()
    try:
        result = chromium(page, tmp_path, proxy, "--dump-dom")
    finally:
        proxy.close()
    assert any("Content Security Policy" in line for line in console(result.stderr)), result.stderr[-2000:]
    assert any("203.0.113.9" in r for r in proxy.from_page()), proxy.requests


def test_a_reader_sees_the_steps_the_frames_and_nothing_else(exported: tuple[Path, Path], tmp_path: Path) -> None:
    page, run = exported
    proxy = CountingProxy()
    try:
        dom = chromium(page, tmp_path, proxy, "--dump-dom")
        shot_path = tmp_path / "shot.png"
        shot = chromium(page, tmp_path, proxy, f"--screenshot={shot_path}")
    finally:
        proxy.close()
    # what a reader sees: the steps, their verdicts and decisions; hostile strings as text only
    text = dom.stdout
    assert dom.returncode == 0 and "record intact" in text
    for number in range(1, 10):
        assert f'id="step-{number}"' in text and f"Step {number} · turn" in text
    assert "confirm" in text and "headless rule: approve" in text and "Refused by sandbox policy." in text
    body = text.split("</style>", 1)[1]
    assert "<script" not in body and "<img" not in body and "<b>" not in body
    assert "&lt;script&gt;alert(" in body and HOSTILE_TASK.split("<", 1)[0] in body
    # no console message (a CSP violation, a script error), no request from the page
    assert console(dom.stderr) == [] and console(shot.stderr) == []
    assert proxy.from_page() == []
    # the images loaded: inside each frame's border are that screenshot's own pixels
    with Image.open(shot_path) as image:
        shot_image = image.convert("RGB")
    boxes = frames(shot_image)
    assert len(boxes) >= 3, boxes
    screens = [Image.open(p).convert("RGB") for p in sorted((run / "screens").iterdir())]
    for box in boxes[:4]:
        crop = shot_image.crop(box)
        best = min(ImageStat.Stat(ImageChops.difference(crop, s.resize(crop.size))).mean[0] for s in screens)
        assert best < 12, (box, best)
        assert max(ImageStat.Stat(crop).stddev) > 10  # a screen, not a blank box
