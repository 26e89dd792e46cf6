"""Token counts from replies and cost estimates from list prices."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .vendors import Price

# USD per million tokens (input, output): each vendor's list prices are in its record (agents/vendors.py).
# An unknown model has no estimate (cost None); the settings file can add or correct entries under
# [model_prices].
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def price_for(
    model: str, overrides: Mapping[str, Price] | None = None, listed: Mapping[str, Price] | None = None
) -> Price | None:
    """(input, output) USD per million tokens for ``model`` (a dated snapshot counts as its alias): the
    settings' ``overrides`` first, then the vendor's ``listed`` prices."""
    for table in (overrides or {}, listed or {}):
        for name in (model, _DATE_SUFFIX.sub("", model)):
            if name in table:
                return table[name]
    return None


def estimate_cost(price: Price | None, input_tokens: int, output_tokens: int) -> float | None:
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def count(value: Any) -> int:
    """A token count from a reply: a non-negative int, anything else 0."""
    return value if type(value) is int and value >= 0 else 0
