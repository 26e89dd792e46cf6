"""Runs for the export tests: a real sim run full of hostile strings, and damaged copies of it.

The damaged directories are one function each in ``DAMAGED`` (name -> what it does to a copy of a good run,
and the exit code ``export`` must give), so the tests can switch to the shared hostile corpus
(tests/hostile_runs.py) by replacing this table.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cua_tui.build import RunOptions, build_run

TYPED = "cua-tui verified"
HOSTILE_TASK = 'Fill the form <script>alert("task")</script> \x1b[31mred\x1b[0m & "quotes"'
HOSTILE_SAYS = "<img src=x onerror=alert(1)> filling \u202eevil\u202c the form"
HOSTILE_FINAL = "</style><style>body{display:none}</style> done"
HOSTILE_KIND = "<b>bold</b>"
CLICK_FIELD = (250, 182)
TURNS: list[dict[str, Any]] = [
    {
        "text": HOSTILE_SAYS,
        "actions": [
            {"type": "click", "button": "left", "x": CLICK_FIELD[0], "y": CLICK_FIELD[1]},
            {"type": "type", "text": TYPED},
            {"type": "click", "button": "left", "x": 550, "y": 182},
        ],
    },
    {
        "actions": [
            {"type": "drag", "path": [{"x": 10, "y": 10}, {"x": 100, "y": 200}]},
            {"type": "scroll", "x": 300, "y": 300, "scroll_x": 0, "scroll_y": 300},
            {"type": "keypress", "keys": ["ctrl", "alt", "Delete"]},
            {"type": "move", "x": 5, "y": 5},
        ],
    },
    {"actions": [{"type": HOSTILE_KIND, "x": 1}, {"type": "wait"}]},
]


def sim_run(runs: Path, turns: list[dict[str, Any]] | None = None, *, task: str = HOSTILE_TASK) -> Path:
    """A real run of the real supervisor on the sim desktop (every decision approved), sealed."""
    run = build_run(
        RunOptions(
            task=task,
            backend="sim",
            agent=None,
            script={"turns": TURNS if turns is None else turns, "final_text": HOSTILE_FINAL},
            runs_dir=runs,
            decisions="approve",
            fsync=False,
        )
    )
    run.run()
    return run.path


def audit_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "audit.jsonl").read_bytes().splitlines()]


def bomb_png(width: int = 40_000, height: int = 40_000) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` pixels (a decompression bomb's shape)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def _a_screen(run: Path) -> Path:
    return sorted((run / "screens").iterdir())[0]


def symlinked_screen(run: Path) -> None:
    screen = _a_screen(run)
    screen.unlink()
    screen.symlink_to("/etc/passwd")


def fifo_screen(run: Path) -> None:
    screen = _a_screen(run)
    screen.unlink()
    os.mkfifo(screen)


def bomb_screen(run: Path) -> None:
    _a_screen(run).write_bytes(bomb_png())


def missing_screen(run: Path) -> None:
    _a_screen(run).unlink()


def non_utf8_line(run: Path) -> None:
    lines = (run / "audit.jsonl").read_bytes().split(b"\n")
    lines[5] = lines[5].replace(b'"turn"', b'"t\xffrn"', 1)
    (run / "audit.jsonl").write_bytes(b"\n".join(lines))


def empty_dir(run: Path) -> None:
    shutil.rmtree(run)
    run.mkdir()


def audit_is_a_link(run: Path) -> None:
    (run / "audit.jsonl").unlink()
    (run / "audit.jsonl").symlink_to("/dev/zero")


# name -> (damage, export's exit code): tampered runs are still exported (1); nothing to export is 2
DAMAGED: dict[str, tuple[Callable[[Path], None], int]] = {
    "symlinked screen": (symlinked_screen, 1),
    "FIFO screen": (fifo_screen, 1),
    "bomb PNG": (bomb_screen, 1),
    "missing screen": (missing_screen, 1),
    "non-UTF-8 line": (non_utf8_line, 1),
    "empty directory": (empty_dir, 2),
    "audit.jsonl a link to /dev/zero": (audit_is_a_link, 2),
}
