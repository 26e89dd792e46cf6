"""Keeping secrets out of what is shown, logged or stored: the API key, a URL's user info and query."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit


class Redactor:
    """Removes secrets (the API key) from any text that may be shown, logged or stored."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text


def public_url(url: str | None) -> str | None:
    """A base URL fit for run.json and messages: no user info, query or fragment."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "(unparseable URL)"
