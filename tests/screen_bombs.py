"""A run directory whose screens are larger than the run's own screen (issue 20, point 3).

``oversized_run`` makes a real run (the one builder, the sim desktop at 1024 x 720, a script of 12 clicks:
13 screens) and then, as a forger without a key can, points each of its screen events at a different real
PNG of 10,000 x 4,000 pixels (each about 120 KB on disk, 160 MB once decoded to RGBA, 120 MB as RGB),
records that size in the event and recomputes the chain, so ``verify`` answers intact. 40 MP is within the
global cap of ``core.imaging`` (a screen of 8K): only the run's own size tells these screens apart.
"""

from __future__ import annotations

import functools
import hashlib
import json
import struct
import zlib
from pathlib import Path
from typing import Any

from hostile_runs import rechain

from cua_tui.build import RunOptions, build_run

SCREEN = (1024, 720)
CLAIM = (10_000, 4_000)
COUNT = 13
CLICKS = [{"type": "click", "x": 100 + 40 * i, "y": 600} for i in range(COUNT - 1)]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@functools.cache
def _solid_idat(width: int, height: int) -> bytes:
    """The compressed rows of a solid grey ``width`` x ``height`` RGB picture, made a few rows at a time (the
    picture itself, 120 MB at 10,000 x 4,000, is never held)."""
    row = b"\0" + b"\x80" * (width * 3)  # filter byte "none", then the pixels
    packer = zlib.compressobj(9)
    parts = [packer.compress(row * 100) for _ in range(height // 100)]
    parts.append(packer.compress(row * (height % 100)))
    parts.append(packer.flush())
    return b"".join(parts)


def solid_png(width: int, height: int, tag: str = "") -> bytes:
    """A real, valid PNG of ``width`` x ``height`` solid grey pixels; ``tag`` (a tEXt chunk) makes each copy a
    file of its own (screens are stored by hash)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    text = _chunk(b"tEXt", b"Comment\0" + tag.encode()) if tag else b""
    idat = _solid_idat(width, height)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + text + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def oversized_run(runs: Path, claim: tuple[int, int] = CLAIM, count: int = COUNT) -> Path:
    """The run described above: ``count`` screens, each a different ``claim``-sized PNG, chain intact."""
    run = build_run(
        RunOptions(
            task="oversized screens",
            backend="sim",
            agent=None,
            script={"turns": [{"actions": CLICKS[: count - 1]}], "final_text": "done"},
            runs_dir=runs,
            decisions="approve",
            fsync=False,
        )
    ).run()
    path = run.path
    for old in (path / "screens").iterdir():
        old.unlink()
    pngs = [solid_png(*claim, f"screen {i}") for i in range(count)]
    for png in pngs:
        (path / "screens" / f"{hashlib.sha256(png).hexdigest()}.png").write_bytes(png)
    seen: list[int] = []

    def mutate(_number: int, data: bytes) -> bytes:
        if b'"kind":"screen"' not in data:
            return data
        record: dict[str, Any] = json.loads(data)
        png = pngs[len(seen) % count]
        seen.append(1)
        record.update(sha256=hashlib.sha256(png).hexdigest(), width=claim[0], height=claim[1], bytes=len(png))
        return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()

    rechain(path, mutate)
    assert len(seen) == count, f"the run has {len(seen)} screen events, not {count}"
    return path
