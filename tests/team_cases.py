"""What the team queue's tests share (tests/test_team_queue.py, tests/tui/test_fleet_team.py): the session's
PostgreSQL server made ready once (the analysts' roles, a database with the schema to copy for each test),
sessions as a role, a fleet's spec and settings, and a wait on a database read."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
from fleet_cases import FORM

from cua_tui.config import Settings
from cua_tui.team import db
from cua_tui.team.payload import Policy, Spec
from cua_tui.team.submit import submit
from tests.fakes.pgserver import PgServer

WAIT_S = 60.0
TEMPLATE = "queue_template"
ANALYSTS = ("alice", "bob", "carol")
# alice and bob may approve payments; carol is an analyst who is not in that group; root an admin
GROUPS = {"payments": ("alice", "bob")}
ADMINS = ("root_admin",)

# the same field typed into twice, each asked: a on the first grants the field's typing (the second is not
# asked then); under a two-person rule, two requests of one run
TWICE = {
    "turns": [
        {
            "actions": [
                {"type": "click", "x": 250, "y": 182},
                {"type": "type", "text": "cua-tui"},
                {"type": "type", "text": " verified"},
                {"type": "click", "x": 550, "y": 182},
            ]
        }
    ],
    "final_text": "done",
}


def ready(server: PgServer) -> PgServer:
    """The server with the analysts' login roles (members of cua_tui_analyst) and a database holding the
    schema, which each test copies (``server.new_database(TEMPLATE)``). Once per server, whoever asks."""
    with psycopg.connect(server.url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (TEMPLATE,)).fetchone() is not None:
            return server
        for role in (*ANALYSTS, *ADMINS):
            conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute("CREATE ROLE cua_tui_analyst NOLOGIN")
        conn.execute("CREATE ROLE cua_tui_admin NOLOGIN")
        conn.execute(f"GRANT cua_tui_analyst TO {', '.join(ANALYSTS)}")
        conn.execute(f"GRANT cua_tui_admin TO {', '.join(ADMINS)}")
        for group, members in GROUPS.items():
            conn.execute(f"CREATE ROLE {group} NOLOGIN")
            conn.execute(f"GRANT {group} TO {', '.join(members)}")
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    with db.connect(server.url(TEMPLATE), "test"):
        pass  # the schema, made once
    return server


def as_role(url: str, role: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)


def spec(name: str, script: dict[str, Any] = FORM, *, extra_policy: str = "", **more: Any) -> Spec:
    """A sim run of ``script`` under the built-in policy (``extra_policy``: TOML added to its text)."""
    from cua_tui.core.policy import Policy as RunPolicy

    policy = RunPolicy.default()
    if extra_policy:
        policy = RunPolicy.from_toml(policy.text + "\n" + extra_policy, source="test")
    return Spec(
        name=name, task="fill the form", backend="sim", agent="script", script=script,
        policy=Policy(policy.text, policy.sha256), **more,
    )  # fmt: skip


def settings(tmp: Path) -> Settings:
    return Settings.load({"CUA_TUI_CONFIG": str(tmp / "none.toml"), "CUA_TUI_RUNS_DIR": str(tmp / "runs")})


def wait_for(what: str, check: Any, timeout: float = WAIT_S) -> Any:
    """Poll ``check`` (a database read) until it gives something truthy."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def one(url: str, sql: str, *args: Any) -> Any:
    # a statement waiting on another session's locks gives up, as the project's own sessions do
    with psycopg.connect(url, autocommit=True, options="-c statement_timeout=15000") as conn:
        row = conn.execute(sql, args).fetchone()
    return row[0] if row is not None else None


def posted(
    url: str,
    texts: dict[str, str] | None = None,
    *,
    rule: str = "",
    label: str = "",
    approvers: list[str] | None = None,
    quorum: int | None = None,
    kind: str = "action",
) -> int:
    """A run and one of its requests, written as a worker writes them (``rule`` and ``label``: its policy
    rule and tier in its body; ``approvers`` and ``quorum``: what its task's policy narrows them to; ``kind``
    what is asked)."""
    done = submit(url, [spec("a")], tasks_sha256="0" * 64, name="t")
    run_id = done.runs[0][1]
    body = json.dumps({"rule": rule, "label": label} if rule or label else {})
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO cua_tui.requests (run_id, fleet_id, turn, index, kind, seq, body, content_sha256, texts, "
            "tier, approvers, quorum) VALUES (%s, %s, 1, 1, %s, 7, %s, repeat('a', 64), %s, 1, %s, %s) "
            "RETURNING id",
            (run_id, done.fleet_id, kind, body, json.dumps(texts) if texts else None, approvers, quorum or 1),
        ).fetchone()
    assert row is not None
    return int(row[0])
