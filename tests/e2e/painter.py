"""A slow X client for the settle tests: a window over the whole screen that answers each key press late.

``python painter.py DISPLAY DELAY CHUNKS GAP [CARET]``: after each key press it waits DELAY seconds, then
paints a new 24x24 black square in CHUNKS horizontal strips GAP seconds apart (a page that paints an update
in pieces), and flushes each. With CARET=1 it also blinks a 2x16 caret every 0.1 s on its own, as a text
field does. It prints ``ready`` once its window is mapped and has the keyboard focus.
"""

from __future__ import annotations

import sys
import time

from Xlib import X, display

SQUARE = 24


def main() -> None:
    name, delay, chunks, gap = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    caret = len(sys.argv) > 5 and sys.argv[5] == "1"
    d = display.Display(name)
    screen = d.screen()
    width, height = screen.width_in_pixels, screen.height_in_pixels
    window = screen.root.create_window(
        0,
        0,
        width,
        height,
        0,
        screen.root_depth,
        X.InputOutput,
        X.CopyFromParent,
        background_pixel=screen.white_pixel,
        event_mask=X.KeyPressMask | X.ExposureMask,
        override_redirect=True,
    )
    window.map()
    d.sync()
    window.set_input_focus(X.RevertToParent, X.CurrentTime)
    ink = window.create_gc(foreground=screen.black_pixel)
    paper = window.create_gc(foreground=screen.white_pixel)
    d.sync()
    print("ready", flush=True)
    presses, shown, next_blink = 0, False, time.monotonic() + 0.1
    while True:
        while d.pending_events():
            event = d.next_event()
            if event.type != X.KeyPress:
                continue
            time.sleep(delay)
            columns = (width - 16) // (SQUARE + 4)
            x, y = 8 + (presses % columns) * (SQUARE + 4), 8 + (presses // columns) * (SQUARE + 4)
            presses += 1
            strip = SQUARE // chunks
            for chunk in range(chunks):
                if chunk:
                    time.sleep(gap)
                rows = strip if chunk < chunks - 1 else SQUARE - chunk * strip
                window.fill_rectangle(ink, x, y + chunk * strip, SQUARE, rows)
                d.flush()
        if caret and time.monotonic() >= next_blink:
            shown = not shown
            window.fill_rectangle(ink if shown else paper, width - 20, height - 30, 2, 16)
            d.flush()
            next_blink += 0.1
        time.sleep(0.002)


if __name__ == "__main__":
    main()
