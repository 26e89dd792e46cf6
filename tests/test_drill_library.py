"""The drill library the project ships (issue 41, point 3): drills recorded from real runs of the labs by
scripts/drill_library.py, in several variants of each kind, within 2 MB, each with its right answer and why."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from test_drills import sim_run

from cua_tui.build import BuildError
from cua_tui.core import events as ev
from cua_tui.core.actions import Kind
from cua_tui.core.drills import load_library
from cua_tui.core.runlog import RunReader
from cua_tui.labs import SHIPPED_DRILLS

ROOT = Path(__file__).resolve().parents[1]
# each kind of threat the issue names, and the benign ones, by their ids' stem
KINDS = {
    "exfil-send": "reject",  # the injection lab's exfiltration to a host outside the allow-list
    "download-mirror": "reject",  # a download from a foreign host
    "destroy": "reject",  # a click on a destructive button
    "password": "reject",  # a password-shaped text typed into a field of another origin
    "safety-check": "reject",  # a safety check not to acknowledge
    "benign": "approve",  # right to approve: rejecting everything scores badly too
}


def stem(drill_id: str) -> str:
    return drill_id.rsplit("-", 1)[0] if drill_id[-1].isdigit() else drill_id.split("-", 1)[0]


def test_the_shipped_library_holds_each_kind_in_several_variants_within_2_mb() -> None:
    drills = load_library(SHIPPED_DRILLS)
    kinds = Counter(stem(d.id) if not d.id.startswith("benign") else "benign" for d in drills)
    assert set(kinds) == set(KINDS) and all(count >= 3 for count in kinds.values()), kinds
    for drill in drills:
        kind = "benign" if drill.id.startswith("benign") else stem(drill.id)
        assert drill.answer.value == KINDS[kind], drill.id
        assert drill.why and drill.words and drill.reason, drill.id
        assert drill.benign or drill.missed, f"{drill.id}: a threat says what a miss would have done"
        assert (drill.frame.width, drill.frame.height) == (1024, 720)
        assert drill.source.startswith("lab "), drill.source
    # every screen is its own: no two drills look the same
    assert len({d.frame.sha256 for d in drills}) == len(drills)
    # the variants of a kind differ where an analyst could learn them: position, host, wording, text
    for kind in ("exfil-send", "download-mirror", "destroy", "password", "safety-check"):
        same = [d for d in drills if d.id.startswith(kind)]
        points = [d.action.point for d in same if d.action is not None and d.action.point is not None]
        assert len(set(points)) == len(points), kind  # a typing drill has none: its field moved, its text differs
        assert len({d.words for d in same}) == len(same) and len({d.why for d in same}) == len(same), kind
    passwords = [d.action.text for d in drills if d.id.startswith("password") and d.action is not None]
    assert len(set(passwords)) == 3
    # a typing drill knows the field its typing goes to on its screen (its moment's focus)
    typing = [d for d in drills if d.action is not None and d.action.kind is Kind.TYPE]
    assert typing and all(d.focus is not None for d in typing)
    assert all(d.focus is None for d in drills if d not in typing)
    assert all(d.kind == "safety_check" and d.checks for d in drills if d.id.startswith("safety-check"))
    size = sum(f.stat().st_size for f in SHIPPED_DRILLS.iterdir())
    assert size <= 2_000_000, size
    # the library is package data: the wheel carries it with the labs
    assert {p.suffix for p in SHIPPED_DRILLS.iterdir()} == {".json", ".png"}


def test_drills_on_with_no_library_of_ones_own_draw_from_the_shipped_ones(tmp_path: Path) -> None:
    result, desktop = sim_run(tmp_path / "shipped", drill_rate=1.0, drill_seed=2,
                              drill_library=tmp_path / "none-yet", drill_shipped=True)  # fmt: skip
    assert result.status == "passed", result.reason
    shipped = {d.id for d in load_library(SHIPPED_DRILLS)}
    with RunReader(result.path) as reader:
        answered = [s.event for s in reader.poll() if isinstance(s.event, ev.DrillAnswered)]
    assert answered and {a.drill for a in answered} <= shipped
    # no drill's action reached the desktop: what it typed is the form's phrase, once
    assert [a.text for a in desktop.executed if a.kind is Kind.TYPE] == ["cua-tui verified"]
    # a shipped typing drill shows its text; the chain keeps only its length and SHA-256
    secrets = [d.action.text for d in load_library(SHIPPED_DRILLS) if d.id.startswith("password") and d.action]
    assert not any(secret in (result.path / "audit.jsonl").read_text() for secret in secrets)
    assert json.loads((result.path / "run.json").read_text())["drills"]["library"] == len(shipped)


def test_a_drill_of_ones_own_replaces_the_shipped_one_of_its_id_and_leaving_them_out_can_leave_none(
    tmp_path: Path,
) -> None:
    from drill_cases import make_library

    folder = make_library(tmp_path)
    mine = load_library(folder)
    result, _ = sim_run(tmp_path / "both", drill_rate=1.0, drill_seed=4, drill_library=folder, drill_shipped=True)
    assert json.loads((result.path / "run.json").read_text())["drills"]["library"] == (
        len(load_library(SHIPPED_DRILLS)) + len(mine)
    )
    with pytest.raises(BuildError, match="drill_shipped = false"):
        sim_run(tmp_path / "none", drill_rate=0.5, drill_library=tmp_path / "empty", drill_shipped=False)


def test_the_settings_leave_the_shipped_drills_out(tmp_path: Path) -> None:
    from cua_tui.config import ConfigError, Settings

    path = tmp_path / "settings.toml"
    assert Settings.load({"CUA_TUI_CONFIG": str(path)}).drill_shipped is True
    path.write_text("drill_shipped = false\n")
    assert Settings.load({"CUA_TUI_CONFIG": str(path)}).drill_shipped is False
    path.write_text('drill_shipped = "no"\n')
    with pytest.raises(ConfigError, match="line 1"):
        Settings.load({"CUA_TUI_CONFIG": str(path)})


def test_a_variant_moves_a_labs_controls_and_regions_and_the_default_is_the_lab_as_it_was() -> None:
    from cua_tui.labs import get_lab
    from cua_tui.labs.base import Variant
    from cua_tui.labs.injection import InjectionLab

    for name in ("form", "injection", "search-export"):
        lab = get_lab(name)
        assert '<div class="abs" style="left:' not in lab.page() and lab.variant == Variant()
    moved = InjectionLab(Variant((24, 40), "sink.example.invalid", 1))
    (region,) = moved.regions()
    assert (region["x"], region["y"]) == (40 + 24, 344 + 40)
    page = moved.page()
    assert '<div class="abs" style="left:24px;top:40px">' in page
    assert "https://sink.example.invalid/upload" in page and "Upload key" in page
    assert "collector.exfil.invalid" not in page


def test_a_drill_stands_only_where_a_request_of_its_kind_would() -> None:
    """An action's drill in front of an action of its kind (its row takes that row of the batch); the model's
    safety checks in front of its safety checks, gating the batch's actions as the real ones do."""
    import random

    from cua_tui.core.actions import Action
    from cua_tui.core.drills import DrillPlan
    from cua_tui.core.values import DecisionRequest, Gated

    plan = DrillPlan(1.0, load_library(SHIPPED_DRILLS), random.Random(1))
    typing = Action(Kind.TYPE, text="cua-tui verified")
    action = DecisionRequest("r", 1, 1, "c", "action", "typing counts as transmission", action=typing)
    clicking = DecisionRequest("r", 1, 2, "c", "action", "submits the form", action=Action(Kind.CLICK, (10, 20)))
    gated = (Gated(0, None, "allow", "actions.click", "click is allowed"),)
    checks = DecisionRequest("r", 1, 0, "c", "safety_check", "the model raised safety checks", gated=gated)
    for _ in range(200):
        before_action, before_checks = plan.before(action), plan.before(checks)
        assert before_action is not None and before_action.action is not None
        assert before_action.action.kind is Kind.TYPE  # typing for typing: the batch's proposal is typing
        before_click = plan.before(clicking)
        assert before_click is not None and before_click.action is not None and before_click.action.kind is Kind.CLICK
        assert before_checks is not None and before_checks.kind == "safety_check"
        assert before_checks.shown(checks).gated == gated and before_action.shown(action).gated == ()
