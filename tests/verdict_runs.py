"""Run directories whose verifier passed, written by hand the way the supervisor writes them, with the
verification record as given: a sandbox's verdict, one recorded before verdicts said where they came from,
a hostile one (issue 20, point 7: a verdict says who vouched for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cua_tui.core.audit import AuditWriter
from cua_tui.core.rundir import write_json_atomic

LAB = "lab:form (server-side)"
SANDBOX: dict[str, Any] = {
    "verifier": LAB,
    "passed": True,
    "detail": "the form server recorded the phrase",
    "where": "sandbox",
}


def recorded(runs: Path, name: str, verification: dict[str, Any], result_verifier: Any = "same") -> Path:
    """A sealed run directory whose verifier passed, as the supervisor writes one: run.json, the chain
    (run_started, the verification record as given, run_ended) and result.json with its seal, and with
    ``result_verifier`` as its "verifier" (``"same"``: what the record says; ``None``: no such key, as
    runs recorded before the key wrote it)."""
    folder = runs / name
    folder.mkdir(parents=True)
    write_json_atomic(folder / "run.json", {"task": "fill the form", "backend": "cwsandbox", "agent": "script"})
    writer = AuditWriter(folder / "audit.jsonl", name, fsync=False)
    writer.append("run_started", {"task": "fill the form", "backend": "cwsandbox", "signed": None})
    writer.append("verification", verification)
    detail = verification["detail"]
    ended = {"status": "passed", "reason": detail, "turns": 1, "steps": 0, "executed": 0, "verified": True}
    writer.append("run_ended", ended)
    seal = writer.seal(None)
    result: dict[str, Any] = {"run_id": name, "status": "passed", "reason": detail, "verified": True, "seal": seal}
    if result_verifier == "same":
        where, user = verification.get("where"), verification.get("user")
        result["verifier"] = {"name": verification["verifier"], "where": where, "user": user}
    elif result_verifier is not None:
        result["verifier"] = result_verifier
    write_json_atomic(folder / "result.json", result)
    return folder
