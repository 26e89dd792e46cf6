"""In-process X11 capture (mss, XShm) and input (XTEST through python-xlib), with settle detection.

One ``X11Session`` per display. Input goes through one python-xlib connection guarded by a lock that is
held per event, never across a whole action, so ``release_all`` and ``stop`` from another thread get in
between two key strokes; once stopped, every further input call is a no-op. Each event is flushed to the
server as it is made (in order, on one connection); ``perform`` waits for one round trip after the last
event of an action, so the settle clock starts once the server has processed all of the action's input.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mss
import mss.tools
from PIL import Image
from Xlib import XK, X, display
from Xlib.ext import xtest

from ..core.actions import MODIFIERS, Action, Kind
from ..core.geometry import Size
from ..core.ports import DesktopError, Frame, StepResult
from ..core.stale import ScreenCheck

XK.load_keysym_group("xf86")

BUTTONS = {"left": 1, "middle": 2, "right": 3, "back": 8, "forward": 9}
MODIFIER_KEYSYMS = {"ctrl": "Control_L", "alt": "Alt_L", "shift": "Shift_L", "super": "Super_L"}

# Settling after input, measured with Chromium on Xvfb (it paints in 60 Hz frames, 16.7 ms apart) on
# a loaded 2-core machine: a click shows 5-25 ms after the input, usually in one frame; typed text
# shows 5-70 ms after the last key, often in two or three chunks. A quiet period shorter than one
# frame can end between two frames of the same update: with 12 ms, 4 of 80 screenshots after typing
# 20 characters into a freshly focused field missed characters that showed later; with 20 ms, 1 of
# 80; with 30 ms, none, at +13 ms median per typing step.
SETTLE_POLL = 0.004  # between two raw grabs
# once the screen changed, unchanged this long means settled (over one frame)
SETTLE_QUIET = 0.02
# nothing changed this long after the input: the action changed nothing visible
SETTLE_FIRST_CHANGE = 0.05
SETTLE_LIMIT = 0.4  # a blinking caret or an animation never settles
# the first typed character can show 70 ms after the last key
KEYBOARD_FIRST_CHANGE = 0.1
KEYBOARD_KINDS = frozenset({Kind.TYPE, Kind.KEYPRESS, Kind.HOLD_KEY})

# A busy machine paints later than the waits above allow (with the fixed waits, 3 of 30 screenshots
# after typing in the local benchmark differed from the screen 150 ms later), and a screenshot taken
# before the paint shows a screen the model then acts on while it changes: the stale-screen guard
# refuses the next approved click. The waits therefore follow what this desktop has shown
# (PaintTiming): how late a first change came, the longest pause between two changes of one update,
# and the changes that came after a settle had ended (seen before the next action's input). per
# settle: what a burst of load taught is forgotten over a few tens of steps
TIMING_DECAY = 0.9
# the first-change wait: at least twice the latest (decaying) first change seen
LATENCY_FACTOR = 2.0
# the quiet wait: at least 1.5 times the longest (decaying) pause inside one update
GAP_FACTOR = 1.5
FIRST_CHANGE_CAP = 0.6  # seconds: the waits never grow past these
QUIET_CAP = 0.15
LIMIT_CAP = 1.2
# a change this soon after a settle ended, before the next input, is a late paint
LATE_WINDOW = 1.0
# square pixels: a smaller change (a caret blinking) is no paint of an update
LATE_MIN_AREA = 64
# Only a change near where the input went tells of its paint (typed text shows along the clicked
# field, a click's effect around it, a new page everywhere); a clock ticking or an animation
# elsewhere on the page would lengthen every wait for nothing. Half the width and height of the box
# looked at, in pixels:
NEAR = (320, 120)


@dataclass(slots=True)
class PaintTiming:
    """How this desktop paints after input, as the settle waits have seen it (seconds, decaying maxima)."""

    latency: float = 0.0  # input to the first change
    gap: float = 0.0  # between two changes of one update
    late: int = 0  # changes that came after a settle had ended

    def waits(self, quiet: float, first_change: float, limit: float) -> tuple[float, float, float]:
        """The settle's (quiet, first_change, limit): the defaults, longer where this desktop needs it."""
        first = min(FIRST_CHANGE_CAP, max(first_change, LATENCY_FACTOR * self.latency))
        still = min(QUIET_CAP, max(quiet, GAP_FACTOR * self.gap))
        return still, first, max(limit, min(LIMIT_CAP, first + 4 * still))

    def settled(self, latency: float | None, gap: float) -> None:
        """One settle's observations: when the first change came (None: none came) and the longest pause."""
        self.latency = max(latency or 0.0, self.latency * TIMING_DECAY)
        self.gap = max(gap, self.gap * TIMING_DECAY)

    def came_late(self, changed: bool, quiet: float, first_change: float) -> None:
        """A change came after a settle ended: the wait that ended it was too short. From now on it is at
        least that wait times its factor (the first-change wait doubles, the quiet one grows by half)."""
        self.late += 1
        if changed:  # the update paused longer than the quiet wait
            self.gap = min(QUIET_CAP / GAP_FACTOR, max(self.gap, quiet))
        else:  # the first change came after the first-change wait
            self.latency = min(FIRST_CHANGE_CAP / LATENCY_FACTOR, max(self.latency, first_change))


@dataclass(frozen=True, slots=True)
class _Settled:
    # the waits it used (the keyboard's or the pointer's)
    timing: PaintTiming
    raw: bytearray  # the grab the settle returned (mss's own buffer)
    size: tuple[int, int]
    at: float  # perf_counter when it ended
    changed: bool  # a change had been seen
    near: tuple[int, int] | None  # where the input went (the pointer's last place)
    quiet: float
    first_change: float


def _first_difference(a: bytes | bytearray, b: bytes | bytearray) -> int:
    """The index of the first byte where two different sequences of one length differ (a binary search
    over slices: each comparison is a memcmp)."""
    lo, hi = 0, len(a) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if a[: mid + 1] != b[: mid + 1]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def changed_at_least(
    before: bytearray, after: bytearray, size: tuple[int, int], area: int, near: tuple[int, int] | None = None
) -> bool:
    """Whether the box around what differs between two raw BGRX grabs of one size covers ``area`` square
    pixels, looking only within NEAR of the point ``near`` (None: the whole screen). Row by row, and done as
    soon as it does: a few milliseconds at most."""
    width, height = size
    x0, y0, x1, y1 = 0, 0, width, height
    if near is not None:
        x0, x1 = max(0, near[0] - NEAR[0]), min(width, near[0] + NEAR[0])
        y0, y1 = max(0, near[1] - NEAR[1]), min(height, near[1] + NEAR[1])
    stride = width * 4
    top: int | None = None
    left, right = width, -1
    for y in range(y0, y1):
        start = y * stride
        row_a, row_b = before[start + x0 * 4 : start + x1 * 4], after[start + x0 * 4 : start + x1 * 4]
        if row_a == row_b:
            continue
        top = y if top is None else top
        left = min(left, _first_difference(row_a, row_b) // 4)
        right = max(right, x1 - x0 - 1 - _first_difference(row_a[::-1], row_b[::-1]) // 4)
        if (right - left + 1) * (y - top + 1) >= area:
            return True
    return False


# a spare keycode lent to another character is remapped this long after its last press
REMAP_GRACE = 0.25
_ENV_LOCK = threading.Lock()


@contextmanager
def xauthority(path: str) -> Iterator[None]:
    """python-xlib reads XAUTHORITY from the environment when it connects; point it at our cookie briefly."""
    with _ENV_LOCK:
        old = os.environ.get("XAUTHORITY")
        os.environ["XAUTHORITY"] = path
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("XAUTHORITY", None)
            else:
                os.environ["XAUTHORITY"] = old


def grant_local_user(display_name: str, cookie_file: str, user: str) -> None:
    """Let ``user``'s processes connect without the cookie (server-interpreted localuser access)."""
    with xauthority(cookie_file):
        d = display.Display(display_name)
    try:
        # 5: FamilyServerInterpreted
        d.change_hosts(X.HostInsert, 5, b"localuser\x00" + user.encode())
        d.sync()
    finally:
        d.close()


class X11Session:
    """Capture and input on one X display."""

    def __init__(self, display_name: str, size: Size, *, png_level: int = 1) -> None:
        self.display_name = display_name
        self.size = size
        self.png_level = png_level
        self._local = threading.local()  # mss instances are per thread
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._pressed_keys: set[int] = set()
        self._pressed_buttons: set[int] = set()
        # Spare keycodes (no keysym) lent to characters the keymap lacks: keysym -> keycode, least
        # recently used first, and when each was last pressed. A lent keycode is remapped only after
        # REMAP_GRACE.
        self._spare: list[int] = []
        self._lent: dict[int, int] = {}
        self._lent_used: dict[int, float] = {}
        # seconds, a running estimate: when to start encoding while settling
        self._encode_cost = 0.01
        # the last action's parts, in ms (input, settle, encode): benchmarks
        self.timing: dict[str, float] = {}
        self._encoded_ms = 0.0
        # typed text paints in pieces, a click's effect at once: each kind of input has its own
        # waits
        self.key_timing = PaintTiming()
        self.pointer_timing = PaintTiming()
        # the last settle's end, until the next action's input
        self._settled: _Settled | None = None
        # where the pointer was last moved: where input goes
        self._point: tuple[int, int] | None = None
        try:
            self._d = display.Display(display_name)
        except Exception as exc:
            raise DesktopError(f"cannot connect to X display {display_name}: {exc}", fatal=True) from None
        self._keymap = self._read_keymap()

    # ---------------------------------------------------------------------------------------------
    # Capture
    # ----------------------------------------------------------------------------------------------
    def _mss(self) -> mss.base.MSSBase:
        grabber = getattr(self._local, "mss", None)
        if grabber is None:
            grabber = mss.MSS(display=self.display_name)
            self._local.mss = grabber
        return grabber

    def grab_raw(self, region: tuple[int, int, int, int] | None = None) -> mss.screenshot.ScreenShot:
        if self._stopped.is_set():
            raise DesktopError("the desktop was stopped", fatal=True)
        try:
            grabber = self._mss()
            if region is None:
                return grabber.grab(grabber.monitors[1])
            x0, y0, x1, y1 = region
            return grabber.grab({"left": x0, "top": y0, "width": x1 - x0, "height": y1 - y0})
        except DesktopError:
            raise
        except Exception as exc:
            raise DesktopError(f"screen capture failed: {exc}", fatal=True) from None

    def encode(self, shot: mss.screenshot.ScreenShot) -> Frame:
        started = time.perf_counter()
        try:
            return self._encode(shot)
        finally:
            self._encoded_ms += (time.perf_counter() - started) * 1000

    def _encode(self, shot: mss.screenshot.ScreenShot) -> Frame:
        # BGRX -> RGB in Pillow's C unpacker: the same bytes as ``shot.rgb``, in about half the time
        # bytes(): Debian's Pillow 9 (the sandbox image's) decodes only immutable buffers; the copy
        # is ~0.3 ms
        rgb = Image.frombuffer("RGB", shot.size, bytes(shot.raw), "raw", "BGRX", 0, 1).tobytes()
        png = mss.tools.to_png(rgb, shot.size, level=self.png_level)
        assert png is not None
        return Frame(png, shot.width, shot.height)

    def screenshot(self) -> Frame:
        return self.encode(self.grab_raw())

    def settled_screenshot(
        self,
        *,
        quiet: float = SETTLE_QUIET,
        first_change: float = SETTLE_FIRST_CHANGE,
        limit: float = SETTLE_LIMIT,
        keys: bool = False,
    ) -> Frame:
        """A capture taken once the screen stopped changing after input.

        Polls raw grabs (a few ms each): once a change has been seen, returns when the screen stayed the
        same for ``quiet`` seconds; if nothing changes within ``first_change`` seconds, returns that frame.
        ``limit`` caps the wait (a blinking caret or an animation never settles). The three are the least
        waits: this desktop's paint times so far lengthen them (PaintTiming; ``keys``: the keyboard's).
        """
        near = self._point
        start = time.perf_counter()
        shot = self.grab_raw()
        timing = self.key_timing if keys else self.pointer_timing
        quiet, first_change, limit = timing.waits(quiet, first_change, limit)
        last, last_change, changed = shot.raw, start, False
        first_seen: float | None = None
        longest_gap = 0.0
        encoded: Frame | None = None
        # The ``last`` object that ``encoded`` shows.
        encoded_raw: object = None
        while True:
            deadline = last_change + quiet if changed else start + first_change
            # The PNG is encoded ahead, in the last few ms before the wait would end, instead of
            # polling then; it is returned only if the grab that ends the wait is still that frame
            # (a change re-encodes).
            if encoded_raw is not last and time.perf_counter() >= min(deadline, start + limit) - self._encode_cost:
                encoded, encoded_raw = self._encode_ahead(shot), last
            else:
                self._stopped.wait(SETTLE_POLL)
            shot = self.grab_raw()
            now = time.perf_counter()
            if shot.raw != last:
                # What would lengthen the waits must be a paint, not a caret blinking meanwhile
                # (checked only then: a prompt paint costs nothing)
                if changed:
                    gap = now - last_change
                    if GAP_FACTOR * gap > quiet and changed_at_least(last, shot.raw, shot.size, LATE_MIN_AREA, near):
                        longest_gap = max(longest_gap, gap)
                elif LATENCY_FACTOR * (now - start) <= first_change or changed_at_least(
                    last, shot.raw, shot.size, LATE_MIN_AREA, near
                ):
                    first_seen = now - start
                changed, last, last_change = True, shot.raw, now
            elif changed and now - last_change >= quiet:
                break
            if not changed and now - start >= first_change:
                break
            if now - start >= limit:
                break
        timing.settled(first_seen, longest_gap)
        self._settled = _Settled(timing, last, shot.size, time.perf_counter(), changed, near, quiet, first_change)
        if encoded is not None and encoded_raw is last:
            return encoded
        return self.encode(shot)

    def _encode_ahead(self, shot: mss.screenshot.ScreenShot) -> Frame:
        """``encode``, keeping a running estimate of its cost (how far ahead of a deadline to start it)."""
        t0 = time.perf_counter()
        frame = self.encode(shot)
        self._encode_cost = 0.8 * self._encode_cost + 0.2 * min(time.perf_counter() - t0, 0.05)
        return frame

    def _late_paint(self) -> None:
        """Before an action's input: did the screen change since the last settle ended (a paint that came
        after that wait)? Then the wait grows (PaintTiming.came_late). A change long after, far from where
        the input went, or as small as a caret, tells nothing. One grab (a few ms), only within LATE_WINDOW
        of the last settle: between the steps of one batch, not after a model's turn.

        (Looked at before the input, not in the settle's first grab after it: a quick X client can paint
        the new input's effect within a millisecond, and it would be taken for the last one's late paint.)"""
        settled, self._settled = self._settled, None
        if settled is None or time.perf_counter() - settled.at > LATE_WINDOW:
            return
        shot = self.grab_raw()
        if shot.raw == settled.raw or shot.size != settled.size:
            return
        if changed_at_least(settled.raw, shot.raw, shot.size, LATE_MIN_AREA, settled.near):
            settled.timing.came_late(settled.changed, settled.quiet, settled.first_change)

    # ---------------------------------------------------------------------------------------------
    # Input
    # ----------------------------------------------------------------------------------------------
    def _read_keymap(self) -> dict[int, tuple[int, bool]]:
        """keysym -> (keycode, needs shift) for the current keyboard mapping."""
        d = self._d
        first = d.display.info.min_keycode
        count = d.display.info.max_keycode - first + 1
        table: dict[int, tuple[int, bool]] = {}
        for offset, syms in enumerate(d.get_keyboard_mapping(first, count)):
            for index, sym in enumerate(syms[:2]):
                if sym and sym not in table:
                    table[sym] = (first + offset, index == 1)
            if not any(syms):
                self._spare.append(first + offset)
        return table

    def _event(self, kind: int, detail: int = 0, x: int | None = None, y: int | None = None) -> None:
        with self._lock:
            if self._stopped.is_set():
                raise DesktopError("the desktop was stopped", fatal=True)
            if x is not None and y is not None:
                xtest.fake_input(self._d, kind, x=x, y=y)
            else:
                xtest.fake_input(self._d, kind, detail)
            # sent now, in order; no round trip per event (see ``sync``)
            self._d.flush()
            if kind == X.KeyPress:
                self._pressed_keys.add(detail)
            elif kind == X.KeyRelease:
                self._pressed_keys.discard(detail)
            elif kind == X.ButtonPress:
                self._pressed_buttons.add(detail)
            elif kind == X.ButtonRelease:
                self._pressed_buttons.discard(detail)

    def sync(self) -> None:
        """One round trip: the server has processed every input event sent before."""
        with self._lock:
            if self._stopped.is_set():
                raise DesktopError("the desktop was stopped", fatal=True)
            self._d.sync()

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        if keysym in self._keymap:
            return self._keymap[keysym]
        # Borrow a spare keycode for a character the keymap lacks (as xdotool does). One keycode per
        # such character, kept while spares last: remapping a keycode whose key event the client has
        # not read yet would make it read the new character (typing "é☃" gave "☃☃").
        code = self._lent.pop(keysym, None)
        if code is None:
            if not self._spare:
                raise DesktopError(f"no free keycode to type keysym {keysym:#x}")
            if len(self._lent) < len(self._spare):
                code = self._spare[len(self._lent)]
            else:
                # all lent: take back the least recently used one, once its last press is old enough
                code = self._lent.pop(next(iter(self._lent)))
                self._stopped.wait(max(0.0, self._lent_used.get(code, 0.0) + REMAP_GRACE - time.monotonic()))
            with self._lock:
                if self._stopped.is_set():
                    raise DesktopError("the desktop was stopped", fatal=True)
                self._d.change_keyboard_mapping(code, [(keysym, keysym)])
                self._d.sync()
            # clients must see the MappingNotify before the key event
            time.sleep(0.01)
        self._lent[keysym] = code  # most recently used last
        self._lent_used[code] = time.monotonic()
        return code, False

    def _tap(self, keysym: int) -> None:
        code, shift = self._keycode(keysym)
        shift_code = self._keymap[XK.string_to_keysym("Shift_L")][0]
        if shift:
            self._event(X.KeyPress, shift_code)
        self._event(X.KeyPress, code)
        self._event(X.KeyRelease, code)
        if shift:
            self._event(X.KeyRelease, shift_code)

    def move(self, x: int, y: int) -> None:
        self._event(X.MotionNotify, x=x, y=y)
        self._point = (x, y)

    def foreign_input(self) -> None:
        """Another X client gave input since the last settle (a benchmark's other tool): a change now tells
        nothing of how this desktop paints after ours."""
        self._settled = None

    def button(self, number: int, press: bool) -> None:
        self._event(X.ButtonPress if press else X.ButtonRelease, number)

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        self.move(x, y)
        for _ in range(count):
            self.button(BUTTONS[button], True)
            self.button(BUTTONS[button], False)

    def press_modifiers(self, mods: tuple[str, ...], press: bool) -> None:
        order = mods if press else tuple(reversed(mods))
        for mod in order:
            code, _ = self._keycode(XK.string_to_keysym(MODIFIER_KEYSYMS[mod]))
            self._event(X.KeyPress if press else X.KeyRelease, code)

    def chord(self, chord: str, *, hold: float = 0.0) -> None:
        *mods, key = chord.split("+")
        if key in MODIFIERS:  # a lone modifier chord ("shift")
            mods, key = [*mods, key], ""
        self.press_modifiers(tuple(mods), True)
        try:
            if key:
                code, _ = self._keycode(keysym_for_key(key))
                self._event(X.KeyPress, code)
                if hold:
                    self._stopped.wait(hold)
                self._event(X.KeyRelease, code)
            elif hold:
                self._stopped.wait(hold)
        finally:
            if not self._stopped.is_set():
                self.press_modifiers(tuple(mods), False)

    def type_text(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self._tap(XK.string_to_keysym("Return"))
            elif char == "\t":
                self._tap(XK.string_to_keysym("Tab"))
            else:
                self._tap(keysym_for_char(char))

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        self.move(x, y)
        for count, (neg, pos) in ((dy, (4, 5)), (dx, (6, 7))):
            number = pos if count > 0 else neg
            for _ in range(abs(count)):
                self.button(number, True)
                self.button(number, False)

    def pointer(self) -> tuple[int, int]:
        with self._lock:
            reply = self._d.screen().root.query_pointer()
        return reply.root_x, reply.root_y

    def release_all(self) -> None:
        """Release every key and button we pressed, plus all modifiers. Safe from any thread."""
        with self._lock:
            try:
                for code in list(self._pressed_keys):
                    xtest.fake_input(self._d, X.KeyRelease, code)
                for number in list(self._pressed_buttons):
                    xtest.fake_input(self._d, X.ButtonRelease, number)
                for mod in MODIFIER_KEYSYMS.values():
                    entry = self._keymap.get(XK.string_to_keysym(mod))
                    if entry:
                        xtest.fake_input(self._d, X.KeyRelease, entry[0])
                self._d.sync()
            except Exception:
                # the X server may already be gone: nothing is held then
                pass
            self._pressed_keys.clear()
            self._pressed_buttons.clear()

    def stop(self) -> None:
        self.release_all()
        self._stopped.set()
        with self._lock:
            try:
                self._d.close()
            except Exception:
                pass

    # ---------------------------------------------------------------------------------------------
    # One action, then a settled screenshot
    # ----------------------------------------------------------------------------------------------
    def perform_checked(self, action: Action, check: ScreenCheck | None) -> StepResult:
        """The action, only if its area still looks as the model saw it (one grab of the area, ~1 ms);
        else nothing runs and the screen as it is now comes back, marked stale."""
        if check is not None:
            shot = self.grab_raw(check.box)
            if check.changed(Image.frombuffer("RGB", shot.size, bytes(shot.raw), "raw", "BGRX", 0, 1)):
                return StepResult(self.screenshot(), stale=True)
        return self.perform(action)

    def perform(self, action: Action) -> StepResult:
        started = time.perf_counter()
        self._late_paint()
        self.press_modifiers(action.hold, True)
        try:
            output, image = self._input(action)
        finally:
            if action.hold and not self._stopped.is_set():
                self.press_modifiers(action.hold, False)
        inputs = time.perf_counter()
        # A zoom's picture is the action's own work, not the screenshot's.
        self._encoded_ms = 0.0
        frame = self._screen_after(action)
        done = time.perf_counter()
        encoded, self._encoded_ms = self._encoded_ms, 0.0
        self.timing = {
            "input": (inputs - started) * 1000,
            "settle": max(0.0, (done - inputs) * 1000 - encoded),
            "encode": encoded,
        }
        return StepResult(frame, output=output, image=image)

    def _input(self, action: Action) -> tuple[str | None, Frame | None]:
        """Send the action's input; what it reads (the pointer's place, a zoomed picture) comes back."""
        match action.kind:
            case Kind.CLICK | Kind.DOUBLE_CLICK | Kind.TRIPLE_CLICK:
                assert action.point is not None
                count = {Kind.CLICK: 1, Kind.DOUBLE_CLICK: 2, Kind.TRIPLE_CLICK: 3}[action.kind]
                self.click(*action.point, button=action.button, count=count)
            case Kind.MOVE:
                assert action.point is not None
                self.move(*action.point)
            case Kind.DRAG:
                self.move(*action.path[0])
                self.button(BUTTONS["left"], True)
                for point in action.path[1:]:
                    # Pages need motion events spread in time to see a drag.
                    self._stopped.wait(0.008)
                    self.move(*point)
                self.button(BUTTONS["left"], False)
            case Kind.SCROLL:
                x, y = action.point or self.pointer()
                self.scroll(x, y, action.scroll_x, action.scroll_y)
            case Kind.KEYPRESS:
                for _ in range(action.repeat):
                    self.chord(action.chord)
            case Kind.HOLD_KEY:
                self.chord(action.chord, hold=action.duration_ms / 1000)
            case Kind.TYPE:
                self.type_text(action.text)
            case Kind.WAIT:
                self._stopped.wait(action.duration_ms / 1000)
            case Kind.MOUSE_DOWN | Kind.MOUSE_UP:
                if action.point is not None:
                    self.move(*action.point)
                self.button(BUTTONS[action.button], action.kind is Kind.MOUSE_DOWN)
            case Kind.CURSOR_POSITION:
                x, y = self.pointer()
                return f"X={x},Y={y}", None
            case Kind.ZOOM:
                assert action.region is not None
                return None, self.encode(self.grab_raw(action.region))
            case Kind.SCREENSHOT:
                pass
        return None, None

    def _screen_after(self, action: Action) -> Frame:
        """The screen once the action's effect has painted (at once for an action that changes nothing)."""
        if action.kind in (Kind.WAIT, Kind.SCREENSHOT, Kind.CURSOR_POSITION, Kind.ZOOM):
            return self.screenshot()
        self.sync()
        if action.kind in KEYBOARD_KINDS:
            return self.settled_screenshot(first_change=KEYBOARD_FIRST_CHANGE, keys=True)
        return self.settled_screenshot()


def keysym_for_char(char: str) -> int:
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code  # Latin-1 keysyms equal their code points
    return 0x01000000 + code  # X11 Unicode keysym


def keysym_for_key(key: str) -> int:
    sym = XK.string_to_keysym(key)
    if sym == X.NoSymbol and len(key) == 1:
        sym = keysym_for_char(key)
    if sym == X.NoSymbol:
        raise DesktopError(f"no X keysym for key {key!r}")
    return int(sym)
