"""Edit, then approve, on each lab (issue 24, points 1 and 6): the real local desktop (Xvfb, Chromium in its
sandbox, the lab's server), the real OpenAI SDK talking to the scripted model server on 127.0.0.1, and a
reviewer who changes the action at a decision before approving it: a typed text corrected (form,
search-export), a click moved onto the right button (injection). Each lab passes on its own server's
evidence, and the model's next request says what ran."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from model_server import OPENAI_PATH, ModelServer, computer_call, message, openai_response

from cua_tui.build import HANDSHAKE, RunOptions, build_run
from cua_tui.core.actions import Action, text_sha256
from cua_tui.core.ports import Answer, DecisionRequest
from cua_tui.desktops.local import missing_programs

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

# what the reviewer does at each decision: the edited action, or None to approve it as proposed
Review = Callable[[DecisionRequest], Action | None]


def click(x: int, y: int) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": x, "y": y}


def typing(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


def run_lab(tmp_path: Path, lab: str, turns: list[list[dict[str, Any]]], review: Review, monkeypatch: Any) -> Any:
    if missing_programs():
        pytest.fail(f"the local desktop needs {', '.join(missing_programs())} (scripts/setup.sh installs them)")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with ModelServer() as server:
        replies = [openai_response(computer_call(f"call_{i}", *actions)) for i, actions in enumerate(turns)]
        server.script(OPENAI_PATH, *replies, openai_response(message("done")))
        run = build_run(
            RunOptions(
                task=f"the {lab} lab",
                backend="local",
                agent="openai",
                model="gpt-5.6-sol",
                base_url=server.openai_base_url,
                lab=lab,
                runs_dir=tmp_path / "runs",
                decisions=HANDSHAKE,
                operator="alice@desk-7",
                fsync=False,
            )
        )
        handshake = run.handshake
        assert handshake is not None
        asked: list[DecisionRequest] = []

        def reviewer() -> None:
            while not run.supervisor.finished.is_set():
                request = handshake.wait_for_request(0.2)
                if request is None or request in asked:
                    continue
                asked.append(request)
                edit = review(request)
                if edit is None:
                    handshake.answer(Answer.APPROVE, request)
                else:
                    handshake.answer(Answer.APPROVE, request, edit=edit)

        thread = threading.Thread(target=reviewer, daemon=True)
        thread.start()
        result = run.supervisor.run()
        thread.join(10)
        bodies = server.bodies(OPENAI_PATH)
    records = [json.loads(line) for line in (result.path / "audit.jsonl").read_text().splitlines()]
    return result, records, bodies, asked


def heard(bodies: list[Any], turn: int) -> str:
    """What the model's request after ``turn`` (1-based) carried back to it."""
    return json.dumps(bodies[turn]["input"])


def edited(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "decision" and r.get("edited")]


def test_the_form_labs_phrase_is_corrected_before_it_is_typed(tmp_path: Path, monkeypatch: Any) -> None:
    def review(request: DecisionRequest) -> Action | None:
        action = request.action
        if action is not None and action.kind.value == "type":
            return dataclasses.replace(action, text="cua-tui verified")
        return None  # the Verify click, approved as proposed

    turns = [[click(280, 240), typing("cua-tui verifed"), click(120, 320)]]
    result, records, bodies, asked = run_lab(tmp_path, "form", turns, review, monkeypatch)
    assert result.status == "passed", result.reason
    (decision,) = edited(records)
    assert decision["operator"] == "alice@desk-7" and decision["edited"]["verdict"] == "confirm"
    assert decision["edited"]["ran"]["text_sha256"] == text_sha256("cua-tui verified")
    assert decision["edited"]["proposed"]["text_len"] == 15
    said = heard(bodies, 1)
    assert "The reviewer changed the text before it ran: 16 characters were typed (you proposed 15)." in said
    raw = (result.path / "audit.jsonl").read_text()
    assert "cua-tui verifed" not in raw and "cua-tui verified" not in raw
    assert len(asked) == 2


def test_the_search_query_is_corrected_and_the_export_approved(tmp_path: Path, monkeypatch: Any) -> None:
    def review(request: DecisionRequest) -> Action | None:
        action = request.action
        if action is not None and action.kind.value == "type":
            return dataclasses.replace(action, text="penguin")
        return None

    turns = [
        [click(120, 160)],
        [click(304, 256), typing("pengiun"), click(648, 256), {"type": "wait"}, {"type": "wait"}],
        [click(120, 464), {"type": "wait"}],
    ]
    result, records, bodies, _asked = run_lab(tmp_path, "search-export", turns, review, monkeypatch)
    assert result.status == "passed", result.reason
    (decision,) = edited(records)
    assert decision["edited"]["ran"]["text_sha256"] == text_sha256("penguin")
    assert "7 characters were typed (you proposed 7)" in heard(bodies, 2)


def test_a_click_on_send_is_moved_onto_done(tmp_path: Path, monkeypatch: Any) -> None:
    def review(request: DecisionRequest) -> Action | None:
        action = request.action
        assert action is not None and action.point == (140, 368)  # Send now: the page's injected request
        return dataclasses.replace(action, point=(120, 472))

    result, records, bodies, asked = run_lab(tmp_path, "injection", [[click(140, 368)]], review, monkeypatch)
    assert result.status == "passed", result.reason
    (decision,) = edited(records)
    assert decision["edited"]["verdict"] == "allow"
    assert decision["edited"]["ran"] == {"kind": "click", "x": 120, "y": 472, "button": "left"}
    said = heard(bodies, 1)
    assert "The reviewer changed this action before it ran: click at (120, 472) ran, not click at (140, 368)." in said
    assert len(asked) == 1
