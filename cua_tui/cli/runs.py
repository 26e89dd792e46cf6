"""``cua-tui runs``: the runs in the runs directory, newest first, each with its chain checked.

The runs are read by core/runlist.py (every run directory is untrusted: read through core/safeio, its chain
through core/audit's verifier); here are the options, the table and its cells, each shown literally.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import click

from ..core.events import RunStatus
from ..core.runlist import JSON_KEYS as JSON_KEYS
from ..core.runlist import RunEntry as RunEntry
from ..core.runlist import read_runs as read_runs
from .base import fail, settings
from .flags import flag, queue_flag

# every way a run ends, and ``unfinished`` (no result.json: running, or stopped before its seal)
STATUSES = (*(status.value for status in RunStatus), "unfinished")
# How each run ended first, then whether its record vouches for it (core/ending.py: status, record,
# checked in, one meaning each); then what every command takes (RUN).
HEADER = (
    "STATUS",
    "RECORD",
    "RUN",
    "STARTED",
    "DURATION",
    "TASK",
    "BACKEND",
    "AGENT",
    "CHECKED IN",
    "REASON",
    "STEPS",
    "DECISIONS",
)
# widest a cell may be; the SHRINKABLE columns shrink further to fit a terminal, down to
# SHRINK_FLOOR
LIMITS = (26, 24, 40, 16, 9, 40, 12, 32, 28, 48, 6, 9)
SHRINKABLE = ("TASK", "AGENT", "REASON", "FLEET")
# Where shrinking is not enough (80 columns cannot hold them all), these go, first first; STATUS,
# RECORD, RUN (what every command takes) and TASK always stay, and FLEET (which task of its fleet a run
# is) outlasts the others. `--json` and a wider terminal show them all.
HIDE_ORDER = ("BACKEND", "DECISIONS", "STEPS", "CHECKED IN", "DURATION", "AGENT", "STARTED", "REASON", "FLEET")
# the FLEET column (fleet id / task name), shown when a listed run belongs to a fleet
FLEET_LIMIT = 48
SHRINK_FLOOR = 12
# A fleet id (`fleet-YYYYMMDD-HHMMSS-xxxxxx`) cut to fit: `fleet-` goes first, then the date, then the time;
# the six-character tail that tells fleets apart stays.
_FLEET_ID = re.compile(r"^(fleet-)?(\d{8}-)?(\d{6}-)?([0-9a-f]{6})$")
FLEET_TAIL = 6
FLEET_NAME_KEPT = 16  # a fleet's task's name is cut only past this many characters, and only when it must
# the least a cell can be cut to and still say something ("ab…")
MIN_CELL = 3
# where a runs directory named is none: where the folder comes from
ELSEWHERE = "--runs-dir names the folder of run directories (default: CUA_TUI_RUNS_DIR, else the settings' runs_dir)"
_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def row_cells(entry: RunEntry) -> tuple[str, ...]:
    """A run's table row, before it is made literal and cut to width."""
    from ..core.describe import agent_name
    from ..core.ending import checked_in, record_words

    said = entry.verifier
    where = "-" if said is None else checked_in(said["where"] or "", said["user"] or "", short=True)
    agent = "/".join(part for part in (agent_name(entry.agent), entry.model) if part) or "-"
    record = "-" if entry.verified is None else record_words(entry.verified)
    if entry.verified == "unsealed" and entry.unknown_outcomes:
        record = f"unsealed, {entry.unknown_outcomes} unknown"
    return (
        entry.headline().text,
        record,
        entry.id,
        _local(entry.started_at),
        _duration(entry.duration),
        entry.task if entry.task is not None else "?",
        entry.backend or "-",
        agent,
        where,
        entry.reason or "",
        "-" if entry.steps is None else str(entry.steps),
        "-" if entry.decisions is None else str(entry.decisions),
    )


def _local(epoch: float | None) -> str:
    return "?" if epoch is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def _queued(queue: str, fleet_id: str | None) -> tuple[Path, list[RunEntry]]:
    """A team's runs (``--queue``), as the table's entries; one line and exit 2 when the queue cannot be read."""
    from ..team import db
    from ..team.listing import team_runs

    url = db.queue_url(queue, settings().queue)
    try:
        with db.connect(url, "cua-tui runs") as conn:
            return Path(db.shown(url)), team_runs(conn, fleet_id)
    except db.LINK_ERRORS as exc:
        fail(f"queue {db.shown(url)}: {db.one_line_error(exc)}")


def runs_in(runs_dir: Path | None, *, check: bool) -> tuple[Path, list[RunEntry] | None]:
    """The runs directory (``--runs-dir``, else the settings') and its runs; None when the settings' folder
    does not exist yet (no run was made). A ``--runs-dir`` that does not exist, or anything that is not a
    readable folder (a file, a FIFO), is a usage error."""
    from ..core.safeio import RunFileError, RunFolder
    from ..core.text import visible
    from .verified import NAME, Cache, KeyRefused, cache_key

    where = settings()
    folder = runs_dir or where.runs_dir
    cache = None
    if check:
        key: bytes | None = None
        if where.cache_dir is not None:
            try:
                key = cache_key(where.config_dir, where.cache_dir)
            except KeyRefused as exc:
                # the listing stays right, only slower: every run verified, nothing remembered
                click.echo(f"note: {visible(str(exc))}; every run is verified, none remembered", err=True)
        cache = Cache(where.cache_dir / NAME if where.cache_dir is not None else None, key)
    try:
        top = RunFolder.open(folder, follow_link=True)
    except RunFileError as exc:
        if exc.reason == "missing" and runs_dir is not None:
            # a folder named on purpose: a typo must not read as "no runs"
            fail("no such runs directory", path=folder, hint=ELSEWHERE)
        if exc.reason != "missing":
            # a file, a FIFO, a folder it may not read: not "no runs"
            fail(f"not a runs directory ({exc.detail})", path=folder, hint=ELSEWHERE)
        return folder, None
    with top:
        found = read_runs(top, check=check, cache=cache)
    if cache is not None:
        cache.save()
    return folder, found


def since_option(since: str | None) -> float | None:
    """``--since`` as epoch seconds (None: not given); a usage error when it cannot be read."""
    try:
        return parse_since(since) if since is not None else None
    except ValueError as exc:
        fail(str(exc))


# ------------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------------
def parse_since(text: str, now: float | None = None, option: str = "--since") -> float:
    """``--since``: a relative age (``90s``, ``30m``, ``2h``, ``3d``, ``1w``) or an ISO 8601 date or date
    and time (``2026-12-01``, ``2026-12-01T14:00``, ``2026-12-01 14:00+01:00``; local time when no offset
    is given). Returns epoch seconds; ValueError with a one-line reason otherwise."""
    text = text.strip()
    relative = _RELATIVE.match(text.lower())
    if relative:
        return (time.time() if now is None else now) - float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{option} {text!r}: expected an age such as 30m, 2h, 3d or 1w, or an ISO date/time such as "
            f"2026-12-01 or 2026-12-01T14:00"
        ) from None
    return when.timestamp() if when.tzinfo else when.astimezone().timestamp()


def _keep(entry: RunEntry, statuses: tuple[str, ...], since: float | None, fleet: str | None = None) -> bool:
    if statuses and entry.status not in statuses:
        return False
    if fleet is not None and entry.fleet != fleet:
        return False
    return since is None or (entry.started_at is not None and entry.started_at >= since)


# ------------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------------
def table(entries: list[RunEntry], width: int | None = None) -> list[str]:
    """The header and one line per run (see ``layout``)."""
    return layout(entries, width)[0]


def fleet_forms(fleet: str) -> list[str]:
    """A fleet id (made visible), from whole to shortest: ``fleet-`` dropped, then the date, then the
    time; never its six-character tail. An id of another shape keeps its last six characters."""
    match = _FLEET_ID.match(fleet)
    if match is None:
        return [fleet, "…" + fleet[-FLEET_TAIL:]] if len(fleet) > FLEET_TAIL + 1 else [fleet]
    _prefix, date, clock, tail = match.groups()
    forms = [fleet, f"{date or ''}{clock or ''}{tail}", f"{clock or ''}{tail}", tail]
    return list(dict.fromkeys(forms))  # in order, each once


def fleet_cell(fleet: str, name: str | None, width: int, drop: int | None = None) -> str:
    """The FLEET cell (``<fleet id>/<task's name>``, both made visible) in at most ``width`` characters:
    the fleet id shortened first (``fleet_forms``; ``drop`` of its forms dropped, None: as few as fit),
    the task's name kept whole while it can be, and cut only when the fleet's tail leaves it no room."""
    from ..core.text import truncate

    forms = fleet_forms(fleet)
    if drop is None:
        drop = next((k for k, form in enumerate(forms) if len(_joined(form, name)) <= width), len(forms))
    form = forms[min(drop, len(forms) - 1)]
    cell = _joined(form, name)
    if len(cell) <= width:
        return cell
    if name is None or width - len(form) - 1 < MIN_CELL:
        return truncate(cell, width)
    return f"{form}/{truncate(name, width - len(form) - 1)}"


def _joined(form: str, name: str | None) -> str:
    return form if name is None else f"{form}/{name}"


def fleet_drop(fleets: list[tuple[str, str | None]], width: int) -> int:
    """How many of its forms every fleet id of a column drops, so that the column's cells fit ``width``
    with their task's names whole (one form for the whole column: a fleet reads the same on every row)."""
    most = max((len(fleet_forms(fleet)) for fleet, _name in fleets), default=1)
    for drop in range(most):
        if all(len(_joined(fleet_forms(f)[min(drop, len(fleet_forms(f)) - 1)], n)) <= width for f, n in fleets):
            return drop
    return most - 1


def hidden_note(hidden: list[str], width: int) -> str:
    """The note (on stderr) naming the columns hidden, in at most ``width`` characters: their names
    where they fit, else how many."""
    from ..core.text import truncate

    count = f"{len(hidden)} column{'s' if len(hidden) != 1 else ''}"
    for note in (
        f"note: {', '.join(hidden)} hidden to fit {width} columns; --json or a wider terminal shows them",
        f"note: {', '.join(hidden)} hidden; --json or a wider terminal shows them",
        f"note: {count} hidden to fit ({', '.join(hidden)}); --json shows them",
        f"note: {count} hidden to fit {width} columns; --json or a wider terminal shows them",
        f"note: {count} hidden; --json shows them",
    ):
        if len(note) <= width:
            return note
    return truncate(f"note: {count} hidden", width)


# the colour of a STATUS or RECORD cell's tone on a terminal (core/ending.py: green only for a passed run
# on an intact, sealed record; a claim in the warning colour)
_TONE_COLOUR = {"good": "green", "bad": "red", "claim": "yellow"}


def _painted(cell: str, tone: str) -> str:
    """A cell in its tone's colour (click.echo drops the colour where the output is not a terminal)."""
    colour = _TONE_COLOUR.get(tone)
    return click.style(cell, fg=colour, bold=tone != "good") if colour else cell


def layout(entries: list[RunEntry], width: int | None = None, *, colour: bool = False) -> tuple[list[str], list[str]]:
    """The header and one line per run, every cell made literal (core/text.visible) and cut to its limit;
    and the columns hidden. With ``width`` (a terminal's) no line is wider: TASK, AGENT, REASON and FLEET
    shrink (widest first, down to SHRINK_FLOOR; FLEET by shortening the fleet id, keeping the task's
    name), and where that is not enough the columns of HIDE_ORDER go, first first, rather than every cell
    being cut to nothing; on a terminal too narrow even for the columns that stay, TASK is cut further
    and then each line. ``colour``: STATUS and RECORD in their colours (``_painted``)."""
    from ..core import ending
    from ..core.text import truncate, visible

    raw = [row_cells(entry) for entry in entries]
    limits = list(LIMITS)
    header: tuple[str, ...] = HEADER
    fleets: list[tuple[str, str | None] | None] = []
    if any(entry.fleet is not None for entry in entries):
        # runs of a fleet: which one, and which task
        header = (*HEADER, "FLEET")
        limits.append(FLEET_LIMIT)
        for entry in entries:
            name = None if entry.fleet_task is None else visible(entry.fleet_task, limit=80)
            fleets.append(None if entry.fleet is None else (visible(entry.fleet, limit=80), name))
        raw = [(*cells, "-" if f is None else fleet_cell(*f, 10_000)) for cells, f in zip(raw, fleets, strict=True)]
    texts = [tuple(visible(c) for c in row) for row in raw]
    natural = [max([len(header[i]), *(min(len(r[i]), limits[i]) for r in texts)]) for i in range(len(header))]
    shown = list(range(len(header)))
    hidden: list[str] = []
    widths = dict(enumerate(natural))
    if width is not None:
        floor = {i: min(natural[i], SHRINK_FLOOR) if header[i] in SHRINKABLE else natural[i] for i in shown}
        if fleets:
            # the FLEET cell keeps the fleet's tail and the task's name (up to FLEET_NAME_KEPT)
            kept = max((len(f[1] or "") for f in fleets if f is not None), default=0)
            fleet_at = header.index("FLEET")
            floor[fleet_at] = min(natural[fleet_at], max(len("FLEET"), FLEET_TAIL + 1 + min(kept, FLEET_NAME_KEPT)))

        def need(columns: list[int], sizes: dict[int, int]) -> int:
            return sum(sizes[i] for i in columns) + 2 * (len(columns) - 1)

        for name in HIDE_ORDER:
            # a column goes before a shrinkable one would be cut below SHRINK_FLOOR
            if need(shown, floor) <= width:
                break
            if name in header:
                shown.remove(header.index(name))
                hidden.append(name)
        excess = need(shown, widths) - width
        while excess > 0:
            # one character at a time off the widest shrinkable column: they end up even
            cuttable = [i for i in shown if widths[i] > floor[i]]
            if not cuttable:
                break
            widths[max(cuttable, key=lambda i: widths[i])] -= 1
            excess -= 1
        task = header.index("TASK")
        if excess > 0:
            # narrower than the columns that always stay: TASK gives what it can, then each line is cut
            cut = min(excess, widths[task] - max(len("TASK"), MIN_CELL))
            widths[task] -= max(cut, 0)

    drop = 0
    if fleets:
        room = min(limits[-1], widths[len(header) - 1])
        drop = fleet_drop([f for f in fleets if f is not None], room)

    def fit(row: tuple[str, ...], i: int, at: int) -> str:
        room = min(limits[i], widths[i])
        fleet = fleets[at] if header[i] == "FLEET" else None
        return truncate(row[i], room) if fleet is None else fleet_cell(*fleet, room, drop)

    # each row's tones: its STATUS cell's and its RECORD cell's
    tones = [{0: e.headline().tone.value, 1: ending.record_tone(e.record).value} for e in entries]
    rows: list[tuple[tuple[str, ...], dict[int, str]]] = [(tuple(header[i] for i in shown), {})]
    rows += [(tuple(fit(r, i, at) for i in shown), tones[at]) for at, r in enumerate(texts)]
    lines: list[str] = []
    for cells, tone in rows:
        columns = list(zip(cells, shown, strict=True))
        line = "  ".join(cell.ljust(widths[i]) for cell, i in columns).rstrip()
        if width is not None and len(line) > width:
            lines.append(truncate(line, width))  # no room for even the columns that stay
            continue
        if colour:
            line = "  ".join(_painted(cell, tone.get(i, "")) + " " * (widths[i] - len(cell)) for cell, i in columns)
        lines.append(line.rstrip())
    return lines, hidden


@click.command("runs")
@flag("runs_dir")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES, case_sensitive=False),
    help="Only runs that ended so (repeat for several); unfinished: no result.json (running or interrupted).",
)
@click.option(
    "--since", default=None, metavar="WHEN", help="Only runs started since WHEN: 30m, 2h, 3d, 1w or an ISO date/time."
)
@click.option("--fleet", "fleet_id", default=None, metavar="ID", help="Only the runs of this fleet (`cua-tui fleet`).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array (keys documented in the README).")
@click.option("--no-check", is_flag=True, help="Skip checking each run's record (RECORD and DECISIONS show -).")
@queue_flag("A team's queue (postgresql://...): its runs, on every worker, from the database (RECORD is -).")
def command(
    runs_dir: Path | None,
    statuses: tuple[str, ...],
    since: str | None,
    fleet_id: str | None,
    as_json: bool,
    no_check: bool,
    queue: str | None,
) -> None:
    """List runs, newest first: how each ended (STATUS) and its record first, then its id, start (local
    time), duration, task, backend, agent/model, where its status was checked, the reason, steps and
    decisions (not made by the policy).

    RECORD is the audit log as `cua-tui verify` finds it: intact (and sealed), unsealed (interrupted;
    with the number of actions whose outcome is unknown), TAMPERED or unusable. Unless it is intact the
    STATUS is the run's claim (claimed: passed). CHECKED IN says where the task's verifier ran: the
    controller or inside the sandbox (its own word), and as which user. FLEET (shown when a listed run
    belongs to a fleet) is the fleet id and the task's name."""
    from ..core.text import visible

    since_at = since_option(since)
    found: list[RunEntry] | None
    if queue is not None:
        folder, found = _queued(queue, fleet_id)
    else:
        folder, found = runs_in(runs_dir, check=not no_check)
    if found is None and not as_json:
        # the settings' folder, not made yet
        click.echo(f"no runs yet in {visible(str(folder))}")
        return
    entries = found or []
    wanted = tuple(s.lower() for s in statuses)
    entries = [e for e in entries if _keep(e, wanted, since_at, fleet_id)]
    entries.sort(key=lambda e: (e.started_at or 0.0, e.id), reverse=True)
    if not entries and not as_json:
        filtered = bool(wanted) or since_at is not None or fleet_id is not None
        click.echo(f"no runs in {visible(str(folder))}" + (" match the filters" if filtered else ""))
        return
    if as_json:
        # ensure_ascii: every character beyond ASCII (C1 controls such as U+009B included) leaves
        # escaped
        click.echo(json.dumps([e.as_json() for e in entries], ensure_ascii=True, indent=2))
        return
    terminal = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if terminal else None
    lines, hidden = layout(entries, width, colour=terminal and not os.environ.get("NO_COLOR"))
    for line in lines:
        click.echo(line)
    if hidden and width is not None:  # on stderr: stdout stays the table
        click.echo(hidden_note(hidden, width), err=True)
