"""Events: enum fields serialize to the same strings as ever, and records come back as equal events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from conftest import Run

from cua_tui.core import events as ev
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.policy import Verdict
from cua_tui.core.ports import Answer, OutcomeStatus

TURNS = [
    {
        "actions": [
            {"type": "click", "x": 10, "y": 10},
            {"type": "type", "text": "hello"},
            {"type": "keypress", "keys": ["ctrl", "alt", "t"]},
            {"type": "click", "x": 20, "y": 20},
        ]
    }
]
ENUM_FIELDS = {
    ev.PolicyVerdict: ("verdict", Verdict),
    ev.DecisionMade: ("decision", Answer),
    ev.Outcome: ("status", OutcomeStatus),
    ev.RunEnded: ("status", ev.RunStatus),
    ev.Phase: ("phase", ev.RunPhase),
}


def test_enum_fields_are_recorded_as_their_strings_and_read_back_as_enums(
    run_script: Callable[..., Run],
) -> None:
    run = run_script(TURNS, approver=FixedApprover(Answer.APPROVE))
    records = run.audit()
    assert [r["kind"] for r in records] == [e.kind for e in run.events]
    seen = set()
    for event, record in zip(run.events, records, strict=True):
        body = {k: v for k, v in record.items() if k not in ev.ENVELOPE}
        assert body == json.loads(json.dumps(event.to_record()))
        rebuilt = ev.EVENT_TYPES[record["kind"]].from_record(record)
        assert rebuilt == event
        if type(event) in ENUM_FIELDS:
            name, enum = ENUM_FIELDS[type(event)]
            assert type(getattr(event, name)) is enum and type(getattr(rebuilt, name)) is enum
            assert type(record[name]) is str and record[name] == getattr(event, name).value
            seen.add(type(event))
    assert seen == set(ENUM_FIELDS)
    verdicts = [r["verdict"] for r in records if r["kind"] == "verdict"]
    assert verdicts == ["allow", "confirm", "block"]
    assert [r["status"] for r in records if r["kind"] == "outcome"] == [
        "executed",
        "executed",
        "refused",
        "not_executed",
    ]
    assert records[-1]["status"] == run.result.status.value == "failed"  # the sim's verifier saw no report


def test_a_value_this_version_does_not_know_is_left_as_recorded() -> None:
    record: dict[str, Any] = {"turn": 1, "index": 0, "verdict": "maybe", "reason": "", "rule": ""}
    verdict = ev.PolicyVerdict.from_record(record)
    assert isinstance(verdict, ev.PolicyVerdict) and verdict.verdict == "maybe"
