"""The egress proxy of the local desktop: the sandbox's only way out, an HTTP/1.1 forward proxy that lets
through only what an :class:`AllowList` names and records every decision. Its rules and its limits:
docs/backends/local.md, "The egress proxy".

Modules: :mod:`.judge` (what of a request the allow-list judges, and where an allowed name may connect),
:mod:`.http1` (HTTP/1.1 framing), :mod:`.proxy` (:class:`EgressProxy`), :mod:`.relay` (:func:`relay_command`).
"""

from __future__ import annotations

from ...core.allowlist import AllowList, Judgement
from .http1 import MAX_HEADER_BYTES
from .proxy import EgressProxy
from .relay import relay_command

__all__ = ["MAX_HEADER_BYTES", "AllowList", "EgressProxy", "Judgement", "relay_command"]
