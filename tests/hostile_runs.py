"""The shared corpus of damaged and hostile run directories (issue 10, point 7; issue 8, point 2).

Each ``Case`` turns a copy of one real run (made by the one builder on the sim desktop, signed, sealed)
into one kind of damage or attack: files replaced by links leaving the directory, FIFOs, devices,
sockets, directories or huge sparse files; references that climb out (a screen event whose sha256 is
``../../etc/passwd``); decompression-bomb screenshots (a PNG header claiming 40,000 x 40,000 pixels);
bytes that are not UTF-8; enormous lines; missing files; an empty directory. Each names the exit code
``cua-tui verify`` must give (1 tampered, 2 unusable) and fragments of its one-line answer, so that
``verify``, ``runs`` and every later reader (``replay``, ``export``) are tested against the same list:

    @pytest.mark.parametrize("case", CASES, ids=str)
    def test_x(case, corpus_run, tmp_path): run = case.build(corpus_run, tmp_path / "runs", tmp_path / "out")

``DAMAGED`` holds damage that ``verify`` rightly accepts (exit 0: run.json is not part of the seal,
and a run without result.json is an interrupted prefix) but every reader must still survive.

Also here: ``cli`` (a command in a child process under a memory ceiling, with its time and peak memory
checked) and the helpers that forge lines (``rechain``) and files (``sparse``, ``fifo``, ``forged_png``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cua_tui.build import RunOptions, build_run
from cua_tui.core.audit import GENESIS, verify_run

TURNS: list[dict[str, Any]] = [
    {
        "actions": [
            {"type": "click", "x": 250, "y": 182},
            {"type": "type", "text": "hostile"},
            {"type": "click", "x": 550, "y": 182},
        ]
    }
]
MIDDLE = 10  # a line in the middle of the pristine run's log
BIG = 3 * 1024**3  # sparse: costs no disk, but a whole-file read would cost 3 GB of memory
MEMORY_CEILING = 1536 * 1024**2  # address space of the child: a regression fails fast instead of eating the machine
MAX_RSS_KB = 200 * 1024  # an intact verify of a small run stays near 60 MB
MAX_CPU_SECONDS = 1.0  # the command's own work (CPU time: the wall clock of a shared 2-core machine says little)
MAX_WALL_SECONDS = 10.0  # and a generous bound on waiting; a hang ends at the timeout
BOMB = (40_000, 40_000)

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


# ---------------------------------------------------------------------------------------------------
# Running a command the way a user does, with bounds
# ---------------------------------------------------------------------------------------------------
def _ceiling() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))


def cli(
    tmp_path: Path, *args: str | Path, cpu: float = MAX_CPU_SECONDS, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run `cua-tui ARGS` in a child with a memory ceiling; check time, memory and the absence of a traceback."""
    stats = tmp_path / "stats.txt"
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(stats), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=_ceiling,
        env={**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), **(env or {})},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    wall, used, rss = stats.read_text().split()
    assert float(used) < cpu, f"took {used} s of CPU ({wall} s)"
    assert float(wall) < MAX_WALL_SECONDS, f"took {wall} s ({used} s of CPU)"
    assert int(rss) < MAX_RSS_KB, f"max RSS {int(rss) // 1024} MB"
    return proc.returncode, proc.stdout, proc.stderr


def check_answer(code: int, out: str, err: str, expected: int, says: tuple[str, ...]) -> str:
    """`cua-tui verify`'s output: the exit code, then one line with the answer (stderr unless intact),
    then only notes."""
    assert code == expected, (out, err)
    text = err if expected else out
    assert (out if expected else err) == ""
    answer, *notes = text.splitlines()
    assert all(note.startswith("note: ") for note in notes), text
    assert answer.startswith("TAMPERED: " if expected == 1 else ""), text
    for fragment in says:
        assert fragment in answer, f"{fragment!r} not in {answer!r}"
    return answer


# ---------------------------------------------------------------------------------------------------
# The pristine run, and forging
# ---------------------------------------------------------------------------------------------------
def pristine_run(folder: Path) -> Path:
    """One real run, signed and sealed: the builder on the sim desktop with a script agent (its typing
    approved by the headless rule). The key stays outside the runs directory."""
    key = folder / "audit.key"
    key.write_bytes(b"a key kept outside the run directory")
    key.chmod(0o600)
    options = RunOptions(
        task="hostile corpus",
        backend="sim",
        agent=None,
        script={"turns": TURNS, "final_text": "done"},
        runs_dir=folder / "runs",
        decisions="approve",
        audit_key=key,
        fsync=False,
    )
    path = build_run(options).run().path
    assert verify_run(path).code == 0
    return path


def a_screenshot(run: Path) -> str:
    lines = (run / "audit.jsonl").read_bytes().splitlines()
    sha: str = next(json.loads(line)["sha256"] for line in lines if b'"kind":"screen"' in line)
    return sha


def sparse(path: Path, size: int = BIG) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def unix_socket(path: Path) -> Path:
    """A socket file at ``path``: bound in a short folder (a socket's path is limited to 107 bytes, and a
    test's temporary folder under pytest-xdist is deep), then moved into place."""
    with tempfile.TemporaryDirectory(prefix="cua-sock-", dir="/tmp") as short:
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(os.path.join(short, "s"))
        finally:
            sock.close()
        os.rename(os.path.join(short, "s"), path)
    return path


def device(path: Path) -> Path:
    """A character device (/dev/zero's numbers) where a run belongs; skips where mknod is not allowed."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("mknod is not permitted here")
    return path


def forged_png(width: int, height: int) -> bytes:
    """A tiny file whose header claims ``width`` x ``height`` (what a decompression bomb looks like to a reader)."""
    chunk = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    iend = b"IEND"
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + struct.pack(">I", 0)
        + iend
        + struct.pack(">I", zlib.crc32(iend))
    )


def real_png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def rechain(run: Path, mutate: Callable[[int, bytes], bytes]) -> None:
    """Rewrite audit.jsonl with each line's bytes passed through mutate(line number, bytes), recomputing
    every prev and the seal (without its signature), so the chain itself is consistent: only the line's
    bytes can give it away (what a forger without the key can do)."""
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
    result["seal"].pop("signature", None)
    (run / "result.json").write_text(json.dumps(result))


def in_line(number: int, old: bytes, new: bytes) -> Callable[[int, bytes], bytes]:
    def mutate(n: int, data: bytes) -> bytes:
        if n != number:
            return data
        assert old in data, data
        return data.replace(old, new, 1)

    return mutate


def in_first_screen(change: Callable[[dict[str, Any]], None]) -> Callable[[int, bytes], bytes]:
    """A mutation of the first screen record's fields (the rest of the log as it was)."""
    done: list[bool] = []

    def mutate(_n: int, data: bytes) -> bytes:
        if done or b'"kind":"screen"' not in data:
            return data
        done.append(True)
        record = json.loads(data)
        change(record)
        return json.dumps(record, separators=(",", ":")).encode()

    return mutate


def swap_first_screen(run: Path, png: bytes, *, record_size: tuple[int, int] | None = None) -> str:
    """Store ``png`` under its own hash and point the first screen record at it (chain recomputed)."""
    sha = hashlib.sha256(png).hexdigest()
    (run / "screens" / f"{sha}.png").write_bytes(png)

    def change(record: dict[str, Any]) -> None:
        record["sha256"] = sha
        if record_size is not None:
            record["width"], record["height"] = record_size

    rechain(run, in_first_screen(change))
    return sha


# ---------------------------------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------------------------------
Make = Callable[[Path, Path], None]  # (the run directory's copy, a folder outside the runs directory)


@dataclass(frozen=True)
class Case:
    """One hostile or damaged run directory: ``make`` edits a fresh copy of the pristine run in place
    (it may replace the directory itself); ``exit`` is what `cua-tui verify` must answer, ``says``
    fragments of its one-line answer, ``cell`` what `cua-tui runs` shows in VERIFIED."""

    name: str
    make: Make
    exit: int
    says: tuple[str, ...] = ()
    cell: str = field(default="")

    def __post_init__(self) -> None:
        if not self.cell:
            object.__setattr__(self, "cell", {1: "TAMPERED", 2: "unusable"}.get(self.exit, "intact"))

    def __str__(self) -> str:
        return self.name

    def fragments(self, pristine: Path) -> tuple[str, ...]:
        """``says`` with ``{screen}`` (the first 12 hex digits of the first screenshot's hash) and
        ``{next_line}`` (the number of the line after the pristine log's last) filled in."""
        lines = (pristine / "audit.jsonl").read_bytes().count(b"\n")
        values = {"screen": a_screenshot(pristine)[:12], "next_line": lines + 1}
        return tuple(fragment.format(**values) for fragment in self.says)

    @property
    def verified(self) -> str:
        """The cell as `runs --json` spells it."""
        return self.cell.split(",")[0].lower()

    def build(self, pristine: Path, runs_dir: Path, outside: Path, name: str | None = None) -> Path:
        """A copy of ``pristine`` at ``runs_dir/<name>`` (the pristine run's id by default), made hostile."""
        run = runs_dir / (name or pristine.name)
        shutil.copytree(pristine, run)
        outside.mkdir(parents=True, exist_ok=True)
        self.make(run, outside)
        return run


def _replace(name: str, how: str) -> Make:
    """``name`` in the run directory replaced by a link to /dev/zero, a FIFO, a socket, a directory, a
    link to a huge file outside, a link to the real file moved outside, or a huge sparse file inside."""

    def make(run: Path, outside: Path) -> None:
        target = run / name
        away = outside / name.replace("/", "-")
        if how == "copy-outside":  # following the link would find the real file and answer "intact"
            shutil.move(target, away)
            target.symlink_to(away)
            return
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
        if how == "dev-zero":
            target.symlink_to("/dev/zero")
        elif how == "fifo":
            fifo(target)
        elif how == "socket":
            unix_socket(target)
        elif how == "directory":
            target.mkdir()
        elif how == "big-outside":
            target.symlink_to(sparse(away.with_name(f"big-{away.name}")))
        elif how == "fifo-outside":  # opening what the link names would block forever
            target.symlink_to(fifo(away.with_name(f"fifo-{away.name}")))
        elif how == "big-inside":
            sparse(target)
        elif how == "missing":
            pass
        else:
            raise ValueError(how)

    return make


def _in_screens(how: str) -> Make:
    def make(run: Path, outside: Path) -> None:
        sha = a_screenshot(run)
        png = run / "screens" / f"{sha}.png"
        if how == "bomb-in-place":  # the same name, a bomb's bytes: its hash gives it away
            png.write_bytes(forged_png(*BOMB))
        elif how == "over-cap":
            png.unlink()
            sparse(png, 65 * 1024**2)
        else:
            _replace(f"screens/{sha}.png", how)(run, outside)

    return make


def _rechained(mutate: Callable[[int, bytes], bytes]) -> Make:
    return lambda run, _outside: rechain(run, mutate)


def _not_utf8(name: str, key: bytes) -> Make:
    """Bytes that are not UTF-8 inside a string of a run's JSON file."""

    def make(run: Path, _outside: Path) -> None:
        data = (run / name).read_bytes()
        assert key in data, data[:200]
        (run / name).write_bytes(data.replace(key, key + b"\xff\xfe", 1))

    return make


def _path_itself(how: str) -> Make:
    """The run directory itself replaced (what `verify RUN` and `runs` are pointed at)."""

    def make(run: Path, outside: Path) -> None:
        moved = outside / f"moved-{run.name}"
        shutil.move(run, moved)
        if how == "link-to-run":  # a link planted among runs could stand in for another run
            run.symlink_to(moved)
        elif how == "dev-zero-link":
            run.symlink_to("/dev/zero")
        elif how == "fifo":
            fifo(run)
        elif how == "device":
            device(run)
        elif how == "regular-file":
            run.write_bytes(b"not a directory\n")
        elif how == "empty-directory":
            run.mkdir()
        else:
            raise ValueError(how)

    return make


def _bomb_rechained(run: Path, _outside: Path) -> None:
    swap_first_screen(run, forged_png(*BOMB), record_size=BOMB)


def _other_size_rechained(run: Path, _outside: Path) -> None:
    swap_first_screen(run, real_png(10, 10))  # the record still says 1024 x 720


def _text_as_screenshot(run: Path, _outside: Path) -> None:
    swap_first_screen(run, b"root:x:0:0:root:/root:/bin/bash\n" * 4)


def _traversal(sha: str) -> Make:
    def change(record: dict[str, Any]) -> None:
        record["sha256"] = sha

    # a fresh mutation per copy: in_first_screen remembers that it has done its one change
    return lambda run, _outside: rechain(run, in_first_screen(change))


def _appended_long_line(run: Path, _outside: Path) -> None:
    with open(run / "audit.jsonl", "ab") as fh:
        fh.write(b"x" * (9 * 1024**2))


def _unfinished_long_tail(run: Path, _outside: Path) -> None:
    (run / "result.json").unlink()
    with open(run / "audit.jsonl", "ab") as fh:
        fh.write(b'{"seq":' + b"9" * (9 * 1024**2))


def _broken_link_then_huge_tail(run: Path, _outside: Path) -> None:
    """Naming a broken link reads the log again; a 3 GB tail after it must not be read to its end."""
    (run / "result.json").unlink()
    lines = (run / "audit.jsonl").read_bytes().splitlines(keepends=True)
    del lines[MIDDLE - 1]
    with open(run / "audit.jsonl", "wb") as fh:
        fh.write(b"".join(lines))
        fh.truncate(BIG)


_BAD_UTF8 = {
    "ff": b"\xff",
    "lone-lead": b"\xc3",
    "truncated-3-byte": b"\xe2\x82",
    "surrogate": b"\xed\xa0\x80",
    "overlong": b"\xc0\xaf",
    "above-max": b"\xf4\x90\x80\x80",
}
_BAD_JSON = {
    "nul-in-string": b'"x":"a\x00b",',
    "raw-escape-in-string": b'"x":"\x1b]52;c;SGk=\x07",',
    "nul-outside": b'\x00"x":1,',
    "deep-nesting": b'"x":' + b"[" * 100_000 + b"]" * 100_000 + b",",
}
_KINDS = {"dev-zero": "a symbolic link", "fifo": "a FIFO", "big-outside": "a symbolic link", "directory": "a directory"}


def _cases() -> list[Case]:
    cases = []
    # result.json: anything but a regular file is an edit; over the cap, it cannot be read
    for how in ("dev-zero", "fifo", "big-outside", "copy-outside", "directory", "fifo-outside"):
        what = _KINDS.get(how, "a symbolic link")
        cases.append(Case(f"result.json-{how}", _replace("result.json", how), 1, ("result.json: " + what,)))
    cases.append(
        Case("result.json-big-inside", _replace("result.json", "big-inside"), 2, ("result.json", "larger than 16 MiB"))
    )
    cases.append(
        Case("result.json-not-utf8", _not_utf8("result.json", b'"status": "'), 1, ("result.json: not valid JSON",))
    )
    # audit.jsonl: without a readable log there is nothing to check
    audit_kinds = {**_KINDS, "socket": "a socket", "big-inside": "longer than 8 MiB", "missing": "no audit.jsonl"}
    hows = ("dev-zero", "fifo", "big-outside", "copy-outside", "directory", "socket", "big-inside", "missing")
    for how in (*hows, "fifo-outside"):
        what = audit_kinds.get(how, "a symbolic link")
        cases.append(Case(f"audit.jsonl-{how}", _replace("audit.jsonl", how), 2, ("audit.jsonl", what)))
    # other run files
    cases.append(Case("run.json-copy-outside", _replace("run.json", "copy-outside"), 1, ("run.json: a symbolic link",)))
    cases.append(Case("run.json-fifo", _replace("run.json", "fifo"), 1, ("run.json: a FIFO",)))
    for how in ("fifo", "dev-zero"):
        cases.append(Case(f"transcript.jsonl-{how}", _replace("transcript.jsonl", how), 1, ("transcript.jsonl: ",)))
    # screens/ and the screenshots in it
    screens = {"copy-outside": "screens: a symbolic link", "dev-zero": "screens: a symbolic link"}
    screens |= {"fifo": "screens: a FIFO", "directory": "missing", "missing": "missing from screens/"}
    for how, said in screens.items():
        cases.append(Case(f"screens-{how}", _replace("screens", how), 1, (said,)))
    for how in ("copy-outside", "dev-zero", "fifo", "directory", "fifo-outside"):
        what = _KINDS.get(how, "a symbolic link")
        cases.append(Case(f"screenshot-{how}", _in_screens(how), 1, ("screenshot {screen}", what)))
    cases.append(
        Case("screenshot-missing", _in_screens("missing"), 1, ("screenshot {screen}… is missing from screens/",))
    )
    cases.append(Case("screenshot-over-cap", _in_screens("over-cap"), 2, ("screenshot {screen}", "larger than 64 MiB")))
    cases.append(
        Case("screenshot-bomb-in-place", _in_screens("bomb-in-place"), 1, ("screenshot {screen}… was altered",))
    )
    says = ("is refused", f"claims {BOMB[0]} x {BOMB[1]} pixels")
    cases.append(Case("screenshot-bomb-rechained", _bomb_rechained, 1, says))
    cases.append(Case("screenshot-other-size-rechained", _other_size_rechained, 1, ("10 x 10", "not 1024 x 720")))
    cases.append(Case("screenshot-text-rechained", _text_as_screenshot, 1, ("not a PNG",)))
    # references that climb out of screens/
    for name, sha in (("traversal-relative", "../../etc/passwd"), ("traversal-absolute", "/etc/passwd")):
        cases.append(Case(f"screen-{name}", _traversal(sha), 1, ("a screen event without a valid sha256",)))
    # the run directory itself
    itself = {"link-to-run": "a symbolic link", "dev-zero-link": "a symbolic link", "fifo": "a FIFO"}
    itself |= {"device": "a device", "regular-file": "a regular file, not a directory"}
    for how, what in itself.items():
        cases.append(Case(f"run-dir-{how}", _path_itself(how), 2, ("not a run directory", what)))
    cases.append(Case("run-dir-empty-directory", _path_itself("empty-directory"), 2, ("no audit.jsonl",)))
    # lines: strict UTF-8 and JSON even where the chain was recomputed to match, and bounded
    for name, bad in _BAD_UTF8.items():
        key = in_line(MIDDLE, b'"kind":', b'"x' + bad + b'":1,"kind":')
        value = in_line(MIDDLE, b'"kind":"', b'"note' + bad + b'":"x","kind":"')  # a value the verifier skips
        says = (f"line {MIDDLE}: not a valid JSON record", "UTF-8")
        cases.append(Case(f"line-not-utf8-{name}-key", _rechained(key), 1, says))
        cases.append(Case(f"line-not-utf8-{name}-value", _rechained(value), 1, says))
    for name, bad in _BAD_JSON.items():
        mutate = in_line(MIDDLE, b'"kind":', bad + b'"kind":')
        cases.append(Case(f"line-{name}", _rechained(mutate), 1, (f"line {MIDDLE}: not a valid JSON record",)))
    pad = in_line(MIDDLE, b'"kind":', b'"pad":"' + b"a" * (9 * 1024**2) + b'","kind":')
    cases.append(Case("line-over-long", _rechained(pad), 2, (f"line {MIDDLE}", "longer than 8 MiB")))
    cases.append(Case("line-over-long-after-seal", _appended_long_line, 1, ("line {next_line}: appended after",)))
    cases.append(Case("line-over-long-unfinished-tail", _unfinished_long_tail, 2, ("longer than 8 MiB",)))
    cases.append(Case("line-deleted-then-huge-tail", _broken_link_then_huge_tail, 1, (f"line {MIDDLE}: ", "deleted")))
    return cases


def _damaged() -> list[Case]:
    """Damage outside the seal: verify answers 0, readers show what they can ("?" where they cannot)."""
    return [
        Case("run.json-not-utf8", _not_utf8("run.json", b'"task": "'), 0, ("intact: ",)),
        Case("run.json-big-inside", _replace("run.json", "big-inside"), 0, ("intact: ",)),
        Case("run.json-missing", _replace("run.json", "missing"), 0, ("intact: ",)),
        Case("result.json-missing", _replace("result.json", "missing"), 0, ("UNSEALED",), cell="unsealed"),
    ]


CASES: tuple[Case, ...] = tuple(_cases())
DAMAGED: tuple[Case, ...] = tuple(_damaged())
ALL: tuple[Case, ...] = CASES + DAMAGED
assert len({case.name for case in ALL}) == len(ALL)
