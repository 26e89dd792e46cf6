"""cua-tui export --atif: a run as an ATIF-v1.7 trajectory with its screenshots beside it, from real sim runs
(and hand-written logs for what a sim run does not have: token figures, refused egress), each validated
against a strict model of the format (tests/atif_schema.py)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from atif_schema import Trajectory
from cli_batch import batch
from click.testing import CliRunner, Result
from conftest import make_supervisor
from export_runs import DAMAGED, HOSTILE_SAYS, HOSTILE_TASK, TYPED, audit_records, sim_run
from pydantic import ValidationError
from review_runs import reviewed_run
from runlogs import UNSIGNED, write_run

from cua_tui.cli import main
from cua_tui.core import events as ev
from cua_tui.core.actions import Action, Kind
from cua_tui.core.ports import Answer, DecisionRequest, Ruling
from cua_tui.core.supervisor import Supervisor
from cua_tui.export import RunUnusable, atif, open_run

SHA = hashlib.sha256(TYPED.encode()).hexdigest()


def invoke(args: list[object], home: Path) -> Result:
    env = {"CUA_TUI_CONFIG": str(home / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(home / "runs")}
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def exported(run: Path, out: Path, home: Path, code: int = 0) -> dict[str, Any]:
    """``export RUN --atif OUT`` (exit ``code``), the trajectory read back and validated."""
    result = invoke(["export", run, "--atif", out], home)
    assert result.exit_code == code, result.output
    data: dict[str, Any] = json.loads(out.read_bytes())
    Trajectory.model_validate(data)
    return data


def heads(run: Path) -> list[str]:
    """The SHA-256 of each line of the audit log (the chain's heads, by seq)."""
    return [hashlib.sha256(line).hexdigest() for line in (run / "audit.jsonl").read_bytes().splitlines()]


def cua(obj: dict[str, Any]) -> Any:
    return obj["extra"]["cua_tui"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("atif")


@pytest.fixture(scope="module")
def run_dir(home: Path) -> Path:
    return sim_run(home / "runs")


@pytest.fixture(scope="module")
def trajectory(run_dir: Path, home: Path) -> dict[str, Any]:
    (home / "out").mkdir()
    return exported(run_dir, home / "out" / "run.json", home)


# --------------------------------------------------------------------------------------------------
# The trajectory of a real run
# --------------------------------------------------------------------------------------------------
def test_one_agent_step_per_model_turn_with_its_actions_as_tool_calls(
    trajectory: dict[str, Any], run_dir: Path
) -> None:
    records = audit_records(run_dir)
    assert trajectory["schema_version"] == "ATIF-v1.7" and trajectory["session_id"] == run_dir.name
    assert trajectory["agent"]["name"] == "script" and trajectory["agent"]["version"] == "0.1.0"
    assert trajectory["agent"]["tool_definitions"][0]["function"]["name"] == "computer"
    task, *steps = trajectory["steps"]
    assert task["source"] == "user" and task["message"][0] == {"type": "text", "text": HOSTILE_TASK}
    turns = [r for r in records if r["kind"] == "model_turn"]
    assert [s["source"] for s in steps] == ["agent"] * len(turns)
    assert [s["message"] for s in steps] == [t["text"] for t in turns]
    assert steps[0]["message"] == HOSTILE_SAYS
    for step, turn in zip(steps, turns, strict=True):
        proposals = [r for r in records if r["kind"] == "proposal" and r["turn"] == turn["turn"]]
        calls = step.get("tool_calls", [])
        assert [c["function_name"] for c in calls] == ["computer"] * len(proposals)
        assert [c["arguments"] for c in calls] == [p["action"] or {} for p in proposals]
        results = step.get("observation", {}).get("results", [])
        assert [r["source_call_id"] for r in results] == [c["tool_call_id"] for c in calls]
        assert step["llm_call_count"] == 0 and "metrics" not in step  # a script: no model was asked
        assert cua(step)["chain"]["head"] == heads(run_dir)[cua(step)["chain"]["last_seq"]]
    malformed = steps[2]["tool_calls"][0]
    assert cua(malformed)["malformed"]["kind"] == "<b>bold</b>" and malformed["arguments"] == {}
    heard = [r["content"] for r in steps[1]["observation"]["results"]]
    assert heard[2] == "Refused by sandbox policy. Stop and report."  # the exact text the model heard
    assert heard[3] == "Not executed: an earlier action in this turn did not run."
    assert trajectory["final_metrics"]["total_steps"] == len(trajectory["steps"])


def test_typed_text_is_only_its_length_and_hash(trajectory: dict[str, Any], home: Path) -> None:
    data = (home / "out" / "run.json").read_bytes()
    written = [data, *(p.read_bytes() for p in (home / "out" / "run.images").iterdir())]
    assert all(TYPED.encode() not in blob for blob in written)
    typing = trajectory["steps"][1]["tool_calls"][1]
    assert typing["arguments"] == {"kind": "type", "text_len": len(TYPED), "text_sha256": SHA}


def test_each_distinct_screen_is_written_once_named_by_its_hash(
    trajectory: dict[str, Any], run_dir: Path, home: Path
) -> None:
    folder = home / "out" / "run.images"
    paths = [
        part["source"]["path"]
        for step in trajectory["steps"]
        for content in [step["message"], *(r["content"] for r in step.get("observation", {}).get("results", []))]
        if isinstance(content, list)
        for part in content
        if part["type"] == "image"
    ]
    assert len(paths) > len(set(paths))  # a screen shown twice (the drag changed nothing) ...
    files = sorted(p.name for p in folder.iterdir())
    assert sorted({p.removeprefix("run.images/") for p in paths}) == files  # ... is one file
    for name in files:
        png = (folder / name).read_bytes()
        assert hashlib.sha256(png).hexdigest() + ".png" == name
        assert png == (run_dir / "screens" / name).read_bytes()
    records = audit_records(run_dir)
    shown = {r["sha256"] for r in records if r["kind"] == "screen" and r["purpose"] in ("initial", "after_action")}
    assert {name[:-4] for name in files} == shown


def test_cua_tui_facts_per_action_and_for_the_run(trajectory: dict[str, Any], run_dir: Path) -> None:
    steps = trajectory["steps"]
    typing = cua(steps[1]["tool_calls"][1])
    assert typing["verdict"] == {
        "verdict": "confirm",
        "rule": "actions.type",
        "reason": "typing counts as transmission: the text can leave the sandbox",
    }
    decided = [(d["decision"], d["by"], d["how"]) for d in typing["decisions"]]
    assert decided == [("approve", "headless rule: approve", "rule")]
    assert typing["outcome"]["status"] == "executed" and typing["requests"][0]["subject"] == "action"
    assert typing["chain"]["head"] == heads(run_dir)[typing["chain"]["last_seq"]]
    blocked = cua(steps[2]["tool_calls"][2])
    assert blocked["verdict"]["rule"] == "keys.block:ctrl+alt+Delete" and blocked["outcome"]["status"] == "refused"
    assert blocked["decisions"] == [
        {
            "decision": "reject",
            "by": "policy",
            "how": "policy",
            "subject": "action",
            "note": blocked["verdict"]["reason"],
            "seq": 44,
        }
    ]
    facts = cua(trajectory)
    assert facts["verify"]["verdict"] == "intact" and facts["verify"]["head"] == heads(run_dir)[-1]
    assert facts["run"]["status"] == "passed" and facts["verification"]["passed"] is True
    assert facts["images"]["written"] == 5 and facts["cut"] == [] and facts["screens_refused"] == []


def test_reject_reasons_are_user_steps(tmp_path: Path) -> None:
    reviewed = reviewed_run(tmp_path / "runs")
    data = exported(reviewed.path, tmp_path / "t.json", tmp_path)
    sources = [s["source"] for s in data["steps"]]
    assert sources == ["user", "agent", "user", "agent"]  # the task, the turn, the reason, the final turn
    turn, reason = data["steps"][1], data["steps"][2]
    assert reason["message"] == "not that text"
    rejected = turn["tool_calls"][2]
    assert cua(reason)["tool_call_id"] == rejected["tool_call_id"] and cua(reason)["kind"] == "reject_reason"
    decision = cua(rejected)["decisions"][0]
    assert (decision["decision"], decision["by"], decision["note"]) == ("reject", "human", "not that text")
    assert decision["operator"] == cua(reason)["operator"] != ""
    assert turn["observation"]["results"][2]["content"].endswith("The reviewer said: not that text")


def test_tokens_and_cost_are_the_steps_metrics(tmp_path: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = [
        ("model_turn", {"turn": 1, "text": "a", "calls": 1, "actions": 1, "input_tokens": 1200, "output_tokens": 80}),
        ("proposal", {"turn": 1, "index": 0, "call_id": "c", "action": {"kind": "wait"}, "summary": "wait"}),
        ("egress", {"host": "evil.example", "port": 443, "method": "CONNECT", "allowed": False, "reason": "x"}),
        ("outcome", {"turn": 1, "index": 0, "call_id": "c", "status": "executed", "message": "OK"}),
        ("model_turn", {"turn": 2, "text": "b", "calls": 0, "actions": 0, "input_tokens": 900, "output_tokens": 20}),
    ]
    records[0][1]["cost_usd"], records[4][1]["cost_usd"] = 0.0125, 0.0075
    data = exported(write_run(tmp_path / "r", None, records, signed=UNSIGNED), tmp_path / "t.json", tmp_path)
    first, second = data["steps"][1], data["steps"][2]
    assert first["metrics"] == {"prompt_tokens": 1200, "completion_tokens": 80, "cost_usd": 0.0125}
    assert second["metrics"]["prompt_tokens"] == 900 and first["llm_call_count"] == 1
    totals = data["final_metrics"]
    assert (totals["total_prompt_tokens"], totals["total_completion_tokens"]) == (2100, 100)
    assert totals["total_cost_usd"] == pytest.approx(0.02)
    refused = {"method": "CONNECT", "host": "evil.example", "port": 443, "reason": "x"}
    assert cua(first["tool_calls"][0])["egress_refused"] == [refused]
    assert cua(data)["egress_refused"] == [refused] and cua(data)["egress_refused_total"] == 1


class TakingOver:
    """At the first decision, takes the desktop instead of answering (as ``T`` does)."""

    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        assert self.supervisor is not None and self.supervisor.take_over() is None
        return Ruling(Answer.REJECT, "human (TUI)", human=True, takeover=True)


def test_a_takeover_is_a_user_step_with_the_reviewers_actions(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [
        {"actions": [{"type": "click", "button": "left", "x": 250, "y": 182}, {"type": "type", "text": "x"}]}
    ]
    approver = TakingOver()
    sup, _events, _agent = make_supervisor(tmp_path, turns, approver=approver, operator="alice@desk-7")
    approver.supervisor = sup

    def feed() -> None:
        assert sup.takeover_input(Action(Kind.TYPE, text=TYPED)) is None
        assert sup.takeover_input(Action(Kind.CLICK, point=(550, 182))) is None
        sup.hand_back()

    def on_event(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.TakeoverStarted):
            threading.Thread(target=feed, daemon=True).start()

    sup.subscribe(on_event)
    assert sup.run().status == "passed"
    data = exported(sup.rundir.path, tmp_path / "t.json", tmp_path)
    assert TYPED.encode() not in (tmp_path / "t.json").read_bytes()
    taken = next(s for s in data["steps"] if cua(s)["kind"] == "takeover")
    assert taken["source"] == "user" and "alice@desk-7" in taken["message"] and "The model was told" in taken["message"]
    actions = cua(taken)["actions"]
    assert [a["arguments"]["kind"] for a in actions] == ["type", "click"]
    assert actions[0]["arguments"]["text_sha256"] == SHA and actions[0]["by"] == "human (takeover)"
    assert len(taken["observation"]["results"]) == 2
    model_turn = data["steps"][1]
    (taken_over,) = cua(model_turn["tool_calls"][1])["decisions"]
    assert taken_over["note"].startswith("the reviewer took")
    assert not any(cua(s)["kind"] == "reject_reason" for s in data["steps"])  # a takeover is no reason


# --------------------------------------------------------------------------------------------------
# Damaged runs, caps, where it goes
# --------------------------------------------------------------------------------------------------
def test_damaged_runs_are_exported_with_their_verdict_or_not_at_all(run_dir: Path, tmp_path: Path) -> None:
    runs: dict[str, Path] = {}
    commands: list[list[str | Path]] = []
    for number, (name, (damage, _code)) in enumerate(sorted(DAMAGED.items())):
        runs[name] = tmp_path / str(number) / run_dir.name
        shutil.copytree(run_dir, runs[name])
        damage(runs[name])
        commands.append(["export", runs[name], "--atif", tmp_path / str(number) / "out" / "x.json"])
        (tmp_path / str(number) / "out").mkdir()
    answers = batch(tmp_path / "batch", commands, env={"CUA_TUI_RUNS_DIR": str(tmp_path / "runs")})
    for (name, (_damage, code)), answer in zip(sorted(DAMAGED.items()), answers, strict=True):
        got, _out, err = answer.answered()
        assert got == code and "Traceback" not in err, (name, err)
        out = Path(answer.argv[-1])
        if code == 2:  # nothing to export: nothing written, not even the images folder
            assert list(out.parent.iterdir()) == [], name
            continue
        data = json.loads(out.read_bytes())
        Trajectory.model_validate(data)
        assert cua(data)["verify"]["verdict"] == "tampered" and "TAMPERED" in err, name
        assert "not a trustworthy record" in data["notes"]
        assert b"root:x:0:0" not in out.read_bytes()  # nothing read through the link
        refused = {s["sha256"] for s in cua(data)["screens_refused"]}
        images = {p.name[:-4] for p in (out.parent / "x.images").iterdir()}
        assert not refused & images  # a refused screen has no file and no image part ...
        facts = [
            r.get("extra", {}).get("cua_tui", {}).get("screen", {})
            for s in data["steps"][1:]
            for r in s.get("observation", {}).get("results", [])
        ]
        assert all(f.get("refused") for f in facts if f.get("sha256") in refused)  # ... but says why


def test_an_edited_line_is_exported_with_exit_1(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    audit = copy / "audit.jsonl"
    audit.write_bytes(audit.read_bytes().replace(b'"message":"OK"', b'"message":"OK!"', 1))
    data = exported(copy, tmp_path / "t.json", tmp_path, code=1)
    verify = cua(data)["verify"]
    assert verify["verdict"] == "tampered" and verify["exit"] == 1 and verify["findings"][0]["kind"] == "edited"
    assert data["steps"][1]["observation"]["results"][0]["content"][0]["text"] == "OK!"  # what it claims


def test_where_it_goes(run_dir: Path, home: Path, tmp_path: Path) -> None:
    inside = invoke(["export", run_dir, "--atif", run_dir / "x.json"], home)
    assert inside.exit_code == 2 and "inside the run directory" in inside.output
    assert not (run_dir / "x.json").exists() and not (run_dir / "x.images").exists()
    theirs = tmp_path / "t.images"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    refused = invoke(["export", run_dir, "--atif", tmp_path / "t.json"], home)
    assert refused.exit_code == 2 and "holds files of its own (notes.txt)" in refused.output
    assert (theirs / "notes.txt").read_text() == "mine" and not (tmp_path / "t.json").exists()
    earlier = tmp_path / "e.images"
    earlier.mkdir()
    (earlier / ("0" * 64 + ".png")).write_bytes(b"stale")  # an earlier export's: replaced whole
    exported(run_dir, tmp_path / "e.json", home)
    assert not (earlier / ("0" * 64 + ".png")).exists() and len(list(earlier.iterdir())) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.images", "e.json", "t.images"]  # no temporary left
    unusable = invoke(["export", tmp_path / "nope", "--atif", tmp_path / "n.json"], home)
    assert unusable.exit_code == 2 and not (tmp_path / "n.json").exists() and not (tmp_path / "n.images").exists()


def test_the_html_caps_bound_it_and_it_says_what_they_cut(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atif, "MAX_ACTIONS", 4)
    with open_run(run_dir) as run:
        one = len(run.screen(run.timeline.first_screen).png or b"")
        monkeypatch.setattr(atif, "MAX_IMAGES", one * 2 + 10)
        cut = atif.build(run, "x.images")
    Trajectory.model_validate(cut.data)
    calls = [c for s in cut.data["steps"] for c in s.get("tool_calls", [])]
    assert len(calls) == 4 and len(cut.images) == 2
    assert cut.cut[0] == "5 action(s) after the first 4 not written (the cap)"
    assert "screenshot(s) not written" in cut.cut[1] and "Cut: 5 action(s)" in cut.data["notes"]
    assert cua(cut.data)["cut"] == cut.cut


def test_the_schema_model_refuses_what_harbor_refuses(trajectory: dict[str, Any]) -> None:
    """The check itself can fail: an unknown field, an agent's field on a user step, a result naming no call."""
    spoils: tuple[Callable[[dict[str, Any]], object], ...] = (
        lambda d: d.update(unknown=1),
        lambda d: d["steps"][0].update(tool_calls=[]),
        lambda d: d["steps"][1]["observation"]["results"][0].update(source_call_id="nope"),
        lambda d: d["steps"][1]["tool_calls"][0].update(name="computer"),
        lambda d: d["steps"][2].update(step_id=7),
    )
    for spoil in spoils:
        data = json.loads(json.dumps(trajectory))
        spoil(data)
        with pytest.raises(ValidationError):
            Trajectory.model_validate(data)


WEIRD: list[object] = [None, [], {}, "x", -1, 10**30, 1.5, True, [[1, 2]], {"text": TYPED}, "<b>"]
RECORDS: list[tuple[str, dict[str, object]]] = [
    ("model_turn", {"turn": 1, "text": "t", "calls": 1, "actions": 1, "cost_usd": 0.5}),
    ("safety_checks", {"turn": 1, "call_id": "c", "checks": [{"id": "i", "code": "c", "message": "m"}]}),
    ("proposal", {"turn": 1, "index": 0, "call_id": "c", "action": {"kind": "click", "x": 1, "y": 2}, "summary": "s"}),
    ("verdict", {"turn": 1, "index": 0, "verdict": "allow", "reason": "r", "rule": "x"}),
    ("decision", {"turn": 1, "index": 0, "decision": "reject", "by": "human", "note": "n", "operator": "o"}),
    ("egress", {"host": "h", "port": 1, "method": "GET", "allowed": False, "reason": "r"}),
    ("outcome", {"turn": 1, "index": 0, "call_id": "c", "status": "declined", "message": "no", "duration_ms": 1.0}),
    ("turn_refused", {"turn": 2, "actions": 5, "reason": "r"}),
    ("takeover", {"turn": 2, "by": "human (takeover)", "operator": "o", "where": "w"}),
    ("proposal", {"turn": 2, "index": 0, "call_id": "t", "action": {"kind": "wait"}, "by": "human (takeover)"}),
    ("takeover_ended", {"turn": 2, "actions": 1, "told": "told"}),
    ("verification", {"verifier": "v", "passed": True, "detail": "d"}),
]


def test_records_of_any_shape_give_a_valid_trajectory_or_one_line(tmp_path: Path) -> None:
    rng = random.Random(7)
    for i in range(60):
        records = [(kind, dict(fields)) for kind, fields in RECORDS]
        if i == 0:  # an edited record that holds a typed text: never written
            records[2][1]["action"] = {"kind": "type", "text": TYPED}
        for _ in range(4 if i else 0):
            _kind, fields = rng.choice(records)
            fields[rng.choice(list(fields))] = rng.choice(WEIRD)
        folder = write_run(tmp_path / str(i), None, records, signed=UNSIGNED)
        try:
            with open_run(folder) as run:
                data = json.loads(atif.encode(atif.build(run, "x.images").data))
        except RunUnusable as exc:
            assert "\n" not in str(exc)
            continue
        Trajectory.model_validate(data)
        assert TYPED not in json.dumps(data)


def test_every_case_of_the_shared_hostile_corpus(tmp_path: Path) -> None:
    """tests/hostile_runs.py's corpus in one child: a valid trajectory with the verdict (0 or 1), or one line
    and nothing written (2); never a traceback, never a byte read outside the run."""
    from hostile_runs import ALL, pristine_run

    (tmp_path / "pristine").mkdir()
    pristine = pristine_run(tmp_path / "pristine")
    commands: list[list[str | Path]] = []
    for number, case in enumerate(ALL):
        try:
            run = case.build(pristine, tmp_path / str(number) / "runs", tmp_path / str(number) / "outside")
        except pytest.skip.Exception:
            continue  # a case this machine cannot make (a device without mknod)
        (tmp_path / str(number) / "out").mkdir()
        commands.append(["export", run, "--atif", tmp_path / str(number) / "out" / "x.json"])
    codes = set()
    for answer in batch(tmp_path / "batch", commands, env={"CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}):
        code, _out, err = answer.answered()
        codes.add(code)
        out = Path(answer.argv[-1])
        assert "Traceback" not in err and code in (0, 1, 2), (answer.argv, err)
        if code == 2:
            assert list(out.parent.iterdir()) == [] and len(err.strip().splitlines()) == 1, err
            continue
        data = json.loads(out.read_bytes())
        Trajectory.model_validate(data)
        verdict = cua(data)["verify"]["verdict"]
        assert verdict == "tampered" if code == 1 else verdict in ("intact", "unsealed"), (answer.argv, verdict)
        assert b"root:x:0:0" not in out.read_bytes()
    assert codes == {0, 1, 2}, codes  # intact, tampered and unusable cases all answered
