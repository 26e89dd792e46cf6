"""``--agent openai-compatible`` (issue 40): the whole loop through the real ``openai`` package's chat
completions client against a scripted model on 127.0.0.1 (tests/open_weight.py) that plays each family in
its own grammar, finds its targets in the screenshot it receives and checks what it is sent; the sim desktop's
form passes through every grammar. The key: only the compat variable's, never OPENAI_API_KEY, and no header
at all without one. A reply that cannot be read, a call for the person, a refused action: each on record,
each heard by the model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from model_server import ModelServer
from open_weight import CHAT_PATH, Conversation, chat_completion, texts

from cua_tui.build import RunOptions, build_run
from cua_tui.core.actions import text_sha256
from cua_tui.core.geometry import Size
from cua_tui.core.grammars import GRAMMARS
from cua_tui.core.supervisor import ASK_DECLINED
from cua_tui.desktops.sim import PHRASE

# a well-known model name of each family (the grammar is inferred from it), as a server would serve it
MODELS = {
    "ui-tars": "ByteDance-Seed/UI-TARS-1.5-7B",
    "ui-tars-v1": "bytedance-research/UI-TARS-7B-SFT",
    "qwen3": "Qwen/Qwen3-VL-8B-Instruct",
    "qwen2.5": "Qwen/Qwen2.5-VL-7B-Instruct",
    "fara": "microsoft/Fara-7B",
    "glm": "zai-org/GLM-4.5V",
    "opencua": "xlangai/OpenCUA-7B",
}
OPENAI_KEY = "sk-openai-must-never-leave-9f2c"


def sent_size(grammar: str) -> tuple[int, int]:
    return tuple(GRAMMARS[grammar].sizes(Size(1024, 720))[0])  # type: ignore[return-value]


def run(tmp_path: Path, monkeypatch: Any, conversation: Conversation, **options: Any) -> tuple[Any, Path]:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("OPENAI_ADMIN_KEY", OPENAI_KEY + "-admin")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-must-not-leave")
    monkeypatch.delenv("CUA_TUI_COMPAT_API_KEY", raising=False)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    with ModelServer() as server:
        server.script(CHAT_PATH, *[conversation] * 12)
        built = build_run(
            RunOptions(
                task="type the phrase into the field and click Verify",
                backend="sim",
                agent="openai-compatible",
                model=MODELS[conversation.grammar],
                base_url=f"{server.url}/v1",
                runs_dir=tmp_path / "runs",
                decisions="approve",
                fsync=False,
                **options,
            )
        )
        result = built.supervisor.run()
    return result, result.path


def final_text(result: Any) -> str:
    return str(json.loads((result.path / "result.json").read_text())["final_text"])


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "audit.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("grammar", list(MODELS))
def test_every_grammar_fills_the_form_through_the_real_openai_client(
    grammar: str, tmp_path: Path, monkeypatch: Any
) -> None:
    conversation = Conversation(grammar, sent_size(grammar), PHRASE, never=(OPENAI_KEY, "org-must-not-leave"))
    result, path = run(tmp_path, monkeypatch, conversation)
    assert not conversation.problems, conversation.problems
    assert result.status == "passed", result.reason
    info = json.loads((path / "run.json").read_text())
    assert info["agent"] == "openai-compatible" and info["model"] == MODELS[grammar]
    assert (info["grammar"], info["grammar_inferred"]) == (grammar, True)
    every = records(path)
    turns = [r for r in every if r["kind"] == "model_turn"]
    assert turns and all(t["shown"]["sent"] == t["shown"]["seen"] == "{}x{}".format(*sent_size(grammar)) for t in turns)
    assert {t["shown"]["space"] for t in turns} == {GRAMMARS[grammar].sizes(Size(1024, 720))[1].space}
    assert turns[0]["input_tokens"] == 900 and turns[-1]["total_cost_usd"] == 0.0
    # typed text: length and SHA-256 only, in every file of the run
    typed = [r["action"] for r in every if r["kind"] == "proposal" and r["action"] and r["action"]["kind"] == "type"]
    assert typed and all(a["text_sha256"] == text_sha256(PHRASE) for a in typed)
    for file in path.rglob("*"):
        if file.is_file() and file.suffix in (".json", ".jsonl"):
            assert PHRASE not in file.read_text(), file.name
    # the model heard each step: the requests after the first carry its own past reply back
    assert len(conversation.requests) == len(turns)


def serve(conversation: Conversation, tmp_path: Path, model: str) -> Any:
    """A run of ``model`` on the sim desktop against ``conversation``, as the environment has it set up."""
    with ModelServer() as server:
        server.script(CHAT_PATH, *[conversation] * 4)
        built = build_run(
            RunOptions(task="t", backend="sim", agent="openai-compatible", model=model, base_url=f"{server.url}/v1",
                       runs_dir=tmp_path / "runs", decisions="approve", fsync=False)
        )  # fmt: skip
        return built.supervisor.run()


def test_the_key_is_the_compat_variables_never_openais(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("CUA_TUI_COMPAT_API_KEY", "vllm-key-1")
    conversation = Conversation("qwen3", sent_size("qwen3"), PHRASE, key="vllm-key-1", never=(OPENAI_KEY,))
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    result = serve(conversation, tmp_path, "Qwen/Qwen3-VL-8B-Instruct")
    assert not conversation.problems and result.status == "passed"
    assert "vllm-key-1" not in (result.path / "run.json").read_text() + (result.path / "audit.jsonl").read_text()
    # the ATIF trajectory names the model and the grammar, and says what each turn was shown
    from atif_schema import Trajectory
    from click.testing import CliRunner

    from cua_tui.cli import main

    out = tmp_path / "trajectory.json"
    exported = CliRunner().invoke(main, ["export", str(result.path), "--atif", str(out)], catch_exceptions=False)
    assert exported.exit_code == 0, exported.output
    data = json.loads(out.read_bytes())
    Trajectory.model_validate(data)
    assert data["agent"]["model_name"] == "Qwen/Qwen3-VL-8B-Instruct"
    assert data["agent"]["extra"]["cua_tui"]["grammar"] == "qwen3"
    turns = [s for s in data["steps"] if s["source"] == "agent"]
    assert turns[0]["extra"]["cua_tui"]["shown"] == {"sent": "1024x704", "seen": "1024x704", "space": "0-1000"}


def test_a_key_in_the_variable_the_settings_name(tmp_path: Path, monkeypatch: Any) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[openai-compatible]\napi_key_variable = "MY_VLLM_KEY"\ngrammar = "opencua"\n')
    conversation = Conversation("opencua", sent_size("opencua"), PHRASE, key="from-my-variable")
    monkeypatch.setenv("MY_VLLM_KEY", "from-my-variable")
    monkeypatch.delenv("CUA_TUI_COMPAT_API_KEY", raising=False)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(settings))
    result = serve(conversation, tmp_path, "my-own-finetune")
    assert not conversation.problems and result.status == "passed"
    info = json.loads((result.path / "run.json").read_text())
    assert (info["grammar"], info["grammar_inferred"]) == ("opencua", False)


def test_settings_may_not_name_another_vendors_key_variable(tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[openai-compatible]\napi_key_variable = "OPENAI_API_KEY"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", "run", "--headless", "--backend", "sim", "--agent", "openai-compatible",
         "--model", "Qwen/Qwen3-VL-8B", "--base-url", "http://127.0.0.1:9/v1", "--task", "t"],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "CUA_TUI_CONFIG": str(settings)},
    )  # fmt: skip
    assert proc.returncode == 2 and "another vendor's key" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [(["--model", "my-finetune", "--base-url", "http://127.0.0.1:9/v1"],
      "no grammar is known for model 'my-finetune': give --grammar, one of ui-tars,"),
     (["--model", "Qwen/Qwen3-VL-8B"], "needs --base-url"),
     (["--base-url", "http://127.0.0.1:9/v1"], "needs --model"),
     (["--model", "x", "--grammar", "qwen4"], "Invalid value for '--grammar'")],
)  # fmt: skip
def test_what_an_open_weight_run_lacks_is_a_one_line_usage_error(flags: list[str], said: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cua_tui.cli", "run", "--headless", "--backend", "sim", "--agent", "openai-compatible",
         "--task", "t", *flags],
        capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "CUA_TUI_CONFIG": str(tmp_path / "x")},
    )  # fmt: skip
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 3


def scripted(grammar: str, replies: list[str]) -> Any:
    """A model that answers these replies in turn (no checks), recording what it is sent."""
    sent: list[dict[str, Any]] = []

    def answer(received: Any) -> Any:
        from model_server import Reply

        sent.append(received.json)
        return Reply(chat_completion(replies[min(len(sent), len(replies)) - 1], n=len(sent)))

    return answer, sent


def run_replies(tmp_path: Path, monkeypatch: Any, grammar: str, replies: list[str], decisions: str = "approve") -> Any:
    monkeypatch.delenv("CUA_TUI_COMPAT_API_KEY", raising=False)
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "none.toml"))
    answer, sent = scripted(grammar, replies)
    with ModelServer() as server:
        server.script(CHAT_PATH, *[answer] * (len(replies) + 2))
        built = build_run(
            RunOptions(task="fill the form", backend="sim", agent="openai-compatible", model=MODELS[grammar],
                       base_url=f"{server.url}/v1", runs_dir=tmp_path / "runs", decisions=decisions, fsync=False,
                       max_turns=12)
        )  # fmt: skip
        result = built.supervisor.run()
    return result, records(result.path), sent


def test_a_reply_that_cannot_be_read_is_one_refusal_and_the_model_hears_why(tmp_path: Path, monkeypatch: Any) -> None:
    replies = [
        "Thought: two at once\nAction: click(start_box='(1,2)')\nAction: type(content='s3cret-typed')",
        "Thought: The field.\nAction: finished(content='stopped')",
    ]
    result, every, sent = run_replies(tmp_path, monkeypatch, "ui-tars", replies)
    (refused,) = [r for r in every if r["kind"] == "turn_refused"]
    assert "more than one 'Action:' line" in refused["reason"] and refused["actions"] == 0
    assert not [r for r in every if r["kind"] == "proposal"]
    assert "Your last reply could not be read: the reply has more than one 'Action:' line" in texts(sent[1])
    assert "s3cret-typed" not in (result.path / "audit.jsonl").read_text()
    assert final_text(result) == "stopped"


def test_call_user_is_a_decision_that_lets_the_model_go_on(tmp_path: Path, monkeypatch: Any) -> None:
    replies = [
        "Thought: I need the user to log in for me.\nAction: call_user()",
        "Thought: Going on.\nAction: finished(content='done')",
    ]
    result, every, sent = run_replies(tmp_path, monkeypatch, "ui-tars", replies)
    (asked,) = [r for r in every if r["kind"] == "decision_requested"]
    assert asked["subject"] == "ask" and "the model asks for you: I need the user to log in for me." in asked["reason"]
    assert ASK_DECLINED in texts(sent[1])
    assert result.status in ("passed", "failed", "finished")


def test_a_refused_action_and_a_memorized_fact_are_heard_and_kept(tmp_path: Path, monkeypatch: Any) -> None:
    call = '<tool_call>\n{{"name": "computer_use", "arguments": {}}}\n</tool_call>'
    replies = [
        "Search first.\n" + call.format('{"action": "web_search", "query": "penguins"}'),
        "Noted.\n" + call.format('{"action": "pause_and_memorize_fact", "fact": "no search here"}'),
        "Stop.\n" + call.format('{"action": "terminate", "status": "failure"}'),
    ]
    result, every, sent = run_replies(tmp_path, monkeypatch, "fara", replies)
    (proposal,) = [r for r in every if r["kind"] == "proposal"]
    assert proposal["raw_kind"] == "web_search" and "visit_url" in proposal["error"]
    assert "visit_url" in texts(sent[1])  # the refusal's reason, heard
    turns = [r for r in every if r["kind"] == "model_turn"]
    assert "Memorized: no search here" in turns[1]["text"]
    assert final_text(result) == "gave up: Stop."


LOOK = {
    "ui-tars": ("Thought: I look around.\nAction: click(start_box='(900,600)')",
                "Thought: Done.\nAction: finished(content='looked')"),
    "qwen3": ('<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [880, 830]}}'
              "\n</tool_call>",
              '<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "success"}}'
              "\n</tool_call>"),
    "fara": ('Look.\n<tool_call>\n{"name": "computer_use", '
             '"arguments": {"action": "left_click", "coordinate": [900, 600]}}\n</tool_call>',
             'Done.\n<tool_call>\n{"name": "computer_use", "arguments": {"action": "terminate", "status": "success"}}'
             "\n</tool_call>"),
    "glm": ("I look. <|begin_of_box|>left_click(start_box='[880,830]')<|end_of_box|>\nMemory:\n[]",
            "Done. <|begin_of_box|>DONE()<|end_of_box|>\nMemory:\n[]"),
    "opencua": ("## Thought:\nI look.\n\n## Action:\nClick the page.\n\n"
                "## Code:\n```python\npyautogui.click(x=900, y=600)\n```",
                "## Thought:\nDone.\n\n## Action:\nStop.\n\n"
                "## Code:\n```code\ncomputer.terminate(status='success')\n```"),
}  # fmt: skip


@pytest.mark.parametrize(("grammar", "most"), [("ui-tars", 5), ("qwen3", 3), ("fara", 3), ("glm", 5), ("opencua", 3)])
def test_the_history_holds_as_many_screenshots_as_the_family_expects(
    grammar: str, most: int, tmp_path: Path, monkeypatch: Any
) -> None:
    from open_weight import images

    look, done = LOOK[grammar]
    result, _, sent = run_replies(tmp_path, monkeypatch, grammar, [look] * 9 + [done])
    assert final_text(result) and len(sent) == 10
    assert [len(images(body)) for body in sent] == [min(k, most) for k in range(1, 11)]
    full = sent_size(grammar)
    last = images(sent[-1])
    assert last[-1].size == full  # the current screenshot, at the size the processor keeps
    if grammar == "glm":  # the history's screenshots at half size, in one user turn
        assert {shot.size for shot in last[:-1]} == {(full[0] // 2, full[1] // 2)}
        assert [m["role"] for m in sent[-1]["messages"]] == ["user"]
        assert "step 1: Screenshot:(Omitted in context.)" in texts(sent[-1])
    if grammar == "opencua":  # the older steps as one assistant message of their ## Action: lines
        assert "# Step 1:\n## Action:\nClick the page." in texts(sent[-1])
    # every past reply is in the history (the families that replay them whole)
    if grammar in ("ui-tars", "qwen3", "fara"):
        replies = [m for m in sent[-1]["messages"] if m["role"] == "assistant"]
        assert len(replies) == 9
