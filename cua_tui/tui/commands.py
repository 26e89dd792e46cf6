"""cua-tui's own commands: the command palette's entries (ctrl+p), and the App's actions for history and
detail (search the audit log, open a batch row or an earlier turn, copy ids and hashes, verify the audit
log now, show the policy).

Every palette entry is an action of the App, named as a key binding names it; it is listed only when the
App has that action and ``check_action`` allows it now (the same rule as its key), and it is checked
again when chosen, as the run may have moved on meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from textual import work
from textual.actions import parse
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..core.text import visible
from .audit_pane import AuditPane
from .batch import ActionRow, TurnSummary
from .detail import action_detail, copy, text_screen, turn_detail
from .keys import KEYS

if TYPE_CHECKING:
    from ..core.audit import VerifyReport
    from .source import RunSource

# (title, what it does, the action as a key binding names it): the keys' own first (their title, sentence and
# key from tui/keys.py), then the commands that have no key
COMMANDS: tuple[tuple[str, str, str], ...] = (
    *((key.palette, f"{key.help} ({key.shown})", key.action) for key in KEYS if key.palette),
    ("Copy run directory", "put the run directory's path on the clipboard", "copy_run_dir"),
    ("Copy run id", "put the run id on the clipboard", "copy_run_id"),
    ("Copy chain head", "put the audit chain's head hash on the clipboard", "copy_head"),
    ("Verify now", "check the audit log as written so far, as cua-tui verify does", "verify_now"),
    ("Show policy", "the policy in effect", "show_policy"),
)


class PaletteHost(Protocol):
    """What the palette asks of the App (tui/app.py's CuaApp): the view under it, and whether an action of
    the App's is possible now."""

    @property
    def view_screen(self) -> Any: ...

    def possible(self, action: str, parameters: tuple[object, ...]) -> bool | None: ...


class CuaCommands(Provider):
    """The palette's cua-tui entries, those possible now."""

    def _owner(self, name: str) -> Any:
        """The App, or the screen under the palette, that has the action ``name`` (None: neither)."""
        app = cast(PaletteHost, self.app)  # the palette of cua-tui's one App
        for owner in (app, app.view_screen):
            if owner is not None and callable(getattr(owner, f"action_{name}", None)):
                return owner
        return None

    def _possible(self) -> Iterator[tuple[str, str, str]]:
        for title, help_text, action in COMMANDS:
            _, name, params = parse(action)
            if self._can(name, params):
                yield title, help_text, action

    def _can(self, name: str, params: tuple[object, ...]) -> bool:
        """Whether the action is possible, the palette's own field aside (its letters are not our keys)."""
        owner = self._owner(name)
        if owner is None:
            return False
        app = cast(PaletteHost, self.app)
        return bool(app.possible(name, params) if owner is app else owner.check_action(name, params))

    async def _run(self, action: str) -> None:
        _, name, params = parse(action)
        owner = self._owner(name)
        if owner is not None and self._can(name, params):
            await self.app.run_action(action, owner)
        else:
            self.app.notify(f"{name.replace('_', ' ')}: not possible any more", severity="warning", markup=False)

    async def discover(self) -> Hits:
        for title, help_text, action in self._possible():
            yield DiscoveryHit(title, partial(self._run, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, action in self._possible():
            score = matcher.match(f"{title} {help_text}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self._run, action), text=title, help=help_text)


class HistoryActions:
    """A run screen's actions for history and detail (a mixin: the screen's own file stays small). It
    expects the screen's ``source`` (a RunSource), ``view`` (the RunView) and ``running``."""

    source: RunSource
    view: Any
    running: bool
    app: Any

    def check_history_action(self, action: str) -> bool | None:
        """Whether one of these actions is possible now; None for an action that is not one of them."""
        if action in ("copy_run_dir", "verify_now"):
            return self.run_dir is not None
        if action == "copy_run_id":
            return bool(self.source.info.run_id)
        if action in ("copy_head", "search", "show_policy"):
            return True
        return None

    @property
    def run_dir(self) -> Path | None:
        """The run directory being written (a live run), or None (a recording)."""
        path = self.source.run_dir
        return Path(path) if path is not None else None

    def action_search(self) -> None:
        screen: Any = self
        screen.query_one(AuditPane).action_search()

    def action_copy_run_dir(self) -> None:
        if self.run_dir is not None:
            copy(self.app, "run directory", str(self.run_dir))

    def action_copy_run_id(self) -> None:
        copy(self.app, "run id", self.source.info.run_id)

    def action_copy_head(self) -> None:
        copy(self.app, "chain head", self.view.head)

    def action_show_policy(self) -> None:
        self.app.push_screen(text_screen("Active policy", self.source.policy_lines or ["(no policy lines)"]))

    def action_verify_now(self) -> None:
        if self.run_dir is not None:
            self.app.notify("verifying the audit log…", title="verify", markup=False, timeout=3)
            self._verify(self.run_dir)

    @work(thread=True, exclusive=True, exit_on_error=False, group="verify", description="verify the audit log")
    def _verify(self, run_dir: Path) -> None:
        # the same check as `cua-tui verify`, off the UI thread
        from ..core.audit import verify_run

        report = verify_run(run_dir)
        self.app.call_from_thread(self._verified, report)

    def _verified(self, report: VerifyReport) -> None:
        app = self.app
        lines = [visible(report.summary, limit=300), *(f"note: {visible(n, limit=200)}" for n in report.notes[:3])]
        app.notify(
            "\n".join(lines),
            title="verify: intact" if report.intact else "verify: NOT INTACT",
            severity="information" if report.intact else "error",
            timeout=15 if report.intact else 60,
            markup=False,
        )

    # A click on a batch row, or on an earlier turn: its detail, with its audit events still held.
    def on_action_row_selected(self, message: ActionRow.Selected) -> None:
        screen: Any = self
        self.app.push_screen(action_detail(message.row, screen.query_one(AuditPane).entries()))

    def on_turn_summary_selected(self, message: TurnSummary.Selected) -> None:
        screen: Any = self
        summary = message.summary
        entries = screen.query_one(AuditPane).entries()
        self.app.push_screen(turn_detail(summary.turn, summary.text, summary.rows, entries))
