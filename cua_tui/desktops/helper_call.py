"""What one exec runs inside the sandbox: hand a request to the resident helper, copy its reply to stdout.

Standard library only, imported alone, so each step's exec starts Python and little else. ``WAIT`` is how
long to keep trying to reach the helper's socket (the first request waits for the helper to come up).
Exit status 0 when a reply was copied, 3 when the helper could not be reached.
"""

from __future__ import annotations

import socket
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] != "call":
        print("usage: helper.pyz call SOCKET REQUEST_JSON WAIT", file=sys.stderr)
        return 2
    path, request, wait = argv[1], argv[2].encode(), float(argv[3])
    deadline = time.monotonic() + wait
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(path)
            break
        except OSError as exc:
            conn.close()
            if time.monotonic() >= deadline:
                print(f"the helper is not answering on {path}: {exc.strerror or exc}", file=sys.stderr)
                return 3
            time.sleep(0.05)
    with conn:
        conn.sendall(request + b"\n")
        out = sys.stdout.buffer
        while chunk := conn.recv(1 << 20):
            out.write(chunk)
        out.flush()
    return 0
