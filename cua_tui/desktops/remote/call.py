"""What one exec runs inside the sandbox: hand a request to the resident helper, copy its reply to stdout.

Standard library only, imported alone, so each step's exec starts Python and little else. Its modes
(``call``, ``stream``) and exit statuses: docs/backends/helper.md.
"""

from __future__ import annotations

import base64
import socket
import sys
import time

MAX_REQUEST = 1 << 20
# what is read from the resident helper's socket at most (the controller caps it lower)
MAX_REPLY = 64 << 20


def _connect(path: str, wait: float) -> socket.socket | None:
    deadline = time.monotonic() + wait
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            return conn
        except OSError as exc:
            conn.close()
            if time.monotonic() >= deadline:
                print(f"the helper is not answering on {path}: {exc.strerror or exc}", file=sys.stderr)
                return None
            time.sleep(0.05)


def _ask(path: str, request: bytes, wait: float) -> bytes | None:
    """One request to the resident helper; its whole reply (it closes the connection after it)."""
    conn = _connect(path, wait)
    if conn is None:
        return None
    chunks, size = [], 0
    with conn:
        conn.sendall(request.rstrip(b"\n") + b"\n")
        while chunk := conn.recv(1 << 20):
            size += len(chunk)
            if size > MAX_REPLY:
                print(f"the helper's reply is over {MAX_REPLY} bytes", file=sys.stderr)
                return None
            chunks.append(chunk)
    return b"".join(chunks)


def _stream(path: str, wait: float) -> int:
    stdin, out = sys.stdin.buffer, sys.stdout.buffer
    while line := stdin.readline(MAX_REQUEST):
        reply = _ask(path, line, wait)
        if reply is None:
            return 3
        out.write(b"%d\n" % len(reply) + reply)
        out.flush()
    # stdin ended: the controller closed the stream, or died. The desktop goes with it (and the
    # container with the desktop, its main process): nothing of the run outlives its controller for
    # long.
    _ask(path, b'{"op": "shutdown"}', 1.0)
    return 0


def _with_key(request: bytes) -> bytes:
    """A request whose ``key`` is ``"stdin"`` (the ``ready`` request: the run's key for sealed text, see
    sealed.py) gets the key from the first line of stdin, so that it never stands in a command line."""
    if b'"key"' not in request:
        return request
    # only for this one request: a step's exec starts with as little as it can
    import json

    try:
        parsed = json.loads(request)
    except ValueError:
        return request
    if not isinstance(parsed, dict) or parsed.get("key") != "stdin":
        return request
    parsed["key"] = sys.stdin.buffer.readline(256).strip().decode("ascii", "replace")
    return json.dumps(parsed).encode()


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "stream":
        return _stream(argv[1], float(argv[2]))
    if len(argv) not in (4, 5) or argv[0] != "call" or argv[4:] not in ([], ["base64"]):
        print("usage: helper.pyz call SOCKET REQUEST_JSON|- WAIT [base64] | stream SOCKET WAIT", file=sys.stderr)
        return 2
    path, wait = argv[1], float(argv[3])
    request = sys.stdin.buffer.readline(MAX_REQUEST) if argv[2] == "-" else _with_key(argv[2].encode())
    reply = _ask(path, request, wait)
    if reply is None:
        return 3
    if argv[4:]:
        reply = base64.b64encode(reply)
        reply = b"%d\n" % len(reply) + reply
    sys.stdout.buffer.write(reply)
    sys.stdout.buffer.flush()
    return 0
