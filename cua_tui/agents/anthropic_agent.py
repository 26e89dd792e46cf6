"""``--agent anthropic``: the Messages API with the ``computer_toolset_20260801`` toolset, through the
official ``anthropic`` SDK (imported lazily, when the agent is built). The conversation is kept here (the
API is stateless) and every ``tool_use`` is answered. Wire format: docs/models.md, "What is sent".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Self, Unpack

from ..core.actions import ANTHROPIC_MEMBERS, ANTHROPIC_TO_KIND, Kind
from ..core.geometry import OutOfRange, Scaling
from ..core.ports import ActionResult, AgentError, Call, CallResult, Frame, Turn
from ..core.text import encodable, one_line
from .images import b64, fit_png
from .replies import encodable_tree, reply_id, reply_list
from .vendor_agent import NO_RESULT, VendorAgent, VendorOptions, by_call
from .vendors import VENDORS, AgentRequest

if TYPE_CHECKING:
    # the client type of the base class below (a string there: the SDK loads when the agent is built)
    import anthropic  # noqa: F401

DEFAULT_MODEL = VENDORS["anthropic"].default_model or ""
TOOLSET_TYPE = "computer_toolset_20260801"
DEFAULT_MAX_TOKENS = 8192
DEFAULT_KEEP_IMAGES = 8
OMITTED_IMAGE = "[an earlier screenshot was removed from the conversation to save space]"
# Counted as input: cached tokens are input tokens too (priced at the base rate, see prices.py).
INPUT_TOKENS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

_CURSOR = re.compile(r"^X=(\d+),Y=(\d+)$")


def toolset(withheld: frozenset[Kind] | set[Kind] = frozenset()) -> dict[str, Any]:
    """The ``tools[]`` entry, members of withheld kinds disabled."""
    entry: dict[str, Any] = {"type": TOOLSET_TYPE}
    disabled = {m: {"enabled": False} for m in ANTHROPIC_MEMBERS if ANTHROPIC_TO_KIND[m] in withheld}
    if disabled:
        entry["configs"] = disabled
    return entry


class AnthropicAgent(VendorAgent["anthropic.Anthropic"]):
    """One run's conversation with a Claude model. Not reusable across runs."""

    name = "anthropic"
    client_class = "Anthropic"

    def __init__(
        self,
        api_key: str,
        model: str = DEFAULT_MODEL,
        *,
        withheld: frozenset[Kind] | set[Kind] = frozenset(),
        max_tokens: int = DEFAULT_MAX_TOKENS,
        keep_images: int = DEFAULT_KEEP_IMAGES,
        **options: Unpack[VendorOptions],
    ) -> None:
        super().__init__(api_key, model, **options)
        self.max_tokens = max_tokens
        self.keep_images = max(1, keep_images)
        self.tool = toolset(frozenset(withheld))
        self.messages: list[dict[str, Any]] = []
        # the tool_use blocks of the last reply, each owed a result
        self._pending: list[dict[str, Any]] = []
        self._scaling: Scaling | None = None

    @classmethod
    def from_request(cls, request: AgentRequest) -> Self:
        """As every vendor's, with the policy's withheld kinds: the toolset disables those members."""
        return cls(request.key or "", request.model or "", withheld=request.withheld, **cls.request_options(request))

    # ---------------------------------------------------------------------------------------------
    # Agent protocol
    # ----------------------------------------------------------------------------------------------
    def start(self, task: str, frame: Frame) -> Turn:
        png, scaling = fit_png(frame, self.limits)
        self.messages.append({"role": "user", "content": [_image(png), {"type": "text", "text": task}]})
        return self._request(scaling)

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        png, scaling = fit_png(frame, self.limits)
        found = by_call(results)
        blocks: list[dict[str, Any]] = []
        for block in self._pending:
            result = found.get(block["id"])
            action = result.results[0] if result is not None and result.results else None
            blocks.append(self._tool_result(block, action))
        if blocks and not blocks[-1].get("is_error"):
            blocks[-1]["content"].append(_image(png))
        else:
            # an error result carries text only: the screen follows the results
            blocks.append(_image(png))
        if note:
            # after the results: what else happened on the desktop (a takeover), in the supervisor's words
            blocks.append({"type": "text", "text": encodable(note)})
        self.messages.append({"role": "user", "content": blocks})
        return self._request(scaling)

    # ---------------------------------------------------------------------------------------------
    def _tool_result(self, block: dict[str, Any], action: ActionResult | None) -> dict[str, Any]:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block["id"]}
        if isinstance(block.get("toolset_name"), str):
            result["toolset_name"] = block["toolset_name"]
        if action is None or not action.ok:
            result["is_error"] = True
            result["content"] = [{"type": "text", "text": encodable(action.message if action else "") or NO_RESULT}]
            return result
        text = encodable(action.message)
        if block.get("name") == "cursor_position":
            text = self._cursor_in_model_space(text)
        content: list[dict[str, Any]] = [{"type": "text", "text": text or "OK"}]
        if action.image is not None:
            # a zoom: captured at display resolution, sent within the model's limits
            content.append(_image(fit_png(action.image, self.limits)[0]))
        result["content"] = content
        return result

    def _cursor_in_model_space(self, text: str) -> str:
        match = _CURSOR.match(text)
        if not match or self._scaling is None or self._scaling.is_identity:
            return text
        try:
            x, y = self._scaling.to_model(int(match.group(1)), int(match.group(2)))
        except OutOfRange:
            return text
        return f"X={x},Y={y}"

    def _request(self, scaling: Scaling) -> Turn:
        self._prune_images()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": self.instructions,
            "tools": [self.tool],
            "messages": self.messages,
        }
        return self._send(
            lambda: self._client.messages.with_raw_response.create(**kwargs), lambda data: self._read(data, scaling)
        )

    def _read(self, data: dict[str, Any], scaling: Scaling) -> Turn:
        if data.get("type") == "error":
            error = data.get("error")
            detail = error.get("message") if isinstance(error, dict) else None
            raise AgentError(f"the model API answered an error: {one_line(str(detail or 'no detail'), 200)}")
        content = reply_list(data, "content")
        calls: list[Call] = []
        texts: list[str] = []
        unknown: list[str] = []
        # positions in kept of the tool_use blocks
        pending: list[int] = []
        kept: list[dict[str, Any]] = []
        for block in content:
            if not isinstance(block, dict):
                unknown.append(type(block).__name__)
                continue
            kept.append(block)
            kind = block.get("type")
            if kind == "tool_use":
                tool_id = reply_id(block.get("id"), "a tool_use block", "id")
                raw = {
                    "name": block.get("name"),
                    "input": block.get("input"),
                    "toolset_name": block.get("toolset_name"),
                }
                calls.append(Call(tool_id, "anthropic", (raw,), (), scaling))
                pending.append(len(kept) - 1)
            elif kind == "text":
                if isinstance(block.get("text"), str):
                    texts.append(block["text"])
            elif kind in ("thinking", "redacted_thinking"):
                # kept in the history, as the API requires, never shown
                continue
            else:
                unknown.append(kind if isinstance(kind, str) else "?")
        self._count_turn(unknown, "content block(s)")
        stop = data.get("stop_reason")
        if stop == "refusal":
            texts.append("(the model refused to continue)")
        elif stop == "max_tokens" and not calls:
            self.notes.append(f"turn {self.turns}: the reply was cut at max_tokens={self.max_tokens}")
        usage = self._usage(data, INPUT_TOKENS)
        # Sent back as history, and echoed in the results (toolset_name): made encodable, since the
        # SDK cannot send a lone surrogate. The calls above carry the blocks as received, for the
        # parser.
        history = encodable_tree(kept)
        self.messages.append({"role": "assistant", "content": history})
        self._pending = [history[i] for i in pending]
        self._scaling = scaling
        response_id = data.get("id")
        return Turn(
            tuple(calls),
            text=self._text(texts),
            response_id=response_id if isinstance(response_id, str) else "",
            usage=usage,
        )

    def _prune_images(self) -> None:
        """Keep only the ``keep_images`` most recent images in the history (oldest replaced by a note)."""
        seen = 0
        for message in reversed(self.messages):
            content = message.get("content")
            if not isinstance(content, list) or message.get("role") != "user":
                continue
            for holder in reversed(content):
                nested = holder.get("content") if holder.get("type") == "tool_result" else None
                targets = nested if isinstance(nested, list) else [holder]
                for block in reversed(targets):
                    if block.get("type") != "image":
                        continue
                    seen += 1
                    if seen > self.keep_images:
                        block.clear()
                        block.update({"type": "text", "text": OMITTED_IMAGE})


def _image(png: bytes) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png)}}
