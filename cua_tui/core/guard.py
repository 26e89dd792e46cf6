"""The input guard of a decision: the keys that answer it count only once it has been on screen a moment.

A y pressed for the decision before (a double tap, a key held down) must not approve the next one, painted
a fraction of a second earlier. Browsers hold their security prompts the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

# Firefox holds a security dialog's buttons this long (security.dialog_enable_delay, 1000 ms).
DEFAULT_GUARD_S = 1.0
# Chromium's InputEventActivationProtector ignores input for 500 ms after a dialog shows: never
# less.
GUARD_FLOOR_S = 0.5
# longer only locks the analyst out of their own decisions
GUARD_CEILING_S = 10.0


def check_guard(seconds: float) -> str | None:
    """Why ``seconds`` cannot be a decision's guard (None: it can)."""
    if not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return "must be a number of seconds"
    if seconds < GUARD_FLOOR_S:
        return f"must be at least {GUARD_FLOOR_S:g} s (the floor: a key meant for the decision before must not count)"
    if seconds > GUARD_CEILING_S:
        return f"must be at most {GUARD_CEILING_S:g} s"
    return None


class DecisionGuard:
    """When the decision on screen was painted, and whether an answering key counts yet.

    ``arm(shown)`` is called whenever a view paints what it shows; the guard starts again only when
    ``shown`` (a request, or a key naming it) is another than before. Armed with ``screen=True`` it
    starts only once the view says the decision's own screenshot is on its pane (``screen_shown``): a key
    pressed while the pane still shows an older picture, or none, is held."""

    def __init__(self, seconds: float = DEFAULT_GUARD_S, clock: Callable[[], float] = time.monotonic) -> None:
        if (why := check_guard(seconds)) is not None:
            raise ValueError(f"decision guard {seconds!r}: {why}")
        self.seconds = float(seconds)
        self.clock = clock
        self.shown: object | None = None
        self.painted_at: float | None = None
        # the decision is shown, its screenshot not yet: nothing counts until it is
        self.waiting = False
        # when the guard last ignored a key: it holds until the keys stop that long (a phrase typed on
        # after an ignored e must not have its a or y answer once the decision is a second old)
        self.ignored_at: float | None = None

    def arm(self, shown: object | None, *, screen: bool = False) -> None:
        """``shown`` is what the view shows now (None: no decision); ``screen``: the guard waits for
        ``screen_shown`` before it starts (the view's pane has yet to paint the decision's screenshot)."""
        if shown is None:
            self.shown, self.painted_at, self.waiting, self.ignored_at = None, None, False, None
        elif shown != self.shown or (self.painted_at is None and not self.waiting):
            self.shown = shown
            self.painted_at = None if screen else self.clock()
            self.waiting = screen

    def screen_shown(self) -> None:
        """The decision's own screenshot is on the pane now (or why it is not, or the layout has no pane):
        the guard counts from now."""
        if self.shown is not None and self.waiting:
            self.waiting, self.painted_at = False, self.clock()

    def rearm(self) -> None:
        """The same decision painted again after something else covered the view (counts from now)."""
        if self.shown is not None and not self.waiting:
            self.painted_at = self.clock()

    def age(self) -> float | None:
        """Seconds since the decision shown was painted (None: none is shown)."""
        return None if self.painted_at is None else max(0.0, self.clock() - self.painted_at)

    def passed(self) -> bool:
        age = self.age()
        return not self.waiting and age is not None and age >= self.seconds and self._quiet() is None

    def _quiet(self) -> float | None:
        """Seconds since the guard last ignored a key, while that is under the guard (None: not so)."""
        if self.ignored_at is None:
            return None
        quiet = max(0.0, self.clock() - self.ignored_at)
        return quiet if quiet < self.seconds else None

    def refusal(self, key: str) -> str | None:
        """Why ``key`` is ignored now (None: it counts). A key ignored holds the guard ``seconds`` more: the
        keys count once they have stopped that long."""
        why = self._why(key)
        if why is not None:
            self.ignored_at = self.clock()
        return why

    def _why(self, key: str) -> str | None:
        if self.waiting:
            return (
                f"{key} held: this decision's screenshot is not on the desktop pane yet; keys count "
                f"{self.seconds:.1f} s after it is"
            )
        age = self.age()
        if age is None:
            return None
        if age < self.seconds:
            # never "1.0 s ago" while a 1.0 s guard still holds
            shown = math.floor(round(age, 6) * 10) / 10
            return f"{key} ignored: this decision appeared {shown:.1f} s ago; keys count after {self.seconds:.1f} s"
        quiet = self._quiet()
        if quiet is not None:
            ago = math.floor(round(quiet, 6) * 10) / 10
            return (
                f"{key} ignored: a key was ignored {ago:.1f} s ago; keys count after {self.seconds:.1f} s without one"
            )
        return None

    @property
    def ms(self) -> int:
        """The guard's length in milliseconds (recorded with each answer)."""
        return round(self.seconds * 1000)

    def shown_ms(self) -> int | None:
        """Milliseconds the decision has been on screen (None: none is shown)."""
        age = self.age()
        return None if age is None else int(age * 1000)
