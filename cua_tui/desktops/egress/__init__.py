"""The egress proxy of the local desktop: the sandbox's only way out (DESIGN.md, REFERENCE.md "Local desktop").

The desktop runs in a network namespace that has nothing but ``lo``. Its browser is pointed at a loopback port
inside the namespace where a relay (:func:`relay_command`, socat) forwards every connection to a Unix socket
bind-mounted from the parent. On the other end of that socket listens :class:`EgressProxy`, an HTTP/1.1 forward
proxy that lets through only what an :class:`AllowList` names and records every decision.

Rules, following the sandboxing guide (seeds/003, "Layer 3" and the Squid configuration):

* the decision is made on the host and port of the request target only (``CONNECT host:port`` or an absolute
  ``http://`` URL), never on the Host header, which is rewritten to the judged authority before forwarding;
* an address carrying user information (``http://allowed@evil/``) is refused outright, whatever side of the ``@``
  is on the list; a fragment or backslash ends the authority (``http://evil#@allowed`` is judged as ``evil``);
* a host entry without a port allows ports 80 and 443; ``host:port`` allows that port only;
* ``*.example.org`` allows subdomains of example.org (not example.org itself, not ``evilexample.org``);
* names are compared as lowercase ASCII (punycode); anything outside ``[a-z0-9.-]`` is refused, and an address
  that looks numeric must be a canonical IPv4 or IPv6 literal (``2130706433``, ``127.1``, ``0x7f.0.0.1`` are refused);
  the grammar of entries and hosts is :mod:`cua_tui.core.allowlist`, the same one the policy file is checked with;
* a refused host is never resolved; an allowed name must resolve to public addresses (a name that resolves to
  loopback, private, link-local or metadata addresses is refused) unless ``allow_private_resolution`` is set;
  IP literals on the list are connected to as written;
* every redirect is a new request and is judged again.

For HTTPS the proxy sees only the CONNECT host name: it cannot see or stop TLS SNI / Host mismatches inside the
tunnel (domain fronting). That is the same limit as Squid without TLS interception.

Modules: :mod:`.judge` (what of a request the allow-list judges, and where an allowed name may connect),
:mod:`.http1` (HTTP/1.1 framing), :mod:`.proxy` (:class:`EgressProxy`), :mod:`.relay` (:func:`relay_command`).
"""

from __future__ import annotations

from ...core.allowlist import AllowList, Judgement
from .http1 import MAX_HEADER_BYTES
from .proxy import EgressProxy, EgressRecord
from .relay import relay_command

__all__ = ["MAX_HEADER_BYTES", "AllowList", "EgressProxy", "EgressRecord", "Judgement", "relay_command"]
