"""Token counts from replies and cost estimates from list prices."""

from __future__ import annotations

import re
from typing import Any

# USD per million tokens (input, output): list prices as published when this table was written. An
# ESTIMATE: cached, batch and long-context rates are ignored (every input token is priced at the
# base rate, which over-counts cached ones). An unknown model has no estimate (cost None); the
# settings file can add or correct entries under [model_prices].
PRICES: dict[str, tuple[float, float]] = {
    # OpenAI
    "gpt-5.6-sol": (5.00, 30.00),
    "gpt-5.6-terra": (2.50, 15.00),
    "gpt-5.6-luna": (1.00, 6.00),
    "gpt-5.5": (5.00, 30.00),
    "computer-use-preview": (3.00, 12.00),
    # Anthropic
    "claude-fable-5": (10.00, 50.00),
    "claude-mythos-5": (10.00, 50.00),
    "claude-opus-4-8": (5.00, 25.00),
    "claude-opus-4-7": (5.00, 25.00),
    "claude-opus-4-6": (5.00, 25.00),
    "claude-opus-4-5": (5.00, 25.00),
    "claude-sonnet-5": (3.00, 15.00),
    "claude-sonnet-4-6": (3.00, 15.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
}
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def price_for(model: str, overrides: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """(input, output) USD per million tokens for ``model`` (a dated snapshot counts as its alias)."""
    for table in (overrides or {}, PRICES):
        for name in (model, _DATE_SUFFIX.sub("", model)):
            if name in table:
                return table[name]
    return None


def estimate_cost(price: tuple[float, float] | None, input_tokens: int, output_tokens: int) -> float | None:
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def count(value: Any) -> int:
    """A token count from a reply: a non-negative int, anything else 0."""
    return value if type(value) is int and value >= 0 else 0
