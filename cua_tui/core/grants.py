"""Scoped approvals: ``a`` approves this action and every later one of the same, narrow scope (a key chord,
typing into the focused field, clicks in a policy region) for the rest of the run, until revoked. What a
grant never covers: docs/tui.md, "Scoped approvals".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import focus
from .actions import Action, Kind
from .policy import Decision, Verdict
from .ports import Scope

# pixels: a click this close to the field's point is a click into the same field
FIELD_RADIUS = 8
CLICKS = (Kind.CLICK, Kind.DOUBLE_CLICK, Kind.TRIPLE_CLICK)


def scope_for(action: Action, decision: Decision, field: tuple[int, int] | None) -> Scope | None:
    """The narrow scope an approval of ``action`` could extend to, or None (then ``a`` is not offered).
    ``field`` is the focused field (core/focus.py)."""
    if decision.verdict is not Verdict.CONFIRM or decision.sends_out:
        return None
    if action.kind is Kind.KEYPRESS and action.chord:
        return Scope("chord", action.chord, f"the key chord {action.chord}")
    if action.kind is Kind.TYPE and field is not None and not focus.text_moves_focus(action.text):
        x, y = field
        return Scope("typing", f"{x},{y}", f"typing into the field clicked at ({x}, {y})")
    if action.kind in CLICKS and decision.rule.startswith("regions."):
        name = decision.rule.removeprefix("regions.")
        return Scope("region", decision.rule, f"clicks inside the policy region {name!r}")
    return None


def covers(scope: Scope, action: Action, decision: Decision, field: tuple[int, int] | None) -> bool:
    """Whether ``scope`` covers ``action`` (classified ``decision``, the focused field at ``field``)."""
    if decision.verdict is not Verdict.CONFIRM or decision.sends_out:
        # a block is never covered; an allow needs nothing; sending out always asks
        return False
    if scope.kind == "chord":
        return action.kind is Kind.KEYPRESS and action.chord == scope.key
    if scope.kind == "typing":
        if action.kind is not Kind.TYPE or focus.text_moves_focus(action.text):
            return False
        return focus.same_field(field, typing_point(scope), FIELD_RADIUS)
    if scope.kind == "region":
        return action.kind in CLICKS and decision.rule == scope.key
    return False


def typing_point(scope: Scope) -> tuple[int, int] | None:
    """The field a typing scope names (None for other scopes or a key that is not "x,y")."""
    if scope.kind != "typing":
        return None
    try:
        x, y = (int(v) for v in scope.key.split(","))
    except ValueError:
        return None
    return x, y


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

    def match(self, action: Action, decision: Decision, field: tuple[int, int] | None) -> Grant | None:
        for grant in self.active.values():
            if covers(grant.scope, action, decision, field):
                return grant
        return None

    def outlived(self, field: tuple[int, int] | None) -> list[Grant]:
        """The typing grants whose field is no longer the focused one (``field``): they end now."""
        return [
            g
            for g in self.active.values()
            if g.scope.kind == "typing" and not focus.same_field(field, typing_point(g.scope), FIELD_RADIUS)
        ]
