"""The open-weight models' grammars (core/grammars, issue 40 point 2): each reader against replies copied from
the models' own repositories (the source beside each), coordinates mapped from each family's space onto a
1024x720 display, the controls (finished, call_user, terminate, memorized facts), and a hostile corpus that is
one ReplyError each, never an exception of another kind, never a call evaluated."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_tui.core.actions import Action, ActionError, Kind
from cua_tui.core.geometry import Scaling, Size
from cua_tui.core.grammars import GRAMMARS, ReplyError, UnknownGrammar, grammar_for, parse_unit
from cua_tui.core.grammars.reply import MAX_REPLY_CHARS, TYPED
from cua_tui.core.grammars.resize import Resize, smart_resize

DISPLAY = Size(1024, 720)


def actions(grammar: str, text: str, cursor: tuple[float, float] | None = None) -> list[Action]:
    reply = GRAMMARS[grammar].read(text, cursor)
    _, scaling = GRAMMARS[grammar].sizes(DISPLAY)
    return [parse_unit(unit, scaling) for unit in reply.units]


def described(grammar: str, text: str) -> list[str]:
    return [action.describe() for action in actions(grammar, text)]


# ---------------------------------------------------------------------------------------------------
# Sizes: the image each family's processor keeps (smart_resize as qwen_vl_utils publishes it)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("height", "width", "expected"),
    # bytedance/UI-TARS README_coordinates.md and action_parser.py, values worked by running the published function
    [(1080, 1920, (1092, 1932)), (1440, 2560, (1428, 2548)), (2160, 3840, (2156, 3836)), (800, 1280, (812, 1288)),
     (768, 1366, (756, 1372))],
)  # fmt: skip
def test_smart_resize_gives_ui_tars_published_sizes(height: int, width: int, expected: tuple[int, int]) -> None:
    assert smart_resize(height, width, 28, 100 * 28 * 28, 16384 * 28 * 28) == expected


def test_each_grammar_sends_a_size_its_processor_keeps_and_maps_the_model_space_onto_the_display() -> None:
    sent = {name: grammar.sizes(DISPLAY)[0] for name, grammar in GRAMMARS.items()}
    # microsoft/fara: 1440x900 -> 1428x896 (fara_agent.py); Qwen3-VL's factor is 32 (patch 16 x merge 2)
    assert sent["ui-tars"] == sent["fara"] == sent["opencua"] == Size(1036, 728)
    assert sent["qwen3"] == Size(1024, 704)
    assert GRAMMARS["fara"].resize(Size(1440, 900)) == Size(1428, 896)
    for name, grammar in GRAMMARS.items():
        assert grammar.resize(sent[name]) == sent[name], name
        _, scaling = grammar.sizes(DISPLAY)
        assert scaling.display == DISPLAY
        if grammar.grid:
            assert scaling.relative and scaling.space == f"0-{grammar.grid}"
        else:
            assert scaling.model == sent[name] and scaling.space == str(sent[name])


@given(st.integers(64, 4000), st.integers(64, 4000))
@settings(max_examples=60, deadline=None)
def test_a_resized_size_is_kept_by_the_same_resize(width: int, height: int) -> None:
    if max(width, height) / min(width, height) > 200:
        return
    resize = Resize(28, 3136, 12_845_056)
    once = resize(Size(width, height))
    assert once.width % 28 == 0 and once.height % 28 == 0 and resize(once) == once


def test_a_relative_grid_maps_its_far_edge_to_the_last_pixel_and_refuses_beyond() -> None:
    grid = Scaling.grid(DISPLAY, 1000)
    assert grid.to_display(500, 500) == (512, 360)
    assert grid.to_display(1000, 1000) == (1023, 719)
    assert grid.to_display(0, 0) == (0, 0)
    with pytest.raises(ValueError):
        grid.to_display(1001, 5)
    assert not grid.is_identity


# ---------------------------------------------------------------------------------------------------
# Inference from model names, never a default
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "grammar"),
    [("ByteDance-Seed/UI-TARS-1.5-7B", "ui-tars"), ("bytedance-research/UI-TARS-7B-SFT", "ui-tars-v1"),
     ("UI-TARS-72B-DPO", "ui-tars-v1"), ("Qwen/Qwen3-VL-8B-Instruct", "qwen3"),
     ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5"),
     ("microsoft/Fara-7B", "fara"), ("zai-org/GLM-4.5V", "glm"), ("THUDM/GLM-4.1V-9B-Thinking", "glm"),
     ("xlangai/OpenCUA-7B", "opencua"), ("opencua-32b", "opencua")],
)  # fmt: skip
def test_well_known_model_names_name_their_grammar(model: str, grammar: str) -> None:
    assert grammar_for(model) == (GRAMMARS[grammar], True)
    assert grammar_for("my-finetune", grammar) == (GRAMMARS[grammar], False)


def test_an_unknown_model_without_a_grammar_is_a_one_line_usage_error_listing_them() -> None:
    with pytest.raises(UnknownGrammar) as caught:
        grammar_for("my-finetune-v3")
    message = str(caught.value)
    assert "\n" not in message and "--grammar" in message
    assert all(name in message for name in GRAMMARS)
    with pytest.raises(UnknownGrammar, match="unknown grammar"):
        grammar_for("Qwen/Qwen3-VL-8B", "qwen4")


# ---------------------------------------------------------------------------------------------------
# UI-TARS: replies copied from bytedance/UI-TARS and UI-TARS-desktop (1.5: pixels of the 1036x728 image)
# ---------------------------------------------------------------------------------------------------
def test_ui_tars_replies_from_its_repositories() -> None:
    # UI-TARS README_deploy.md, "Expected Output"
    deploy = (
        "Thought: 我看到Preferences窗口已经打开了，但这里显示的都是系统资源相关的设置。让我点击它看看里面有什么选项。\n"
        "Action: click(start_box='(177,549)')"
    )
    assert described("ui-tars", deploy) == ["click at (175, 543)"]
    assert GRAMMARS["ui-tars"].read(deploy).thought.startswith("我看到Preferences")
    # UI-TARS README.md usage; codes/README.md (the <point> form); training_example.json (box tokens)
    assert described("ui-tars", "Thought: Click the button\nAction: click(start_box='(100,200)')") == [
        "click at (99, 198)"
    ]
    assert described("ui-tars", "Thought: Click the button\nAction: click(point='<point>200 300</point>')") == [
        "click at (198, 297)"
    ]
    assert described("ui-tars", "Action: click(start_box='<|box_start|>(293,218)<|box_end|>')") == [
        "click at (290, 216)"
    ]
    # UI-TARS-desktop packages/ui-tars/action-parser/test/index.test.ts: Reflection form, a bare 4-number box
    reflection = (
        "Reflection: 在桌面上我看到了Chrome浏览器的图标\nAction_Summary: 通过双击操作来打开浏览器。\n"
        "Action: left_double(start_box='21, 246, 21, 246')"
    )
    assert described("ui-tars", reflection) == ["double_click at (21, 244)"]
    # the same file: Thought and Action on one line; type with submit; hotkey
    same_line = "Thought: The task is to open Chrome. Click on the 'X' button. Action: click(start_box='(962,108)')"
    assert described("ui-tars", same_line) == ["click at (951, 107)"]
    assert described("ui-tars", "Thought: 输入网址doubao.com。\nAction: type(content='doubao.com\\n')") == [
        "type 10 characters",
        "press Return",
    ]
    assert described("ui-tars", "Action_Summary: 粘贴使用 ctrl+v。\nAction: hotkey(key='ctrl v')") == ["press ctrl+v"]
    # operators/nut-js/test/execute.test.ts: drag
    drag = "Thought: adjust the price filter.\nAction: drag(start_box='(72,74)', end_box='(175,74)')"
    assert described("ui-tars", drag) == ["drag (72, 74) → (173, 74) via 2 points"]
    # action-parser/test/actionParser.test.ts: a <think> block before the Thought
    think = (
        "<think>\nOkay, let's see.\n</think>\nThought: clear the text.\nAction: click(point='<point>510 150</point>')"
    )
    reply = GRAMMARS["ui-tars"].read(think)
    assert reply.thought == "clear the text." and len(reply.units) == 1


def test_ui_tars_several_actions_of_one_step_scroll_wait_and_the_v1_grid() -> None:
    two = "Thought: two.\nAction: click(start_box='(100,100)')\n\nscroll(start_box='(518,364)', direction='down')"
    assert described("ui-tars", two) == ["click at (99, 99)", "scroll x=0 y=5 notches at (512, 360)"]
    assert described("ui-tars", "Thought: w\nAction: wait()") == ["wait 5000 ms"]
    # v1 (README_v1.md "Coordinate Mapping"): relative 0-1000
    assert described("ui-tars-v1", "Thought: t\nAction: click(start_box='<|box_start|>(500,500)<|box_end|>')") == [
        "click at (512, 360)"
    ]


def test_ui_tars_controls_finished_and_call_user() -> None:
    done = GRAMMARS["ui-tars"].read("Thought: It is done.\nAction: finished(content='The form is submitted.')")
    assert done.end == "The form is submitted." and not done.units and not done.gave_up
    bare = GRAMMARS["ui-tars-v1"].read("Thought: All set.\nAction: finished()")
    assert bare.end == "All set."
    asks = GRAMMARS["ui-tars"].read("Thought: I need the user's password to go on.\nAction: call_user()")
    assert asks.asks == "I need the user's password to go on." and asks.end is None
    # UI-TARS' own leniency: an unescaped quote in type()'s text
    typed = GRAMMARS["ui-tars"].read("Thought: t\nAction: type(content='It's done')")
    assert typed.units[0]["text"] == "It's done"


def test_ui_tars_actions_of_its_other_prompts_are_refused_with_the_models_words_kept() -> None:
    reply = GRAMMARS["ui-tars"].read("Thought: open the app.\nAction: open_app(app_name='Settings')")
    assert reply.thought == "open the app."
    with pytest.raises(ActionError, match="not available on this desktop"):
        actions("ui-tars", "Thought: open the app.\nAction: open_app(app_name='Settings')")


# ---------------------------------------------------------------------------------------------------
# Qwen3-VL and Qwen2.5-VL: <tool_call> JSON (QwenLM cookbooks), 0-1000 for Qwen3, pixels for Qwen2.5
# ---------------------------------------------------------------------------------------------------
def tool_call(**arguments: Any) -> str:
    import json

    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


def test_qwen_replies_in_each_coordinate_space() -> None:
    # QwenLM/Qwen3-VL cookbooks/mobile_agent.ipynb cell 7 (its form: Thought, Action, then the call)
    mobile = (
        "Thought: To search for Musk in X, I need to click on the search bar at the top of the screen.\n"
        'Action: "I tapped on the search bar to begin searching for Musk."\n'
        + tool_call(action="left_click", coordinate=[447, 81])
    )
    assert described("qwen3", mobile) == ["click at (458, 59)"]
    assert GRAMMARS["qwen3"].read(mobile).thought.startswith("Thought: To search for Musk")
    # yooneo/Qwen2.5-VL computer_use.ipynb cell 13 (a fork's run of the cookbook): pixels of the resized image
    assert described("qwen2.5", tool_call(action="left_click", coordinate=[884, 520])) == ["click at (874, 515)"]
    drag = tool_call(action="mouse_move", coordinate=[100, 100]) + tool_call(
        action="left_click_drag", coordinate=[900, 900]
    )
    assert described("qwen3", drag) == ["move to (103, 72)", "drag (103, 72) → (922, 648) via 2 points"]
    assert described("qwen3", tool_call(action="key", keys=["ctrl", "c"])) == ["press ctrl+c"]
    assert described("qwen3", tool_call(action="scroll", pixels=-3)) == ["scroll x=0 y=3 notches"]
    assert described("qwen3", tool_call(action="wait", time=2)) == ["wait 2000 ms"]


def test_qwen_drag_needs_a_known_start_and_follows_the_pointer_from_the_last_reply() -> None:
    with pytest.raises(ReplyError, match="mouse_move there first"):
        GRAMMARS["qwen3"].read(tool_call(action="left_click_drag", coordinate=[900, 900]))
    reply = GRAMMARS["qwen3"].read(tool_call(action="left_click_drag", coordinate=[900, 900]), (100, 100))
    assert reply.units[0]["from"] == [100, 100] and reply.cursor == (900, 900)


def test_qwen_terminate_and_answer_end_the_run_with_the_models_words() -> None:
    done = GRAMMARS["qwen3"].read("The form is sent.\n" + tool_call(action="terminate", status="success"))
    assert done.end == "The form is sent." and not done.gave_up
    failed = GRAMMARS["qwen3"].read("No such page.\n" + tool_call(action="terminate", status="failure"))
    assert failed.gave_up and failed.end == "No such page."
    answer = GRAMMARS["qwen3"].read(tool_call(action="answer", text="42"))
    assert answer.end == "42"


# ---------------------------------------------------------------------------------------------------
# Fara-7B (microsoft/fara fara_agent.py @ 3f3f1fd): what its harness does with each action
# ---------------------------------------------------------------------------------------------------
def test_fara_actions_become_what_its_harness_does() -> None:
    # README.md, "Example of web_surfer.log", step 1: [1074, 37] on the 1428x896 image of a 1440x900 viewport
    first = "To begin, I will click on the 'Trade-In' button.\n" + tool_call(action="left_click", coordinate=[1074, 37])
    _, scaling = GRAMMARS["fara"].sizes(Size(1440, 900))
    (click,) = [parse_unit(u, scaling) for u in GRAMMARS["fara"].read(first).units]
    # the harness clicked (1083.03, 37.17): here the middle of the display pixels that model pixel covers
    assert click.point == (1084, 38)
    typed = tool_call(action="type", text="GameStop 90028", coordinate=[100, 100], delete_existing_text=True)
    assert described("fara", typed) == ["click at (99, 99)", "press ctrl+a", "press BackSpace", "type 14 characters",
                                        "press Return"]  # fmt: skip
    assert (
        described("fara", tool_call(action="type", text="x", coordinate=[1, 1], press_enter=False))[-1]
        == "type 1 characters"
    )
    assert described("fara", tool_call(action="visit_url", url="example.org")) == [
        "press ctrl+l", "type 11 characters", "press Return"
    ]  # fmt: skip
    assert described("fara", tool_call(action="history_back")) == ["press alt+Left"]
    assert described("fara", tool_call(action="scroll", pixels=400)) == ["scroll x=0 y=-4 notches"]


def test_fara_web_search_is_refused_and_facts_are_kept_and_terminate_claims_the_thoughts() -> None:
    with pytest.raises(ActionError, match="visit_url"):
        actions("fara", tool_call(action="web_search", query="GameStop store locator zip code 90028"))
    memo = GRAMMARS["fara"].read("Noted.\n" + tool_call(action="pause_and_memorize_fact", fact="the store opens at 11"))
    assert memo.memos == ("the store opens at 11",) and not memo.units and memo.end is None
    # README.md step 3: the answer is the thoughts before terminate
    answer = "The closest GameStop store to zip code 90028 is located at 5533 W Sunset Blvd."
    done = GRAMMARS["fara"].read(answer + "\n" + tool_call(action="terminate", status="success"))
    assert done.end == answer


# ---------------------------------------------------------------------------------------------------
# GLM-4.5V (zai-org/GLM-V glmv_reward/tests/cogagent/test_osworld_verifier.py, glm-45v/agent.md): 0-999
# ---------------------------------------------------------------------------------------------------
def test_glm_replies_from_its_repository() -> None:
    box = "<think>test</think>Action: <|begin_of_box|>{}<|end_of_box|>"
    drag = box.format("left_drag(start_box='[100, 100]', end_box='[300, 300]')")
    assert described("glm", drag) == ["drag (103, 72) → (308, 216) via 2 points"]
    scroll = box.format("scroll(start_box='[200, 200]', direction='down', step=3)")
    assert described("glm", scroll) == ["scroll x=0 y=3 notches at (206, 144)"]
    assert described("glm", "<think>test</think>Action: <|begin_of_box|>type(content='hello')<|end_of_box|>") == [
        "type 5 characters"
    ]
    # glm-45v/agent.md's desktop example (the server dropped the box tokens) with its Memory: part
    reply = GRAMMARS["glm"].read(
        "I'll click the OK button to close the error dialog.\n"
        "left_click(start_box='[586, 446]', element_info='OK button')\nMemory:\n[]"
    )
    assert reply.thought == "I'll click the OK button to close the error dialog." and reply.memory == "[]"
    assert reply.written == "left_click(start_box='[586, 446]', element_info='OK button')"
    assert described("glm", "<|begin_of_box|>key(keys='ctrl+c')<|end_of_box|>") == ["press ctrl+c"]
    assert described("glm", "<|begin_of_box|>WAIT()<|end_of_box|>") == ["wait 5000 ms"]


def test_glm_done_and_fail() -> None:
    done = GRAMMARS["glm"].read("<think>test</think>The task is complete. <|begin_of_box|>DONE()<|end_of_box|>")
    assert done.end == "The task is complete." and not done.gave_up
    failed = GRAMMARS["glm"].read("<think>test</think>It cannot be done. <|begin_of_box|>FAIL()<|end_of_box|>")
    assert failed.gave_up and failed.end == "It cannot be done."


# ---------------------------------------------------------------------------------------------------
# OpenCUA (xlang-ai/OpenCUA evaluation/agentnetbench sample data; OSWorld mm_agents/opencua prompts.py)
# ---------------------------------------------------------------------------------------------------
def opencua(code: str, thought: str = "I copy the text.", action: str = "Press Ctrl + C.") -> str:
    return f"## Thought:\n{thought}\n\n## Action:\n{action}\n\n## Code:\n```python\n{code}\n```\n"


def test_opencua_code_from_its_data_is_parsed_never_run() -> None:
    assert described("opencua", opencua("pyautogui.hotkey(keys=['ctrl', 'c'])")) == ["press ctrl+c"]
    # OpenCUA model/README.md's grounding example, on a 1920x1080 screen (a 1932x1092 image)
    _, full_hd = GRAMMARS["opencua"].sizes(Size(1920, 1080))
    (click,) = GRAMMARS["opencua"].read(opencua("pyautogui.click(x=1443, y=343)")).units
    assert parse_unit(click, full_hd).point == (1435, 340)
    assert described("opencua", opencua("pyautogui.rightClick(x=615, y=533)")) == ["click right at (608, 528)"]
    drag = opencua("pyautogui.moveTo(x=328, y=469)\npyautogui.dragTo(x=502, y=603, button='left')")
    assert described("opencua", drag) == ["move to (325, 464)", "drag (325, 464) → (497, 597) via 2 points"]
    assert described("opencua", opencua("pyautogui.moveTo(x=779, y=464)\npyautogui.scroll(-3)")) == [
        "move to (770, 459)", "scroll x=0 y=3 notches"
    ]  # fmt: skip
    assert described("opencua", opencua("pyautogui.write(message='stat')\npyautogui.press(keys=['enter'])")) == [
        "type 4 characters", "press Return"
    ]  # fmt: skip
    assert described("opencua", opencua("computer.triple_click(x=100, y=100)")) == ["triple_click at (99, 99)"]
    done = GRAMMARS["opencua"].read(opencua("computer.terminate(status='success')", thought="Done.", action="Finish."))
    assert done.end and not done.gave_up
    failed = GRAMMARS["opencua"].read(opencua("computer.terminate(status='failure')"))
    assert failed.gave_up


# ---------------------------------------------------------------------------------------------------
# The hostile corpus: one ReplyError each, nothing else
# ---------------------------------------------------------------------------------------------------
HOSTILE: dict[str, list[str]] = {
    "ui-tars": [
        "Thought: no action here",
        "Thought: a\nAction: click(start_box='(1,2)')\nAction: click(start_box='(3,4)')",  # two Action lines
        "Thought: a\nAction: click(start_box='(1,2)'",  # an unclosed call
        "Thought: a\nAction: __import__('os').system('id')",
        "Thought: a\nAction: click(start_box=float('nan'))",
        "Thought: a\nAction: click(start_box='=')",  # seen from v1 DPO models (UI-TARS issue #78)
        "Thought: a\nAction: click(start_box='(1,2)', start_box='(3,4)')",
        "Thought: a\nAction: click(start_box=" + "[" * 40 + "]" * 40 + ")",
        "Thought: a\nAction: click(start_box=f'({1},2)')",
        "Thought: a\nAction: finished(content='x')\n\nclick(start_box='(1,2)')",
        "Thought: a\nAction: click(**{'start_box': '(1,2)'})",
        "Thought: a\nAction: (lambda: 0)()",
        "Thought: a\nAction: type(content='" + "9" * 5000 + "')\x00",
    ],
    "qwen3": [
        "I will click.",  # no tool call
        '<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [1, 2]}}\n',
        '<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [NaN, 1]}}'
        "</tool_call>",
        '<tool_call>{"name": "shell", "arguments": {"cmd": "id"}}</tool_call>',
        '<tool_call>{"name": "computer_use", "arguments": {"action": "rm_rf"}}</tool_call>',
        '<tool_call>{"name": "computer_use", "arguments": ' + "[" * 100 + "]" * 100 + "}</tool_call>",
        '<tool_call>{"name": "computer_use", "arguments": {"action": "terminate", "status": "maybe"}}</tool_call>',
        "<tool_call>not json</tool_call>",
    ],
    "glm": [
        "I think so.",
        "<|begin_of_box|>left_click(start_box='[1,1]')<|end_of_box|> then <|begin_of_box|>DONE()<|end_of_box|>",
        "<|begin_of_box|>left_click(start_box='[1,1]'<|end_of_box|>",
        "<|begin_of_box|>left_click(start_box=open('/etc/passwd'))<|end_of_box|>",
        "<|begin_of_box|>scroll(start_box='[1,1]', direction='sideways')<|end_of_box|>",
    ],
    "opencua": [
        "## Thought:\nno code",
        opencua("import os\nos.system('id')"),
        opencua("pyautogui.click(x=" + "(" * 30 + "1" + ")" * 30 + ", y=2)"),
        opencua("pyautogui.click(x=1e999, y=2)"),
        opencua("exec('print(1)') if True else None"),
        opencua("pyautogui.dragTo(x=1, y=2)"),  # from where? no pointer known
        opencua("pyautogui.click(x=1, y=2)") + "\n```python\npyautogui.click(x=3, y=4)\n```",
        opencua("x = 1"),
    ],
}


@pytest.mark.parametrize(("grammar", "text"), [(g, t) for g, texts in HOSTILE.items() for t in texts])
def test_the_hostile_corpus_is_one_reply_error_each(grammar: str, text: str) -> None:
    with pytest.raises(ReplyError) as caught:
        GRAMMARS[grammar].read(text)
    assert "\n" not in caught.value.reason and caught.value.code


@pytest.mark.parametrize("grammar", list(GRAMMARS))
def test_a_ten_megabyte_reply_is_refused_before_it_is_read(grammar: str) -> None:
    with pytest.raises(ReplyError, match="at most 65536"):
        GRAMMARS[grammar].read("Action: " + "x" * (10 * 1024 * 1024))
    GRAMMARS[grammar].read.__doc__  # noqa: B018  (the bound is the reader's, whatever the grammar)
    assert MAX_REPLY_CHARS == 64 * 1024


@pytest.mark.parametrize(
    ("grammar", "text"),
    [("ui-tars", "Thought: t\nAction: click(start_box='(1036,100)')"),  # one past the 1036-pixel image
     ("ui-tars", "Thought: t\nAction: click(start_box='(-1,100)')"),
     ("qwen3", tool_call(action="left_click", coordinate=[1001, 5])),
     ("glm", "<|begin_of_box|>left_click(start_box='[1000,5]')<|end_of_box|>"),
     ("opencua", opencua("pyautogui.click(x=5000, y=5)"))],
)  # fmt: skip
def test_a_coordinate_off_the_models_space_is_refused_never_clamped(grammar: str, text: str) -> None:
    with pytest.raises(ActionError) as caught:
        actions(grammar, text)
    assert caught.value.code == "outside_screen"


def test_typed_text_never_stays_in_the_models_words_and_markup_stays_literal() -> None:
    reply = GRAMMARS["ui-tars"].read("Thought: I type hunter22 [b]now[/b]\nAction: type(content='hunter22')")
    assert "hunter22" not in reply.thought and TYPED in reply.thought and "[b]now[/b]" in reply.thought
    fara = GRAMMARS["fara"].read("I visit evil.example.\n" + tool_call(action="visit_url", url="evil.example"))
    assert "evil.example" not in fara.thought


@given(st.text(max_size=300))
@settings(max_examples=150, deadline=None)
def test_any_text_is_a_reply_or_a_reply_error(text: str) -> None:
    for grammar in GRAMMARS.values():
        try:
            reply = grammar.read(text)
        except ReplyError:
            continue
        _, scaling = grammar.sizes(DISPLAY)
        for unit in reply.units:
            try:
                parse_unit(unit, scaling)
            except ActionError:
                pass


def test_units_are_parsed_strictly_whatever_handed_them() -> None:
    scaling = Scaling.identity(DISPLAY)
    for raw in [None, "click", {"name": "x"}, {"name": "x", "do": "format_disk"},
                {"name": "x", "do": "click", "at": [1, 2], "shell": "id"},
                {"name": "x", "do": "click", "at": [math.nan, 2]}, {"name": "x", "do": "click", "at": [True, 2]},
                {"name": "x", "do": "wait", "ms": 10**9}, {"name": "x", "do": "type", "text": ""}]:  # fmt: skip
        with pytest.raises(ActionError):
            parse_unit(raw, scaling)
    assert (
        parse_unit({"name": "x", "do": "click", "button": "left", "count": 3, "at": [5, 5]}, scaling).kind
        is Kind.TRIPLE_CLICK
    )


def test_no_prompt_tells_a_model_a_password_whatever_its_published_example_does() -> None:
    """GLM's published desktop prompt and OpenCUA's OSWorld prompt hand the model passwords: not ours."""
    from cua_tui.agents.compat_prompts import DIALECTS, Step

    now = Step("data:image/png;base64,AA==", note="Action 1: Declined by the user.")
    past = [Step("data:image/png;base64,AA==", reply="Thought: t\nAction: wait()", thought="t", written="wait()")]
    for name, dialect in DIALECTS.items():
        text = str(dialect.build("fill the form", past, now, Size(1036, 728)))
        assert "password" not in text.lower() and "osworld-public-evaluation" not in text, name
        assert "fill the form" in text and "Declined by the user." in text, name
