"""``--agent openai`` (the default): the OpenAI Responses API with the ``computer`` tool, through the
official ``openai`` SDK (imported lazily, when the agent is built). Actions reach the supervisor exactly as
they arrived, and every call id is answered. Wire format: docs/models.md, "What is sent".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Unpack

from ..core.geometry import Scaling
from ..core.ports import AgentError, Call, CallResult, Frame, SafetyCheck, Turn
from ..core.text import encodable, one_line
from .images import data_url, fit_png
from .replies import reply_id, reply_list
from .vendor_agent import NO_RESULT, VendorAgent, VendorOptions, by_call
from .vendors import VENDORS

if TYPE_CHECKING:
    # the client type of the base class below (a string there: the SDK loads when the agent is built)
    import openai  # noqa: F401

DEFAULT_MODEL = VENDORS["openai"].default_model or ""


class OpenAIAgent(VendorAgent["openai.OpenAI"]):
    """One run's conversation with a Responses model. Not reusable across runs."""

    name = "openai"
    client_class = "OpenAI"

    def __init__(self, api_key: str, model: str = DEFAULT_MODEL, **options: Unpack[VendorOptions]) -> None:
        super().__init__(api_key, model, **options)
        self._previous_id: str | None = None
        # call id -> its number of actions: each call is owed one computer_call_output
        self._pending: dict[str, int] = {}

    # ---------------------------------------------------------------------------------------------
    # Agent protocol
    # ----------------------------------------------------------------------------------------------
    def start(self, task: str, frame: Frame) -> Turn:
        png, scaling = fit_png(frame, self.limits)
        content = [
            {"type": "input_text", "text": task},
            {"type": "input_image", "image_url": data_url(png), "detail": "original"},
        ]
        return self._request([{"role": "user", "content": content}], scaling)

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        png, scaling = fit_png(frame, self.limits)
        url = data_url(png)
        found = by_call(results)
        items: list[dict[str, Any]] = []
        for call_id in self._pending:
            item: dict[str, Any] = {
                "type": "computer_call_output",
                "call_id": call_id,
                "output": {"type": "computer_screenshot", "image_url": url, "detail": "original"},
            }
            result = found.get(call_id)
            if result is not None and result.acknowledged_safety_checks:
                # Echoed as received, made encodable: the SDK cannot send a lone surrogate.
                item["acknowledged_safety_checks"] = [
                    {"id": encodable(c.id), "code": encodable(c.code), "message": encodable(c.message)}
                    for c in result.acknowledged_safety_checks
                ]
            items.append(item)
        report = _report(self._pending, found)
        if report:
            items.append({"role": "user", "content": [{"type": "input_text", "text": report}]})
        if note:
            # after the results: what else happened on the desktop (a takeover), in the supervisor's words
            items.append({"role": "user", "content": [{"type": "input_text", "text": encodable(note)}]})
        return self._request(items, scaling)

    # ---------------------------------------------------------------------------------------------
    def _request(self, items: list[dict[str, Any]], scaling: Scaling) -> Turn:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "tools": [{"type": "computer"}],
            "input": items,
            # not carried over by previous_response_id: sent every time
            "instructions": self.instructions,
            "truncation": "auto",
        }
        if self._previous_id is not None:
            kwargs["previous_response_id"] = self._previous_id
        return self._send(
            lambda: self._client.responses.with_raw_response.create(**kwargs), lambda data: self._read(data, scaling)
        )

    def _read(self, data: dict[str, Any], scaling: Scaling) -> Turn:
        status = data.get("status")
        if status in ("failed", "cancelled"):
            error = data.get("error")
            detail = error.get("message") if isinstance(error, dict) else None
            raise AgentError(f"the model response {status}: {one_line(str(detail or 'no detail'), 200)}")
        response_id = data.get("id")
        if not isinstance(response_id, str) or not response_id:
            raise AgentError("malformed reply from the model API: no response id")
        output = reply_list(data, "output")
        calls: list[Call] = []
        texts: list[str] = []
        unknown: list[str] = []
        for item in output:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "computer_call":
                calls.append(_call(item, scaling))
            elif kind == "message":
                texts.extend(_message_text(item))
            elif kind == "reasoning":
                continue
            else:
                unknown.append(kind if isinstance(kind, str) else type(item).__name__)
        self._count_turn(unknown, "output item(s)")
        usage = self._usage(data, ("input_tokens",))
        self._previous_id = response_id
        self._pending = {}
        for call in calls:
            self._pending.setdefault(call.call_id, len(call.actions))
        return Turn(tuple(calls), text=self._text(texts), response_id=response_id, usage=usage)


def _call(item: dict[str, Any], scaling: Scaling) -> Call:
    call_id = reply_id(item.get("call_id"), "a computer_call", "call_id")
    if "actions" in item and item["actions"] is not None:
        batch = item["actions"]
        # not a list: the parser refuses it
        actions = tuple(batch) if isinstance(batch, list) else (batch,)
    elif "action" in item:
        actions = (item["action"],)
    else:
        actions = ()
    checks = []
    raw_checks = item.get("pending_safety_checks") or []
    for check in raw_checks if isinstance(raw_checks, list) else [raw_checks]:
        if isinstance(check, dict):
            checks.append(SafetyCheck(_text(check.get("id")), _text(check.get("code")), _text(check.get("message"))))
        else:
            # unreadable, yet a check: it still needs a person's decision (fail closed)
            checks.append(SafetyCheck("", "malformed", one_line(repr(check), 120)))
    return Call(call_id, "openai", actions, tuple(checks), scaling)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _message_text(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    texts = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "output_text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(f"(refusal) {part['refusal']}")
    return texts


NO_ACTION_RESULT = "Not executed: no result was recorded for this action."


def _report(pending: dict[str, int], by_id: dict[str, CallResult]) -> str:
    """The supervisor's exact words for every call where something did not simply run (else "")."""
    lines = []
    for call_id, n_actions in pending.items():
        result = by_id.get(call_id)
        if result is None or (not result.results and n_actions):
            lines.append(f"Call {call_id}: {NO_RESULT}")
            continue
        messages = [NO_ACTION_RESULT] * max(n_actions, len(result.results))
        for position, r in enumerate(result.results):
            messages[r.index if 0 <= r.index < len(messages) else position] = r.message
        if all(r.ok for r in result.results) and all(m == "OK" for m in messages):
            continue
        lines.append(f"Call {call_id}:")
        start = 0
        for end in range(1, len(messages) + 1):
            if end < len(messages) and messages[end] == messages[start]:
                continue
            span = f"action {start + 1}" if end - start == 1 else f"actions {start + 1}-{end}"
            lines.append(f"  {span}: {messages[start]}")
            start = end
    if not lines:
        return ""
    return encodable("What happened to your last computer actions:\n" + "\n".join(lines))
