"""A throwaway PostgreSQL server of Debian's ``postgresql`` package, for the team queue's tests and benchmark.

``initdb`` in a temporary folder, a Unix socket only (no TCP port at all), durability off (a test server
loses nothing worth keeping); a database per test copied from a template, so tests share no state.
PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` user the package makes.
``scripts/setup.sh test`` installs the package when it is missing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

PORT = 5432  # names the socket file only: nothing listens on TCP
START_S = 60.0
LOG_TAIL = 4000


def bin_dir() -> Path:
    """The newest installed server's programs (``/usr/lib/postgresql/<major>/bin``)."""
    found = [
        p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists() and p.parent.name.isdigit()
    ]
    if not found:
        raise RuntimeError("no PostgreSQL server installed: `bash scripts/setup.sh test` installs Debian's postgresql")
    return max(found, key=lambda p: int(p.parent.name))


class PgServer:
    """One server: ``start()``, ``url(db)``, ``new_database()``, ``restart()``, ``stop()``."""

    def __init__(self) -> None:
        self.bin = bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="cua-tui-pg-"))
        # the server's user must reach its folders through this one
        self.root.chmod(0o755)
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self._numbers = itertools.count(1)
        self.role = "postgres"

    def _as_server(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv

    def _run(self, argv: list[str], timeout: float = START_S) -> None:
        done = subprocess.run(self._as_server(argv), capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-LOG_TAIL:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {done.stderr[-LOG_TAIL:]}\n{tail}")

    def start(self) -> PgServer:
        for folder in (self.data, self.socket_dir):
            folder.mkdir(mode=0o700)
        self.log.touch()
        if os.geteuid() == 0:
            for path in (self.data, self.socket_dir, self.log):
                shutil.chown(path, "postgres", "postgres")
        initdb = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", self.role]
        self._run([*initdb, "-E", "UTF8", "--locale=C", "--no-sync"])
        self._pg_ctl("start")
        return self

    def _pg_ctl(self, action: str, *more: str) -> None:
        options = (
            f"-k {self.socket_dir} -p {PORT} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            # nothing of a throwaway server's is worth background work: no vacuum, no WAL for replicas
            "-c full_page_writes=off -c autovacuum=off -c wal_level=minimal -c max_wal_senders=0"
        )
        argv = [str(self.bin / "pg_ctl"), action, "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30"]
        self._run([*argv, *more, "-o", options])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.role}@/{database}?host={self.socket_dir}&port={PORT}"

    def new_database(self, template: str = "template1") -> str:
        """A database of its own for one test (a copy of ``template``); its URL."""
        import psycopg

        name = f"test_{next(self._numbers)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.url(name)

    def restart(self) -> None:
        """Stop (fast: open sessions are ended) and start again, as an operator's restart does."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run([str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", "-w"], timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)
