"""The proxy's use of the allow-list: take the host and port out of a request target (never the Host
header), refuse user information, and resolve an allowed name to public addresses only.

The grammar of entries and hosts is :mod:`cua_tui.core.allowlist`; this module only decides what of a
request is judged by it, and what an allowed name may connect to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from ...core.allowlist import AllowList, parse_port, show_host
from .http1 import MAX_HEADER_BYTES, BadRequest


class Refused(Exception):
    """Refused before the allow-list was consulted (user information): answered 403."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(reason)
        self.host, self.port, self.reason = host, port, reason


class NotPublic(Exception):
    """An allowed name resolved only to non-public addresses: answered 403."""


def _split_hostport(authority: str, default_port: int | None) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise BadRequest("malformed IPv6 address in the request target")
        host, rest = authority[1:end], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            raise BadRequest("malformed authority in the request target")
        port_text = rest[1:] if rest else None
    else:
        if authority.count(":") > 1:
            raise BadRequest("IPv6 addresses must be written in brackets")
        host, sep, port_text_ = authority.partition(":")
        port_text = port_text_ if sep else None
    if not host:
        raise BadRequest("missing host in the request target")
    if port_text is None:
        if default_port is None:
            raise BadRequest("missing port in the CONNECT target")
        return host, default_port
    port = parse_port(port_text)
    if port is None:
        raise BadRequest("invalid port in the request target")
    return host, port


def parse_authority(authority: str, default_port: int | None) -> tuple[str, int]:
    """(host, port) of ``host[:port]``; Refused when it carries user information, whatever side is listed."""
    if "@" in authority:
        after = authority.rpartition("@")[2]
        try:
            host, port = _split_hostport(after, default_port)
        except BadRequest:
            host, port = after, default_port or 0
        raise Refused(host, port, "refused: the address carries user information (user@host)")
    return _split_hostport(authority, default_port)


def connect_target(target: str) -> tuple[str, int]:
    """(host, port) of a CONNECT request's ``host:port``."""
    if any(c in target for c in "/?#\\"):
        raise BadRequest("CONNECT needs host:port")
    return parse_authority(target, None)


def absolute_target(target: str) -> tuple[str, str, int]:
    """(path, host, port) of an absolute ``http://`` URL; a fragment or backslash ends the authority."""
    lower = target[:8].lower()
    if lower.startswith("https://"):
        raise BadRequest("https:// URLs go through CONNECT")
    if not lower.startswith("http://"):
        if target.startswith("/") or target == "*":
            raise BadRequest("this is a forward proxy: the request target must be an absolute http:// URL")
        raise BadRequest("only http:// URLs can be forwarded")
    rest = target[7:]
    end = next((i for i, c in enumerate(rest) if c in "/?#\\"), len(rest))
    authority, tail = rest[:end], rest[end:]
    host, port = parse_authority(authority, 80)
    tail = tail.split("#", 1)[0]
    if tail.startswith("?"):
        tail = "/" + tail
    if not tail:
        tail = "/"
    return tail, host, port


def judged_authority(allow: AllowList, host: str, port: int) -> str:
    """The Host header sent upstream: the canonical name that was judged, not what the client wrote."""
    canon = allow.judge(host, port).host or host
    return show_host(canon) + ("" if port == 80 else f":{port}")


def is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address (IPv4-mapped IPv6 judged as its IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def open_upstream(
    host: str, port: int, is_ip: bool, allow_private: bool
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to an allowed target: an IP literal as written; a name to the first of its public addresses
    that answers (NotPublic if it has none, unless ``allow_private``)."""
    if is_ip:
        return await asyncio.open_connection(host, port, limit=MAX_HEADER_BYTES)
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[str] = []
    for *_, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]
        if address not in addresses:
            addresses.append(address)
    if not allow_private:
        public = [a for a in addresses if is_public(ipaddress.ip_address(a))]
        if not public:
            raise NotPublic(f"{host} resolves to {', '.join(addresses) or 'nothing'}, not a public address")
        addresses = public
    error: OSError = OSError(f"no address for {host}")
    for address in addresses:
        try:
            return await asyncio.open_connection(address, port, limit=MAX_HEADER_BYTES)
        except OSError as exc:
            error = exc
    raise error
