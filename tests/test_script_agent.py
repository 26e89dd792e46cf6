"""Script files (``--agent script:PATH``) as hostile input: whatever the file holds, loading it gives a
Script or one clear line (ScriptError), never a traceback, a hang, or unbounded memory; and what a script
may legitimately carry (malformed actions, odd text) reaches the supervisor as a model's reply would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cua_tui.agents.script import MAX_SCRIPT_BYTES, Script, ScriptAgent, ScriptError
from cua_tui.core import events as ev

LONE = json.loads('"\\ud800"')
CLICK = {"type": "click", "x": 250, "y": 182}


def load_text(tmp_path: Path, text: str | bytes) -> Script:
    path = tmp_path / "script.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return Script.load(path)


def refused(tmp_path: Path, text: str | bytes | None = None, *, data: Any = None) -> str:
    with pytest.raises(ScriptError) as info:
        if data is not None:
            Script.from_data(data)
        else:
            assert text is not None
            load_text(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def actions_in(levels: int) -> str:
    return '{"turns": [{"actions": [{"type": "click", "x": ' + "[" * levels + "]" * levels + ', "y": 1}]}]}'


def test_nesting_up_to_64_levels_is_read(tmp_path: Path) -> None:
    # object, turns, turn, actions, action: 5 levels, and 59 lists in the field make 64
    script = load_text(tmp_path, actions_in(59))
    assert script.turns[0].actions[0]["type"] == "click"


@pytest.mark.parametrize("levels", [60, 5_000, 200_000])
def test_nesting_is_capped_with_a_one_line_error_naming_depth_and_place(tmp_path: Path, levels: int) -> None:
    message = refused(tmp_path, actions_in(levels))
    column = len('{"turns": [{"actions": [{"type": "click", "x": ') + 60  # the 65th level
    assert message == f"script {tmp_path / 'script.json'}: nesting deeper than 64 (line 1, column {column})"


def test_data_built_in_python_is_held_to_the_same_cap() -> None:
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ScriptError, match="nesting deeper than 64"):
        Script.from_data({"turns": [{"actions": [{"type": "click", "x": deep, "y": 1}]}]})


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("NaN", "not valid JSON (NaN is not a JSON number)"),
        ("Infinity", "not valid JSON (Infinity is not a JSON number)"),
        ("-Infinity", "not valid JSON (-Infinity is not a JSON number)"),
        ("1e999", "not valid JSON (the number 1e999 is too large for a double)"),
        ("1" * 5000, "not valid JSON (an integer of more than 4300 digits)"),
    ],
)
def test_numbers_json_does_not_have_are_refused(tmp_path: Path, field: str, message: str) -> None:
    text = '{"turns": [{"actions": [{"type": "click", "x": ' + field + ', "y": 1}]}]}'
    assert refused(tmp_path, text).endswith(message)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"turns": [{"actions": [CLICK], "text": 5}]}, 'turn 1: "text" must be a string'),
        ({"turns": [{"actions": [CLICK], "text": ["a"]}]}, 'turn 1: "text" must be a string'),
        ({"turns": [], "final_text": {"a": 1}}, '"final_text" must be a string'),
        ({"turns": [{"actions": [CLICK], "call_id": 7}]}, 'turn 1: "call_id" must be a string'),
        ({"turns": [{"actions": [CLICK], "call_id": f"c{LONE}"}]}, 'turn 1: "call_id" holds a lone surrogate'),
        (
            {"turns": [{"actions": [CLICK], "pending_safety_checks": [{"id": "a", "code": "b", "message": 5}]}]},
            'turn 1: safety check 1: "message" must be a string',
        ),
        (
            {"turns": [{"actions": [CLICK], "pending_safety_checks": [{"id": LONE, "code": "b"}]}]},
            'turn 1: safety check 1: "id" holds a lone surrogate',
        ),
        (
            {"turns": [{"actions": [CLICK], "pending_safety_checks": [{"id": "a", "code": "b", "approved": 1}]}]},
            "turn 1: safety check 1: unknown key(s): approved",
        ),
        ({"turns": [{"actions": []}]}, 'turn 1: "actions" must be a non-empty list'),
    ],
)
def test_outer_shape_is_strict(tmp_path: Path, data: Any, message: str) -> None:
    assert message in refused(tmp_path, data=data)


def test_null_optional_keys_mean_absent() -> None:
    nulls = Script.from_data(
        {
            "turns": [{"actions": [CLICK], "text": None, "call_id": None, "pending_safety_checks": None}],
            "final_text": None,
        }
    )
    plain = Script.from_data({"turns": [{"actions": [CLICK]}]})
    assert nulls == plain
    check = {"id": "sc", "code": "c", "message": None}
    script = Script.from_data({"turns": [{"actions": [CLICK], "pending_safety_checks": [check]}]})
    assert script.turns[0].safety_checks[0].message == ""


def test_text_with_lone_surrogates_and_hostile_actions_pass_through_as_written(tmp_path: Path) -> None:
    text = (
        '{"turns": [{"text": "hi \\ud800", "actions": [{"type": "type", "text": "a\\udc00"}, {"type": "\\ud801"},'
        ' {"type": "click", "x": [[[[[[[[[[1]]]]]]]]]], "y": NaN_NOT_HERE}]}], "final_text": "bye \\udfff"}'
    ).replace("NaN_NOT_HERE", "1")
    script = load_text(tmp_path, text)
    assert script.turns[0].text == f"hi {LONE}"
    assert script.final_text.endswith(json.loads('"\\udfff"'))
    assert script.turns[0].actions[1] == {"type": json.loads('"\\ud801"')}
    assert script.turns[0].actions[2]["x"] == [[[[[[[[[[1]]]]]]]]]]  # the parser's to refuse, not the loader's


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "script.json"
    os.mkfifo(fifo)
    box: dict[str, Any] = {}

    def load() -> None:
        try:
            Script.load(fifo)
        except ScriptError as exc:
            box["error"] = str(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "loading a FIFO hung"
    assert box["error"] == f"script {fifo}: not a regular file"


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/urandom", "/"])
def test_links_to_devices_and_directories_are_refused(tmp_path: Path, target: str) -> None:
    link = tmp_path / "script.json"
    link.symlink_to(target)
    started = time.monotonic()
    with pytest.raises(ScriptError) as info:
        Script.load(link)
    assert time.monotonic() - started < 2
    assert "not a regular file" in str(info.value) or "cannot read it" in str(info.value)


def test_a_file_over_the_cap_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    with path.open("wb") as fh:
        fh.truncate(MAX_SCRIPT_BYTES + 1)  # sparse: no memory or disk spent
    with pytest.raises(ScriptError) as info:
        Script.load(path)
    assert str(info.value).endswith("larger than 20 MiB")


def test_hostile_script_ends_a_run_with_an_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(actions_in(200_000))
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("cua-tui")), "run", "--headless", "--backend", "sim", "--task", "t",
         "--agent", f"script:{path}", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout and "RecursionError" not in proc.stderr
    assert f"script {path}: nesting deeper than 64 (line 1, column 107)" in proc.stderr + proc.stdout


def test_deeply_nested_actions_in_a_script_are_refused_by_the_parser_and_the_run_goes_on(run_script: Any) -> None:
    deep = [[[[[[[[[[1]]]]]]]]]]
    run = run_script([{"actions": [{"type": "click", "x": deep, "y": 1}, CLICK]}], final_text="done")
    assert run.result.status == "failed"  # the sim form's verifier: nothing was submitted
    proposal, _ = run.of(ev.ActionProposed)
    assert (proposal.error_code, proposal.error) == ("bad_schema", "click action: field 'x' nests deeper than 8 levels")
    assert [o[2] for o in run.outcomes()] == ["refused", "not_executed"]
    assert isinstance(run.agent, ScriptAgent) and len(run.agent.received) == 1
