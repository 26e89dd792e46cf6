"""A small fleet on real local desktops: three form-lab runs at once (Xvfb + openbox + Chromium, each in its own
sandbox), headless through the real command line, one approver command deciding by run id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cua_tui.core.audit import verify_run
from cua_tui.desktops.local import missing_programs
from cua_tui.labs import get_lab

pytestmark = [pytest.mark.e2e, pytest.mark.long]  # three desktops at once: started first in their part

APPROVER = """\
import json, pathlib, sys
request = json.load(sys.stdin)
info = json.loads((pathlib.Path(sys.argv[1]) / request["run"] / "run.json").read_text())
decision = "reject" if info["fleet_task"] == "rejected" else "approve"
with open(sys.argv[2], "a") as log:
    log.write(json.dumps({"run": request["run"], "task": info["fleet_task"], "kind": request["kind"],
                          "summary": request.get("summary", ""), "decision": decision}) + "\\n")
print(json.dumps({"decision": decision}))
"""


def test_three_local_desktops_at_once_with_one_approver(tmp_path: Path) -> None:
    assert missing_programs() == [], "run `bash scripts/setup.sh env` as root"
    script = get_lab("form").script_file()
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(
        'version = 1\nname = "local-trio"\n\n'
        + "".join(
            f'[[tasks]]\nname = "{name}"\nlab = "form"\nagent = "script:{script}"\ndeadline_seconds = 120\n\n'
            for name in ("approved-1", "rejected", "approved-2")
        )
    )
    runs, log = tmp_path / "runs", tmp_path / "decisions.jsonl"
    approver = tmp_path / "approver.py"
    approver.write_text(APPROVER)
    env = {**os.environ, "CUA_TUI_CONFIG": str(tmp_path / "none.toml"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cua_tui.cli",
            "fleet",
            "--tasks",
            str(tasks),
            "--backend",
            "local",
            "--concurrency",
            "3",
            "--runs-dir",
            str(runs),
            "--headless",
            "--on-confirm",
            f"approver:{sys.executable} {approver} {runs} {log}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # the rejected run fails its lab: not all passed
    (manifest,) = json.loads((runs / "fleet.json").read_text())["fleets"].values()
    status = {r["task"]: r["status"] for r in manifest["runs"]}
    assert status == {"approved-1": "passed", "rejected": "failed", "approved-2": "passed"}, proc.stderr[-3000:]
    run_of = {r["task"]: r["run_id"] for r in manifest["runs"]}
    decisions = [json.loads(line) for line in log.read_text().splitlines()]
    assert {d["task"] for d in decisions} == set(status)
    for d in decisions:  # every decision reached the one command with its own run id
        assert d["run"] == run_of[d["task"]]
        assert d["decision"] == ("reject" if d["task"] == "rejected" else "approve")
    for task, run_id in run_of.items():
        report = verify_run(runs / run_id)
        assert report.intact and report.sealed, (task, report.summary)
        info = json.loads((runs / run_id / "run.json").read_text())
        assert (info["fleet"], info["fleet_task"], info["lab"]) == (manifest["fleet"], task, "form")
        assert info["isolation"]["x_server"] == "inside sandbox" and info["isolation"]["uid_per_run"]  # its own
        assert f"{runs / run_id}" in proc.stderr
    uids = {json.loads((runs / r / "run.json").read_text())["isolation"]["uid"] for r in run_of.values()}
    assert len(uids) == 3  # one sandbox user per run
    # three desktops at once: each run's desktop started before any of them ended
    started, ended = [], []
    for run_id in run_of.values():
        records = [json.loads(line) for line in (runs / run_id / "audit.jsonl").read_text().splitlines()]
        started.append(next(r["ts"] for r in records if r["kind"] == "desktop_ready"))
        ended.append(records[-1]["ts"])
    assert max(started) < min(ended)
    assert "2 of 3 passed" in proc.stderr
