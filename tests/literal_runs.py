"""Run strings that are markup and terminal escapes, and a hostile run directory carrying them (issue #20,
point 8), for the tests that every view shows them literally (tests/tui/test_literal_strings.py, and
tests/e2e/test_tmux_replay_follow.py through a real terminal).

``recorded`` makes a real run (the one builder, the sim desktop, a script agent) whose task, model text,
final text and a malformed action's kind carry ``HOSTILE``; ``forged`` copies it as a hostile sandbox could
have written it (refused egress to such a host, a desktop error, the verifier's detail and the end reason,
run.json's policy name and allowed hosts), leaving the end to ``finish`` so that a follower sees it arrive.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from cua_tui.build import RunOptions, build_run
from cua_tui.core.audit import AuditWriter
from cua_tui.core.rundir import write_json_atomic
from cua_tui.core.text import visible

# Markup that raises when parsed ([/]), a link that would quit the App, a style, a screen clear, an
# OSC 52 clipboard write, and characters a terminal draws as nothing (a zero-width space, a soft hyphen, a
# Unicode tag, a variation selector: issue #34). No spaces: one token, found whole however a pane wraps it.
INVISIBLE = "\u200b\u00ad\U000e0041\ufe0f"
HOSTILE = "[/][@click=app.quit]q[/][red]r[/red]\x1b[2J\x1b]52;c;aGk=\x07" + INVISIBLE
MARKUP = "[/][@click=app.quit]q[/][red]r[/red]"  # its markup, shown where the string is cut short
SHOWN = visible(HOSTILE)  # "[/][@click=app.quit]q[/][red]r[/red]␛[2J␛]52;c;aGk=␇\u200b\xad\U000e0041\ufe0f"
# an event in full is its JSON: control characters as \u001b escapes, the rest made visible
IN_JSON = visible(json.dumps(HOSTILE, ensure_ascii=False)[1:-1])
FIELD = (250, 182)  # the sim form's phrase field


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def recorded(folder: Path) -> Path:
    """A real run (the builder, the sim desktop, a script agent) of a hostile task whose model text, final
    text and a malformed action's kind carry the string."""
    turn = {"text": HOSTILE, "actions": [click(FIELD), {"type": "type", "text": HOSTILE}, {"type": HOSTILE}]}
    options = RunOptions(
        task=HOSTILE,
        backend="sim",
        agent=None,
        script={"turns": [turn], "final_text": HOSTILE},
        runs_dir=folder / "runs",
        decisions="approve",
        fsync=False,
    )
    return build_run(options).run().path


def forged(real: Path, folder: Path) -> tuple[Path, list[tuple[str, dict[str, Any]]], AuditWriter]:
    """``real`` as a hostile sandbox could have made it: refused egress to a host, a desktop error, the
    verifier's detail and the end reason carry the string, and run.json's policy name and allowed hosts.
    The events up to the verifier's are written (the writer left open); the rest are returned, to append."""
    folder.mkdir(parents=True)
    shutil.copytree(real / "screens", folder / "screens")
    info = json.loads((real / "run.json").read_text())
    info["policy"]["name"] = HOSTILE
    info["allow_domains"] = [HOSTILE]
    write_json_atomic(folder / "run.json", info)
    records: list[tuple[str, dict[str, Any]]] = []
    for line in (real / "audit.jsonl").read_text().splitlines():
        record = json.loads(line)
        kind = record.pop("kind")
        for envelope in ("seq", "ts", "run", "prev"):
            record.pop(envelope)
        records.append((kind, record))
    cut = next(i for i, (kind, _) in enumerate(records) if kind == "verification")
    head, tail = records[:cut], records[cut:]
    hostile: list[tuple[str, dict[str, Any]]] = [
        ("egress", {"host": HOSTILE, "port": 443, "method": "CONNECT", "allowed": False, "reason": HOSTILE}),
        ("error", {"where": "desktop", "message": HOSTILE}),
    ]
    for kind, record in tail:
        if kind == "verification":
            record["detail"] = HOSTILE
        if kind == "run_ended":
            record.update(status="error", reason=HOSTILE)
    writer = AuditWriter(folder / "audit.jsonl", info["run_id"], fsync=False)
    for kind, record in head:
        writer.append(kind, record)
    return folder, hostile + tail, writer


def finish(folder: Path, writer: AuditWriter, tail: list[tuple[str, dict[str, Any]]]) -> None:
    """The rest of the forged run written and sealed, and its result.json."""
    for kind, record in tail:
        writer.append(kind, record)
    write_json_atomic(folder / "result.json", {"status": "error", "reason": HOSTILE, "seal": writer.seal()})
