"""Hostile run directories (issue 8, point 2): every read of a run directory is bounded and stays inside
it. Every class of hostile entry is a case of the shared corpus (tests/hostile_runs.py), checked through
the real commands by tests/test_hostile_runs.py; here, what must still verify within the same bounds, and
the reader itself (core/safeio.py) on its own."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from hostile_runs import MIDDLE, a_screenshot, check_answer, cli, fifo, in_line, pristine_run, rechain

from cua_tui.core import safeio
from cua_tui.core.safeio import (
    LINE_BAD_UTF8,
    LINE_INCOMPLETE,
    LINE_OK,
    LINE_TOO_LONG,
    RunFileError,
    RunFolder,
)


# ---------------------------------------------------------------------------------------------------
# Fixtures: one real sealed run; each test plays with a copy
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pristine_run(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def run(sealed_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs" / sealed_run.name
    shutil.copytree(sealed_run, target)
    return target


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


# ---------------------------------------------------------------------------------------------------
# 1. What is not hostile verifies, within the same bounds
# ---------------------------------------------------------------------------------------------------
def test_the_untouched_copy_verifies_within_the_bounds(run: Path, tmp_path: Path) -> None:
    check_answer(*cli(tmp_path, "verify", run), 0, ("intact: ",))


def test_a_hard_linked_screenshot_is_the_same_file(run: Path, outside: Path, tmp_path: Path) -> None:
    """A hard link is the same file (a backup made with cp -al): still intact."""
    os.link(run / "screens" / f"{a_screenshot(run)}.png", outside / "same.png")
    check_answer(*cli(tmp_path, "verify", run), 0, ("intact: ",))


def test_a_link_where_run_json_belongs_is_refused_by_the_reader(run: Path, outside: Path) -> None:
    shutil.move(run / "run.json", outside / "run.json")
    (run / "run.json").symlink_to(outside / "run.json")
    with RunFolder.open(run) as folder, pytest.raises(RunFileError, match="symbolic link"):
        folder.read_json("run.json")


def test_escaped_controls_are_valid_json_and_verify(run: Path, tmp_path: Path) -> None:
    """JSON escapes (\\u0000, \\u001b) are valid: the line verifies; showing it literally is the reader's job."""
    rechain(run, in_line(MIDDLE, b'"kind":', b'"x":"\\u0000\\u001b]52;c;SGk=\\u0007",' + b'"kind":'))
    check_answer(*cli(tmp_path, "verify", run), 0, ("intact: ",))


# ---------------------------------------------------------------------------------------------------
# 3. The reader itself
# ---------------------------------------------------------------------------------------------------
def reference(data: bytes, cap: int) -> list[tuple[bytes, int]]:
    """What LineReader must yield, computed the obvious way."""
    out: list[tuple[bytes, int]] = []
    parts = data.split(b"\n")
    tail = parts.pop()
    for part in parts:
        if len(part) > cap:
            out.append((b"", LINE_TOO_LONG))
            continue
        try:
            part.decode("utf-8")
            out.append((part, LINE_OK))
        except UnicodeDecodeError:
            out.append((part, LINE_BAD_UTF8))
    if tail:
        out.append((tail, LINE_INCOMPLETE) if len(tail) <= cap else (b"", LINE_TOO_LONG))
    return out


@pytest.mark.parametrize("block", [1, 3, 7, 64, 1 << 20])
def test_line_reader_matches_the_obvious_reading_at_every_block_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Lines, multi-byte characters and bad bytes straddling block boundaries; over-long lines; a tail."""
    monkeypatch.setattr(safeio, "_BLOCK", block)
    rng = random.Random(block)
    pieces = [b"a", b"\xc3\xa9", b"\xe2\x98\x83", b"\xf0\x9f\x98\x80", b"\n", b"\xff", b"\xe2\x82", b'{"k":1}']
    weights = [30, 5, 5, 3, 8, 1, 1, 5]
    cap = 40
    for trial in range(40):
        data = b"".join(rng.choices(pieces, weights, k=rng.randrange(0, 200)))
        if trial % 5 == 0:
            data += b"b" * rng.randrange(30, 120)  # a long tail, sometimes over the cap
        path = tmp_path / f"t{trial}.jsonl"
        path.write_bytes(data)
        with RunFolder.open(tmp_path) as folder, folder.lines(path.name, max_line=cap) as reader:
            got = list(reader)
            again = list(reader)  # iterating again starts over
        assert got == reference(data, cap), data
        assert again == got


def test_line_reader_reads_in_blocks_not_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    real = os.pread

    def pread(fd: int, n: int, off: int) -> bytes:
        reads.append(n)
        return real(fd, n, off)

    monkeypatch.setattr(os, "pread", pread)  # the os module safeio reads
    (tmp_path / "a.jsonl").write_bytes(b'{"n":1}\n' * 400_000)  # 3.2 MB
    with RunFolder.open(tmp_path) as folder, folder.lines("a.jsonl") as reader:
        assert sum(1 for _ in reader) == 400_000
    assert reads and max(reads) <= 1 << 20


def test_read_bytes_caps_and_refuses(tmp_path: Path) -> None:
    (tmp_path / "small").write_bytes(b"12345")
    (tmp_path / "link").symlink_to(tmp_path / "small")
    (tmp_path / "dir").mkdir()
    fifo(tmp_path / "fifo")
    with RunFolder.open(tmp_path) as folder:
        assert folder.read_bytes("small", 5) == b"12345"
        with pytest.raises(RunFileError) as too_large:
            folder.read_bytes("small", 4)
        assert too_large.value.reason == "too_large"
        for name, kind in (("link", "a symbolic link"), ("dir", "a directory"), ("fifo", "a FIFO")):
            with pytest.raises(RunFileError) as exc:
                folder.read_bytes(name, 100)
            assert exc.value.reason == "not_regular" and kind in str(exc.value)
        with pytest.raises(RunFileError) as missing:
            folder.read_bytes("nope", 100)
        assert missing.value.reason == "missing"
        with pytest.raises(ValueError):
            folder.read_bytes("../small", 100)  # one component only: nothing climbs out
        assert folder.kind("link") == "a symbolic link" and folder.kind("nope") is None


def test_subdir_refuses_a_link_and_reads_stay_inside(tmp_path: Path, outside: Path) -> None:
    (outside / "secret.json").write_text('{"secret": 1}')
    run = tmp_path / "run"
    run.mkdir()
    (run / "screens").symlink_to(outside)
    with RunFolder.open(run) as folder:
        with pytest.raises(RunFileError, match="symbolic link"):
            folder.subdir("screens")
        with pytest.raises(RunFileError, match="symbolic link"):
            folder.read_json("screens")
    with pytest.raises(RunFileError, match="symbolic link"):
        RunFolder.open(run / "screens")
    with RunFolder.open(run / "screens", follow_link=True) as followed:  # the user's own runs folder may be a link
        assert followed.read_json("secret.json") == {"secret": 1}


@pytest.mark.parametrize(
    "data",
    [b'{"a": "\xff"}', b'{"\xff": 1}', b'{"a": 1} x', b"[" * 100_000 + b"]" * 100_000, b'{"a": "\x00"}'],
    ids=["bad-utf8-value", "bad-utf8-key", "trailing", "deep", "nul"],
)
def test_read_json_is_strict(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "x.json").write_bytes(data)
    with RunFolder.open(tmp_path) as folder, pytest.raises(RunFileError) as exc:
        folder.read_json("x.json")
    assert exc.value.reason == "invalid"
    assert "\n" not in str(exc.value)
