"""Offline first run on the in-process simulated desktop: the scripted form agent, headless.

Used by ``scripts/setup.sh demo`` until the local Xvfb desktop and the TUI take over. Decisions are asked
on the terminal when there is one (y approve, n reject, k kill), and approved when there is not.
"""

from __future__ import annotations

import sys
from importlib import resources

from .cli import main as cli_main


def main(argv: list[str] | None = None) -> None:
    script = resources.files("cua_tui") / "scripts" / "sim-form.json"
    on_confirm = "ask" if sys.stdin.isatty() else "approve"
    print(f"cua-tui demo (scripted agent, no model, no key) · decisions: {on_confirm}", file=sys.stderr)
    args = [
        "run",
        "--headless",
        "--backend",
        "sim",
        "--agent",
        f"script:{script}",
        "--task",
        "Type the phrase 'cua-tui verified' into the form and click Verify.",
        "--on-confirm",
        on_confirm,
        *(argv if argv is not None else sys.argv[1:]),
    ]
    cli_main(args)


if __name__ == "__main__":
    main()
