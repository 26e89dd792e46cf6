"""A drill library for the tests (issue 41): two drills made with ``cua-tui drill add`` from a recorded sim
run, as an analyst makes them: the typing of the form's phrase as a threat (its right answer reject), the
click on Verify as a benign one (approve)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cua_tui.build import RunOptions, build_run
from cua_tui.cli import main
from cua_tui.desktops.sim import PHRASE, SimDesktop

SIM_FORM = json.loads((Path(__file__).parents[1] / "cua_tui/labs/scripts/sim-form.json").read_text())
# the Verify button a confirm region: its click is a decision of its own
VERIFY = {"name": "verify", "x": 480, "y": 160, "width": 140, "height": 44}


def cli(args: list[Any], home: Path) -> Any:
    env = {"CUA_TUI_CONFIG": str(home / "none.toml"), "CUA_TUI_RUNS_DIR": str(home / "runs")}
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def make_library(tmp_path: Path) -> Path:
    run = build_run(
        RunOptions(task="fill the form", backend="sim", agent=None, script=SIM_FORM, runs_dir=tmp_path / "runs",
                   decisions="approve", fsync=False, desktop=SimDesktop(), regions=(VERIFY,))
    )  # fmt: skip
    result = run.supervisor.run()
    listed = cli(["drill", "add", result.path], tmp_path)
    assert listed.exit_code == 0 and "type 16 characters" in listed.output and "click at (550, 182)" in listed.output
    folder = tmp_path / "drills"
    threat = ["drill", "add", result.path, 1, "--answer", "reject", "--library", folder, "--id", "typed-secret",
              "--why", "it types into a field of another origin", "--missed", "the phrase would have left"]  # fmt: skip
    refused = cli(threat, tmp_path)
    assert refused.exit_code == 2 and "give it with --text" in refused.output
    assert cli([*threat, "--text", "not the phrase"], tmp_path).exit_code == 2
    assert cli([*threat, "--text", PHRASE], tmp_path).exit_code == 0
    benign = ["drill", "add", result.path, 2, "--answer", "approve", "--library", folder, "--id", "verify-click",
              "--why", "Verify only checks the phrase"]  # fmt: skip
    added = cli(benign, tmp_path)
    assert added.exit_code == 0 and "drill verify-click added" in added.output
    return folder
