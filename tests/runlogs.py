"""Run directories written by hand the way the supervisor writes them (signed runs with checkpoints,
intent records, interrupted runs), for the verifier's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_tui.core.audit import AuditKey, AuditWriter, checkpoint_message
from cua_tui.core.rundir import write_json_atomic

UNSIGNED, ABSENT = "unsigned", "absent"  # run_started says "signed": null / has no "signed" (older logs)


def action_records(turns: int, per_turn: int = 3) -> list[tuple[str, dict[str, Any]]]:
    """The records of whole turns as the supervisor writes them: every proposal first, then for each
    action its verdict, the intent to execute and the outcome."""
    out: list[tuple[str, dict[str, Any]]] = []
    for turn in range(1, turns + 1):
        out.append(("model_turn", {"turn": turn, "text": "", "calls": 1, "actions": per_turn}))
        for index in range(per_turn):
            out.append(("proposal", {"turn": turn, "index": index, "call_id": f"c{turn}", "action": None}))
        for index in range(per_turn):
            out.append(("verdict", {"turn": turn, "index": index, "verdict": "allow", "reason": "", "rule": ""}))
            out.append(("executing", {"turn": turn, "index": index, "call_id": f"c{turn}"}))
            out.append(("outcome", {"turn": turn, "index": index, "status": "executed", "message": "OK"}))
    return out


def write_run(
    folder: Path,
    key: AuditKey | None,
    records: list[tuple[str, dict[str, Any]]],
    *,
    signed: str = "key",
    seal: bool = True,
    every: int = 256,
    ended: object = "finished",
) -> Path:
    """A run directory written the way a signed run is: run_started records the key (or not), and with
    a key a checkpoint signs the chain every ``every`` events; sealed (and signed) unless ``seal`` is False,
    its run_ended record and result.json giving the status ``ended``."""
    folder.mkdir(parents=True)
    writer = AuditWriter(folder / "audit.jsonl", folder.name, fsync=False)
    started: dict[str, Any] = {"task": "t", "backend": "dry"}
    if signed == "key":
        assert key is not None
        started["signed"] = {"algorithm": key.algorithm, "key_id": key.key_id}
    elif signed == UNSIGNED:
        started["signed"] = None

    def append(kind: str, payload: dict[str, Any]) -> None:
        writer.append(kind, payload)
        if signed == "key" and key is not None and every and writer.seq % every == 0:
            message = checkpoint_message(folder.name, writer.seq, writer.head)
            signature = {"algorithm": key.algorithm, "key_id": key.key_id, "value": key.sign(message)}
            writer.append("checkpoint", {"events": writer.seq, "head": writer.head, "signature": signature})

    append("run_started", started)
    for kind, payload in records:
        append(kind, payload)
    if seal:
        append("run_ended", {"status": ended, "reason": "done"})
        sealed = writer.seal(key if signed == "key" else None)
        write_json_atomic(folder / "result.json", {"status": ended, "seal": sealed})
    else:
        writer.close()
    return folder


def interrupted_turn() -> list[tuple[str, dict[str, Any]]]:
    """Turn 2 of three actions, cut by a crash: action 1 done, action 2 handed to the desktop (outcome
    unknown), action 3 never reached."""
    recs = action_records(1)
    recs.append(("model_turn", {"turn": 2, "text": "", "calls": 1, "actions": 3}))
    for index in range(3):
        recs.append(("proposal", {"turn": 2, "index": index, "call_id": "c2", "action": None}))
    recs.append(("executing", {"turn": 2, "index": 0, "call_id": "c2"}))
    recs.append(("outcome", {"turn": 2, "index": 0, "status": "executed", "message": "OK"}))
    recs.append(("executing", {"turn": 2, "index": 1, "call_id": "c2"}))
    return recs
