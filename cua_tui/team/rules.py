"""Who may decide what on a team's queue (schema version 4): the rules an admin role sets (``cua-tui queue
rule``), each for a policy rule (``actions.type``, ``regions.send``) or a tier (``tier:transmission``): the
roles that may answer such a request, how many different roles must approve it, and when it escalates to
whom. The table is writable by ``cua_tui_admin`` only; each request takes its rule as it is posted, and the
server holds every answer to it (schema.py). The trust model and the rules, for people: docs/team/rules.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from ..core.policy import APPROVER_KEY_RE, APPROVER_ROLE_RE, APPROVER_TIERS, MAX_QUORUM
from ..core.text import visible
from . import db, schema

KEY_RE = APPROVER_KEY_RE
# a role as PostgreSQL names one (63 bytes), without quoting
ROLE_RE = APPROVER_ROLE_RE
MAX_APPROVERS = 50


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule as the table holds it (``approvers`` None: any analyst)."""

    key: str
    approvers: tuple[str, ...] | None
    quorum: int
    escalate_after_s: float | None
    escalate_to: str | None
    set_by: str
    set_at: datetime

    def line(self) -> str:
        """The rule in one line, shown literally."""
        who = ", ".join(self.approvers) if self.approvers else "any analyst"
        text = f"{self.key}: {who}"
        if self.quorum > 1:
            text += f"; {self.quorum} different roles must approve"
        if self.escalate_after_s is not None:
            text += f"; escalates to {self.escalate_to} after {self.escalate_after_s:g} s"
        return visible(text, limit=400)


def check(
    key: str, approvers: tuple[str, ...] | None, quorum: int, escalate_after_s: float | None, escalate_to: str | None
) -> str | None:
    """Why a rule cannot be set (one line), or None."""
    if not KEY_RE.fullmatch(key):
        tiers = ", ".join(f"tier:{t}" for t in APPROVER_TIERS)
        return f"{visible(key, limit=80)!r} is neither a policy rule (such as actions.type) nor a tier ({tiers})"
    if approvers is not None:
        if not approvers or len(approvers) > MAX_APPROVERS:
            return f"--approvers names 1 to {MAX_APPROVERS} roles"
        bad = [r for r in approvers if not ROLE_RE.fullmatch(r)]
        if bad:
            return f"{visible(bad[0], limit=80)!r} is not a role name"
    if not 1 <= quorum <= MAX_QUORUM:
        return f"--quorum is 1 to {MAX_QUORUM}"
    if (escalate_after_s is None) != (escalate_to is None):
        return "--escalate-after and --escalate-to go together"
    if escalate_to is not None and not ROLE_RE.fullmatch(escalate_to):
        return f"{visible(escalate_to, limit=80)!r} is not a role name"
    if escalate_after_s is not None and not 0 < escalate_after_s <= 7 * 86400:
        return "--escalate-after is a number of seconds, at most a week"
    return None


def set_rule(
    conn: psycopg.Connection[Any],
    key: str,
    approvers: tuple[str, ...] | None,
    quorum: int = 1,
    escalate_after_s: float | None = None,
    escalate_to: str | None = None,
) -> tuple[Rule, list[str]]:
    """Set (or replace) the rule for ``key``; the rule as stored, and the roles it names that do not exist
    (a rule naming only those is one nobody may answer: said, not refused, as roles may come later)."""
    why = check(key, approvers, quorum, escalate_after_s, escalate_to)
    if why is not None:
        raise db.QueueError(why)
    named = [*(approvers or ()), *([escalate_to] if escalate_to else [])]
    try:
        row = conn.execute(
            "INSERT INTO cua_tui.rules (key, approvers, quorum, escalate_after_s, escalate_to) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET approvers = EXCLUDED.approvers, "
            "quorum = EXCLUDED.quorum, escalate_after_s = EXCLUDED.escalate_after_s, "
            f"escalate_to = EXCLUDED.escalate_to RETURNING {_COLUMNS}",
            (key, list(approvers) if approvers is not None else None, quorum, escalate_after_s, escalate_to),
        ).fetchone()
        missing = [
            r for r in named if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (r,)).fetchone() is None
        ]
    except psycopg.errors.InsufficientPrivilege:
        raise db.QueueError(_not_admin(conn)) from None
    assert row is not None
    return _rule(*row), missing


def remove_rule(conn: psycopg.Connection[Any], key: str) -> bool:
    """Remove the rule for ``key``; False when there was none."""
    try:
        return conn.execute("DELETE FROM cua_tui.rules WHERE key = %s RETURNING key", (key,)).fetchone() is not None
    except psycopg.errors.InsufficientPrivilege:
        raise db.QueueError(_not_admin(conn)) from None


def list_rules(conn: psycopg.Connection[Any]) -> list[Rule]:
    return [_rule(*row) for row in conn.execute(f"SELECT {_COLUMNS} FROM cua_tui.rules ORDER BY key LIMIT 10000")]


_COLUMNS = "left(key, 200), approvers[1:50], quorum, escalate_after_s, left(escalate_to, 63), left(set_by, 63), set_at"


def _rule(
    key: str, approvers: list[str] | None, quorum: int, after: float | None, to: str | None, by: str, at: datetime
) -> Rule:
    roles = tuple(visible(str(r), limit=63) for r in approvers) if approvers is not None else None
    return Rule(visible(key, limit=200), roles, int(quorum), after, to, visible(by, limit=63), at)


def _not_admin(conn: psycopg.Connection[Any]) -> str:
    with_role = visible(db.session_user(conn), limit=63)
    return f"only {schema.ADMIN_ROLE} may set who decides what; {with_role} is not a member of it"
