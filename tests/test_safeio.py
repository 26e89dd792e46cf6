"""Hostile run directories (issue 8, point 2): every read of a run directory is bounded and stays inside
it. Each class of hostile entry is checked through the real command (`cua-tui verify`, in a child process
with a memory ceiling): a one-line answer, exit 1 (tampered) or 2 (unusable), in about a second, with
bounded memory, never a hang or a traceback. Then the reader itself (core/safeio.py) on its own."""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import make_supervisor

from cua_tui.core import safeio
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.audit import GENESIS, AuditKey, verify_run
from cua_tui.core.ports import Answer
from cua_tui.core.safeio import (
    LINE_BAD_UTF8,
    LINE_INCOMPLETE,
    LINE_OK,
    LINE_TOO_LONG,
    RunFileError,
    RunFolder,
)

TURNS: list[dict[str, Any]] = [
    {
        "actions": [
            {"type": "click", "x": 250, "y": 182},
            {"type": "type", "text": "hostile"},
            {"type": "click", "x": 550, "y": 182},
        ]
    }
]
MIDDLE = 10
BIG = 3 * 1024**3  # sparse: costs no disk, but a whole-file read would cost 3 GB of memory
MEMORY_CEILING = 1536 * 1024**2  # address space of the child: a regression fails fast instead of eating the machine
MAX_RSS_KB = 200 * 1024  # an intact verify of a small run stays near 60 MB
MAX_CPU_SECONDS = 1.0  # the command's own work (CPU time: the wall clock of a shared 2-core machine says little)
MAX_WALL_SECONDS = 10.0  # and a generous bound on waiting; a hang ends at the timeout

# Peak memory is VmHWM of this process image: getrusage's ru_maxrss survives exec, so a child forked
# from a big pytest process would report the parent's size.
DRIVER = """
import sys, time
from cua_tui.cli import main
wall, cpu = time.perf_counter(), time.process_time()
try:
    main(sys.argv[2:])
finally:
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(sys.argv[1], "w") as fh:
        fh.write(f"{time.perf_counter() - wall} {time.process_time() - cpu} {peak}")
"""


def _ceiling() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))


def cli(tmp_path: Path, *args: str | Path) -> tuple[int, str, str]:
    """Run `cua-tui ARGS` in a child with a memory ceiling; check time, memory and the absence of a traceback."""
    stats = tmp_path / "stats.txt"
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(stats), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=_ceiling,
        env={**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml")},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    wall, cpu, rss = stats.read_text().split()
    assert float(cpu) < MAX_CPU_SECONDS, f"took {cpu} s of CPU ({wall} s)"
    assert float(wall) < MAX_WALL_SECONDS, f"took {wall} s ({cpu} s of CPU)"
    assert int(rss) < MAX_RSS_KB, f"max RSS {int(rss) // 1024} MB"
    return proc.returncode, proc.stdout, proc.stderr


def verify(tmp_path: Path, run: Path, code: int, *fragments: str) -> str:
    """`cua-tui verify RUN`: the exit code, one line on stderr with the answer (then only notes)."""
    rc, out, err = cli(tmp_path, "verify", run)
    assert rc == code, (out, err)
    assert out == ""
    answer, *notes = err.splitlines()
    assert all(note.startswith("note: ") for note in notes), err
    assert answer.startswith("TAMPERED: " if code == 1 else ""), err
    for fragment in fragments:
        assert fragment in answer, f"{fragment!r} not in {answer!r}"
    return answer


# ---------------------------------------------------------------------------------------------------
# Fixtures: one real sealed run; each test plays with a copy
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "k").write_bytes(b"a key kept outside the run directory")
    sup, _events, _agent = make_supervisor(
        folder, TURNS, approver=FixedApprover(Answer.APPROVE), audit_key=AuditKey.load(folder / "k")
    )
    result = sup.run()
    assert verify_run(result.path).code == 0
    return result.path


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


def a_screenshot(run: Path) -> str:
    lines = (run / "audit.jsonl").read_bytes().splitlines()
    return next(json.loads(line)["sha256"] for line in lines if b'"kind":"screen"' in line)


def sparse(path: Path, size: int = BIG) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def rechain(run: Path, mutate: Callable[[int, bytes], bytes]) -> None:
    """Rewrite audit.jsonl with each line's bytes passed through mutate(line number, bytes), recomputing
    every prev and the seal, so the chain itself is consistent: only the line's bytes can give it away."""
    prev, out = GENESIS, []
    for number, line in enumerate((run / "audit.jsonl").read_bytes().splitlines(), 1):
        record = json.loads(line)
        record["prev"] = prev
        data = mutate(number, json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode())
        out.append(data)
        prev = hashlib.sha256(data).hexdigest()
    (run / "audit.jsonl").write_bytes(b"".join(line + b"\n" for line in out))
    result = json.loads((run / "result.json").read_bytes())
    result["seal"].update(events=len(out), head=prev)
    del result["seal"]["signature"]
    (run / "result.json").write_text(json.dumps(result))


def in_line(number: int, old: bytes, new: bytes) -> Callable[[int, bytes], bytes]:
    def mutate(n: int, data: bytes) -> bytes:
        if n != number:
            return data
        assert old in data, data
        return data.replace(old, new, 1)

    return mutate


# ---------------------------------------------------------------------------------------------------
# 1. Files replaced by links, FIFOs, devices, directories, huge files
# ---------------------------------------------------------------------------------------------------
def test_the_untouched_copy_verifies_within_the_bounds(run: Path, tmp_path: Path) -> None:
    rc, out, _err = cli(tmp_path, "verify", run)
    assert rc == 0 and out.startswith("intact: ")


@pytest.mark.parametrize(
    "make",
    ["dev-zero", "fifo", "big-outside", "copy-outside", "directory", "big-inside"],
)
def test_result_json_hostile(run: Path, outside: Path, tmp_path: Path, make: str) -> None:
    result = run / "result.json"
    if make == "copy-outside":  # the real seal, moved out: following it would verify "intact"
        shutil.move(result, outside / "result.json")
        result.symlink_to(outside / "result.json")
        verify(tmp_path, run, 1, "result.json: a symbolic link")
    elif make == "big-inside":
        result.unlink()
        sparse(result)
        verify(tmp_path, run, 2, "result.json", "larger than 16 MiB")
    else:
        result.unlink()
        if make == "dev-zero":
            result.symlink_to("/dev/zero")
        elif make == "fifo":
            fifo(result)
        elif make == "big-outside":
            result.symlink_to(sparse(outside / "big"))
        else:
            result.mkdir()
        kind = {"dev-zero": "a symbolic link", "fifo": "a FIFO", "big-outside": "a symbolic link"}
        verify(tmp_path, run, 1, "result.json: " + kind.get(make, "a directory"))


@pytest.mark.parametrize(
    "make", ["dev-zero", "fifo", "big-outside", "copy-outside", "directory", "big-inside", "socket"]
)
def test_audit_log_hostile_is_unusable(run: Path, outside: Path, tmp_path: Path, make: str) -> None:
    log = run / "audit.jsonl"
    if make == "copy-outside":
        shutil.move(log, outside / "audit.jsonl")
        log.symlink_to(outside / "audit.jsonl")
    else:
        log.unlink()
        if make == "dev-zero":
            log.symlink_to("/dev/zero")
        elif make == "fifo":
            fifo(log)
        elif make == "big-outside":
            log.symlink_to(sparse(outside / "big"))
        elif make == "directory":
            log.mkdir()
        elif make == "socket":
            import socket

            sock = socket.socket(socket.AF_UNIX)
            sock.bind(str(log))
            sock.close()
        else:  # a huge regular file of NULs, no newline: refused at the line cap, not read to the end
            sparse(log)
    what = {
        "fifo": "a FIFO",
        "directory": "a directory",
        "socket": "a socket",
        "big-inside": "longer than 8 MiB",
    }.get(make, "a symbolic link")
    verify(tmp_path, run, 2, "audit.jsonl", what)


def test_run_json_hostile(run: Path, outside: Path, tmp_path: Path) -> None:
    shutil.move(run / "run.json", outside / "run.json")
    (run / "run.json").symlink_to(outside / "run.json")
    verify(tmp_path, run, 1, "run.json: a symbolic link")
    with RunFolder.open(run) as folder, pytest.raises(RunFileError, match="symbolic link"):
        folder.read_json("run.json")


@pytest.mark.parametrize("make", ["fifo", "dev-zero"])
def test_other_special_entries_are_tampering(run: Path, tmp_path: Path, make: str) -> None:
    target = run / "transcript.jsonl"
    target.unlink()
    fifo(target) if make == "fifo" else target.symlink_to("/dev/zero")
    verify(tmp_path, run, 1, "transcript.jsonl: ")


@pytest.mark.parametrize("make", ["copy-outside", "dev-zero", "fifo", "directory"])
def test_screens_folder_hostile(run: Path, outside: Path, tmp_path: Path, make: str) -> None:
    screens = run / "screens"
    if make == "copy-outside":  # the real screenshots, moved out: following the link would verify "intact"
        shutil.move(screens, outside / "screens")
        screens.symlink_to(outside / "screens")
        verify(tmp_path, run, 1, "screens: a symbolic link")
        return
    shutil.rmtree(screens)
    if make == "dev-zero":
        screens.symlink_to("/dev/zero")
    elif make == "fifo":
        fifo(screens)
    else:  # a directory is what belongs here; an empty one means the screenshots are missing
        screens.mkdir()
    expected = {"dev-zero": "screens: a symbolic link", "fifo": "screens: a FIFO", "directory": "missing"}
    verify(tmp_path, run, 1, expected[make])


@pytest.mark.parametrize("make", ["copy-outside", "dev-zero", "fifo", "directory", "hardlink-ok"])
def test_screenshot_hostile(run: Path, outside: Path, tmp_path: Path, make: str) -> None:
    sha = a_screenshot(run)
    png = run / "screens" / f"{sha}.png"
    if make == "hardlink-ok":  # a hard link is the same file (a backup made with cp -al): still intact
        os.link(png, outside / "same.png")
        rc, out, _err = cli(tmp_path, "verify", run)
        assert rc == 0 and out.startswith("intact: ")
        return
    if make == "copy-outside":
        shutil.move(png, outside / "shot.png")
        png.symlink_to(outside / "shot.png")
    else:
        png.unlink()
        if make == "dev-zero":
            png.symlink_to("/dev/zero")
        elif make == "fifo":
            fifo(png)
        else:
            png.mkdir()
    kind = {"fifo": "a FIFO", "directory": "a directory"}.get(make, "a symbolic link")
    verify(tmp_path, run, 1, f"screenshot {sha[:12]}", kind)


def test_screenshot_over_the_cap_is_unusable(run: Path, tmp_path: Path) -> None:
    sha = a_screenshot(run)
    png = run / "screens" / f"{sha}.png"
    png.unlink()
    sparse(png, 65 * 1024**2)
    verify(tmp_path, run, 2, f"screenshot {sha}.png", "larger than 64 MiB")


@pytest.mark.parametrize("make", ["link-to-run", "fifo", "device", "dev-zero-link"])
def test_verify_path_itself_hostile(run: Path, tmp_path: Path, make: str) -> None:
    path = tmp_path / "arg"
    if make == "link-to-run":  # a link planted among runs could stand in for another run: not followed
        path.symlink_to(run)
        what = "a symbolic link"
    elif make == "fifo":
        fifo(path)
        what = "a FIFO"
    elif make == "device":
        path = Path("/dev/zero")
        what = "a device"
    else:
        path.symlink_to("/dev/zero")
        what = "a symbolic link"
    verify(tmp_path, path, 2, "not a run directory", what)


# ---------------------------------------------------------------------------------------------------
# 2. Lines: bounded, strict UTF-8, valid JSON, even where the chain was recomputed to match
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad",
    [b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"],
    ids=["ff", "lone-lead", "truncated-3-byte", "surrogate", "overlong", "above-max"],
)
@pytest.mark.parametrize("where", ["value", "key"])
def test_invalid_utf8_anywhere_in_a_line_is_tampering(run: Path, tmp_path: Path, bad: bytes, where: str) -> None:
    old = b'"ts":' if where == "key" else b'"run":"'
    new = b'"x' + bad + b'":1,"ts":' if where == "key" else b'"run":"' + bad
    if where == "value":  # a value the verifier skips: not one it reads
        old, new = b'"kind":"', b'"note' + bad + b'":"x","kind":"'
    rechain(run, in_line(MIDDLE, old, new))
    verify(tmp_path, run, 1, f"line {MIDDLE}: not a valid JSON record", "UTF-8")


@pytest.mark.parametrize(
    "bad",
    [b'"x":"a\x00b",', b'"x":"\x1b]52;c;SGk=\x07",', b'\x00"x":1,', b'"x":' + b"[" * 100_000 + b"]" * 100_000 + b","],
    ids=["nul-in-string", "raw-escape-in-string", "nul-outside", "deep-nesting"],
)
def test_invalid_json_in_a_recomputed_line_is_tampering(run: Path, tmp_path: Path, bad: bytes) -> None:
    rechain(run, in_line(MIDDLE, b'"kind":', bad + b'"kind":'))
    verify(tmp_path, run, 1, f"line {MIDDLE}: not a valid JSON record")


def test_escaped_controls_are_valid_json_and_verify(run: Path, tmp_path: Path) -> None:
    """JSON escapes (\\u0000, \\u001b) are valid: the line verifies; showing it literally is the reader's job."""
    rechain(run, in_line(MIDDLE, b'"kind":', b'"x":"\\u0000\\u001b]52;c;SGk=\\u0007",' + b'"kind":'))
    rc, out, _err = cli(tmp_path, "verify", run)
    assert rc == 0 and out.startswith("intact: ")


def test_over_long_line_is_unusable(run: Path, tmp_path: Path) -> None:
    rechain(run, in_line(MIDDLE, b'"kind":', b'"pad":"' + b"a" * (9 * 1024**2) + b'","kind":'))
    verify(tmp_path, run, 2, f"line {MIDDLE}", "longer than 8 MiB")


def test_over_long_line_after_the_seal_is_appended(run: Path, tmp_path: Path) -> None:
    n = (run / "audit.jsonl").read_bytes().count(b"\n")
    with open(run / "audit.jsonl", "ab") as fh:
        fh.write(b"x" * (9 * 1024**2))
    verify(tmp_path, run, 1, f"line {n + 1}: appended after")


def test_over_long_unfinished_tail_of_an_interrupted_run_is_unusable(run: Path, tmp_path: Path) -> None:
    (run / "result.json").unlink()
    with open(run / "audit.jsonl", "ab") as fh:
        fh.write(b'{"seq":' + b"9" * (9 * 1024**2))
    verify(tmp_path, run, 2, "longer than 8 MiB")


def test_broken_link_then_a_huge_tail_answers_quickly(run: Path, tmp_path: Path) -> None:
    """Naming a broken link reads the log again; a 3 GB tail after it must not be read to its end."""
    (run / "result.json").unlink()
    lines = (run / "audit.jsonl").read_bytes().splitlines(keepends=True)
    del lines[MIDDLE - 1]
    with open(run / "audit.jsonl", "wb") as fh:
        fh.write(b"".join(lines))
        fh.truncate(BIG)
    verify(tmp_path, run, 1, f"line {MIDDLE}: ", "deleted")


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
    monkeypatch.setattr(safeio.os, "pread", lambda fd, n, off: reads.append(n) or real(fd, n, off))
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
