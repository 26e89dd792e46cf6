"""The core stays free of UI and vendor imports (DESIGN.md, "Layers")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("textual", "textual_image", "rich", "openai", "anthropic", "cwsandbox", "docker", "grpc")
CORE = Path(__file__).resolve().parents[1] / "cua_tui" / "core"


def test_core_imports_no_ui_or_vendor_package() -> None:
    # every module, those of subpackages (core/audit/) too, as a dotted name under cua_tui.core
    modules = sorted(
        ".".join(p.relative_to(CORE).with_suffix("").parts) for p in CORE.rglob("*.py") if p.stem != "__init__"
    )
    code = (
        "import sys\n"
        + "".join(f"import cua_tui.core.{m}\n" for m in modules)
        + f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        + "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"cua_tui.core pulled in: {out.stdout.strip()}"
    assert len(modules) >= 8


def test_core_sources_do_not_import_ui_or_vendor_packages() -> None:
    offenders = []
    for path in CORE.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from") and words[1].split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(CORE)}:{number}: {line.strip()}")
    assert not offenders
