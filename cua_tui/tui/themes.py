"""Themes: built-in Theme objects plus TOML theme files from the project's themes/ folder and the user's.

Textual has no theme-file loader: each file is read, validated (msgspec, unknown keys refused, colours
parsed) and turned into a ``Theme``. A broken file never stops the app: it is reported and skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import Theme

from ..core import tomlfile
from ..core.text import visible

COLOURS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
)
# cua-tui's own themes: name and dark, then the colours in the order of COLOURS.
_BUILTIN = (
    ("cua-dark", True, "#4f9cf9 #7e8aa2 #ff4fd8 #f2b233 #ff5c5c #3ccf7a #e6e9ef #11151c #181d26 #222a36"),
    ("cua-light", False, "#1f5fbf #5b667a #b0209a #b36b00 #c41e1e #1b7f45 #1b1f27 #f6f7f9 #ffffff #e6e9ef"),
    ("cua-contrast", True, "#ffffff #c0c0c0 #ff00ff #ffff00 #ff3030 #00ff66 #ffffff #000000 #000000 #202020"),
)


def _theme(name: str, dark: bool, colours: str) -> Theme:
    named: dict[str, Any] = dict(zip(COLOURS, colours.split(), strict=True))
    return Theme(name=name, dark=dark, **named)


BUILTIN = [_theme(*row) for row in _BUILTIN]


# A theme is a dozen lines; this bounds what a file in a themes folder that is not one costs.
MAX_THEME_BYTES = 64 * 1024


class _ThemeFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    primary: str
    dark: bool = True
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    variables: dict[str, str] = msgspec.field(default_factory=dict)


def project_themes_dir() -> Path:
    """``themes/`` of a source checkout, or the copy packed into the wheel."""
    here = Path(__file__).resolve().parent.parent
    packed = here / "themes"
    return packed if packed.is_dir() else here.parent / "themes"


def load_theme_file(path: Path) -> Theme:
    """One theme file; ValueError (core.tomlfile's) with the file name, the line and what is wrong."""
    doc = tomlfile.load(path, f"theme file {path.name}", cap=MAX_THEME_BYTES, what="a theme file")
    spec = doc.convert(_ThemeFile)
    if not spec.name.strip() or len(spec.name) > 40:
        raise doc.error(("name",), "must be 1 to 40 characters")
    for field in COLOURS:
        value = getattr(spec, field)
        if value is None:
            continue
        try:
            Color.parse(value)
        except ColorParseError:
            raise doc.error((field,), f"{value!r} is not a colour") from None
    return Theme(
        name=spec.name.strip(),
        dark=spec.dark,
        variables=dict(spec.variables),
        **{field: getattr(spec, field) for field in COLOURS if getattr(spec, field) is not None},
    )


def load_themes(*folders: Path) -> tuple[list[Theme], list[str]]:
    """Built-in themes, then every ``*.toml`` of each folder (later wins); plus the problems found."""
    themes: dict[str, Theme] = {theme.name: theme for theme in BUILTIN}
    problems: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems


def theme_names(*folders: Path) -> list[str]:
    """Every theme a ``--theme`` may name: cua-tui's, the theme files in ``folders`` and Textual's own."""
    from textual.theme import BUILTIN_THEMES

    themes, _problems = load_themes(project_themes_dir(), *folders)
    return sorted({t.name for t in themes} | set(BUILTIN_THEMES))


def install_themes(app: App[Any], requested: str, folders: tuple[Path, ...], *, tell: bool = True) -> None:
    """Register every theme of ``folders`` with ``app`` and choose ``requested`` (cua-dark when it is unknown).
    With ``tell``, each problem (a broken theme file, an unknown name) is a notification, shown literally:
    file names and parser messages quote the file's own text ("[/]" as markup would crash)."""
    themes, problems = load_themes(*folders)
    for theme in themes:
        app.register_theme(theme)
    if requested in {t.name for t in themes} | set(app.available_themes):
        app.theme = requested
    else:
        app.theme = "cua-dark"
        problems.append(f"unknown theme {requested!r}; using cua-dark")
    if tell:
        for problem in problems:
            app.notify(visible(problem), title="theme", severity="warning", timeout=10, markup=False)
