"""A takeover in the TUI (``T``): the panel that says who has the desktop and how to use it, the keys of
the terminal as the desktop's, and passthrough, where every key goes to the desktop until ``ctrl+]``, but
the kill chord ``ctrl+\\``."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Static

from ..core.actions import Action, ActionError, Kind, parse_chord_text
from ..core.text import visible

# the one chord that leaves passthrough: ctrl+] (telnet's escape), which no desktop program needs
LEAVE = "ctrl+right_square_bracket"
LEAVE_SHOWN = "ctrl+]"
# The kill chord, bound in every view and the one key of ours in passthrough: ctrl+\ (a terminal's own
# "quit" key, SIGQUIT in a cooked terminal; Textual's raw mode gives it as a key). No desktop program gets
# it from us: passthrough has no desktop name for it (``key_action`` refuses it), so nothing is lost.
KILL = "ctrl+backslash"
KILL_SHOWN = "ctrl+\\"

# Textual's names of keys that are not characters, as the desktop names them
_NAMES = {
    "enter": "Return",
    "tab": "Tab",
    "escape": "Escape",
    "backspace": "BackSpace",
    "delete": "Delete",
    "insert": "Insert",
    "home": "Home",
    "end": "End",
    "pageup": "Page_Up",
    "pagedown": "Page_Down",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "space": "space",
    **{f"f{n}": f"F{n}" for n in range(1, 25)},
}
_MODIFIERS = ("ctrl", "alt", "shift", "super")


def key_action(key: str, character: str | None) -> Action | str:
    """The desktop action for a key pressed in the terminal: a character typed as text (one character),
    anything else as a chord; or why it has none (a string)."""
    parts = key.split("+")
    mods, name = [p for p in parts[:-1] if p in _MODIFIERS], parts[-1]
    if character is not None and len(character) == 1 and character.isprintable() and not {"ctrl", "alt"} & set(mods):
        return Action(Kind.TYPE, text=character)
    desktop = _NAMES.get(name)
    if desktop is None:
        if len(name) == 1 and name.isascii() and name.isprintable():
            desktop = name
        else:
            return f"the key {visible(key, limit=40)} has no name on the desktop"
    try:
        return Action(Kind.KEYPRESS, chord=parse_chord_text("+".join([*mods, desktop])))
    except ActionError as exc:
        return exc.reason


def panel_text(
    operator: str, *, asked: str = "", private: bool = False, lands: str = "", passthrough: bool = False
) -> Text:
    """The takeover panel: who has the desktop, what the keys and the mouse do, and where a click lands; in
    ``passthrough`` only the two chords that work there."""
    text = Text()
    if asked:
        text.append(" TAKEOVER ASKED ", style="bold reverse")
        text.append(f" {asked}\n")
        text.append("T", style="bold reverse")
        text.append(" cancels   ")
        text.append("k", style="bold reverse")
        text.append(" kill switch")
        return text
    text.append(" YOU HAVE THE DESKTOP ", style="bold reverse")
    text.append(f" {visible(operator, limit=60)} · the model waits; each input is recorded as yours\n")
    if private:
        text.append(" PRIVATE ", style="bold reverse")
        text.append(" typed text stays out of what the model is told; its screens are never sent to it\n")
    if passthrough:
        text.append(" PASSTHROUGH ", style="bold reverse")
        text.append(" every key goes to the desktop but these two; each character as it is typed\n")
        for key, words in ((KILL_SHOWN, "kill switch"), (LEAVE_SHOWN, "leave passthrough")):
            text.append(key, style="bold reverse")
            text.append(f" {words}  ")
        text.append("\ntyping is one action on record until a pause of 1 s or another key")
        return text
    # the keys first: on a small terminal the frame cuts the last lines
    for key, words in (("T", "hand back"), ("k", "kill switch"), ("p", f"passthrough ({LEAVE_SHOWN} leaves)"),
                       ("s", "private"), ("z", "whole / zoom, a cell a pixel")):  # fmt: skip
        text.append(key, style="bold reverse")
        text.append(f" {words}  ")
    text.append("\nclick on the desktop: a click there (press, move, release: a drag)\n")
    text.append(lands or "move the mouse over the desktop to see where a click lands", style="italic")
    return text


class PassthroughScreen(ModalScreen[None]):
    """Every key to the desktop, ``send`` turning each into an action, until ``ctrl+]``. The run's screen
    stays visible beneath; the App's own keys wait until it is left, but the kill chord (``ctrl+\\``, a
    priority binding of the App's)."""

    DEFAULT_CSS = """
    PassthroughScreen {
        background: transparent;
        align: center bottom;
    }
    PassthroughScreen > Static {
        width: 100%;
        height: 1;
        background: $error;
        color: $text;
        text-style: bold;
    }
    """

    def __init__(self, send: Callable[[Action], None], refused: Callable[[str], None]) -> None:
        super().__init__()
        self.send, self.refused = send, refused

    def compose(self) -> ComposeResult:
        words = f" PASSTHROUGH · every key goes to the desktop · {KILL_SHOWN} kill switch · {LEAVE_SHOWN} leaves"
        yield Static(Text(words))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the screen's own bindings (tab, shift+tab) are keys of the desktop here
        return False

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        if event.key == LEAVE:
            self.dismiss()
            return
        if event.key == KILL:
            # the App's kill chord took it, unless the run has ended: never the desktop's
            return
        action = key_action(event.key, event.character)
        if isinstance(action, str):
            self.refused(action)
        else:
            self.send(action)
