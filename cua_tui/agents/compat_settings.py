"""The settings table of ``--agent openai-compatible``, ``[openai-compatible]``: the server (``base_url``), the
model and its grammar, and where its key is: ``api_key`` itself, or ``api_key_variable``, the environment
variable that holds it (CUA_TUI_COMPAT_API_KEY wins over both). No other vendor's key variable may be
named: OPENAI_API_KEY must never reach whatever server ``base_url`` names."""

from __future__ import annotations

import re

import msgspec

VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class CompatTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    api_key: str | None = None
    base_url: str | None = None
    api_key_variable: str | None = None
    model: str | None = None
    grammar: str | None = None

    def __post_init__(self) -> None:
        from .vendors import VENDORS

        variable = (self.api_key_variable or "").strip()
        if variable and not VARIABLE.fullmatch(variable):
            raise ValueError("api_key_variable must name an environment variable")
        others = {v.key_variable for v in VENDORS.values() if v.key_variable and v.name != "openai-compatible"}
        if variable in others:
            raise ValueError(
                f"api_key_variable may not name another vendor's key ({variable}): it would reach this server"
            )

    def __repr__(self) -> str:
        key = "set" if self.api_key else None
        return (
            f"CompatTable(api_key={key}, base_url={self.base_url!r}, api_key_variable={self.api_key_variable!r}, "
            f"model={self.model!r}, grammar={self.grammar!r})"
        )
