"""Each open-weight family's own prompt and conversation (docs/open-weight.md names the source of
each): its documented system prompt and action space, the task, and the history in the form the model was
trained on (how many past screenshots, in which message, what of its past replies). Nothing secret goes
into a prompt, whatever a published example does (GLM's and OpenCUA's examples tell the model a password:
those lines are left out), and the supervisor's words about what happened to the model's last actions go
where the model reads the next screenshot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.geometry import Size

Message = dict[str, Any]


@dataclass(slots=True)
class Step:
    """One turn of the conversation: the screenshot shown (a data URL; ``half``: at half size, for GLM's
    history), what the model was told with it, and the reply it gave ("" while it is the current turn);
    ``thought`` and ``written`` are the reply's words and its action text as the grammar read them."""

    image: str
    note: str = ""
    reply: str = ""
    thought: str = ""
    written: str = ""
    memory: str = ""
    half: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one family talks: ``build`` (task, past steps, the current step, the size sent) -> the messages;
    ``params`` the sampling its repository uses; ``half_images`` whether the history wants half-size shots."""

    build: Callable[[str, list[Step], Step, Size], list[Message]]
    params: dict[str, Any]
    half_images: bool = False


def image_part(url: str) -> Message:
    return {"type": "image_url", "image_url": {"url": url}}


def text_part(text: str) -> Message:
    return {"type": "text", "text": text}


# ------------------------------------------------------------------------------------------------
# UI-TARS (bytedance/UI-TARS prompts.py @ 7eca1f0, the UI-TARS-1.5 COMPUTER_USE prompt, with
# UI-TARS-desktop's call_user() line; v1: OSWorld's UITARS_USR_PROMPT_THOUGHT with its call-user action
# space). History as OSWorld's agent sends it: the last 5 screenshots, every past reply in full.
# --------------------------------------------------------------------------------------------------
UI_TARS_PROMPT = r"""You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='ctrl c') # Split keys with a space and use lowercase. Also, do not use more than 3 keys in one hotkey action.
type(content='xxx') # Use escape characters \', \", and \n in content part to ensure we can parse the content in normal python string format. If you want to submit your input, use \n at the end of content. 
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \', \", and \n in content part to ensure we can parse the content in normal python string format.
call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.


## Note
- Use English in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
{instruction}
"""
UI_TARS_V1_PROMPT = r"""You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task. 

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='')
type(content='') #If you want to submit your input, use "\n" at the end of `content`.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished()
call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.


## Note
- Use English in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
{instruction}
"""
UI_TARS_IMAGES = 5
_BOX = re.compile(r"(start_box|end_box)='\((\d+),\s*(\d+)\)'")


def _with_box_tokens(reply: str) -> str:
    """A past reply as UI-TARS' agent re-sends it: its points wrapped in the box tokens again (the server
    strips special tokens when it decodes; add_box_token in action_parser.py)."""
    return _BOX.sub(lambda m: f"{m.group(1)}='<|box_start|>({m.group(2)},{m.group(3)})<|box_end|>'", reply)


def _ui_tars(prompt: str) -> Callable[[str, list[Step], Step, Size], list[Message]]:
    def build(task: str, past: list[Step], now: Step, sent: Size) -> list[Message]:
        messages: list[Message] = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": [text_part(prompt.format(instruction=task))]},
        ]
        keep = len(past) - (UI_TARS_IMAGES - 1)
        for number, step in enumerate(past):
            parts = ([text_part(step.note)] if step.note else []) + ([image_part(step.image)] if number >= keep else [])
            if parts:
                messages.append({"role": "user", "content": parts})
            messages.append({"role": "assistant", "content": _with_box_tokens(step.reply)})
        messages.append(
            {"role": "user", "content": ([text_part(now.note)] if now.note else []) + [image_part(now.image)]}
        )
        return messages

    return build


# ------------------------------------------------------------------------------------------------
# Qwen3-VL and Qwen2.5-VL (QwenLM cookbooks/utils/agent_function_call.py ComputerUse; Qwen-Agent's
# NousFnCallPrompt). The cookbooks are single-step and set no history rule: past replies go back as
# the assistant's turns and each result as a <tool_response>, as Qwen-Agent sends them; the last 3
# screenshots are kept (as Fara, trained on Qwen2.5-VL, does).
# --------------------------------------------------------------------------------------------------
QWEN_IMAGES = 3
# the function signatures' part, word for word in Qwen-Agent's template and in Fara's own
_FN_SIGNATURES = """You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tool_descs}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""
FN_CALL_TEMPLATE = (
    """# Tools

You may call one or more functions to assist with the user query.

"""
    + _FN_SIGNATURES
)

# the computer's description both Qwen's cookbook and Fara give, word for word, up to where they part
_SCREEN_BULLETS = """Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a desktop GUI. You do not have access to a terminal or applications menu. You must click on desktop icons to start applications.
* Some applications may take time to start or process actions, so you may need to wait and take successive screenshots to see the results of your actions. E.g. if you click on Firefox and a window doesn't open, try wait and taking another screenshot.
* The screen's resolution is {width}x{height}.
* Whenever you intend to move the cursor to click on an element like an icon, you should consult a screenshot to determine the coordinates of the element before moving the cursor.
* If you tried clicking on a program or link but it failed to load, even after waiting, try adjusting your cursor position so that the tip of the cursor visually falls on the element that you want to click.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on their edges"""
_QWEN_DESCRIPTION = _SCREEN_BULLETS + """{unless}."""
_QWEN3_ACTIONS = """The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `left_click_drag`: Click and drag the cursor to a specified (x, y) pixel coordinate on the screen.
* `right_click`: Click the right mouse button at a specified (x, y) pixel coordinate on the screen.
* `middle_click`: Click the middle mouse button at a specified (x, y) pixel coordinate on the screen.
* `double_click`: Double-click the left mouse button at a specified (x, y) pixel coordinate on the screen.
* `triple_click`: Triple-click the left mouse button at a specified (x, y) pixel coordinate on the screen (simulated as double-click since it's the closest action).
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `hscroll`: Performs a horizontal scroll (mapped to regular scroll).
* `wait`: Wait specified seconds for the change to happen.
* `terminate`: Terminate the current task and report its completion status.
* `answer`: Answer a question."""
_QWEN25_ACTIONS = """The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button.
* `left_click_drag`: Click and drag the cursor to a specified (x, y) pixel coordinate on the screen.
* `right_click`: Click the right mouse button.
* `middle_click`: Click the middle mouse button.
* `double_click`: Double-click the left mouse button.
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `wait`: Wait specified seconds for the change to happen.
* `terminate`: Terminate the current task and report its completion status."""
_QWEN3_ENUM = ["key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click",
               "double_click", "triple_click", "scroll", "hscroll", "wait", "terminate", "answer"]  # fmt: skip
_QWEN25_ENUM = ["key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click",
                "double_click", "scroll", "wait", "terminate"]  # fmt: skip


def qwen_tool(screen: Size, *, qwen3: bool) -> dict[str, Any]:
    """The computer_use function as the cookbook describes it (Qwen3-VL's screen: its 1000x1000 grid)."""
    coordinate = (
        "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) coordinates to move the mouse to."
    )
    if not qwen3:
        coordinate += " Required only by `action=mouse_move` and `action=left_click_drag`."
    properties: dict[str, Any] = {
        "action": {"description": _QWEN3_ACTIONS if qwen3 else _QWEN25_ACTIONS,
                   "enum": _QWEN3_ENUM if qwen3 else _QWEN25_ENUM, "type": "string"},
        "keys": {"description": "Required only by `action=key`.", "type": "array"},
        "text": {"description": "Required only by `action=type` and `action=answer`." if qwen3
                 else "Required only by `action=type`.", "type": "string"},
        "coordinate": {"description": coordinate, "type": "array"},
        "pixels": {"description": "The amount of scrolling to perform. Positive values scroll up, negative values scroll down. "
                   + ("Required only by `action=scroll` and `action=hscroll`." if qwen3 else "Required only by `action=scroll`."),
                   "type": "number"},
        "time": {"description": "The seconds to wait. Required only by `action=wait`.", "type": "number"},
        "status": {"description": "The status of the task. Required only by `action=terminate`.", "type": "string",
                   "enum": ["success", "failure"]},
    }  # fmt: skip
    description = _QWEN_DESCRIPTION.format(
        width=screen.width, height=screen.height, unless="" if qwen3 else " unless asked"
    )
    return {"name": "computer_use", "description": description,
            "parameters": {"properties": properties, "required": ["action"], "type": "object"}}  # fmt: skip


def tools_text(function: dict[str, Any], template: str = FN_CALL_TEMPLATE) -> str:
    return template.format(tool_descs=json.dumps({"type": "function", "function": function}, ensure_ascii=False))


def _qwen(qwen3: bool) -> Callable[[str, list[Step], Step, Size], list[Message]]:
    def build(task: str, past: list[Step], now: Step, sent: Size) -> list[Message]:
        screen = Size(1000, 1000) if qwen3 else sent
        system = "You are a helpful assistant.\n\n" + tools_text(qwen_tool(screen, qwen3=qwen3))
        messages: list[Message] = [{"role": "system", "content": system}]
        steps = [*past, now]
        keep = len(steps) - QWEN_IMAGES
        for number, step in enumerate(steps):
            parts = (
                [text_part(task)]
                if number == 0
                else [text_part(f"<tool_response>\n{step.note or 'Done.'}\n</tool_response>")]
            )
            if number >= keep:
                parts.append(image_part(step.image))
            messages.append({"role": "user", "content": parts})
            if step is not now:
                messages.append({"role": "assistant", "content": step.reply})
        return messages

    return build


# ------------------------------------------------------------------------------------------------
# Fara-7B (microsoft/fara src/fara/_prompts.py and fara_agent.py @ 3f3f1fd): its own template and
# computer_use function; the first message the screenshot then the task, then "Here is the next
# screenshot. Think about what to do next."; 3 screenshots kept; an older turn is dropped whole but
# the task's text.
# --------------------------------------------------------------------------------------------------
FARA_IMAGES = 3
FARA_NEXT = "Here is the next screenshot. Think about what to do next."
FARA_TEMPLATE = (
    """You are a web automation agent that performs actions on websites to fulfill user requests by calling various tools.
* You should stop execution at Critical Points. A Critical Point would be encountered in tasks like 'Checkout', 'Book', 'Purchase', 'Call', 'Email', 'Order', etc where a binding transaction/agreement would require the user's permission/personal or sensitive information (name, email, credit card, address, payment information, resume, etc) in order to complete a transaction (purchase, reservation, sign-up etc), or to communicate in a way that a human would be expected to do (call, email, apply to a job, etc).
* Solve the task as far as you can up until a Critical Point:
    - For example, if the task is to "call a restaurant to make a reservation", you should not actually make the call but should navigate to the restaurant's page and find the phone number.
    - Similarly, if the task is to "order new size 12 running shoes" you should not actually place the order but should instead search for the right shoes that meet the criteria and add them to the cart.
    - Some tasks, like answering questions, may not encounter a Critical Point at all.

"""
    + _FN_SIGNATURES
)
_FARA_DESCRIPTION = (
    _SCREEN_BULLETS
    + """ unless asked.
* When a separate scrollable container prominently overlays the webpage, if you want to scroll within it, you typically need to mouse_move() over it first and then scroll().
* If a popup window appears that you want to close, if left_click() on the 'X' or close button doesn't work, try key(keys=['Escape']) to close it.
* On some search bars, when you type(), you may need to press_enter=False and instead separately call left_click() on the search button to submit the search query. This is especially true of search bars that have auto-suggest popups for e.g. locations
* For calendar widgets, you usually need to left_click() on arrows to move between months and left_click() on dates to select them; type() is not typically used to input dates there."""
)
_FARA_ACTIONS = """The action to perform. The available actions are:
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order. Includes "Enter", "Alt", "Shift", "Tab", "Control", "Backspace", "Delete", "Escape", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageDown", "PageUp", "Shift", etc.
* `type`: Type a string of text on the keyboard.
* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.
* `left_click`: Click the left mouse button.
* `scroll`: Performs a scroll of the mouse scroll wheel.
* `visit_url`: Visit a specified URL.
* `web_search`: Perform a web search with a specified query.
* `history_back`: Go back to the previous page in the browser history.
* `pause_and_memorize_fact`: Pause and memorize a fact for future reference.
* `wait`: Wait specified seconds for the change to happen.
* `terminate`: Terminate the current task and report its completion status."""


def fara_tool(screen: Size) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "action": {"description": _FARA_ACTIONS,
                   "enum": ["key", "type", "mouse_move", "left_click", "scroll", "visit_url", "web_search",
                            "history_back", "pause_and_memorize_fact", "wait", "terminate"], "type": "string"},
        "keys": {"description": "Required only by `action=key`.", "type": "array"},
        "text": {"description": "Required only by `action=type`.", "type": "string"},
        "press_enter": {"description": "Whether to press the Enter key after typing. Required only by `action=type`.",
                        "type": "boolean"},
        "delete_existing_text": {"description": "Whether to delete existing text before typing. Required only by `action=type`.",
                                 "type": "boolean"},
        "coordinate": {"description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) coordinates to move the mouse to. Required only by `action=left_click`, `action=mouse_move`, and `action=type`.",
                       "type": "array"},
        "pixels": {"description": "The amount of scrolling to perform. Positive values scroll up, negative values scroll down. Required only by `action=scroll`.",
                   "type": "number"},
        "url": {"description": "The URL to visit. Required only by `action=visit_url`.", "type": "string"},
        "query": {"description": "The query to search for. Required only by `action=web_search`.", "type": "string"},
        "fact": {"description": "The fact to remember for the future. Required only by `action=pause_and_memorize_fact`.",
                 "type": "string"},
        "time": {"description": "The seconds to wait. Required only by `action=wait`.", "type": "number"},
        "status": {"description": "The status of the task. Required only by `action=terminate`.", "type": "string",
                   "enum": ["success", "failure"]},
    }  # fmt: skip
    return {"name": "computer_use", "description": _FARA_DESCRIPTION.format(width=screen.width, height=screen.height),
            "parameters": {"properties": properties, "required": ["action"], "type": "object"}}  # fmt: skip


def _fara(task: str, past: list[Step], now: Step, sent: Size) -> list[Message]:
    system = "You are a helpful assistant.\n\n" + tools_text(fara_tool(sent), FARA_TEMPLATE)
    messages: list[Message] = [{"role": "system", "content": system}]
    steps = [*past, now]
    keep = len(steps) - FARA_IMAGES
    for number, step in enumerate(steps):
        text = task if number == 0 else "\n".join(part for part in (step.note, FARA_NEXT) if part)
        if number >= keep:
            messages.append({"role": "user", "content": [image_part(step.image), text_part(text)]})
        elif number == 0:
            messages.append({"role": "user", "content": [text_part(text)]})
        if step is not now:
            messages.append({"role": "assistant", "content": step.reply})
    return messages


# ------------------------------------------------------------------------------------------------
# GLM-4.5V (zai-org/GLM-V examples/gui-agent/glm-45v/agent.md, gui_agent_45v.py get_pc_prompt): one user
# turn, the history as text with the last 4 screenshots at half size inline, the current one last at
# full size, the model's Memory: handed back. The published tail's two password lines are left out.
# --------------------------------------------------------------------------------------------------
GLM_IMAGES = 4
GLM_ACTION_SPACE = """
### {left,right,middle}_click

Call rule: `{left,right,middle}_click(start_box='[x,y]', element_info='')`
{
    'name': ['left_click', 'right_click', 'middle_click'],
    'description': 'Perform a left/right/middle mouse click at the specified coordinates on the screen.',
    'parameters': {
        'type': 'object',
        'properties': {
            'start_box': {
                'type': 'array',
                'items': {
                    'type': 'integer'
                },
                'description': 'Coordinates [x,y] where to perform the click, normalized to 0-999 range.'
            },
            'element_info': {
                'type': 'string',
                'description': 'Optional text description of the UI element being clicked.'
            }
        },
        'required': ['start_box']
    }
}

### hover

Call rule: `hover(start_box='[x,y]', element_info='')`
{
    'name': 'hover',
    'description': 'Move the mouse pointer to the specified coordinates without performing any click action.',
    'parameters': {
        'type': 'object',
        'properties': {
            'start_box': {
                'type': 'array',
                'items': {
                    'type': 'integer'
                },
                'description': 'Coordinates [x,y] where to move the mouse pointer, normalized to 0-999 range.'
            },
            'element_info': {
                'type': 'string',
                'description': 'Optional text description of the UI element being hovered over.'
            }
        },
        'required': ['start_box']
    }
}

### left_double_click

Call rule: `left_double_click(start_box='[x,y]', element_info='')`
{
    'name': 'left_double_click',
    'description': 'Perform a left mouse double-click at the specified coordinates on the screen.',
    'parameters': {
        'type': 'object',
        'properties': {
            'start_box': {
                'type': 'array',
                'items': {
                    'type': 'integer'
                },
                'description': 'Coordinates [x,y] where to perform the double-click, normalized to 0-999 range.'
            },
            'element_info': {
                'type': 'string',
                'description': 'Optional text description of the UI element being double-clicked.'
            }
        },
        'required': ['start_box']
    }
}

### left_drag

Call rule: `left_drag(start_box='[x1,y1]', end_box='[x2,y2]', element_info='')`
{
    'name': 'left_drag',
    'description': 'Drag the mouse from starting coordinates to ending coordinates while holding the left mouse button.',
    'parameters': {
        'type': 'object',
        'properties': {
            'start_box': {
                'type': 'array',
                'items': {
                    'type': 'integer'
                },
                'description': 'Starting coordinates [x1,y1] for the drag operation, normalized to 0-999 range.'
            },
            'end_box': {
                'type': 'array',
                'items': {
                    'type': 'integer'
                },
                'description': 'Ending coordinates [x2,y2] for the drag operation, normalized to 0-999 range.'
            },
            'element_info': {
                'type': 'string',
                'description': 'Optional text description of the UI element being dragged.'
            }
        },
        'required': ['start_box', 'end_box']
    }
}

### key

Call rule: `key(keys='')`
{
    'name': 'key',
    'description': 'Simulate pressing a single key or combination of keys on the keyboard.',
    'parameters': {
        'type': 'object',
        'properties': {
            'keys': {
                'type': 'string',
                'description': 'The key or key combination to press. Use '+' to separate keys in combinations (e.g., 'ctrl+c', 'alt+tab').'
            }
        },
        'required': ['keys']
    }
}

### type

Call rule: `type(content='')`
{
    'name': 'type',
    'description': 'Type text content into the currently focused text input field. This action only performs typing and does not handle field activation or clearing.',
    'parameters': {
        'type': 'object',
        'properties': {
            'content': {
                'type': 'string',
                'description': 'The text content to be typed into the active text field.'
            }
        },
        'required': ['content']
    }
}

### scroll

Call rule: `scroll(start_box='[x,y]', direction='', step=5, element_info='')`
{
    'name': 'scroll',
    'description': 'Scroll an element at the specified coordinates in the specified direction by a given number of wheel steps.',
    'parameters': {
        'type': 'object',
        'properties': {
            'start_box': {
                'type': 'array',
                'items': {
                    'type': 'integer'
                },
                'description': 'Coordinates [x,y] of the element or area to scroll, normalized to 0-999 range.'
            },
            'direction': {
                'type': 'string',
                'enum': ['down', 'up'],
                'description': 'The direction to scroll: 'down' or 'up'.'
            },
            'step': {
                'type': 'integer',
                'default': 5,
                'description': 'Number of wheel steps to scroll, default is 5.'
            },
            'element_info': {
                'type': 'string',
                'description': 'Optional text description of the UI element being scrolled.'
            }
        },
        'required': ['start_box', 'direction']
    }
}

### WAIT

Call rule: `WAIT()`
{
    'name': 'WAIT',
    'description': 'Wait for 5 seconds before proceeding to the next action.',
    'parameters': {
        'type': 'object',
        'properties': {},
        'required': []
    }
}

### DONE

Call rule: `DONE()`
{
    'name': 'DONE',
    'description': 'Indicate that the current task has been completed successfully and no further actions are needed.',
    'parameters': {
        'type': 'object',
        'properties': {},
        'required': []
    }
}

### FAIL

Call rule: `FAIL()`
{
    'name': 'FAIL',
    'description': 'Indicate that the current task cannot be completed or is impossible to accomplish.',
    'parameters': {
        'type': 'object',
        'properties': {},
        'required': []
    }
}"""
GLM_HEAD = """You are a GUI Agent, and your primary task is to respond accurately to user requests or questions. In addition to directly answering the user's queries, you can also use tools or perform GUI operations directly until you fulfill the user's request or provide a correct answer. You should carefully read and understand the images and questions provided by the user, and engage in thinking and reflection when appropriate. The coordinates involved are all represented in thousandths (0-999).

# Task:
{task}

# Task Platform
Ubuntu

# Action Space
{action_space}

# Historical Actions and Current Memory
History:"""
GLM_TAIL = """
Memory:
{memory}
# Output Format
Plain text explanation with action(param='...')
Memory:
[{{"key": "value"}}, ...]

# Some Additional Notes
- I'll give you the most recent 4 history screenshots(shrunked to 50%*50%) along with the historical action steps.
- You should put the key information you *have to remember* in a seperated memory part and I'll give it to you in the next round. The content in this part should be a dict list. If you no longer need some given information, you should remove it from the memory. Even if you don't need to remember anything, you should also output an empty list.

Current Screenshot:
"""


def _glm(task: str, past: list[Step], now: Step, sent: Size) -> list[Message]:
    content: list[Message] = []
    text = GLM_HEAD.format(task=task, action_space=GLM_ACTION_SPACE)
    keep = len(past) - GLM_IMAGES
    for number, step in enumerate(past):
        said = f" Thought: {step.thought}\nAction: {step.written}"
        if step is not past[-1] and past[number + 1].note:
            said += f"\nResult: {past[number + 1].note}"
        if number < keep:
            text += f"\nstep {number + 1}: Screenshot:(Omitted in context.){said}"
            continue
        content.append(text_part(text + f"\nstep {number + 1}: Screenshot:"))
        content.append(image_part(step.half or step.image))
        text = said
    if now.note:
        text += f"\nResult: {now.note}"
    memory = past[-1].memory if past and past[-1].memory else "[]"
    content.append(text_part(text + GLM_TAIL.format(memory=memory)))
    content.append(image_part(now.image))
    return [{"role": "user", "content": content}]


# ------------------------------------------------------------------------------------------------
# OpenCUA-7B/32B (OSWorld mm_agents/opencua prompts.py: the L2 system prompt of its training data, without
# the evaluation's password line; the action history; 3 screenshots).
# --------------------------------------------------------------------------------------------------
OPENCUA_IMAGES = 3
OPENCUA_SYSTEM = """You are a GUI agent. You are given a task and a screenshot of the screen. You need to perform a series of pyautogui actions to complete the task. If the task is not possible to do, output the action computer.terminate(status='failure').

For each step, provide your response in this format:

Thought:
  - Step by Step Progress Assessment:
    - Analyze completed task parts and their contribution to the overall goal
    - Reflect on potential errors, unexpected results, or obstacles
    - If previous action was incorrect, predict a logical recovery step
  - Next Action Analysis:
    - List possible next actions based on current state
    - Evaluate options considering current state and previous actions
    - Propose most logical next action
    - Anticipate consequences of the proposed action
  - For Text Input Actions:
    - Note current cursor position
    - Consolidate repetitive actions (specify count for multiple keypresses)
    - Describe expected final text outcome
  - Use first-person perspective in reasoning

Action:
  Provide clear, concise, and actionable instructions:
  - If the action involves interacting with a specific target:
    - Describe target explicitly without using coordinates
    - Specify element names when possible (use original language if non-English)
    - Describe features (shape, color, position) if name unavailable
    - For window control buttons, identify correctly (minimize "—", maximize "□", close "X")
  - if the action involves keyboard actions like 'press', 'write', 'hotkey':
    - Consolidate repetitive keypresses with count
    - Specify expected text outcome for typing actions

Finally, output the action as PyAutoGUI code or the following functions:
- {"name": "computer.triple_click", "description": "Triple click on the screen", "parameters": {"type": "object", "properties": {"x": {"type": "number", "description": "The x coordinate of the triple click"}, "y": {"type": "number", "description": "The y coordinate of the triple click"}}, "required": ["x", "y"]}}
- {"name": "computer.terminate", "description": "Terminate the current task and report its completion status", "parameters": {"type": "object", "properties": {"status": {"type": "string", "enum": ["success", "failure"], "description": "The status of the task"}}, "required": ["status"]}}"""
OPENCUA_INSTRUCTION = (
    "# Task Instruction:\n{instruction}\n\nPlease generate the next move according to the screenshot, task "
    "instruction and previous steps (if provided).\n"
)
_OPENCUA_ACTION = re.compile(r"^##\s*Action\s*:?\s*$(.*?)(?=^##|\Z)", re.MULTILINE | re.DOTALL | re.IGNORECASE)


def opencua_action(reply: str) -> str:
    """The ``## Action:`` sentence of a past reply, as OpenCUA's history replays it (the code is not)."""
    found = _OPENCUA_ACTION.search(reply)
    return found.group(1).strip() if found else ""


def _opencua(task: str, past: list[Step], now: Step, sent: Size) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": OPENCUA_SYSTEM}]
    keep = len(past) - (OPENCUA_IMAGES - 1)
    older: list[str] = []
    for number, step in enumerate(past):
        history = f"# Step {number + 1}:\n## Action:\n{opencua_action(step.reply)}\n"
        if number < keep:
            older.append(history)
            if number == keep - 1:
                messages.append({"role": "assistant", "content": "\n".join(older)})
            continue
        messages.append({"role": "user", "content": [image_part(step.image)]})
        messages.append({"role": "assistant", "content": history})
    instruction = OPENCUA_INSTRUCTION.format(instruction=task)
    if now.note:
        instruction += f"\nWhat happened to the previous step: {now.note}\n"
    messages.append({"role": "user", "content": [image_part(now.image), text_part(instruction)]})
    return messages


DIALECTS: dict[str, Dialect] = {
    "ui-tars": Dialect(_ui_tars(UI_TARS_PROMPT), {"temperature": 0.0, "max_tokens": 1000, "frequency_penalty": 1}),
    "ui-tars-v1": Dialect(_ui_tars(UI_TARS_V1_PROMPT), {"temperature": 0.0, "max_tokens": 1000, "frequency_penalty": 1}),
    "qwen3": Dialect(_qwen(True), {"temperature": 0.0, "max_tokens": 2048}),
    "qwen2.5": Dialect(_qwen(False), {"temperature": 0.0, "max_tokens": 2048}),
    "fara": Dialect(_fara, {"temperature": 0.0}),
    "glm": Dialect(_glm, {"temperature": 0.001, "max_tokens": 8192, "extra_body": {"skip_special_tokens": False}},
                   half_images=True),
    "opencua": Dialect(_opencua, {"temperature": 0.0, "top_p": 0.9, "max_tokens": 2048}),
}  # fmt: skip
