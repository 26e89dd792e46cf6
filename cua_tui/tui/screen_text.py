"""The screen as text (``t``) and the full-resolution screenshot in a file (``o``), for the live TUI and replay.

The words come from the screen reader the App was given (``core.screentext.ScreenTextReader``; the command
line passes ``cua_tui.ocr``'s Tesseract reader, the TUI never imports it), run in a thread worker, one screen at
a time, cached by the screen's SHA-256; the ordering is ``core.screentext``'s. Without a reader, the view and
the panel say so in one line. The view lists the lines nearest the point that matters (the pending action's
target, or for typing the last click point) first, then the whole page, and filters them as you type in its
search box. The words are the page's own text, untrusted: they are shown as ``rich.text.Text`` after
``core.text.visible``, never as markup.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..core.imaging import ImageRefused, ScreenLimit, decode_screen
from ..core.screentext import (
    ScreenText,
    ScreenTextFailed,
    ScreenTextReader,
    ScreenTextUnavailable,
    TargetText,
    matches,
    search,
)
from ..core.text import visible
from .keys import SCREEN_TEXT, bindings
from .literal import LiteralInput

NEAR_LINES = 6  # lines listed under "near the target"
# a recognised line longer than this is cut (visible() adds the ellipsis)
LINE_CHARS = 400
LOW_CONFIDENCE = 50.0  # words the engine was unsure of are dimmed
# screens whose OCR problem is remembered (each PNG is read at most once)
PROBLEMS_KEPT = 32
NO_READER = "no screen reader was given (the screen is not read as text)"


class NoReader:
    """The reader of an App given none: it has read nothing, and reads nothing."""

    def cached(self, digest: str) -> ScreenText | None:
        return None

    def read(self, png: bytes, digest: str | None = None, *, limit: ScreenLimit) -> ScreenText:
        raise ScreenTextUnavailable(NO_READER)

    def cached_target(self, digest: str, point: tuple[int, int]) -> TargetText | None:
        return None

    def read_target(self, png: bytes, digest: str, point: tuple[int, int], *, limit: ScreenLimit) -> TargetText:
        raise ScreenTextUnavailable(NO_READER)


@dataclass(frozen=True)
class ShownScreen:
    """The screenshot a pane shows, and the point that matters on it (display pixels), with what it is."""

    digest: str  # SHA-256 of the PNG
    # the PNG bytes (called in a worker: a replay reads its run directory)
    load: Callable[[], bytes | None]
    point: tuple[int, int] | None = None
    point_label: str = ""  # "the pending target", "the last click point"
    run_id: str = ""
    # the run's screen: a larger PNG is refused, never decoded
    limit: ScreenLimit = field(kw_only=True)


class ScreenTextRead(Message):
    """The OCR of one screen finished: its text, or the one-line problem (``unavailable``: no engine)."""

    def __init__(self, digest: str, text: ScreenText | None, problem: str = "", unavailable: bool = False) -> None:
        super().__init__()
        self.digest = digest
        self.text = text
        self.problem = problem
        self.unavailable = unavailable


class ScreenReading:
    """The App's OCR: one worker at a time (a request made meanwhile waits, only the newest), results by
    screen hash (the engine's LRU), problems remembered so a screen is read at most once. ``busy`` holds
    until the App has handled the result (so a test or a screenshot can wait for the panes to show it).
    ``reader`` None: nothing is read, and every screen's problem is ``NO_READER``."""

    def __init__(self, app: App[Any], reader: ScreenTextReader | None = None) -> None:
        self.app = app
        self.reader: ScreenTextReader = reader if reader is not None else NoReader()
        self.problems: dict[str, str] = {}
        # points whose element could not be read
        self.unread_targets: set[tuple[str, tuple[int, int]]] = set()
        # set once there is no engine: nothing is tried
        self.unavailable = "" if reader is not None else NO_READER
        self._lock = threading.Lock()
        self._busy: str | None = None  # the digest being read
        self._next: ShownScreen | None = None

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._busy is not None or self._next is not None

    def result(self, digest: str) -> tuple[ScreenText | None, str]:
        """(text, problem) for a screen, as far as known now: (None, "") while it is still being read."""
        if self.unavailable:
            return None, self.unavailable
        return self.reader.cached(digest), self.problems.get(digest, "")

    def target(self, digest: str | None, point: tuple[int, int] | None) -> TargetText | None:
        """What was read at ``point`` of the screen ``digest`` (the target's element and label), if known."""
        if digest is None or point is None or self.unavailable:
            return None
        return self.reader.cached_target(digest, point)

    def request(self, shown: ShownScreen) -> None:
        """Read ``shown`` (and the element at its point) unless it is read already, being read, or known
        unreadable (returns at once)."""
        text, problem = self.result(shown.digest)
        if problem or (
            text is not None
            and (
                shown.point is None
                or (shown.digest, shown.point) in self.unread_targets
                or self.target(shown.digest, shown.point) is not None
            )
        ):
            return
        with self._lock:
            if self._busy == shown.digest:
                return
            if self._busy is not None:
                # read after the current one; an older waiting request is dropped
                self._next = shown
                return
            self._busy = shown.digest
        self._start(shown)

    def _start(self, shown: ShownScreen) -> None:
        self.app.run_worker(
            partial(self._read, shown),
            thread=True,
            exit_on_error=False,
            group="ocr",
            description="read the screen as text",
        )

    def _read(self, shown: ShownScreen) -> None:
        message: ScreenTextRead
        try:
            png = shown.load()
            if png is None:
                message = ScreenTextRead(shown.digest, None, "the screenshot could not be read back")
            else:
                text = self.reader.read(png, shown.digest, limit=shown.limit)
                if shown.point is not None:
                    # the target's own words and label, from crops of its element
                    try:
                        self.reader.read_target(png, shown.digest, shown.point, limit=shown.limit)
                    except ScreenTextFailed:
                        if len(self.unread_targets) >= PROBLEMS_KEPT:
                            self.unread_targets.clear()
                        # tried once; the screen's text stands
                        self.unread_targets.add((shown.digest, shown.point))
                message = ScreenTextRead(shown.digest, text)
        except ScreenTextUnavailable as exc:
            message = ScreenTextRead(shown.digest, None, str(exc), unavailable=True)
        except ScreenTextFailed as exc:
            message = ScreenTextRead(shown.digest, None, str(exc))
        except Exception as exc:  # never a crash of the TUI over a screen's text
            message = ScreenTextRead(shown.digest, None, f"the screen could not be read ({type(exc).__name__})")
        if message.unavailable:
            self.unavailable = message.problem
        elif message.text is None:
            self.problems[shown.digest] = message.problem
            while len(self.problems) > PROBLEMS_KEPT:
                self.problems.pop(next(iter(self.problems)))
        self.app.post_message(message)  # still busy until the App has taken it (``taken``)

    def taken(self, message: ScreenTextRead) -> None:
        """The App handled ``message``: read the screen that waited meanwhile, if any (UI thread)."""
        with self._lock:
            if self._busy != message.digest:
                return
            upcoming, self._next = self._next, None
            self._busy = upcoming.digest if upcoming is not None and not self.unavailable else None
        if self._busy is not None and upcoming is not None:
            self._start(upcoming)


# ------------------------------------------------------------------------------------------------
# The view
# --------------------------------------------------------------------------------------------------
def _line_text(text: str, query: str, words: list[tuple[str, float]] | None = None) -> Text:
    """One line of page text, literally, with the search's matches highlighted."""
    shown = visible(text, limit=LINE_CHARS)
    out = Text(shown)
    if words is not None and len(shown) == len(text):  # dim what the engine was unsure of
        start = 0
        for word, conf in words:
            at = shown.find(word, start)
            if at < 0:
                break
            if conf < LOW_CONFIDENCE:
                out.stylize("dim", at, at + len(word))
            start = at + len(word)
    for begin, end in matches(shown, query):
        out.stylize("bold reverse", begin, end)
    return out


def render_text(shown: ShownScreen, text: ScreenText | None, problem: str, query: str = "") -> Text:
    """The view's body: the lines near the point first, then the whole page, filtered by ``query``."""
    out = Text()
    if text is None:
        out.append(problem or "reading the screen…", style="bold" if problem else "dim")
        return out
    query = query.strip()
    if not text.lines:
        out.append("No text was found on this screen.", style="dim")
        return out
    lines = text.lines
    keep = set(search(lines, query))
    if shown.point is not None:
        x, y = shown.point
        out.append(f"Near {shown.point_label or 'the point'} ({x}, {y}), nearest first\n", style="bold underline")
        near = [line for line in text.nearest_lines(shown.point, NEAR_LINES) if lines.index(line) in keep]
        for line in near:
            out.append(f"{round(line.distance(shown.point)):>5} px  ", style="dim")
            out.append_text(_line_text(line.text, query, [(w.text, w.conf) for w in line.words]))
            out.append("\n")
        if not near:
            out.append("  (no line matches)\n", style="dim")
        out.append("\n")
    count = f"{len(keep)} of {len(lines)} lines match" if query else f"{len(lines)} lines, {len(text.words)} words"
    out.append(f"The whole page, top to bottom ({count})\n", style="bold underline")
    for i, line in enumerate(lines):
        if i in keep:
            out.append("  ")
            out.append_text(_line_text(line.text, query, [(w.text, w.conf) for w in line.words]))
            out.append("\n")
    if text.truncated:
        out.append(f"(only the first {len(text.words)} words are kept)\n", style="dim")
    return out


class ScreenTextScreen(ModalScreen[None]):
    """``t``: the screen as text. The search box filters the lines and highlights what matches."""

    BINDINGS = bindings(SCREEN_TEXT)  # esc, and ctrl+t again, close it (tui/keys.toml)

    def __init__(self, shown: ShownScreen, reading: ScreenReading) -> None:
        super().__init__()
        self.shown = shown
        self.reading = reading

    def compose(self) -> ComposeResult:
        with Vertical(id="screen-text-box"):
            yield Static(id="screen-text-title")
            yield LiteralInput(
                placeholder="search the page text · Esc closes · ctrl+k is the kill switch while this is open",
                id="screen-text-search",
                max_length=200,
            )
            with VerticalScroll(id="screen-text-scroll"):
                yield Static(id="screen-text-body")

    def on_mount(self) -> None:
        self.refresh_text()
        self.query_one(Input).focus()

    def on_input_changed(self, message: Input.Changed) -> None:
        self.refresh_text()

    def refresh_text(self) -> None:
        """Show what is known of the screen's text now (called again when the OCR arrives)."""
        text, problem = self.reading.result(self.shown.digest)
        title = Text()
        title.append("Screen text", style="bold")
        title.append(f" · screen {self.shown.digest[:12]}")
        if text is not None:
            title.append(
                f" · {text.width}x{text.height} · read by Tesseract: OCR can misread, the picture is the truth"
            )
        title.append("\nThe page's own words, shown literally: they grant no permission.", style="dim")
        self.query_one("#screen-text-title", Static).update(title)
        query = self.query_one(Input).value
        self.query_one("#screen-text-body", Static).update(render_text(self.shown, text, problem, query))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


def screen_text_arrived(app: App[Any], reading: ScreenReading, message: ScreenTextRead) -> None:
    """The App's handler of ScreenTextRead calls this first: the reading goes on with the next screen, and
    an open screen-text view of that screen is refreshed."""
    reading.taken(message)
    screen = app.screen
    if isinstance(screen, ScreenTextScreen) and screen.shown.digest == message.digest:
        screen.refresh_text()


# ------------------------------------------------------------------------------------------------
# The full-resolution screenshot in a file
# --------------------------------------------------------------------------------------------------
def screenshots_dir() -> Path:
    """A private folder under the user's cache dir (not the run directory: verify checks what is there)."""
    from platformdirs import user_cache_path

    return user_cache_path("cua-tui") / "screenshots"


def save_screenshot(png: bytes, run_id: str = "", folder: Path | None = None, *, limit: ScreenLimit) -> Path:
    """Write the screenshot as ``<run>-<sha>.png`` in ``folder`` (made private: 0700, the file 0600); the path.

    The bytes come from a sandbox or a run directory someone handed over, and the file is then opened in the
    system viewer: it is decoded with the core's checks (no bomb, a real PNG, no larger than the run's screen,
    ``limit``) and written re-encoded, so the viewer gets the pixels that were shown and nothing else. The
    name is made of the PNG's own SHA-256 and the run id's letters, digits, - and _ only: a recorded digest
    or run id never chooses a path."""
    # ImageRefused for what is not a PNG of the run's screen
    image = decode_screen(png, limit)
    folder = folder or screenshots_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    safe_run = "".join(c for c in run_id if c.isalnum() or c in "-_")[:40]
    path = folder / f"{safe_run + '-' if safe_run else ''}{hashlib.sha256(png).hexdigest()[:16]}.png"
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".screen-", suffix=".png")
    try:
        with os.fdopen(fd, "wb") as out:
            image.save(out, "PNG")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def open_viewer(path: Path) -> str:
    """Open ``path`` in the system viewer (xdg-open) without waiting for it; what happened, in words."""
    opener = shutil.which("xdg-open")
    if opener is None:
        return "no system viewer (xdg-open not found)"
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return "no graphical session to open it in"
    try:
        child = subprocess.Popen(
            [opener, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # its own session: our terminal's Ctrl-C and hang-up are not its business
            start_new_session=True,
        )
    except OSError as exc:
        return f"xdg-open could not start ({exc.strerror})"
    # reaped, not awaited
    threading.Thread(target=child.wait, name="cua-tui-viewer", daemon=True).start()
    return "opened with xdg-open"


def write_and_open(app: App[Any], shown: ShownScreen, folder: Path | None = None) -> None:
    """``o``: in a thread worker, write the screenshot to a file, open the viewer, say where (notify)."""

    def work() -> None:
        try:
            png = shown.load()
            if png is None:
                raise OSError("the screenshot could not be read back")
            path = save_screenshot(png, shown.run_id, folder, limit=shown.limit)
        except (OSError, ImageRefused) as exc:
            reason = visible(str(exc), limit=200)
            app.call_from_thread(
                app.notify, f"screenshot not written: {reason}", title="screenshot", severity="error", markup=False
            )
            return
        how = open_viewer(path)
        app.call_from_thread(
            app.notify, f"screenshot written to {visible(str(path))} · {how}", title="screenshot", markup=False
        )

    app.run_worker(work, thread=True, exit_on_error=False, group="screenshot-file", description="write screenshot")
