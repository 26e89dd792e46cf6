"""No module of cua_tui imports another package's or module's private names (``from x import _y``,
``import x._y``, ``from x._y import z``): what a package keeps private may change in any release."""

from __future__ import annotations

import ast
from pathlib import Path

import cua_tui

PACKAGE = Path(cua_tui.__file__).parent

# The private modules imported on purpose, each with why.
ALLOWED = {
    # The cwsandbox SDK ships its gRPC stubs (the sandbox service's messages) only there.
    "cwsandbox._proto",
}


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str) -> list[tuple[int, str]]:
    """(line, what) for each import of a private name or from a private module in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if any(map(private, a.name.split(".")))]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if module in ALLOWED:
                continue
            if any(map(private, (node.module or "").split("."))):
                found.append((node.lineno, module))
            found += [(node.lineno, f"{module}:{a.name}") for a in node.names if private(a.name)]
    return found


def test_the_scan_finds_each_form() -> None:
    source = (
        "from textual_image.widget.sixel import _ImageSixelImpl, Image\n"
        "import textual_image._terminal\n"
        "from textual_image._sixel import image_to_sixels\n"
        "from ._helpers import x\n"
        "from . import _helpers\n"
        "from __future__ import annotations\n"
        "from cwsandbox._proto import sandbox_pb2\n"
        "import os as _os\n"
    )
    assert private_imports(source) == [
        (1, "textual_image.widget.sixel:_ImageSixelImpl"),
        (2, "textual_image._terminal"),
        (3, "textual_image._sixel"),
        (4, "._helpers"),
        (5, ".:_helpers"),
    ]


def test_no_module_imports_private_names() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, what in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert not found, "private names imported:\n" + "\n".join(found)
