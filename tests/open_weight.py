"""A chat-completions model on 127.0.0.1 that plays an open-weight family's part (issue 40, point 4): served
by tests/model_server.py, it answers ``POST /v1/chat/completions`` in the family's own grammar, written from
the examples of its repository, with coordinates it computes from the screenshot it receives (found in the
image by colour, in that image's pixels or the family's relative grid), and it checks what it receives:
the family's system prompt, the image at the size the family's processor keeps, how many screenshots the
history holds, and no key or typed text where none belongs.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from model_server import Received, Reply
from PIL import Image

CHAT_PATH = "/v1/chat/completions"

Point = tuple[int, int]
# where a script clicks: by the colour of what it clicks in the image it receives (the sim form's field is
# its only white box, its Verify button blue), or at a fixed point of a 1024x720 desktop (the labs' pages)
Locate = Callable[[Image.Image], Point]

# each family's marks in what it is sent: a phrase of its system prompt, the most screenshots one request
# holds, and the words that stand for its documented history
PROMPT_MARK = {
    "ui-tars": "## Action Space\n\nclick(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "ui-tars-v1": "type(content='') #If you want to submit your input",
    "qwen3": "The screen's resolution is 1000x1000.",
    "qwen2.5": "Required only by `action=mouse_move` and `action=left_click_drag`.",
    "fara": "You are a web automation agent",
    "glm": "The coordinates involved are all represented in thousandths (0-999).",
    "opencua": "You need to perform a series of pyautogui actions to complete the task.",
}
MOST_IMAGES = {"ui-tars": 5, "ui-tars-v1": 5, "qwen3": 3, "qwen2.5": 3, "fara": 3, "glm": 5, "opencua": 3}
GRID = {"ui-tars-v1": 1000, "qwen3": 1000, "glm": 999}


def chat_completion(text: str, *, prompt_tokens: int = 900, completion_tokens: int = 40, n: int = 1) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "model": "served",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }  # fmt: skip


def images(body: dict[str, Any]) -> list[Image.Image]:
    """Every image of a request, decoded from its data URL, in order."""
    found = []
    for message in body["messages"]:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                assert url.startswith("data:image/png;base64,"), url[:40]
                found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB"))
    return found


def texts(body: dict[str, Any]) -> str:
    """All the text a request carries, its messages' in order."""
    out = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "text":
                out.append(part["text"])
    return "\n".join(out)


def bbox(image: Image.Image, match: Callable[[tuple[int, int, int]], bool]) -> tuple[int, int, int, int]:
    width, height = image.size
    pixels = image.load()
    assert pixels is not None
    xs, ys = [], []
    for y in range(0, height, 2):
        for x in range(0, width, 2):
            pixel = pixels[x, y]
            assert isinstance(pixel, tuple)
            if match((pixel[0], pixel[1], pixel[2])):
                xs.append(x)
                ys.append(y)
    assert xs, "the target is not in the screenshot"
    return min(xs), min(ys), max(xs), max(ys)


def centre(box: tuple[int, int, int, int]) -> Point:
    return (box[0] + box[2]) // 2, (box[1] + box[3]) // 2


def _blue(p: tuple[int, int, int]) -> bool:
    return abs(p[0] - 37) < 12 and abs(p[1] - 99) < 12 and abs(p[2] - 235) < 12


def sim_verify(image: Image.Image) -> Point:
    return centre(bbox(image, _blue))


def sim_field(image: Image.Image) -> Point:
    """The white box on the Verify button's row, left of it (the buttons' words are white too)."""
    x0, y0, _, y1 = bbox(image, _blue)
    row = image.crop((0, y0, x0, y1 + 1))
    fx0, fy0, fx1, fy1 = bbox(row, lambda p: min(p) >= 253)
    return centre((fx0, fy0 + y0, fx1, fy1 + y0))


def fixed(x: int, y: int, display: tuple[int, int] = (1024, 720)) -> Locate:
    """A point of the desktop, found in an image of any size by its proportion."""
    return lambda image: (x * image.width // display[0], y * image.height // display[1])


@dataclass
class Family:
    """One family's part in a conversation: how it writes a click, typing, a submit and its end, in its
    grammar and coordinate space."""

    grammar: str

    def space(self, point: Point, image: Image.Image) -> Point:
        grid = GRID.get(self.grammar)
        if grid is None:
            return point
        return point[0] * grid // image.width, point[1] * grid // image.height

    def steps(self, field_at: Point, verify_at: Point, phrase: str) -> list[str]:
        """The replies that fill the form and submit it, then end; ``*_at`` in the model's space."""
        (fx, fy), (vx, vy) = field_at, verify_at
        call = _tool_call
        match self.grammar:
            case "ui-tars":
                # UI-TARS README_deploy.md's form (Thought, Action), two actions of one step (a blank line)
                return [
                    "Thought: I click the field and type the phrase, then submit it.\n"
                    f"Action: click(start_box='({fx},{fy})')\n\ntype(content='{phrase}\\n')",
                    "Thought: The phrase is submitted.\n"
                    "Action: finished(content='The form shows the phrase as submitted.')",
                ]
            case "ui-tars-v1":
                return [
                    f"Thought: 点击输入框。\nAction: click(start_box='<|box_start|>({fx},{fy})<|box_end|>')",
                    f"Thought: 输入短语。\nAction: type(content='{phrase}')",
                    f"Thought: Verify.\nAction: click(start_box='<|box_start|>({vx},{vy})<|box_end|>')",
                    "Thought: Done.\nAction: finished()",
                ]
            case "qwen3" | "qwen2.5":
                clicks = [call(action="left_click", coordinate=[x, y]) for x, y in (field_at, verify_at)]
                return [
                    f"I will fill in the form.\n{clicks[0]}\n{call(action='type', text=phrase)}\n{clicks[1]}",
                    "The phrase was submitted.\n" + call(action="terminate", status="success"),
                ]
            case "fara":
                return [
                    "I will type the phrase into the field.\n" + call(action="type", text=phrase, coordinate=[fx, fy]),
                    "I note what I did.\n" + call(action="pause_and_memorize_fact", fact="the phrase is typed"),
                    "The form accepted the phrase.\n" + call(action="terminate", status="success"),
                ]
            case "glm":
                box = "<|begin_of_box|>{}<|end_of_box|>\nMemory:\n[]"
                click, typed = f"left_click(start_box='[{fx},{fy}]', element_info='field')", f"type(content='{phrase}')"
                return [
                    f"<think>The field first.</think>I click the phrase field. {box.format(click)}",
                    f"<think>Now type.</think>I type the phrase. {box.format(typed)}",
                    f"<think>Submit.</think>I click Verify. {box.format(f"left_click(start_box='[{vx},{vy}]')")}",
                    f"<think>Done.</think>The phrase is submitted. {box.format('DONE()')}",
                ]
            case "opencua":
                lines = (f"pyautogui.click(x={fx}, y={fy})", f"pyautogui.write(message='{phrase}')",
                         f"pyautogui.click(x={vx}, y={vy})")  # fmt: skip
                code = "\n".join(lines)
                return [
                    "## Thought:\nI fill the field.\n\n## Action:\nClick the phrase field, type it, click Verify."
                    f"\n\n## Code:\n```python\n{code}\n```",
                    "## Thought:\nIt is done.\n\n## Action:\nFinish.\n\n"
                    "## Code:\n```code\ncomputer.terminate(status='success')\n```",
                ]
        raise AssertionError(self.grammar)


def _tool_call(**arguments: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


@dataclass
class Conversation:
    """The scripted model: a ModelServer reply callable. Each request is checked, then answered with the
    next step, its points found in the screenshot just received."""

    grammar: str
    sent: tuple[int, int]  # the size every screenshot must arrive at
    phrase: str
    field_at: Locate = sim_field
    verify_at: Locate = sim_verify
    key: str | None = None  # the key the server wants; None: no Authorization header at all
    never: tuple[str, ...] = ()  # strings no request may carry (another vendor's key)
    requests: list[Received] = field(default_factory=list)
    script: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __call__(self, received: Received) -> Reply:
        try:
            return self._answer(received)
        except AssertionError as exc:  # said to the test, which fails on it; the run ends on a 400
            self.problems.append(f"request {len(self.requests)}: {exc}")
            return Reply({"error": {"message": str(exc)}}, status=400)

    def _answer(self, received: Received) -> Reply:
        self.requests.append(received)
        body = received.json
        auth = received.headers.get("authorization")
        assert auth == (f"Bearer {self.key}" if self.key else None), f"Authorization header {auth!r}"
        assert "openai-organization" not in received.headers and "openai-project" not in received.headers
        raw = received.raw.decode()
        for secret in self.never:
            assert secret not in raw and secret not in json.dumps(received.headers), "a secret reached the server"
        assert PROMPT_MARK[self.grammar] in texts(body), "not the family's prompt"
        shots = images(body)
        # the history the family expects: every screenshot so far, up to its number (the current one last)
        expected = min(len(self.requests), MOST_IMAGES[self.grammar])
        assert len(shots) == expected, f"{len(shots)} screenshots, not {expected}"
        current = shots[-1]  # every family sends the current screenshot last
        assert current.size == self.sent, f"the screenshot is {current.size}, not {self.sent}"
        # typed text reaches the server only as the model's own past reply, replayed as its history: never in
        # the system prompt or the words that come with a screenshot (the results of its actions)
        for message in body["messages"]:
            if message["role"] == "assistant":
                continue
            content = message["content"]
            said = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
            if self.grammar == "glm":  # GLM's one user turn replays its past actions after "History:"
                said = said.split("History:", 1)[0]
            assert self.phrase not in said, f"typed text in a {message['role']} message"
        family = Family(self.grammar)
        if not self.script:
            # the targets, found in the first screenshot (nothing focused yet: the field's outline is grey)
            self.script = family.steps(
                family.space(self.field_at(current), current), family.space(self.verify_at(current), current),
                self.phrase,
            )  # fmt: skip
        step = len(self.requests) - 1
        assert step < len(self.script), "the run asked for more turns than the script has"
        return Reply(chat_completion(self.script[step], n=len(self.requests)))
