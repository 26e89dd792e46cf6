"""The worker's copy of its runs into the database: every audit line with its exact bytes, and each screen
once by SHA-256, so that a run can be verified (and replayed) from the database alone once its worker is
gone. The run's folder stays the authority: the mirror reads the lines the run wrote (never a second,
in-memory copy that could differ or grow without bound), so a server that restarts only delays it.

A private stretch's screens (a takeover's typing kept from the model) are never copied; their lines are,
as the chain needs them.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import psycopg

from ..core.rundir import RunDir
from .link import Link, Stopped

# read of a run's log per pass (lines beyond wait for the next pass)
CHUNK = 4 * 1024 * 1024
# an audit line longer than this is not a record this program wrote: the run is not mirrored further
LINE_CAP = 8 * 1024 * 1024
SCREEN_CAP = 64 * 1024 * 1024
# run.json as the run wrote it (its task, policy, limits, versions): far above its few kilobytes
RUN_JSON_CAP = 1024 * 1024
PASS_S = 0.25


class _Line(msgspec.Struct):
    seq: int
    kind: str
    sha256: str | None = None
    private: bool | None = None
    phase: str | None = None
    turn: int | None = None


_decode_line = msgspec.json.Decoder(_Line).decode


@dataclass
class _Tail:
    run_id: str
    path: Path
    offset: int = 0
    next_seq: int = 0
    private: bool = False
    phase: str = ""
    turn: int = 0
    steps: int = 0
    done: bool = False  # the run sealed: once caught up, dropped
    info_sent: bool = False  # run.json copied (with the first lines: the run writes it before them)
    broken: str = ""
    caught_up: threading.Event = field(default_factory=threading.Event)


class Mirror:
    """One thread copying every run this worker has going (``add`` one as it starts, ``close`` it once
    sealed, ``flush`` to wait until it is copied)."""

    def __init__(self, link: Link, say: Any) -> None:
        self.link = link
        self.say = say
        self._tails: dict[str, _Tail] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cua-team-mirror", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, run_id: str, path: Path) -> None:
        with self._lock:
            self._tails[run_id] = _Tail(run_id, path)

    def wake(self) -> None:
        self._wake.set()

    def close(self, run_id: str, timeout: float) -> bool:
        """The run is sealed: copy what is left; True once all of it is in the database."""
        with self._lock:
            tail = self._tails.get(run_id)
        if tail is None:
            return True
        tail.done = True
        self._wake.set()
        return tail.caught_up.wait(timeout)

    def _loop(self) -> None:
        while not self.link.stop.is_set():
            self._wake.wait(PASS_S)
            self._wake.clear()
            with self._lock:
                tails = list(self._tails.values())
            for tail in tails:
                try:
                    self._copy(tail)
                except Stopped:
                    return
                except Exception as exc:  # a mirror that fails must not stop the run: said, tried again
                    self.say(f"queue: mirroring run {tail.run_id}: {type(exc).__name__}: {exc}")
                    continue
                if tail.done and tail.caught_up.is_set():
                    with self._lock:
                        self._tails.pop(tail.run_id, None)

    def _copy(self, tail: _Tail) -> None:
        if tail.broken:
            tail.caught_up.set()
            return
        # sealed before this read: then what the read finds is all there is
        finishing = tail.done
        chunk = _read_from(RunDir(tail.path, tail.run_id).audit, tail.offset)
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            if len(chunk) >= CHUNK:
                tail.broken = f"a line longer than {CHUNK:,} bytes at offset {tail.offset}"
                self.say(f"queue: run {tail.run_id} is not mirrored further: {tail.broken}")
            if finishing:
                tail.caught_up.set()
            return
        rows: list[tuple[str, int, bytes]] = []
        screens: list[str] = []
        for raw in chunk[:end].split(b"\n")[:-1]:
            try:
                line = _decode_line(raw)
            except msgspec.DecodeError:
                tail.broken = f"line {tail.next_seq} is not a record"
                break
            if line.seq != tail.next_seq:
                tail.broken = f"line {line.seq} where {tail.next_seq} was due"
                break
            rows.append((tail.run_id, line.seq, raw))
            tail.next_seq += 1
            _note(tail, line, screens)
        if tail.broken:
            self.say(f"queue: run {tail.run_id} is not mirrored further: {tail.broken}")
        if rows:
            pngs = {sha: png for sha in dict.fromkeys(screens) if (png := _screen(tail.path, sha)) is not None}
            info = None if tail.info_sent else _run_json(tail.path)

            def write(conn: psycopg.Connection[Any]) -> None:
                store_screens(conn, tail.run_id, pngs)
                if info is not None:
                    # its exact bytes, as the folder has them: replay and export read it as they read a folder's
                    conn.execute("UPDATE cua_tui.runs SET run_json = %s WHERE id = %s", (info, tail.run_id))
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO cua_tui.events (run_id, seq, line) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        rows,
                    )
                    cur.execute(
                        "UPDATE cua_tui.runs SET mirrored = greatest(mirrored, %s), phase = %s, turn = %s, steps = %s "
                        "WHERE id = %s",
                        (tail.next_seq, tail.phase, tail.turn, tail.steps, tail.run_id),
                    )

            self.link.call(write, f"mirroring run {tail.run_id}")
            tail.offset += sum(len(r[2]) + 1 for r in rows)
            tail.info_sent = True
        if finishing and (tail.broken or len(chunk) == end):
            # every line the run wrote is in
            tail.caught_up.set()


def _note(tail: _Tail, line: _Line, screens: list[str]) -> None:
    """What a line tells the run's row and the screen store."""
    if line.kind == "takeover_private" and line.private is not None:
        tail.private = line.private
    elif line.kind == "screen" and line.sha256 and not tail.private:
        screens.append(line.sha256)
    elif line.kind == "phase" and line.phase:
        tail.phase = line.phase[:64]
    elif line.kind == "model_turn" and line.turn is not None:
        tail.turn = line.turn
    elif line.kind == "executing":
        tail.steps += 1


def store_screens(conn: psycopg.Connection[Any], run_id: str, pngs: dict[str, bytes]) -> None:
    """Each screen once (by SHA-256), and which run shows it."""
    if not pngs:
        return
    with conn.cursor() as cur:
        cur.execute("SELECT sha256 FROM cua_tui.screens WHERE sha256 = ANY(%s)", (list(pngs),))
        have = {row[0] for row in cur.fetchall()}
        missing = [(sha, png) for sha, png in pngs.items() if sha not in have]
        if missing:
            cur.executemany("INSERT INTO cua_tui.screens (sha256, png) VALUES (%s, %s) ON CONFLICT DO NOTHING", missing)
        cur.executemany(
            "INSERT INTO cua_tui.run_screens (run_id, sha256) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            [(run_id, sha) for sha in pngs],
        )


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(CHUNK)
    except FileNotFoundError:
        return b""


def _run_json(run_dir: Path) -> bytes | None:
    with contextlib.suppress(OSError):
        with open(RunDir(run_dir, run_dir.name).run_json, "rb") as fh:
            data = fh.read(RUN_JSON_CAP + 1)
        if len(data) <= RUN_JSON_CAP:
            return data
    return None


def _screen(run_dir: Path, sha: str) -> bytes | None:
    if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
        return None
    with contextlib.suppress(OSError):
        with open(RunDir(run_dir, run_dir.name).screens.folder / f"{sha}.png", "rb") as fh:
            data = fh.read(SCREEN_CAP + 1)
        if len(data) <= SCREEN_CAP:
            return data
    return None
