"""Scoped approvals: ``a`` approves this action and every later one of the same, narrow scope for the rest
of the run.

A scope is one of three, always narrow and shown before the reviewer presses ``a``:

- ``chord``: this key chord (the same keys, in the same order);
- ``typing``: typing into this field, the one the last click before the typing landed in (a later typing
  counts when the last click before it landed within ``FIELD_RADIUS`` pixels of that point);
- ``region``: clicks inside this policy region (the rule that asked is the region's).

A grant never covers a blocked action (blocks are decided before any decision is asked) nor a model's
safety check (those always need a decision of their own), and it can be revoked at any time. Grants are
recorded as events of their own, with who granted them; each action a grant approves names the grant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .actions import Action, Kind
from .policy import Decision, Verdict
from .ports import Scope

FIELD_RADIUS = 8  # pixels: a click this close to the field's point is a click into the same field
CLICKS = (Kind.CLICK, Kind.DOUBLE_CLICK, Kind.TRIPLE_CLICK)


def scope_for(action: Action, decision: Decision, last_click: tuple[int, int] | None) -> Scope | None:
    """The narrow scope an approval of ``action`` could extend to, or None (then ``a`` is not offered)."""
    if decision.verdict is not Verdict.CONFIRM:
        return None
    if action.kind is Kind.KEYPRESS and action.chord:
        chord = "+".join(action.chord)
        return Scope("chord", chord, f"the key chord {chord}")
    if action.kind is Kind.TYPE and last_click is not None:
        x, y = last_click
        return Scope("typing", f"{x},{y}", f"typing into the field clicked at ({x}, {y})")
    if action.kind in CLICKS and decision.rule.startswith("regions."):
        name = decision.rule.removeprefix("regions.")
        return Scope("region", decision.rule, f"clicks inside the policy region {name!r}")
    return None


def covers(scope: Scope, action: Action, decision: Decision, last_click: tuple[int, int] | None) -> bool:
    """Whether ``scope`` covers ``action`` (classified ``decision``, the last click at ``last_click``)."""
    if decision.verdict is not Verdict.CONFIRM:
        return False  # a block is never covered; an allow needs nothing
    if scope.kind == "chord":
        return action.kind is Kind.KEYPRESS and "+".join(action.chord) == scope.key
    if scope.kind == "typing":
        if action.kind is not Kind.TYPE or last_click is None:
            return False
        x, y = (int(v) for v in scope.key.split(","))
        return abs(last_click[0] - x) <= FIELD_RADIUS and abs(last_click[1] - y) <= FIELD_RADIUS
    if scope.kind == "region":
        return action.kind in CLICKS and decision.rule == scope.key
    return False


@dataclass(frozen=True, slots=True)
class Grant:
    id: int
    scope: Scope
    by: str  # who granted it (the operator)
    turn: int
    index: int


@dataclass
class Grants:
    """The run's active grants, in the order they were given."""

    active: dict[int, Grant] = field(default_factory=dict)
    _next: int = 1

    def add(self, scope: Scope, by: str, turn: int, index: int) -> Grant:
        grant = Grant(self._next, scope, by, turn, index)
        self._next += 1
        self.active[grant.id] = grant
        return grant

    def revoke(self, grant_id: int) -> Grant | None:
        return self.active.pop(grant_id, None)

    def match(self, action: Action, decision: Decision, last_click: tuple[int, int] | None) -> Grant | None:
        for grant in self.active.values():
            if covers(grant.scope, action, decision, last_click):
                return grant
        return None
