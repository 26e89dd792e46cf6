"""Labs: fixture web applications with independent, server-side verification.

Each lab serves its page on 127.0.0.1 (an ephemeral port) from the controller process; Chromium opens it in
kiosk mode. ``get_lab(name)`` builds one (not started); ``LABS`` maps every name to its class.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .base import Box, Lab
from .form import FormLab
from .injection import InjectionLab
from .search_export import SearchExportLab

# the drill library recorded from these labs (scripts/drill_library.py; docs/drills.md)
SHIPPED_DRILLS = Path(str(resources.files(__package__).joinpath("drills")))

LABS: dict[str, type[Lab]] = {cls.name: cls for cls in (FormLab, SearchExportLab, InjectionLab)}


def get_lab(name: str) -> Lab:
    """A new, not yet started lab by name; ValueError listing the known names otherwise."""
    try:
        cls = LABS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown lab {name!r}; choose one of {', '.join(LABS)}") from None
    return cls()


__all__ = ["LABS", "SHIPPED_DRILLS", "Box", "FormLab", "InjectionLab", "Lab", "SearchExportLab", "get_lab"]
