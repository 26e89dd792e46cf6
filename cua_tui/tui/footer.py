"""The footer of every view: Textual's, composed again only when the keys it shows change.

Textual's footer composes itself anew on every refresh of the bindings (a focus that moves, a screen pushed
or popped, each decision shown), mounting and styling each of its keys again. Most of those refreshes
change nothing it shows, and they were most of the style work of a run's view (in the decision tests,
four fifths of every style applied was a footer key's)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

Shown = tuple[object, ...]


class KeysFooter(Footer):
    def __init__(self) -> None:
        super().__init__()
        self._shown: Shown | None = None

    def _showing(self) -> Shown:
        """What the footer would show now: each shown key, its action, words, state and how it is written."""
        app = self.app
        keys = tuple(
            (
                *(binding.key, app.get_key_display(binding), binding.action, binding.description, binding.group),
                *(enabled, tooltip),
            )
            for _node, binding, enabled, tooltip in self.screen.active_bindings.values()
            if binding.show or binding.key == app.COMMAND_PALETTE_BINDING
        )
        return (keys, self.show_command_palette, app.ENABLE_COMMAND_PALETTE)

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._shown = self._showing()
        widgets: Iterable[Widget] = super().compose()
        yield from widgets

    def bindings_changed(self, screen: Screen[object]) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._compose_if_changed)

    async def _compose_if_changed(self) -> None:
        if self.is_attached and self._showing() != self._shown:
            await self.recompose()
