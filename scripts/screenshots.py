"""Pictures of the supervision TUI for the README, from the recorded runs the snapshot tests use.

    .venv/bin/python scripts/screenshots.py [--out screenshots] [--theme NAME]

Writes one SVG per scene (awaiting-decision, refused, finished, help) through the App's own
``save_screenshot``, and a PNG next to each when ``rsvg-convert`` is installed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the scenes live with the snapshot tests that use them (tests/scenes.py), not in the package
sys.path.insert(0, str(ROOT / "tests"))
from scenes import SCENES, save  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots", help="folder for the pictures")
    parser.add_argument("--theme", default="cua-dark", help="TUI theme")
    parser.add_argument("scenes", nargs="*", metavar="SCENE", help=f"any of {', '.join(SCENES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.scenes if name not in SCENES]
    if unknown:
        parser.error(f"unknown scene(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    rsvg = shutil.which("rsvg-convert")
    for name in args.scenes or SCENES:
        svg = save(SCENES[name], args.out, theme=args.theme)
        line = f"{svg.relative_to(ROOT) if svg.is_relative_to(ROOT) else svg}"
        if rsvg:
            png = svg.with_suffix(".png")
            subprocess.run([rsvg, str(svg), "-o", str(png)], check=True)
            line += f" + {png.name}"
        print(line)
    if not rsvg:
        print("rsvg-convert not found: SVG only (apt-get install librsvg2-bin for PNGs)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
