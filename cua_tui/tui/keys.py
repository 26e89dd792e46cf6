"""The one table of keys, ``keys.toml`` beside this file: each key of the App, of a run's view, of the fleet's
and a replay's, of the widgets (the audit list, the fleet's tables, the editor) and of the dialogs, with its
action, the footer's word and the help screen's sentence. Everything that binds a key takes its ``BINDINGS``
from it (``bindings``); the footer shows those bindings, the help screen (``?``) lists them (``help_keys``),
the command palette names their keys, and tests/tui/test_keys.py checks that nothing binds a key of its own,
and the decision panel's key line and the manual's key tables (docs/tui.md, docs/commands/fleet.md) against
them. Adding a key: docs/contributing/key.md.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from textual.binding import Binding, BindingType

from .takeover import KILL

# where a key is bound: the App (every view that can do its action), a run's view and its audit list, the
# fleet's and its two tables (the queue and the runs), a replay's, the editor e opens; then the dialogs: the
# help, a detail (an event in full), the screen as text, a reject's reason, the grants, the fleet's kill-all
# question and its typed text in full
APP, RUN, AUDIT, FLEET, TABLE, REPLAY, EDITOR = "app", "run", "audit", "fleet", "table", "replay", "editor"
HELP, DETAIL, SCREEN_TEXT, REASON, GRANTS, KILL_ALL, ALL_TEXT, ASIDE = (
    "help", "detail", "screen_text", "reason", "grants", "kill_all", "all_text", "aside",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Key:
    """One key: ``key`` as Textual names it (comma-joined: each), the ``action`` it runs, ``footer`` its word
    in the footer (shown there unless ``show`` is False), ``help`` its sentence in the help screen (empty:
    not listed; another binding of the same key, a neighbour's sentence or the dialog's own lines say it),
    ``palette`` its title in the command palette (empty: not there); ``textual``: Textual binds it itself
    (listed, not bound again)."""

    id: str
    home: str
    key: str
    action: str
    footer: str
    help: str
    show: bool = True
    priority: bool = False
    palette: str = ""
    textual: bool = False
    # how the help and the manual write it, where not as ``shown`` does (a replay's arrows)
    display: str = ""

    @property
    def shown(self) -> str:
        """The key as the help screen, the palette and the manual write it (keys bound together: each)."""
        return self.display or ", ".join(self.names)

    @property
    def names(self) -> tuple[str, ...]:
        """Each key of a comma-joined ``key`` (Textual binds each), as ``shown`` writes it."""
        return (self.display,) if self.display else tuple(shown(key) for key in self.key.split(","))

    def binding(self) -> Binding:
        return Binding(
            self.key, self.action, self.footer, show=self.show, priority=self.priority, tooltip=self.help, id=self.id
        )


_SHOWN = {"question_mark": "?", "slash": "/", KILL: "ctrl+\\", "escape": "esc"}


def shown(key: str) -> str:
    """A Textual key name as the help screen, the palette and the manual write it (``question_mark``: ``?``)."""
    return _SHOWN.get(key, key)


TABLE_FILE = Path(__file__).with_name("keys.toml")
HOMES = (
    APP, RUN, AUDIT, FLEET, TABLE, REPLAY, EDITOR, HELP, DETAIL, SCREEN_TEXT, REASON, GRANTS, KILL_ALL, ALL_TEXT, ASIDE,
)  # fmt: skip


def load(path: Path = TABLE_FILE) -> tuple[Key, ...]:
    """The key table (a file of the package, not the user's): each ``[[key]]`` a ``Key``, its fields exactly
    (a typo is an error at import, not a key that silently does nothing), ids unique, homes known."""
    with path.open("rb") as fh:
        rows = tomllib.load(fh)["key"]
    names = {f.name for f in fields(Key)}
    keys = tuple(Key(**row) for row in rows if set(row) <= names)
    if len(keys) != len(rows) or len({key.id for key in keys}) != len(keys):
        raise ValueError(f"{path}: a key with an unknown field, or an id twice")
    if any(key.home not in HOMES for key in keys):
        raise ValueError(f"{path}: a key bound in none of {', '.join(HOMES)}")
    return keys


KEYS = load()
# what a view's help says beside its keys: the mouse
RUN_MOUSE = (("click", "a batch row or an earlier turn: its detail; the wheel scrolls the panes"),)
TAKEOVER_MOUSE = (("click", "on the desktop pane: a click on the desktop there (press and release apart: a drag)"),)
EDITOR_MOUSE = (("click", "on the desktop pane: the point there (a drag: the end being moved)"),)


def bindings(home: str, *, only: Iterable[str] = ()) -> list[BindingType]:
    """The bindings of ``home`` (``only``: those ids), in the table's order; not Textual's own."""
    ids = set(only)
    return [key.binding() for key in KEYS if key.home == home and not key.textual and (not ids or key.id in ids)]


def keys_of(homes: Sequence[str], app_actions: Iterable[str] | None = None) -> list[Key]:
    """The keys of a view made of ``homes``, in that order (the table's within each); of the App's, those whose
    action is in ``app_actions`` (None: all) and Textual's own."""
    actions = set(app_actions) if app_actions is not None else None
    chosen = []
    for key in KEYS:
        if key.home not in homes:
            continue
        name = key.action.partition("(")[0]
        if key.home == APP and not key.textual and actions is not None and name not in actions:
            continue
        chosen.append(key)
    return sorted(chosen, key=lambda key: homes.index(key.home))


def help_keys(keys: Sequence[Key], mouse: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """The help screen's lines: each key once, in the table's order, with the sentence of its first binding
    that has one (a view's own before the App's: the fleet's k kills the selected run), keys saying the same
    sentence on one line (the editor's arrows); then the mouse's."""
    lines: dict[str, Key] = {}
    for key in keys:
        known = lines.get(key.shown)
        if key.help and (known is None or (known.home == APP and key.home != APP)):
            lines[key.shown] = key
    said: dict[str, list[str]] = {}
    for name, key in lines.items():
        said.setdefault(key.help, []).append(name)
    return [*((" ".join(names), sentence) for sentence, names in said.items()), *mouse]
