"""``--backend sim``: an in-process desktop with a small form application, drawn with Pillow.

It is a real desktop as far as the supervisor can tell: clicks land on widgets by pixel geometry, typing
goes to the focused field (and is lost without focus), scrolling moves the page, layouts can change
between screenshots, held modifiers and buttons are tracked and released, and a server-side style
verifier checks what was actually submitted. Tests use its hooks to make commands hang, fail or kill the
desktop mid-run. It starts in microseconds, so the core's contracts are tested without Xvfb.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from PIL import Image, ImageDraw, ImageFont

from ..core.actions import Action, Kind
from ..core.geometry import Size
from ..core.imaging import crop_frame, encode_png
from ..core.ports import BaseDesktop, DesktopError, Frame, StepResult, Verification

PHRASE = "cua-tui verified"
DEFAULT_SIZE = Size(1024, 720)


@dataclass
class Widget:
    name: str
    kind: str  # "field" | "button" | "label"
    x: int
    y: int
    width: int
    height: int
    label: str = ""
    placeholder: str = ""  # a field's grey words while it is empty

    def contains(self, px: int, py: int, offset: int) -> bool:
        top = self.y - offset
        return self.x <= px < self.x + self.width and top <= py < top + self.height


@dataclass
class SimApp:
    """The page: a phrase field, a Verify button, a Send button and some untrusted page text."""

    page_text: str = "Type the phrase shown below into the field, then click Verify."
    phrase: str = PHRASE
    widgets: list[Widget] = field(
        default_factory=lambda: [
            Widget("title", "label", 40, 30, 600, 30, "Verification form"),
            Widget("phrase", "field", 40, 160, 420, 44, "", placeholder="Enter the phrase"),
            Widget("verify", "button", 480, 160, 140, 44, "Verify"),
            Widget("send", "button", 40, 400, 160, 44, "Send report"),
        ]
    )
    values: dict[str, str] = field(default_factory=dict)
    focus: str | None = None
    select_all: bool = False
    scroll: int = 0
    proofs: list[str] = field(default_factory=list)  # what the "server" accepted
    sent: list[str] = field(default_factory=list)
    clicks: list[tuple[str, int, int]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)

    def widget_at(self, x: int, y: int) -> Widget | None:
        for widget in self.widgets:
            if widget.kind != "label" and widget.contains(x, y, self.scroll):
                return widget
        return None

    def widget(self, name: str) -> Widget:
        return next(w for w in self.widgets if w.name == name)

    def centre(self, name: str) -> tuple[int, int]:
        w = self.widget(name)
        return w.x + w.width // 2, w.y - self.scroll + w.height // 2

    def move(self, name: str, dx: int = 0, dy: int = 0) -> None:
        """Change the layout (a late-loading banner pushing content, a reflow)."""
        w = self.widget(name)
        w.x += dx
        w.y += dy

    def click(self, x: int, y: int) -> None:
        target = self.widget_at(x, y)
        self.clicks.append((target.name if target else "", x, y))
        if target is None:
            self.focus = None
        elif target.kind == "field":
            self.focus = target.name
            self.select_all = False
        elif target.name == "verify":
            self.submit()
        elif target.name == "send":
            self.sent.append(self.values.get("phrase", ""))

    def submit(self) -> None:
        self.proofs.append(self.values.get("phrase", ""))

    def type(self, text: str) -> None:
        if self.focus is None:
            # typing without focus goes nowhere, as on a real page
            return
        current = "" if self.select_all else self.values.get(self.focus, "")
        self.values[self.focus] = current + text
        self.select_all = False

    def key(self, chord: str) -> None:
        self.keys.append(chord)
        if chord == "ctrl+a" and self.focus:
            self.select_all = True
        elif chord == "BackSpace" and self.focus:
            value = "" if self.select_all else self.values.get(self.focus, "")[:-1]
            self.values[self.focus] = value
            self.select_all = False
        elif chord in ("Return", "KP_Enter") and self.focus == "phrase":
            self.submit()
        elif chord == "Tab":
            self.focus = "phrase" if self.focus is None else None

    def verify(self) -> Verification:
        ok = self.phrase in self.proofs
        detail = (
            f"the form server recorded the phrase ({len(self.proofs)} submission(s))"
            if ok
            else f"the form server has no submission of the phrase ({len(self.proofs)} submission(s))"
        )
        return Verification(ok, detail, "sim form server")


class SimDesktop(BaseDesktop):
    """In-process desktop around a SimApp. Hooks: ``hang`` (block commands until set free),
    ``fail_with`` (next command raises), ``die`` (desktop gone), ``before_action`` (callback)."""

    name = "sim"

    def __init__(
        self, size: Size = DEFAULT_SIZE, app: SimApp | None = None, *, verifier: bool = True, user: str | None = None
    ) -> None:
        self.size = size
        self.app = app or SimApp()
        self.with_verifier = verifier
        # the user its verdicts name, None: this process's (scenes fix it: stable pictures)
        self.user = user
        self.pointer = (size.width // 2, size.height // 2)
        self.held_keys: set[str] = set()
        self.held_buttons: set[str] = set()
        self.executed: list[Action] = []
        self.started = False
        self.stopped = False
        self.released = 0
        self.hang = threading.Event()  # set: commands block until ``unhang`` is set
        self.unhang = threading.Event()
        self.hang_screenshots = False
        self.fail_with: str | None = None
        self.dead = False
        self.before_action: Callable[[SimDesktop, Action], None] | None = None
        self._lock = threading.RLock()
        self._font = ImageFont.load_default(size=18)

    # ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.started = True

    def screenshot(self) -> Frame:
        if self.hang_screenshots:
            self._maybe_hang()
        self._check()
        with self._lock:
            return self._render()

    def perform(self, action: Action) -> StepResult:
        self._maybe_hang()
        self._check()
        if self.fail_with:
            message, self.fail_with = self.fail_with, None
            raise DesktopError(message)
        if self.before_action is not None:
            self.before_action(self, action)
        with self._lock:
            # stopped (or gone) while we waited: input in flight becomes a no-op
            self._check()
            output, image = self._apply(action)
            self.executed.append(action)
            return StepResult(self._render(), output=output, image=image)

    def capture_region(self, region: tuple[int, int, int, int]) -> Frame:
        return crop_frame(self.screenshot(), region)

    def release_all(self) -> None:
        with self._lock:
            self.held_keys.clear()
            self.held_buttons.clear()
            self.released += 1

    def stop(self) -> None:
        self.stopped = True
        self.unhang.set()

    def verify(self) -> Verification | None:
        # The sim's form server is an object of this process: the controller judged.
        if not self.with_verifier:
            return None
        verdict = self.app.verify().in_controller()
        return verdict if self.user is None else replace(verdict, user=self.user)

    # ---------------------------------------------------------------------------------------------
    def _check(self) -> None:
        if self.dead:
            raise DesktopError("the sandbox is gone (connection lost)", fatal=True)
        if self.stopped:
            raise DesktopError("the desktop was stopped", fatal=True)

    def _maybe_hang(self) -> None:
        if self.hang.is_set():
            self.unhang.wait(60)

    def _apply(self, action: Action) -> tuple[str | None, Frame | None]:
        app = self.app
        self.held_keys.update(action.hold)
        try:
            match action.kind:
                case Kind.CLICK | Kind.DOUBLE_CLICK | Kind.TRIPLE_CLICK:
                    assert action.point
                    self.pointer = action.point
                    app.click(*action.point)
                case Kind.MOVE:
                    assert action.point
                    self.pointer = action.point
                case Kind.DRAG:
                    self.pointer = action.path[-1]
                case Kind.SCROLL:
                    if action.point:
                        self.pointer = action.point
                    app.scroll = max(0, app.scroll + 40 * action.scroll_y)
                case Kind.TYPE:
                    app.type(action.text)
                case Kind.KEYPRESS:
                    for _ in range(action.repeat):
                        app.key(action.chord)
                case Kind.HOLD_KEY:
                    time.sleep(action.duration_ms / 1000)
                case Kind.WAIT:
                    # the page is static: no need to wait long
                    time.sleep(min(action.duration_ms, 50) / 1000)
                case Kind.MOUSE_DOWN:
                    self.held_buttons.add(action.button)
                case Kind.MOUSE_UP:
                    self.held_buttons.discard(action.button)
                case Kind.CURSOR_POSITION:
                    return f"X={self.pointer[0]},Y={self.pointer[1]}", None
                case Kind.ZOOM:
                    assert action.region
                    return None, crop_frame(self._render(), action.region)
                case _:
                    pass
        finally:
            self.held_keys.difference_update(action.hold)
        return None, None

    def _render(self) -> Frame:
        app = self.app
        img = Image.new("RGB", self.size, (246, 247, 249))
        draw = ImageDraw.Draw(img)
        font = self._font
        for w in app.widgets:
            top = w.y - app.scroll
            box = (w.x, top, w.x + w.width, top + w.height)
            if w.kind == "label":
                draw.text((w.x, top), w.label, fill=(20, 20, 20), font=font)
            elif w.kind == "field":
                outline = (37, 99, 235) if app.focus == w.name else (120, 120, 120)
                draw.rectangle(box, fill=(255, 255, 255), outline=outline, width=2)
                value = app.values.get(w.name, "")
                if value:
                    draw.text((w.x + 8, top + 12), value, fill=(0, 0, 0), font=font)
                elif w.placeholder:  # as the labs' pages: the field says what goes in it
                    draw.text((w.x + 8, top + 12), w.placeholder, fill=(130, 130, 130), font=font)
            else:
                fill = (220, 38, 38) if w.name == "send" else (37, 99, 235)
                draw.rectangle(box, fill=fill)
                draw.text((w.x + 16, top + 12), w.label, fill=(255, 255, 255), font=font)
        draw.text((40, 90 - app.scroll), f"Phrase: {app.phrase}", fill=(40, 40, 40), font=font)
        draw.multiline_text((40, 260 - app.scroll), app.page_text[:400], fill=(90, 30, 30), font=font)
        if app.proofs:
            draw.text((40, 220 - app.scroll), f"Submitted: {len(app.proofs)}", fill=(0, 120, 0), font=font)
        return encode_png(img)


def build(size: Size, table: None, **_: object) -> SimDesktop:
    """The backend's builder (desktops/__init__.py): the simulated form app at ``size``."""
    return SimDesktop(size)
