"""A long-lived process's sessions on the queue: a small pool, and one way to run a statement through a
server that may restart (retried with backoff, said once, for statements that are safe to repeat)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from . import db

# The pool logs every failed attempt (several lines each, the socket path in them) through Python's
# last-resort handler, on stderr: a restarting server is said once, by the link's own backoff, instead.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

T = TypeVar("T")


class Stopped(RuntimeError):
    """The process is stopping: the statement was not (or no longer) tried."""


class Link:
    """Sessions on the queue for one process: ``call(fn)`` runs ``fn(conn)`` in a transaction of a pooled
    session. A lost link (the server restarting, the network) is retried with backoff until ``stop`` is
    set or ``patience`` seconds pass; ``say`` hears when it went and when it came back."""

    def __init__(self, url: str, application: str, *, size: int, say: Callable[[str], None]) -> None:
        self.url = url
        self.info = db.conninfo_for(url, application)
        self.backoff = db.Backoff(say)
        self._backoff_lock = threading.Lock()
        self.stop = threading.Event()
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.info,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=max(2, size),
            open=False,
            check=ConnectionPool.check_connection,
            configure=_configure,
            timeout=db.CONNECT_TIMEOUT_S,
            reconnect_timeout=0,
            name=application,
        )

    def open(self) -> None:
        """Open the pool once one session works (QueueError otherwise: the caller says it and exits)."""
        conn = db.connect(self.url, "cua-tui")  # the schema, made or checked once
        conn.close()
        self.pool.open(wait=True, timeout=db.CONNECT_TIMEOUT_S * 2)

    def close(self) -> None:
        self.stop.set()
        self.pool.close(timeout=2)

    def call(
        self,
        fn: Callable[[psycopg.Connection[Any]], T],
        what: str,
        *,
        patience: float | None = None,
        cancel: threading.Event | None = None,
    ) -> T:
        """``fn(conn)`` in one transaction; on a lost link, again (``fn`` must be safe to repeat: a statement
        whose commit was lost may have happened). Raises Stopped when told to stop, the last link error
        once ``patience`` runs out or ``cancel`` is set, and any other error at once."""
        import time

        started = time.monotonic()
        while True:
            if self.stop.is_set():
                raise Stopped(what)
            try:
                with self.pool.connection() as conn, conn.transaction():
                    result = fn(conn)
                with self._backoff_lock:
                    self.backoff.ok()
                return result
            except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
                with self._backoff_lock:
                    delay = self.backoff.failed(what, exc)
                if patience is not None and time.monotonic() - started + delay > patience:
                    raise
                if (cancel or self.stop).wait(delay):
                    if cancel is not None and cancel.is_set():
                        raise
                    raise Stopped(what) from None


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute(f"SET statement_timeout = {db.STATEMENT_TIMEOUT_MS}")
    conn.execute(f"SET idle_in_transaction_session_timeout = {db.IDLE_IN_TRANSACTION_MS}")
