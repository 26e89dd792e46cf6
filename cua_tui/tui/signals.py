"""Getting the analyst's attention: the bell and a desktop notification when a decision starts waiting (a
terminal escape sent only where the environment names a terminal known to show it, its body stripped of
control characters), and the alert line that stays until it has been seen. Which terminals: docs/tui.md."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ..core.attention import Attention
from ..core.run_view import RunView

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_BODY = 200


@dataclass(frozen=True)
class Signals:
    """Which signals a waiting decision gives (settings ``bell`` / ``notify``, or CUA_TUI_BELL / CUA_TUI_NOTIFY=0)."""

    bell: bool = True
    notify: bool = True


def _clean(text: str, limit: int = MAX_BODY) -> str:
    text = _CONTROL.sub(" ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def notification_protocol(env: Mapping[str, str]) -> str | None:
    """``"99"``, ``"9"``, ``"777"`` or None: the notification escape the terminal named by ``env`` shows."""
    term = env.get("TERM", "")
    program = env.get("TERM_PROGRAM", "")
    lc_terminal = env.get("LC_TERMINAL", "")  # iTerm2 sets it, and it survives ssh and tmux
    if term == "xterm-kitty" or env.get("KITTY_WINDOW_ID"):
        return "99"
    if program in ("iTerm.app", "WezTerm") or lc_terminal == "iTerm2" or env.get("WT_SESSION"):
        return "9"
    if program == "ghostty" or term == "xterm-ghostty":
        return "9"
    if term.startswith(("foot", "rxvt-unicode")) or env.get("VTE_VERSION"):
        return "777"
    return None


def notification_escape(title: str, body: str, env: Mapping[str, str]) -> str | None:
    """The escape sequence that makes the terminal show a desktop notification, or None where none is known."""
    protocol = notification_protocol(env)
    if protocol is None:
        return None
    title, body = _clean(title, 80), _clean(body)
    if protocol == "99":
        sequence = f"\x1b]99;i=cua:d=0;{title}\x1b\\\x1b]99;i=cua:d=1:p=body;{body}\x1b\\"
    elif protocol == "9":
        sequence = f"\x1b]9;{title}: {body}\x07"
    else:
        sequence = f"\x1b]777;notify;{title.replace(';', ',')};{body}\x07"
    if env.get("TMUX"):
        sequence = "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return sequence


class AlertBar(Static):
    """The alerts not yet seen: hidden when there are none; ``x`` marks them seen."""

    view: reactive[RunView | None] = reactive(None, init=False, always_update=True, layout=False, repaint=False)

    def watch_view(self, view: RunView | None) -> None:
        if view is not None:
            self.show_alerts(view.attention)

    _shown: tuple[int, object] = (-1, None)  # nothing shown yet: the first call sets the display

    def show_alerts(self, attention: Attention) -> None:
        unseen = attention.unseen
        shown = (len(unseen), unseen[-1] if unseen else None)
        if shown == self._shown:
            # the same alerts: no redraw on every event of the run
            return
        self._shown = shown
        self.display = bool(unseen)
        if not unseen:
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" ALERT ", style="bold reverse")
        count = f" {len(unseen)} unseen · x marks them seen · " if len(unseen) > 1 else " x marks it seen · "
        text.append(count, style="bold")
        text.append(unseen[-1].line)  # already made visible by core.attention
        if len(unseen) > 1:
            text.append("\n")
            text.append(" " * 7 + " earlier: ", style="bold")
            text.append(" · ".join(a.line for a in reversed(unseen[-4:-1])))
        self.update(text)
