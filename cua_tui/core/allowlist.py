"""The one allow-list grammar: what the policy file's ``[network] allow_domains`` accepts is exactly what the
egress proxy enforces (the proxy is in ``desktops/egress/``). The grammar: docs/files/policy.md,
"The allow-list grammar".
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PORTS",
    "AllowList",
    "AllowListError",
    "Entry",
    "HostError",
    "Judgement",
    "canonical_host",
    "parse_entry",
    "parse_port",
    "show_host",
]

DEFAULT_PORTS = frozenset({80, 443})
MAX_HOST_LENGTH = 253

_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_PORT_TEXT = re.compile(r"[0-9]{1,5}")
_BRACKETED = re.compile(r"(\[[^\[\]]*\])(?::(.*))?", re.DOTALL)


class HostError(ValueError):
    """A host that is neither a canonical host name nor an IP literal; the message says why (not which)."""


class AllowListError(ValueError):
    """An allow-list entry outside the grammar. ``problem`` completes a sentence that starts with the entry."""

    def __init__(self, entry: object, problem: str) -> None:
        super().__init__(entry, problem)
        self.entry = entry
        self.problem = problem

    def __str__(self) -> str:
        return f"allow-list entry {self.entry!r} {self.problem}"


def canonical_host(text: str) -> tuple[str, bool]:
    """The canonical form of a host (lowercase name without trailing dot, or a compressed IP address) and
    whether it is an IP literal. Raises HostError with a reason a person understands."""
    if not text:
        raise HostError("empty host")
    if "@" in text:
        raise HostError("user information (user@host) is not allowed in a host")
    if not text.isascii():
        raise HostError("non-ASCII: use its punycode (xn--) form")
    host = text.lower()
    if host.startswith("[") or host.endswith("]") or ":" in host:
        if host.startswith("[") != host.endswith("]"):
            raise HostError("malformed IPv6 address: unbalanced brackets")
        inner = host[1:-1] if host.startswith("[") else host
        try:
            ip6 = ipaddress.IPv6Address(inner)
        except ValueError:
            raise HostError("not a valid IPv6 address") from None
        if ip6.scope_id:
            raise HostError("IPv6 scope ids are not allowed")
        return ip6.compressed, True
    if host.endswith("."):
        host = host[:-1]
    if not host or len(host) > MAX_HOST_LENGTH:
        raise HostError(f"not a valid host name (empty, or over {MAX_HOST_LENGTH} characters)")
    if not set(host) <= _HOST_CHARS:
        raise HostError("not a valid host name (only a-z, 0-9, '.' and '-' are allowed)")
    labels = host.split(".")
    if any(not label or len(label) > 63 for label in labels):
        raise HostError("not a valid host name (an empty label, or one over 63 characters)")
    if any(label.startswith("-") or label.endswith("-") for label in labels):
        raise HostError("not a valid host name (a label starts or ends with '-')")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        # A URL parser reads such a host as an IPv4 address in some notation; accept only the
        # canonical one.
        try:
            ip4 = ipaddress.IPv4Address(host)
        except ValueError:
            raise HostError(
                "neither a host name nor a canonical IPv4 address (write four decimal numbers, like 127.0.0.1)"
            ) from None
        return str(ip4), True
    return host, False


def show_host(host: str) -> str:
    """A canonical host as written in a URL authority (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host else host


def parse_port(text: str) -> int | None:
    """A port written as 1-5 ASCII digits, from 1 to 65535; None for anything else."""
    if not _PORT_TEXT.fullmatch(text) or not 1 <= int(text) <= 65535:
        return None
    return int(text)


@dataclass(frozen=True, slots=True)
class Entry:
    text: str  # normalized: parsing it again gives the same entry
    host: str  # canonical host, or the base domain of a wildcard
    wildcard: bool
    is_ip: bool
    ports: frozenset[int]

    def matches(self, host: str) -> bool:
        return host.endswith("." + self.host) if self.wildcard else host == self.host


def parse_entry(raw: object) -> Entry:
    """One entry of the grammar above. Raises AllowListError naming the entry and what is wrong with it."""
    if not isinstance(raw, str):
        raise AllowListError(raw, "is not a string")
    text = raw.strip()
    if not text:
        raise AllowListError(raw, "is empty")
    if "://" in text or any(c in text for c in "/?#\\"):
        raise AllowListError(raw, "is not a host name or IP address: write a host or host:port, not a URL")
    if "@" in text:
        raise AllowListError(raw, "carries user information (user@host), which is not allowed")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise AllowListError(raw, "is not a host name or IP address")
    port_text: str | None
    if text.startswith("["):
        m = _BRACKETED.fullmatch(text)
        if not m:
            raise AllowListError(raw, "is not a host name or IP address: malformed bracketed IPv6 address")
        host, port_text = m[1], m[2]
    elif "[" in text or "]" in text:
        raise AllowListError(raw, "is not a host name or IP address: unbalanced or misplaced brackets")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        # a plain host, or a bare IPv6 literal (which cannot carry a port)
        host, port_text = text, None
    ports = DEFAULT_PORTS
    if port_text is not None:
        port = parse_port(port_text)
        if port is None:
            raise AllowListError(raw, "has an invalid port: the port must be a number from 1 to 65535")
        ports = frozenset({port})
    wildcard = host.startswith("*.")
    base = host[2:] if wildcard else host
    if "*" in base:
        raise AllowListError(raw, "uses '*' other than as a leading '*.', meaning 'any subdomain of'")
    try:
        canon, is_ip = canonical_host(base)
    except HostError as exc:
        raise AllowListError(raw, f"is not a host name or IP address: {exc}") from None
    if wildcard and is_ip:
        raise AllowListError(raw, "puts a wildcard on an IP address: a wildcard needs a domain name")
    shown = ("*." if wildcard else "") + show_host(canon) + (f":{next(iter(ports))}" if port_text else "")
    return Entry(shown, canon, wildcard, is_ip, ports)


@dataclass(frozen=True, slots=True)
class Judgement:
    """The full answer of :meth:`AllowList.judge`: ``host`` is canonical, or None when the host is invalid."""

    allowed: bool
    reason: str
    host: str | None
    is_ip: bool


class AllowList:
    """Host (and port) patterns a request may reach. Build it with :meth:`parse`."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._entries: tuple[Entry, ...] = tuple(entries)

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        """Parse entries: ``example.com``, ``*.example.org``, ``127.0.0.1:8123``, ``[::1]:8080``, ``::1``.

        Raises AllowListError (a ValueError) naming the first invalid entry."""
        if isinstance(entries, str | bytes):
            raise TypeError("AllowList.parse takes a list of entries, not a single string")
        parsed: dict[str, Entry] = {}
        for raw in entries:
            entry = parse_entry(raw)
            parsed.setdefault(entry.text, entry)
        return cls(parsed.values())

    @property
    def entries(self) -> tuple[str, ...]:
        """The normalized entries, in the order given."""
        return tuple(e.text for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"AllowList({list(self.entries)!r})"

    def judge(self, host: str, port: int) -> Judgement:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            return Judgement(False, f"invalid port {port!r}", None, False)
        try:
            canon, is_ip = canonical_host(host)
        except HostError as exc:
            return Judgement(False, f"invalid host {host!r}: {exc}", None, False)
        matching = [e for e in self._entries if e.is_ip == is_ip and e.matches(canon)]
        for entry in matching:
            if port in entry.ports:
                return Judgement(True, f"allowed: {entry.text}", canon, is_ip)
        if matching:
            ports = ", ".join(str(p) for p in sorted(set().union(*(e.ports for e in matching))))
            reason = f"port {port} is not on the allow-list for {show_host(canon)} (allowed ports: {ports})"
            return Judgement(False, reason, canon, is_ip)
        return Judgement(False, "not on the allow-list", canon, is_ip)
