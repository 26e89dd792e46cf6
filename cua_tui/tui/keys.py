"""The one table of keys: each key of the App, of a run's view and of the fleet's, with its action, the
footer's word and the help screen's sentence. The App and the screens take their ``BINDINGS`` from here
(``bindings``); the footer shows those bindings, the help screen (``?``) lists them (``help_keys``), the
command palette names their keys, and tests/tui/test_keys.py checks the decision panel's key line and the
manual's key tables (docs/tui.md, docs/commands/fleet.md) against them. Adding a key: docs/contributing/key.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from textual.app import App
from textual.binding import Binding, BindingType

from .takeover import KILL

# where a key is bound: the App (every view that can do its action), a run's view and its audit list, the
# fleet's and its two tables (the queue and the runs)
APP, RUN, AUDIT, FLEET, TABLE = "app", "run", "audit", "fleet", "table"


@dataclass(frozen=True, slots=True)
class Key:
    """One key: ``key`` as Textual names it, the ``action`` it runs, ``footer`` its word in the footer (shown
    there unless ``show`` is False), ``help`` its sentence in the help screen (empty: another binding of the
    same key says it), ``palette`` its title in the command palette (empty: not there); ``textual``: Textual
    binds it itself (listed, not bound again)."""

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

    @property
    def shown(self) -> str:
        """The key as the help screen, the palette and the manual write it."""
        return shown(self.key)

    def binding(self) -> Binding:
        return Binding(
            self.key, self.action, self.footer, show=self.show, priority=self.priority, tooltip=self.help, id=self.id
        )


_SHOWN = {"question_mark": "?", "slash": "/", KILL: "ctrl+\\", "escape": "esc"}


def shown(key: str) -> str:
    """A Textual key name as the help screen, the palette and the manual write it (``question_mark``: ``?``)."""
    return _SHOWN.get(key, key)


# fmt: off
KEYS: tuple[Key, ...] = (
    # The App's: every view that can do them (ViewScreen.APP_ACTIONS). e and n come first, as k does: the
    # keys typed right after them must find the field they open focused, not be handled against the view as
    # it was (a k there was the kill switch).
    Key(
        "approve", APP, "y", "approve", "approve",
        "approve the pending action (in the fleet: the selected request; on a group, each of its runs, each "
        "its own recorded decision naming the group)",
        palette="Approve",
    ),
    Key(
        "approve_scope", APP, "a", "approve_scope", "approve scope",
        "approve it and every later action of its scope (named in the panel) for the rest of that run",
        palette="Approve scope",
    ),
    Key(
        "edit", APP, "e", "edit", "edit",
        "edit it (the text, the point, the chord, the scroll), then Enter approves it as edited",
        priority=True, palette="Edit",
    ),
    Key(
        "reject", APP, "n", "reject", "reject",
        "reject it, with an optional one-line reason the model hears: the batch halts",
        priority=True, palette="Reject",
    ),
    Key(
        "kill", APP, "k", "kill", "KILL SWITCH",
        "kill switch: nothing more runs, input released, desktop stopped, the run ends killed",
        priority=True,
    ),
    Key(
        "kill_always", APP, "ctrl+k", "kill('always')", "kill",
        "the kill switch while you type in a field (a reason, a search, an edit)",
        show=False, priority=True, palette="Kill switch",
    ),
    # the kill chord: the kill switch in passthrough too, where every other key is the desktop's
    Key(
        "kill_chord", APP, KILL, "kill_chord", "kill",
        "the kill chord: the kill switch in every state, in passthrough and while you type in a field too",
        show=False, priority=True,
    ),
    Key(
        "zoom", APP, "z", "zoom", "zoom",
        "whole screen / zoom: at a decision the pane frames the target (for typing, the field clicked last)",
        palette="Zoom",
    ),
    Key(
        "screen_text", APP, "t", "screen_text", "screen text",
        "the screen as text (OCR): the words nearest the target first, then the whole page; type to search",
        palette="Screen text",
    ),
    Key(
        "open_screenshot", APP, "o", "open_screenshot", "screenshot",
        "write the full-resolution screenshot to a file (says where) and open it in the system viewer",
        palette="Open screenshot",
    ),
    Key("help", APP, "question_mark", "help", "help", "this help: the keys and the active policy", palette="Help"),
    # Textual's own, listed as ours are
    Key(
        "palette", APP, App.COMMAND_PALETTE_BINDING, "command_palette", "palette",
        "command palette: the commands that apply now (approve, reject, kill, zoom, copy, verify now, show "
        "policy, grants, search, help) and Textual's (themes)",
        textual=True,
    ),
    Key("quit_app", APP, "ctrl+q", "quit", "quit", "the same as q", textual=True),
    # A run's view
    Key("grants", RUN, "g", "grants", "grants", "the scoped approvals in force; Enter revokes the selected one",
        palette="Grants"),
    Key(
        "alerts_seen", RUN, "x", "alerts_seen", "alerts seen",
        "the alerts have been seen: the alert line goes until the next one",
    ),
    Key("back", RUN, "escape", "back", "back to the fleet", "a fleet's run: back to the fleet (the run goes on)"),
    Key(
        "quit", RUN, "q", "quit_when_done", "quit",
        "quit once the run has ended; during it, a first q says what leaving ends and a second within 3 s "
        "leaves (the run is killed and sealed)",
    ),
    # during a run: says what leaving means (the sentence is quit's)
    Key("leave", RUN, "q", "leave", "leave", "", show=False),
    Key(
        "search", RUN, "slash", "search", "search",
        "search the audit log: words, kind:NAME (Enter keeps the filter, Esc clears it)",
        show=False, palette="Search audit log",
    ),
    # the desktop taken over, and handed back
    Key(
        "takeover", RUN, "T", "takeover", "take over",
        "take over the desktop: the run pauses, your clicks and keys run as your own actions",
        palette="Take over",
    ),
    Key(
        "hand_back", RUN, "T", "hand_back", "hand back",
        "hand the desktop back to the model, told what you did",
        palette="Hand back",
    ),
    Key(
        "passthrough", RUN, "p", "passthrough", "passthrough",
        "during a takeover: every key to the desktop until ctrl+], but the kill chord ctrl+\\",
        palette="Passthrough",
    ),
    Key(
        "private", RUN, "s", "private", "private",
        "during a takeover: a private stretch on or off (typed text and screens kept from the model)",
        palette="Private stretch",
    ),
    Key(
        "event_open", AUDIT, "enter", "open", "event in full",
        "in the audit log (up / down move, a click selects): the event in full; c copies its hash",
        show=False,
    ),
    # The fleet's
    Key(
        "open_run", FLEET, "enter", "open_run", "live view",
        "on a group (×N): list its runs, or fold them again; on a request whose typed text the panel cut: all "
        "of it (enter again: the run); else the run's full live view; esc returns",
    ),
    # the App's kill switch, worded for what it kills here: the selected run (K: every run)
    Key(
        "kill_run", FLEET, "k", "app.kill", "kill run",
        "kill the selected run (the queue's request's run, or the run table's row when it has the focus)",
        priority=True,
    ),
    Key("kill_all", FLEET, "K", "kill_all", "kill all", "kill every run (asks first)"),
    Key(
        "leave_fleet", FLEET, "q", "leave", "quit",
        "leave: during the fleet, press twice (every run is killed and sealed first)",
    ),
    Key("next_table", FLEET, "tab", "app.focus_next", "next table", "move between the queue and the table of runs",
        show=False, textual=True),
    # the fleet's two tables (tui/row_table.py)
    Key("row_up", TABLE, "up", "cursor(-1)", "previous row", "select the previous row", show=False),
    Key("row_down", TABLE, "down", "cursor(1)", "next row", "select the next row", show=False),
    Key("row_choose", TABLE, "enter", "select", "choose", "", show=False),
)
# fmt: on
BY_ID = {key.id: key for key in KEYS}
# what a view's help says beside its keys: the mouse
RUN_MOUSE = (("click", "a batch row or an earlier turn: its detail; the wheel scrolls the panes"),)
TAKEOVER_MOUSE = (("click", "on the desktop pane: a click on the desktop there (press and release apart: a drag)"),)


def bindings(home: str, *, only: Iterable[str] = ()) -> list[BindingType]:
    """The bindings of ``home`` (``only``: those ids), in the table's order; not Textual's own."""
    ids = set(only)
    return [key.binding() for key in KEYS if key.home == home and not key.textual and (not ids or key.id in ids)]


def keys_of(homes: Iterable[str], app_actions: Iterable[str] | None = None) -> list[Key]:
    """The keys of a view made of ``homes``; of the App's, those whose action is in ``app_actions`` (None:
    all) and Textual's own."""
    wanted, actions = tuple(homes), set(app_actions) if app_actions is not None else None
    chosen = []
    for key in KEYS:
        if key.home not in wanted:
            continue
        name = key.action.partition("(")[0]
        if key.home == APP and not key.textual and actions is not None and name not in actions:
            continue
        chosen.append(key)
    return chosen


def help_keys(keys: Sequence[Key], mouse: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """The help screen's lines: each key once, in the table's order, with the sentence of its first binding
    that has one (a view's own before the App's: the fleet's k kills the selected run); then the mouse's."""
    lines: dict[str, Key] = {}
    for key in keys:
        known = lines.get(key.shown)
        if key.help and (known is None or (known.home == APP and key.home != APP)):
            lines[key.shown] = key
    return [*((shown, key.help) for shown, key in lines.items()), *mouse]
