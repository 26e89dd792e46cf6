"""Reaching a team's queue: which URL (``--queue``, else ``CUA_TUI_QUEUE``, else the settings' ``queue``),
TLS unless the server is on this machine, one-line errors that never show a password, and the backoff
every long-lived session reconnects with (a restarting server is said once, not per attempt)."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import conninfo

from ..core.errors import UsageError
from ..core.text import visible
from . import schema

# what a session waits for the server before it gives up, unless the URL says otherwise
CONNECT_TIMEOUT_S = 5
# the longest one statement may run (a row lock held by someone else, a wedged server)
STATEMENT_TIMEOUT_MS = 15_000
# the longest a session of ours may sit inside a transaction without a statement: the server then ends it
# and frees its row locks (a worker frozen mid-transaction, SIGSTOP or a suspended VM, would otherwise hold
# them for ever, and the reaper that declares it lost would wait on them); no transaction of ours waits
# on anything but the database
IDLE_IN_TRANSACTION_MS = 10_000
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class QueueError(RuntimeError, UsageError):
    """The queue cannot be used: no URL, a URL that is refused, a server that cannot be reached, a schema
    this version cannot use. The message is one line and never holds a password."""


def queue_url(given: str | None, configured: str | None) -> str:
    """The queue's URL: the command line's, else the settings' (``CUA_TUI_QUEUE`` is read into those)."""
    url = (given or "").strip() or (configured or "").strip()
    if not url:
        raise QueueError("no queue: give --queue postgresql://... (or set CUA_TUI_QUEUE, or `queue` in the settings)")
    return url


def conninfo_for(url: str, application: str) -> str:
    """The libpq connection string for ``url``: TLS required (``sslmode=require``) unless every host is a Unix
    socket folder or this machine, or the URL names an ``sslmode`` itself; a connect timeout; the
    program's name in ``application_name`` for the server's views."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise QueueError(f"queue URL {shown(url)}: {one_line_error(exc)}") from None
    hosts = [h for h in str(params.get("host") or "").split(",") if h] or [""]
    local = all(h == "" or h.startswith("/") or h in _LOCAL_HOSTS for h in hosts)
    extra: dict[str, Any] = {"application_name": application}
    if not local and not params.get("sslmode"):
        extra["sslmode"] = "require"
    if not params.get("connect_timeout"):
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    return conninfo.make_conninfo(url, **extra)


def shown(url: str) -> str:
    """The URL as it may be shown: role, host and database; never a password."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unreadable URL)"
    user = params.get("user") or ""
    host = params.get("host") or "local socket"
    port = f":{params['port']}" if params.get("port") else ""
    db = params.get("dbname") or ""
    return visible(f"postgresql://{user}{'@' if user else ''}{host}{port}/{db}", limit=200)


# what a driver's message may quote of a connection string it could not read: a password, in either form
_SECRETS = (
    re.compile(r"(://[^:/@\s\"']*):[^@\s\"']*@"),
    re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE),
)


def one_line_error(exc: BaseException) -> str:
    """A driver's error as one line (libpq's are several, with hints), any password it quotes cut out."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    for pattern in _SECRETS:
        line = pattern.sub(lambda m: m.group(1) + (":***@" if m.group(0).endswith("@") else "***"), line)
    return visible(line, limit=300)


def connect(
    url: str, application: str, *, autocommit: bool = True, check_schema: bool = True
) -> psycopg.Connection[Any]:
    """A session on the queue, its schema made or upgraded at first use; QueueError otherwise."""
    info = conninfo_for(url, application)
    try:
        conn = psycopg.connect(info, autocommit=autocommit)
    except psycopg.Error as exc:
        raise QueueError(f"queue {shown(url)}: cannot connect: {one_line_error(exc)}") from None
    try:
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        conn.execute(f"SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}")
        if check_schema:
            schema.ensure(conn)
    except schema.SchemaError as exc:
        conn.close()
        raise QueueError(f"queue {shown(url)}: {exc}") from None
    except psycopg.Error as exc:
        conn.close()
        raise QueueError(f"queue {shown(url)}: {one_line_error(exc)}") from None
    return conn


def session_user(conn: psycopg.Connection[Any]) -> str:
    """The role the server authenticated this session as: who answers, submits or works."""
    row = conn.execute("SELECT session_user").fetchone()
    return str(row[0]) if row else ""


# the errors after which a session is made again (the server restarted, the link dropped)
LINK_ERRORS: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError)


@dataclass
class Backoff:
    """Delays between reconnection attempts: doubling from ``first`` to ``most`` seconds, with jitter so
    that many workers do not knock at once. ``say`` is told once when the link is lost and once when it
    is back."""

    say: Callable[[str], None]
    first: float = 0.2
    most: float = 5.0
    _delay: float = 0.0
    _down_since: float | None = None
    _rng: random.Random = field(default_factory=random.Random)

    def failed(self, what: str, exc: BaseException) -> float:
        """A failed attempt: the seconds to wait before the next (the first failure is said)."""
        if self._down_since is None:
            self._down_since = time.monotonic()
            self.say(f"queue: {what}: {one_line_error(exc)}; reconnecting")
            self._delay = self.first
        else:
            self._delay = min(self.most, self._delay * 2)
        return self._delay * (0.5 + self._rng.random())

    def ok(self) -> None:
        if self._down_since is not None:
            took = time.monotonic() - self._down_since
            self.say(f"queue: reconnected after {took:.1f} s")
            self._down_since = None

    @property
    def down(self) -> bool:
        return self._down_since is not None
