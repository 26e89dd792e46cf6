"""The real ``cua-tui`` command line with one seam, for tests/test_fleet_hostile.py: the cwsandbox desktop
raises the exception named by ``CUA_TEST_ESCAPE`` where the hostile service's ``escape`` behaviour marks a
reply (``CUA_TEST_ESCAPE_AT``: ``reply``, as the reply is judged; ``stop``, as the desktop is stopped after
such a reply), as an interpreter, a vendor SDK or a bug of ours could raise anything anywhere.

``python tests/fleet_escape.py ARGS...`` is ``cua-tui ARGS...``.
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from cua_tui.desktops.cwsandbox import CWSandboxDesktop
from cua_tui.desktops.remote.desktop import HelperDesktop
from cua_tui.desktops.remote.wire import Blobs


class Escaped(BaseException):
    """An exception no handler of the run expects: it derives from neither Exception nor a known kind."""


def _escape() -> BaseException:
    name = os.environ["CUA_TEST_ESCAPE"]
    kind = Escaped if name == "Escaped" else getattr(builtins, name)
    return kind(f"injected {name}")


def install() -> None:
    answer, stop = CWSandboxDesktop._answer, CWSandboxDesktop.stop
    at = os.environ.get("CUA_TEST_ESCAPE_AT", "reply")
    marked: set[int] = set()

    def judged(
        self: HelperDesktop, returncode: int, stdout: bytes, stderr: bytes, *, cap: int | None = None
    ) -> tuple[dict[str, Any], Blobs]:
        header, blobs = answer(self, returncode, stdout, stderr, cap=cap)
        if header.get("escape"):
            marked.add(id(self))
            if at == "reply":
                raise _escape()
        return header, blobs

    def stopped(self: CWSandboxDesktop) -> None:
        stop(self)
        if at == "stop" and id(self) in marked:
            raise _escape()

    CWSandboxDesktop._answer = judged  # type: ignore[method-assign]
    CWSandboxDesktop.stop = stopped  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    from cua_tui.cli import main

    sys.argv[0] = "cua-tui"
    main()
