"""The helper zipapp: the project's own desktop code, packed for a remote sandbox (``helper.py``).

It holds exactly the modules the helper imports (checked by a test that runs it) and ``mss``, which Debian
bookworm does not package, with fixed timestamps so the same sources give the same bytes and the same
SHA-256 (recorded in run.json).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # cua_tui/

# The modules the helper needs, relative to cua_tui/ (whole folders end with "/"): nothing that
# imports a vendor SDK, the UI, the builder or the audit log.
SHIPPED = (
    "__init__.py",
    "procs.py",
    "core/__init__.py",
    "core/actions.py",
    "core/allowlist.py",
    "core/errors.py",
    "core/events.py",
    "core/geometry.py",
    "core/ports.py",
    "core/stale.py",
    "core/text.py",
    "core/values.py",
    "desktops/__init__.py",
    "desktops/isolation.py",
    "desktops/local.py",
    "desktops/quiet.py",
    "desktops/target.py",
    "desktops/x11.py",
    "desktops/remote/__init__.py",
    "desktops/remote/call.py",
    "desktops/remote/helper.py",
    "desktops/remote/sealed.py",
    "desktops/remote/wire.py",
    "desktops/egress/",
    "labs/",
)

MAIN = '''\
"""cua-tui's in-sandbox helper (see cua_tui/desktops/remote/helper.py)."""
import sys

if len(sys.argv) > 1 and sys.argv[1] in ("call", "stream"):  # a step's exec: the standard library only
    from cua_tui.desktops.remote.call import main

    sys.exit(main(sys.argv[1:]))
# the resident helper: the local desktop and the labs, put together here
from cua_tui.desktops.remote.helper import main
from cua_tui.labs import get_lab

sys.exit(main(sys.argv[1:], get_lab))
'''

_EPOCH = (2020, 1, 1, 0, 0, 0)


# Pure-Python packages the helper needs that Debian bookworm does not package: copied from this
# environment (the locked version) into the zipapp's root, so a sandbox needs no package index.
VENDORED = ("mss",)


def _vendored() -> list[tuple[str, Path]]:
    out = []
    for name in VENDORED:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"the helper zipapp needs the {name!r} package in this environment")
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                out.append((f"{name}/{path.relative_to(root).as_posix()}", path))
    return out


def _files() -> list[tuple[str, Path]]:
    out = _vendored()
    for entry in SHIPPED:
        if entry.endswith("/"):
            for path in sorted((PACKAGE / entry).rglob("*")):
                if path.is_file() and path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                    out.append((f"cua_tui/{path.relative_to(PACKAGE).as_posix()}", path))
        else:
            out.append((f"cua_tui/{entry}", PACKAGE / entry))
    return out


@functools.cache
def helper_zipapp() -> bytes:
    """The zipapp's bytes (built once per process)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in [("__main__.py", MAIN.encode()), *((n, p.read_bytes()) for n, p in _files())]:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def helper_sha256() -> str:
    return hashlib.sha256(helper_zipapp()).hexdigest()
