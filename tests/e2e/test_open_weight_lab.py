"""The form lab on the real local desktop (Xvfb, Chromium, the lab's server) through two open-weight
grammars (issue 40, point 4): the real ``openai`` client talks to the scripted model on 127.0.0.1
(tests/open_weight.py), which gets the screenshot at the size its family's processor keeps, answers in
UI-TARS-1.5's text or Qwen3-VL's ``<tool_call>`` with the field and the Verify button in its own space (pixels
of that image, or the 0-1000 grid), and the lab's server decides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from model_server import ModelServer
from open_weight import CHAT_PATH, Conversation, fixed

from cua_tui.build import RunOptions, build_run
from cua_tui.core.geometry import Size
from cua_tui.core.grammars import GRAMMARS
from cua_tui.desktops.local import missing_programs
from cua_tui.labs.form import INPUT, PHRASE, VERIFY

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

MODELS = {"ui-tars": "ByteDance-Seed/UI-TARS-1.5-7B", "qwen3": "Qwen/Qwen3-VL-8B-Instruct"}


@pytest.mark.parametrize("grammar", list(MODELS))
def test_the_form_lab_passes_through_an_open_weight_grammar(grammar: str, tmp_path: Path, monkeypatch: Any) -> None:
    if missing_programs():
        pytest.fail(f"the local desktop needs {', '.join(missing_programs())} (scripts/setup.sh installs them)")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-this-server")
    monkeypatch.delenv("CUA_TUI_COMPAT_API_KEY", raising=False)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    sent = GRAMMARS[grammar].sizes(Size(1024, 720))[0]
    conversation = Conversation(
        grammar, (sent.width, sent.height), PHRASE,
        field_at=fixed(INPUT.x + INPUT.width // 2, INPUT.y + INPUT.height // 2),
        verify_at=fixed(VERIFY.x + VERIFY.width // 2, VERIFY.y + VERIFY.height // 2),
        never=("sk-openai-not-for-this-server",),
    )  # fmt: skip
    with ModelServer() as server:
        server.script(CHAT_PATH, *[conversation] * 6)
        run = build_run(
            RunOptions(task="", backend="local", lab="form", agent="openai-compatible", model=MODELS[grammar],
                       base_url=f"{server.url}/v1", runs_dir=tmp_path / "runs", decisions="approve", fsync=False)
        )  # fmt: skip
        result = run.supervisor.run()
    assert not conversation.problems, conversation.problems
    assert result.status == "passed", result.reason
    info = json.loads((result.path / "run.json").read_text())
    assert info["grammar"] == grammar and info["lab"] == "form"
    assert PHRASE not in (result.path / "audit.jsonl").read_text()
