"""A run as an animated film strip (GIF or WebP): the initial screen, then one frame per step with its target
marked and a caption, bounded in frames, width and bytes.

Frames: the initial screen, then for each step the screen after it (when it never ran, the screen it was
decided on, from ``core.timeline.screens``, marked in red and captioned "not run"), its marker drawn as in
the HTML export, and a caption line (step, turn, what ran and a person's hand in it, outcome). Caps: at
most ``MAX_FRAMES`` frames (steps sampled evenly, the first and the last kept), at most ``MAX_WIDTH`` pixels
wide, and at most ``MAX_BYTES`` of output; past the byte cap the strip is encoded again with half the frames
and three quarters of the width, and refused after ``_ATTEMPTS`` tries.
Every screenshot is decoded through ``core.imaging.decode_screen`` (header checked first against the run's
own screen: a decompression bomb, or a picture larger than the run's screen, is refused, never decoded); a
refused, missing or private (``core.private``, left out) screen becomes a grey frame that says so.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from ..core import timeline
from ..core.hand import hand
from ..core.imaging import ImageRefused, decode_screen
from ..core.private import HAND_BACK, LEFT_OUT
from ..core.text import visible
from .marks import marker_of
from .source import Run

MAX_FRAMES = 100
MAX_WIDTH = 800
MAX_BYTES = 16 * (1 << 20)
FRAME_MS = 1000
LAST_FRAME_MS = 3000
_ATTEMPTS = 4
_CAPTION = 22  # pixels of caption under each frame
_COLOURS = {"allow": (209, 0, 209), "confirm": (232, 166, 0), "block": (224, 0, 0)}


class AnimationError(Exception):
    """The strip cannot be made within its caps; ``str()`` is one line."""


@dataclass(frozen=True)
class _Shot:
    sha: str | None
    caption: str
    action: Any = None
    verdict: str = "allow"


def _shots(run: Run) -> list[_Shot]:
    line = run.timeline
    shots = [_Shot(line.first_screen, "initial screen")]
    for step in line.steps:
        screens = timeline.screens(step)
        status = str(step.outcome.status) if step.outcome is not None else "no outcome"
        status = f"not run: {screens.not_run}" if screens.not_run else status
        verdict = str(step.verdict.verdict) if step.verdict is not None else "block"
        ran = screens.after is not None
        said = hand(step)
        # what ran, and the person's hand in it (core/hand.py), as the HTML report's timeline says it
        marks = ["EDITED"] if said.edited else []
        marks += [f"takeover #{said.takeover}"] if said.takeover else []
        marks += [way.how for way in said.chosen if way.how not in ("person", "takeover")]
        what = " · ".join([said.summary, *marks])
        caption = f"step {step.number + 1} · turn {step.turn} · {what} · {status}"
        colour = verdict if ran and verdict in _COLOURS else "block"
        # A step that never ran shows the screen it was decided on (the one its reviewer saw, when
        # recorded); the marker is where it ran (a reviewer's edit moves it).
        shots.append(_Shot(screens.after if ran else screens.before, caption, said.action, colour))
    return shots


def sample(count: int, cap: int) -> list[int]:
    """``cap`` indexes of ``range(count)`` spread evenly, the first and the last always among them."""
    if count <= cap:
        return list(range(count))
    if cap <= 1:
        return [0]
    return sorted({round(i * (count - 1) / (cap - 1)) for i in range(cap)})


class _Painter:
    """Decodes each distinct screen once (scaled to the strip's width) and draws frames from them."""

    def __init__(self, run: Run, width: int) -> None:
        self.run = run
        self.width = width
        self.cache: dict[str | None, tuple[Image.Image | None, str, tuple[int, int]]] = {}
        self.font = ImageFont.load_default(size=14)

    def _screen(self, sha: Any) -> tuple[Image.Image | None, str, tuple[int, int]]:
        if not isinstance(sha, str):
            # an edited record may name a screen by anything JSON holds
            sha = None
        if sha not in self.cache:
            if sha is None:
                self.cache[sha] = (None, "no screen recorded", (0, 0))
            else:
                screen = self.run.screen(sha)
                try:
                    if screen.png is None and screen.private:
                        count = len(self.run.private)
                        raise ImageRefused(f"screen {sha[:12]}: {LEFT_OUT} ({count} in this run)\n{HAND_BACK}")
                    if screen.png is None:
                        raise ImageRefused(screen.refused or "missing")
                    image = decode_screen(screen.png, self.run.limit, expect=(screen.width, screen.height))
                    size = image.size
                    height = max(1, round(image.height * self.width / image.width))
                    self.cache[sha] = (image.resize((self.width, height), Image.Resampling.LANCZOS), "", size)
                except ImageRefused as exc:
                    why = str(exc) if screen.private else f"screen {sha[:12]}: {exc}"
                    self.cache[sha] = (None, why, (0, 0))
        return self.cache[sha]

    def frame(self, shot: _Shot, height: int) -> Image.Image:
        image, refused, size = self._screen(shot.sha)
        canvas = Image.new("RGB", (self.width, height + _CAPTION), (32, 32, 32))
        draw = ImageDraw.Draw(canvas)
        if image is not None:
            canvas.paste(image.crop((0, 0, self.width, min(height, image.height))), (0, 0))
            self._mark(draw, shot, size)
            if isinstance(shot.sha, str) and self.run.screen(shot.sha).private:
                # included as asked (--include-private): marked on the frame itself
                draw.rectangle((0, 0, self.width - 1, _CAPTION), fill=(224, 0, 0))
                draw.text((6, 3), "PRIVATE (takeover's private stretch)", fill=(255, 255, 255), font=self.font)
        else:
            rows = [row for line in refused.split("\n") for row in textwrap.wrap(line, 90) or [""]]
            for row, text in enumerate(rows[:4]):
                where = (12, height // 2 + row * _CAPTION)
                draw.text(where, visible(text, limit=110), fill=(230, 230, 230), font=self.font)
        draw.text((6, height + 3), visible(shot.caption, limit=110), fill=(240, 240, 240), font=self.font)
        return canvas

    def _mark(self, draw: ImageDraw.ImageDraw, shot: _Shot, size: tuple[int, int]) -> None:
        if shot.action is None or not size[0]:
            return
        marker = marker_of(shot.action, *size)
        scale = self.width / size[0]
        colour = _COLOURS.get(shot.verdict, _COLOURS["block"])
        radius = max(6, round(14 * scale))
        if marker.region is not None:
            x0, y0, x1, y1 = (round(v * scale) for v in marker.region)
            draw.rectangle((x0, y0, x1, y1), outline=colour, width=3)
        elif len(marker.points) > 1:
            points = [(round(x * scale), round(y * scale)) for x, y in marker.points]
            draw.line(points, fill=colour, width=3)
            (sx, sy), (ex, ey) = points[0], points[-1]
            draw.ellipse((sx - radius, sy - radius, sx + radius, sy + radius), outline=colour, width=3)
            draw.ellipse((ex - 4, ey - 4, ex + 4, ey + 4), fill=colour)
        elif marker.points:
            x, y = (round(v * scale) for v in marker.points[0])
            draw.ellipse((x - radius, y - radius, x + radius, y + radius), outline=colour, width=3)
            draw.ellipse((x - 3, y - 3, x + 3, y + 3), fill=colour)

    def frames(self, shots: list[_Shot]) -> Iterator[Image.Image]:
        heights = [img.height for img, _r, _s in (self._screen(s.sha) for s in shots) if img is not None]
        height = max(heights) if heights else round(self.width * 0.7)
        for shot in shots:
            yield self.frame(shot, height)


def render(run: Run, fmt: str) -> bytes:
    """The film strip of ``run`` as ``fmt`` ("gif" or "webp") bytes, within the caps (AnimationError if not)."""
    shots = _shots(run)
    frames, width = MAX_FRAMES, MAX_WIDTH
    # a larger one is refused
    screen_widths = [w for w, _h in run.sizes.values() if 0 < w <= run.limit.width]
    if screen_widths:
        width = min(width, max(screen_widths))
    size = 0
    for _attempt in range(_ATTEMPTS):
        chosen = [shots[i] for i in sample(len(shots), frames)]
        data = _encode(_Painter(run, width).frames(chosen), len(chosen), fmt)
        size = len(data)
        if size <= MAX_BYTES:
            return data
        frames, width = max(2, frames // 2), max(160, width * 3 // 4)
    raise AnimationError(f"the {fmt.upper()} stays over {MAX_BYTES >> 20} MiB ({size:,} bytes) even at {width} px")


def _encode(frames: Iterator[Image.Image], count: int, fmt: str) -> bytes:
    first = next(frames)
    durations = [FRAME_MS] * (count - 1) + [LAST_FRAME_MS]
    buf = io.BytesIO()
    if fmt == "gif":
        first.save(buf, format="GIF", save_all=True, append_images=frames, duration=durations, loop=0, optimize=False)
    else:
        first.save(buf, format="WEBP", save_all=True, append_images=frames, duration=durations, loop=0, quality=70)
    return buf.getvalue()
