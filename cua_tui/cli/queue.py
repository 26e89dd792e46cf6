"""``cua-tui queue ACTION``: a team queue's schema (``init``, ``upgrade``: versioned migrations, each once, in
one transaction), its upkeep (``prune``) and who may decide what (``rule``, an admin's)."""

from __future__ import annotations

from typing import Any

import click

from .base import fail, settings
from .flags import queue_flag

ACTIONS = ("init", "upgrade", "prune", "rule")


@click.command("queue")
@click.argument("action", type=click.Choice(ACTIONS))
@click.argument("key", metavar="[RULE_OR_TIER]", required=False)
@queue_flag()
@click.option(
    "--older-than",
    metavar="AGE",
    default=None,
    help="prune: the fleets whose runs all ended this long ago or more (30d, 12h, 2w) or before a date.",
)
@click.option(
    "--even-last-copy",
    is_flag=True,
    help="prune: also the runs whose lines exist nowhere else (their worker never sealed their folder).",
)
@click.option(
    "--approvers",
    metavar="ROLE,...",
    default=None,
    help="rule: the roles that may answer such a request (a member of one may); without it, any analyst.",
)
@click.option("--quorum", type=int, default=1, show_default=True, help="rule: how many different roles must approve.")
@click.option("--escalate-after", type=float, default=None, metavar="SECONDS", help="rule: escalate after so long...")
@click.option(
    "--escalate-to", default=None, metavar="ROLE", help="rule: ...to this role's members (their terminals ring)."
)
@click.option("--list", "listing", is_flag=True, help="rule: list the rules.")
@click.option("--remove", is_flag=True, help="rule: remove the rule for RULE_OR_TIER.")
def command(
    action: str,
    key: str | None,
    older_than: str | None,
    even_last_copy: bool,
    approvers: str | None,
    quorum: int,
    escalate_after: float | None,
    escalate_to: str | None,
    listing: bool,
    remove: bool,
    **values: Any,
) -> None:
    """A team's queue in PostgreSQL: `init` makes its schema, `upgrade` brings it to this version, `prune`
    removes old finished fleets' mirrored lines and screens, `rule RULE_OR_TIER` sets who may answer such a
    requests and how many must approve (the admin role's; `--list`, `--remove`)."""
    from ..team import db, schema

    url = db.queue_url(values["queue"], settings().queue)
    rule_options = approvers is not None or quorum != 1 or escalate_after is not None or escalate_to is not None
    if action != "rule" and (key is not None or rule_options or listing or remove):
        fail(f"queue {action}: RULE_OR_TIER, --approvers, --quorum, --escalate-*, --list and --remove are rule's")
    if action == "rule":
        _rule(url, key, approvers, quorum, escalate_after, escalate_to, listing=listing, remove=remove)
        return
    if action == "prune":
        _prune(url, older_than, even_last_copy)
        return
    if older_than is not None or even_last_copy:
        fail(f"queue {action}: --older-than and --even-last-copy are prune's")
    with db.connect(url, "cua-tui queue", check_schema=False) as conn:
        try:
            before, after = schema.migrate(conn)
        except schema.SchemaError as exc:
            raise db.QueueError(f"queue {db.shown(url)}: {exc}") from None
    if before == after:
        click.echo(f"queue {db.shown(url)}: schema version {after}, up to date", err=True)
    else:
        verb = "made" if before == 0 else "upgraded"
        click.echo(f"queue {db.shown(url)}: schema {verb}: version {before} -> {after}", err=True)


def _prune(url: str, older_than: str | None, even_last_copy: bool) -> None:
    from ..team import db
    from ..team.prune import prune
    from .runs import parse_since

    if older_than is None:
        fail("queue prune needs --older-than AGE (such as 30d): what is younger stays")
    try:
        cutoff = parse_since(older_than, option="--older-than")
    except ValueError as exc:
        fail(str(exc))
    with db.connect(url, "cua-tui queue") as conn:
        done = prune(conn, cutoff, even_last_copy=even_last_copy)
    line = f"queue {db.shown(url)}: pruned {done.runs} runs of {done.fleets} finished fleets, {done.screens} screens"
    if done.kept:
        line += f"; kept {done.kept} whose lines exist nowhere else (--even-last-copy removes them too)"
    click.echo(line, err=True)


def _rule(
    url: str,
    key: str | None,
    approvers: str | None,
    quorum: int,
    escalate_after: float | None,
    escalate_to: str | None,
    *,
    listing: bool,
    remove: bool,
) -> None:
    from ..team import db, rules

    if listing:
        if key is not None or remove or approvers is not None or quorum != 1 or escalate_after or escalate_to:
            fail("queue rule --list takes nothing else")
        with db.connect(url, "cua-tui queue") as conn:
            found = rules.list_rules(conn)
        for rule in found:
            click.echo(f"{rule.line()} (set by {rule.set_by} at {rule.set_at:%Y-%m-%d %H:%M})")
        if not found:
            click.echo(f"queue {db.shown(url)}: no rules: any analyst answers any request, one answer each", err=True)
        return
    if key is None:
        fail("queue rule needs RULE_OR_TIER (such as actions.type or tier:transmission), or --list")
    if remove:
        if approvers is not None or quorum != 1 or escalate_after is not None or escalate_to is not None:
            fail("queue rule --remove takes RULE_OR_TIER alone")
        with db.connect(url, "cua-tui queue") as conn:
            gone = rules.remove_rule(conn, key)
        click.echo(f"rule {key}: {'removed' if gone else 'there was none'}", err=True)
        return
    roles = tuple(r.strip() for r in approvers.split(",") if r.strip()) if approvers is not None else None
    with db.connect(url, "cua-tui queue") as conn:
        rule, missing = rules.set_rule(conn, key, roles, quorum, escalate_after, escalate_to)
    click.echo(f"rule set: {rule.line()}", err=True)
    if missing:
        click.echo(f"note: no role {', '.join(missing)} on this server yet: nobody may answer as it", err=True)
