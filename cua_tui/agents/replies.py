"""Reading a vendor's reply strictly: a JSON object of bounded nesting, ids that can be echoed back, and
history that the SDK can encode again. Anything else is an AgentError naming what is wrong."""

from __future__ import annotations

from typing import Any

from ..core import strictjson
from ..core.ports import AgentError
from ..core.text import encodable, lone_surrogate, one_line


def decode_json(content: bytes) -> dict[str, Any]:
    """The reply body as a JSON object, or AgentError naming what is wrong (never a traceback). Nesting is
    capped (strictjson.MAX_DEPTH) before anything walks the reply: the parser, repr, and the SDK that sends
    an Anthropic reply back as history all recurse."""
    try:
        data = strictjson.loads(content)
    except strictjson.JSONError as exc:
        detail = f"not JSON ({one_line(str(exc), 120)})" if exc.syntax else one_line(str(exc), 120)
        raise AgentError(f"malformed reply from the model API: {detail}") from None
    if not isinstance(data, dict):
        raise AgentError(f"malformed reply from the model API: a JSON {type(data).__name__}, not an object")
    return data


def reply_id(value: Any, owner: str, name: str) -> str:
    """An id from a reply that must be echoed back (a call id, a tool_use id): a non-empty string the
    SDK can encode, or AgentError. A lone surrogate ("\\ud800") is valid JSON but no request can carry it."""
    if not isinstance(value, str) or not value:
        raise AgentError(f"malformed reply from the model API: {owner} has no {name}")
    if lone_surrogate(value) >= 0:
        raise AgentError(f"malformed reply from the model API: the {name} of {owner} is not encodable text")
    return value


def reply_list(data: dict[str, Any], key: str) -> list[Any]:
    """A reply's list of items (``output``, ``content``), or AgentError when it is not a list."""
    items = data.get(key)
    if not isinstance(items, list):
        raise AgentError(f"malformed reply from the model API: {key!r} is not a list")
    return items


def encodable_tree(value: Any) -> Any:
    """``value`` (a decoded reply, nested at most strictjson.MAX_DEPTH) with every string made encodable,
    for sending it back (as Anthropic history): the SDK encodes requests as strict UTF-8."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, list):
        return [encodable_tree(v) for v in value]
    if isinstance(value, dict):
        return {encodable(k): encodable_tree(v) for k, v in value.items()}
    return value
