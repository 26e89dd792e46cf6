"""The relay inside the sandbox's network namespace: loopback TCP -> the proxy's bind-mounted Unix socket."""

from __future__ import annotations

_SOCAT_SPECIAL = frozenset(":,!\"'\\{}[]()")


def relay_command(socket_path: str, port: int) -> list[str]:
    """argv of the relay to run inside the network namespace: loopback TCP ``port`` -> the proxy's Unix socket."""
    path = str(socket_path)
    if not path or any(c in _SOCAT_SPECIAL or not c.isprintable() for c in path):
        raise ValueError(f"socket path {path!r} is empty or has characters socat would misread")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"invalid relay port {port!r}")
    return ["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr", f"UNIX-CONNECT:{path}"]
