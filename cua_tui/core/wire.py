"""Wire formats: a vendor's record (agents/vendors.py) names one, and every call of its turns says which
(``Call.format``); its parser stays here, behind the trust boundary, and a new format is one more entry of
FORMATS. "openai": each raw is an action object; "anthropic": each raw is ``{"name": member, "input":
{...}, "toolset_name": "computer"}``; "grammar": each raw is a unit an open-weight model's grammar read
from its reply (core/grammars/units.py), whichever grammar it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .actions import Action, ActionError, parse_anthropic, parse_openai
from .geometry import Scaling
from .grammars import parse_unit
from .text import one_line


@dataclass(frozen=True, slots=True)
class WireFormat:
    """How one format's raw actions are read: ``parse`` (raw, scaling) gives an Action or raises
    ActionError; ``kind_field`` names the field that says a raw action's kind (recorded for one that
    could not be read)."""

    parse: Callable[[Any, Scaling], Action]
    kind_field: str


def _parse_toolset_block(raw: Any, scaling: Scaling) -> Action:
    if not isinstance(raw, dict):
        raise ActionError("bad_schema", "a toolset call is an object {name, input, toolset_name}")
    return parse_anthropic(raw.get("name"), raw.get("input"), scaling, raw.get("toolset_name"))


FORMATS: dict[str, WireFormat] = {
    "openai": WireFormat(parse_openai, "type"),
    "anthropic": WireFormat(_parse_toolset_block, "name"),
    "grammar": WireFormat(parse_unit, "name"),
}


def parse_wire(wire_format: str, raw: Any, scaling: Scaling) -> Action:
    """One raw action of a call in ``wire_format``; a format with no parser is refused like a bad action."""
    found = FORMATS.get(wire_format)
    if found is None:
        raise ActionError("bad_schema", f"cannot read a {one_line(wire_format, 40)!r} action")
    return found.parse(raw, scaling)


def raw_kind(wire_format: str, raw: Any) -> str:
    """The kind a raw action claims (its format's kind field), cut to 40 characters; "" where none."""
    found = FORMATS.get(wire_format)
    value = raw.get(found.kind_field) if found is not None and isinstance(raw, dict) else None
    return value[:40] if isinstance(value, str) else ""
