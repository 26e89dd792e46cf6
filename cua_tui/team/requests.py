"""A decision request as a row of the team queue, and back.

The row's ``body`` is what every analyst's panel shows, with the typed text left out (its length and
SHA-256 stay); the text itself is in ``texts`` only while the request is open (the schema's trigger wipes
it in the statement that answers or closes it). ``content_sha256`` fixes the request as its worker posted
it, text included: a worker applies only an answer to a request whose id *and* hash are its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import msgspec

from ..core.actions import Action, ActionError, action_of_record
from ..core.fleet_queue import priority
from ..core.ports import DecisionRequest, Frame, Gated, SafetyCheck, Scope
from ..core.strictjson import MAX_DEPTH, depth_exceeds
from ..core.text import one_line, visible

# a row's body and texts, read back: bounded before they are held
MAX_BODY_BYTES = 1024 * 1024
MAX_TEXTS_BYTES = 256 * 1024
ACTION_TEXT = "action"


@dataclass(frozen=True, slots=True)
class Posting:
    """What a worker writes for one request: the panel's ``body``, the ``texts`` kept until the answer, the
    hash of the whole, and the queue's tier."""

    body: dict[str, Any]
    texts: dict[str, str]
    content_sha256: str
    tier: int


def posting(request: DecisionRequest, rule: str, fleet_id: str, seq: int) -> Posting:
    """The row of ``request`` (``rule``: its verdict's policy rule; ``seq``: its decision_requested line)."""
    whole = request.to_json()
    place = priority(request, rule)
    whole |= {
        "fleet": fleet_id,
        "seq": seq,
        "rule": rule,
        "tier": int(place.tier),
        "label": place.label,
        "why": place.why,
        "deadline_s": request.deadline_s,
    }
    if request.scope is not None:
        whole["scope"] = {"kind": request.scope.kind, "key": request.scope.key, "label": request.scope.label}
    content = hashlib.sha256(msgspec.json.encode(whole, order="sorted")).hexdigest()
    body, texts = _without_texts(whole)
    return Posting(body, texts, content, int(place.tier))


def _without_texts(whole: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    body = dict(whole)
    texts: dict[str, str] = {}
    action = body.get("action")
    if isinstance(action, dict) and "text" in action:
        body["action"] = {k: v for k, v in action.items() if k != "text"}
        texts[ACTION_TEXT] = action["text"]
    gated = body.get("gated")
    if isinstance(gated, list):
        kept = []
        for item in gated:
            inner = item.get("action") if isinstance(item, dict) else None
            if isinstance(inner, dict) and "text" in inner:
                texts[str(item.get("index"))] = inner["text"]
                item = {**item, "action": {k: v for k, v in inner.items() if k != "text"}}
            kept.append(item)
        body["gated"] = kept
    return body, texts


class RowError(ValueError):
    """A request row that cannot be used as read (someone else wrote it): one line, shown literally."""


def read_json(value: Any, cap: int, what: str) -> Any:
    """A jsonb column as the driver gave it (already decoded) or as text, bounded and shallow enough."""
    if value is None:
        return None
    if isinstance(value, str | bytes):
        raw = value.encode() if isinstance(value, str) else value
        if len(raw) > cap:
            raise RowError(f"{what}: {len(raw):,} bytes, more than {cap:,}; refused")
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            raise RowError(f"{what}: not JSON; refused") from None
    if depth_exceeds(value, MAX_DEPTH):
        raise RowError(f"{what}: nested deeper than {MAX_DEPTH}; refused")
    if len(msgspec.json.encode(value)) > cap:
        raise RowError(f"{what}: more than {cap:,} bytes; refused")
    return value


def approver_request(body: Any, texts: Any, request_id: int) -> dict[str, Any]:
    """The JSON an ``approver:CMD`` gets for a row (the panel's request, typed text included, as a local
    fleet's approver gets it), or RowError."""
    data = read_json(body, MAX_BODY_BYTES, f"request {request_id}'s body")
    if not isinstance(data, dict):
        raise RowError(f"request {request_id}: its body is not an object; refused")
    found = read_json(texts, MAX_TEXTS_BYTES, f"request {request_id}'s typed text") or {}
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise RowError(f"request {request_id}: its typed text is not a map of texts; refused")
    out = dict(data)
    text = found.get(ACTION_TEXT)
    if isinstance(out.get("action"), dict) and text is not None:
        out["action"] = {**out["action"], "text": text}
    if isinstance(out.get("gated"), list):
        out["gated"] = [
            {**g, "action": {**g["action"], "text": found[str(g.get("index"))]}}
            if isinstance(g, dict) and isinstance(g.get("action"), dict) and str(g.get("index")) in found
            else g
            for g in out["gated"]
        ]
    out["request_id"] = request_id
    return out


def summary(body: Any) -> str:
    """One line for a request row, shown literally (a headless analyst's log)."""
    if not isinstance(body, dict):
        return "?"
    what = body.get("summary") or body.get("kind") or "?"
    index = body.get("index")
    number = index + 1 if type(index) is int else "?"
    return visible(f"{body.get('run', '?')} turn {body.get('turn', '?')} #{number}: {what}", limit=200)


_KINDS = ("action", "safety_check", "budget", "ask")


def _str(data: dict[str, Any], key: str, limit: int, what: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str) or len(value) > limit:
        raise RowError(f"{what}: {key} is not a string of at most {limit:,} characters; refused")
    return value


def _int(data: dict[str, Any], key: str, what: str) -> int:
    value = data.get(key)
    if type(value) is not int or not 0 <= value < 1 << 31:
        raise RowError(f"{what}: {key} is not a count; refused")
    return value


def _action(value: Any, what: str) -> Action:
    """An action as a row holds it: its record, the typed text put back beside it (approver_request)."""
    if not isinstance(value, dict):
        raise RowError(f"{what}: an action is not an object; refused")
    record = dict(value)
    text = record.pop("text", None)
    try:
        return action_of_record(record, text if isinstance(text, str) else "")
    except ActionError as exc:
        raise RowError(f"{what}: {visible(one_line(exc.reason, 300))}; refused") from None


def request_of_row(body: Any, texts: Any, frame: Frame | None, request_id: int) -> DecisionRequest:
    """The decision request a row describes (``body`` and ``texts`` as read, bounded; ``frame`` its screen,
    None while the worker's mirror has not brought it), or RowError: a row is someone else's writing."""
    what = f"request {request_id}"
    data = approver_request(body, texts, request_id)  # bounded, the typed text put back
    kind = data.get("kind")
    if kind not in _KINDS:
        raise RowError(f"{what}: unknown kind {visible(str(kind), limit=40)}; refused")
    action = None
    if data.get("action") is not None:
        action = _action(data["action"], what)
    checks = data.get("safety_checks") or []
    if not isinstance(checks, list) or len(checks) > 100:
        raise RowError(f"{what}: safety_checks is not a list of checks; refused")
    safety = tuple(
        SafetyCheck(_str(c, "id", 200, what), _str(c, "code", 200, what), _str(c, "message", 4000, what))
        if isinstance(c, dict) else _bad(what, "a safety check is not an object")
        for c in checks
    )  # fmt: skip
    gated_rows = data.get("gated") or []
    if not isinstance(gated_rows, list) or len(gated_rows) > 100:
        raise RowError(f"{what}: gated is not a list of actions; refused")
    gated = []
    for g in gated_rows:
        if not isinstance(g, dict):
            _bad(what, "a gated action is not an object")
        inner = None
        if g.get("action") is not None:
            inner = _action(g["action"], what)
        gated.append(
            Gated(_int(g, "index", what), inner, _str(g, "verdict", 20, what), _str(g, "rule", 200, what),
                  _str(g, "reason", 2000, what))
        )  # fmt: skip
    scope = None
    if isinstance(data.get("scope"), dict):
        raw = data["scope"]
        scope = Scope(_str(raw, "kind", 20, what), _str(raw, "key", 500, what), _str(raw, "label", 500, what))
    deadline = data.get("deadline_s")
    if deadline is not None and (type(deadline) not in (int, float) or not 0 < deadline < 1e7):
        raise RowError(f"{what}: deadline_s is not a number of seconds; refused")
    return DecisionRequest(
        run_id=_str(data, "run", 100, what), turn=_int(data, "turn", what), index=_int(data, "index", what),
        call_id=_str(data, "call_id", 200, what), kind=kind, reason=_str(data, "reason", 4000, what),
        action=action, safety_checks=safety, frame=frame, scope=scope, gated=tuple(gated),
        deadline_s=float(deadline) if deadline is not None else None,
    )  # fmt: skip


def _bad(what: str, why: str) -> Any:
    raise RowError(f"{what}: {why}; refused")
