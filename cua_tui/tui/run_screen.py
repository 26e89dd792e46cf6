"""One run's screen: the live screen, the pending batch with its risks, the audit log and the status, and
the decision in view (y / a / n through the App, g the scoped approvals, x the alerts). The same screen
shows a lone run (``cua-tui run``, ``demo``) and a fleet's run opened from its queue: its source says
which (``RunSource``)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.actions import parse as parse_action
from textual.app import ComposeResult
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

from ..core import ending
from ..core import events as ev
from ..core.actions import Action, Kind
from ..core.describe import ASK_NOT_APPROVED
from ..core.drills import revealed
from ..core.edits import editable
from ..core.geometry import Size
from ..core.guard import DecisionGuard
from ..core.ports import Answer, DecisionRequest
from ..core.run_view import RunView
from ..core.runlog import RunReader
from ..core.safeio import RunFileError
from ..core.text import failure, visible
from .app import ViewScreen, desktop_beside
from .audit_list import MAX_ENTRIES
from .audit_pane import AuditPane
from .batch import BatchPane
from .commands import HistoryActions
from .decision_panel import DecisionPanel, compact_terminal
from .desktop_view import DesktopView
from .dialogs import GrantsScreen, RejectReason, open_reason
from .editor import ActionEditor
from .footer import KeysFooter
from .frames import Target
from .goal import GoalBar
from .keys import APP, AUDIT, EDITOR, EDITOR_MOUSE, RUN, RUN_MOUSE, TAKEOVER_MOUSE, Key, bindings, help_keys, keys_of
from .messages import RunEvent, RunFinished, while_open
from .screen_text import ScreenTextRead, ScreenTextScreen, ShownScreen
from .signals import AlertBar
from .source import RunSource
from .status import StatusBar
from .takeover import PassthroughScreen, panel_text
from .target_view import destination, focus_target, injection_at, labelled, shot_of, shown_screen, typing_field

if TYPE_CHECKING:
    from ..core.injection import Injection
    from .app import CuaApp

# earlier events a view opened on a going run reads back from its audit log
AUDIT_HISTORY = MAX_ENTRIES
# how often the takeover's marker follows the mouse at most
HOVER_REDRAW_S = 0.15


class AuditHistory(Message):
    """A run's audit events up to ``upto`` read back from its log (the last AUDIT_HISTORY of them)."""

    def __init__(self, events: list[ev.Stamped], upto: int, problem: str | None) -> None:
        super().__init__()
        self.events, self.upto, self.problem = events, upto, problem


class RunScreen(HistoryActions, ViewScreen):
    """desktop pane | decision + batch + audit panes, status bar, footer, for the run ``source`` tells."""

    BINDINGS = bindings(RUN)  # tui/keys.py
    HOMES = (APP, RUN, AUDIT)
    # The run's state, from its event stream alone: the panes are bound to it and render their part.
    view: reactive[RunView] = reactive(RunView, init=False, layout=False, repaint=False)

    def __init__(self, app: CuaApp, source: RunSource) -> None:
        super().__init__()
        self.cua = app
        self.source = source
        # the screen as text (OCR in a worker), the App's, shared with the fleet's screen
        self.reading = app.reading
        # y / a / n count only once the decision was seen
        self.guard: DecisionGuard = app.new_guard()
        # The panes, held (not queried): the screen feeds them what the view does not say.
        self.desktop = DesktopView(graphics=app.graphics, id="desktop")
        self.panel = DecisionPanel(id="decision")
        self.batch_pane = BatchPane(id="batch", history=True)
        self.audit = AuditPane(id="audit")
        self.status = StatusBar(source.info, clock=app.clock, id="status")
        self.running = True
        self.final_status = ""
        # the run's own result said whether its seal reached the disk
        self._sealed_known = False
        self.zoomed = False
        # live events while the earlier ones are read back
        self._backlog: deque[ev.Stamped] | None = None
        # ``e``: the pending action being edited (the panel steps aside for it)
        self.editor: ActionEditor | None = None
        # ``T``: a takeover asked for (the run pauses once nothing is in flight), and its panel; the
        # pixel the mouse is over (where a click lands) and the last one clicked
        self.asked = False
        self.passthrough = False  # ``p``: every key the desktop's (the panel offers only what works there)
        self.takeover_panel = Static(id="takeover")
        self.hover: tuple[int, int] | None = None
        self.last_point: tuple[int, int] | None = None
        self._marking: Timer | None = None
        # a pending request's deadline (monotonic) and the timer counting it down in the panel
        self._due: float | None = None
        self._due_for: DecisionRequest | None = None
        self._countdown: Timer | None = None

    @property
    def run_task(self) -> str:
        """The fleet task whose run this is ("" for a lone run)."""
        return self.source.label

    def compose(self) -> ComposeResult:
        self.set_reactive(RunScreen.view, self.source.attach(self._told))
        self.running = self.view.ended is None
        info = self.source.info
        yield GoalBar(info, id="goal").data_bind(view=RunScreen.view)
        yield AlertBar(id="alerts").data_bind(view=RunScreen.view)
        yield from desktop_beside(
            self.desktop,
            self.panel.data_bind(view=RunScreen.view),
            self.takeover_panel,
            self.batch_pane.data_bind(view=RunScreen.view),
            self.audit,
        )
        self.status.info = info
        yield self.status.data_bind(view=RunScreen.view)
        yield KeysFooter()

    def _told(self, stamped: ev.Stamped) -> None:  # the run's thread: post, never wait
        self.post_message(RunEvent(stamped))

    def on_mount(self) -> None:
        source = self.source
        # Text: a str border title is parsed as markup, and a fleet task's name is the tasks file's
        # own text
        title = f"Desktop · {visible(source.label, limit=64)} (live)" if source.label else "Desktop"
        self.desktop.border_title = Text(title)
        panel = self.panel
        panel.run_name = source.run_name
        self.audit.audit_list.live = source.live
        if self.view.ended is not None:
            self.audit.set_state("sealed")
        if self.view.seq >= 0 and source.run_dir is not None:
            # The events before the copy the view started from: read back from the run's audit log
            # (the record itself) in a worker; events arriving meanwhile wait, so the pane keeps the
            # chain's order.
            self._backlog = deque(maxlen=AUDIT_HISTORY)
            reader = partial(self._read_history, str(source.run_dir), self.view.seq)
            self.run_worker(reader, thread=True, exit_on_error=False)
        if source.owned:
            self.cua.drive(source, self)
        self._show_pending()
        self._show_takeover()

    def on_unmount(self) -> None:
        self.source.detach()
        # Leaving the TUI while the run goes on is a kill: the run's thread must end, or the process
        # could not exit (asyncio waits for the worker's thread) and the caller's own kill would
        # never come.
        if self.source.owned and self.running:
            self.source.kill(by="human (left the TUI)")

    # ---------------------------------------------------------------------------------------------
    # The earlier events of a run opened mid-way
    # ----------------------------------------------------------------------------------------------
    def _read_history(self, path: str, upto: int) -> None:
        """Worker thread: the last events of the run's audit log up to ``upto``, posted as one AuditHistory."""
        tail: deque[ev.Stamped] = deque(maxlen=AUDIT_HISTORY)
        problem = None
        try:
            with RunReader(path) as reader:
                for stamped in reader.poll():
                    if stamped.seq > upto:
                        break
                    tail.append(stamped)
        except (OSError, RunFileError) as exc:
            problem = failure(exc)
        self.post_message(AuditHistory(list(tail), upto, problem))

    def on_audit_history(self, message: AuditHistory) -> None:
        message.stop()
        pane = self.audit
        history, backlog, self._backlog = message.events, self._backlog or (), None
        for stamped in history:
            pane.record(stamped.event, stamped.seq, stamped.head, chain=False)
        if not history or history[-1].seq != message.upto:
            why = message.problem or "the audit log holds fewer events than the run has told"
            self.notify(
                f"earlier audit events not all shown: {visible(why, limit=200)}", severity="warning", markup=False
            )
        for stamped in backlog:
            pane.record(stamped.event, stamped.seq, stamped.head, chain=False)
        pane.set_state("sealed" if self.view.ended is not None else "live")

    # ---------------------------------------------------------------------------------------------
    # Events
    # ----------------------------------------------------------------------------------------------
    @property
    def pending(self) -> DecisionRequest | None:
        """The request awaiting the reviewer: the run's own (from the event stream, through the RunView),
        unless this reviewer has already answered it and the stream has not yet said so (``open_request``)."""
        return self.view.open_request if self.running else None

    def _close_request(self) -> None:
        """The pending request can no longer be answered here (answered, or the run stops): the view notes it,
        and the panes bound to the view hide it."""
        self.view.answered = self.view.pending
        self.mutate_reactive(RunScreen.view)

    @while_open
    def on_run_event(self, message: RunEvent) -> None:
        message.stop()
        stamped = message.stamped
        # a team analyst's own drill, folded by the fleet's control (no line of the chain: its place is the
        # last line's, its head unsaid)
        own = not stamped.head and isinstance(stamped.event, ev.DrillShown | ev.DrillAnswered)
        if own:
            stamped = replace(stamped, head=self.view.head)
        elif stamped.seq <= self.view.seq:
            return  # already in the copy the view started from
        event = stamped.event
        view = self.view
        was_pending = self.pending
        view.apply(stamped)
        audit = self.audit
        if self._backlog is not None:
            # the audit pane shows it after the history read back
            self._backlog.append(stamped)
        else:
            audit.record(event, stamped.seq, stamped.head)
        # the batch pane, the status bar and the alerts follow it
        self.mutate_reactive(RunScreen.view)
        match event:
            case ev.RunEnded():
                self.running = False
                # result.json is written after this last event and may fail: sealed only once it is
                # there
                sealing = self.source.owned and self.source.live and not self._sealed_known
                audit.set_state("sealing…" if sealing else "sealed")
            case ev.Killed() if self.source.owned:
                self.notify("kill switch: run stopped", severity="error", markup=False)
            case ev.DrillAnswered() if self.source.live and view.revealed is event:  # the drill up here, not a record
                # revealed at once: what was right and why, and whether it was caught, in the panel above the
                # request that follows (and a toast, should none follow)
                missed = event.caught is False or bool(event.false_alarm)
                self.panel.revealed = revealed(event)
                self.notify(revealed(event), title="a drill", severity="warning" if missed else "information",
                            timeout=20, markup=False)  # fmt: skip
                self.render_frame()
            case ev.DecisionMade() | ev.DrillShown() if self.panel.revealed:
                self.panel.revealed = ""  # the request after the drill is answered, or another drill is up
        if view.alert is not None:
            self.refresh_bindings()
        if isinstance(event, ev.ScreenCaptured) and event.png is not None:
            self.render_frame()
            if self.pending is not None and self.pending is was_pending:
                # a new screen during a decision
                self._read_screen()
        if self.pending is not was_pending:
            self._show_pending()
        if isinstance(event, ev.TakeoverStarted | ev.TakeoverEnded | ev.TakeoverPrivate | ev.RunEnded | ev.Killed):
            if not isinstance(event, ev.TakeoverPrivate):
                self.asked = False
            self._show_takeover()

    @while_open
    def on_run_finished(self, message: RunFinished) -> None:
        message.stop()
        self.running = False
        if self.view.pending is not None:
            self._close_request()  # the run ended without saying so: nothing of it can be answered
        self.final_status = message.status
        self._sealed_known = True
        if self.source.live:
            self._show_seal(message)
        self._show_pending()
        if message.status:
            self.notify(f"run ended: {visible(message.status)} · press q to quit", timeout=30, markup=False)

    def _show_seal(self, message: RunFinished) -> None:
        """The audit pane and the status bar as the run's result has them: a run whose seal could not be
        written (its RunEnded record says how it ended, not that it was sealed) is shown not sealed, why."""
        sealed = self.cua.result is not None and self.cua.result.sealed
        self.audit.set_state("sealed" if sealed else "NOT sealed")
        if sealed:
            return
        reason = visible(message.reason or "the run ended without a result", limit=300)
        status = self.status
        status.final = f"{visible(message.status or 'error')} · {reason}"
        status.record = ending.UNSEALED  # no seal vouches for that status: a claim
        status.ended = status.ended or self.cua.clock()
        status.show(self.view)
        self.notify(f"not sealed: {reason}", title="seal", severity="error", timeout=60, markup=False)

    def _show_pending(self) -> None:
        """Show what ``pending`` says (the one place that reads it for the panes)."""
        request = self.pending
        if self.editor is not None and request is not self.editor.request:
            self._close_editor("the decision you were editing closed: nothing was sent")
        # a new decision on screen: its keys count after the guard, from when its screenshot is on the pane
        self.guard.arm(request, screen=True)
        # at a decision the pane frames the target (z: whole)
        self.zoomed = self._focus_target() is not None
        panel = self.panel
        panel.set_compact(compact_terminal(self.app.size.width, self.app.size.height))
        panel.can_edit = self._editable() is not None
        self._count_down(request)
        started = self.view.started
        panel.injection = self._injection()
        task = self.source.info.task or (started.task if started else "")
        panel.facts(task=task, destination=self._destination(), field=self._field() is not None)
        panel.redraw()
        if request is not None:
            self._read_screen()
        self.batch_pane.mark_pending(request.index if request is not None else None)
        self.render_frame()
        self.call_after_refresh(self._screen_check)
        self.app.refresh_bindings()
        if request is not None and self.source.owned:
            what = request.action.describe() if request.action is not None else "model safety checks"
            body = f"turn {request.turn}, action {request.index + 1}: {what} · {request.reason}"
            if request.kind == "ask":
                body = f"turn {request.turn}: {request.reason}"
            self.cua.signal("cua-tui: decision needed", body)

    def _count_down(self, request: DecisionRequest | None) -> None:
        """A request with a deadline: the panel counts the seconds left, once a second, until it closes."""
        deadline = request.deadline_s if request is not None else None
        if deadline is None:
            self._due = self.panel.left = self._due_for = None
            if self._countdown is not None:
                self._countdown.stop()
                self._countdown = None
            return
        if request is not self._due_for:
            # counted from when it was shown: the run's own clock started a moment before, never after
            self._due, self._due_for = time.monotonic() + deadline, request
        if self._countdown is None:
            self._countdown = self.set_interval(1.0, self._tick_deadline)
        self.panel.left = self._due - time.monotonic() if self._due is not None else None

    def _tick_deadline(self) -> None:
        if self._due is not None and self.pending is not None:
            self.panel.set_left(self._due - time.monotonic())

    # ---------------------------------------------------------------------------------------------
    # Frames
    # ----------------------------------------------------------------------------------------------
    @property
    def painted_sha(self) -> str:
        """The SHA-256 of the screenshot the pane shows ("": none, refused, none yet, or no pane in the
        layout: a picture painted where no one can see it was not shown)."""
        return self.desktop.painted_sha if self.desktop.on_screen else ""

    def render_frame(self) -> None:
        shot = shot_of(self.view)
        if shot is None:
            return
        if self.view.takeover is not None:
            # where a click lands, marked; a zoom stays on the last point clicked (it would move under
            # the mouse if it followed it)
            point = self.last_point if self.zoomed else self.hover or self.last_point
            target = Target(point=point, kind="click") if point is not None else None
            self.desktop.show_shot(shot, target, zoom=self.zoomed and target is not None)
            return
        if self.editor is not None:
            # where the draft lands, a cell a screen pixel
            self.desktop.show_shot(shot, self.editor.target(), zoom=self.zoomed)
            return
        # the zoom keeps the target's label in view
        target = labelled(self._focus_target(), self.reading, shot.sha)
        self.desktop.show_shot(shot, target, zoom=self.zoomed)

    def on_desktop_view_painted(self, message: DesktopView.Painted) -> None:
        message.stop()
        self._screen_check()

    def _screen_check(self) -> None:
        """The input guard starts once the pending decision's own screenshot is on the pane (or the pane
        says why not); where the layout shows no pane, once the panel is painted, which then says so."""
        request = self.pending
        if request is None or not self.guard.waiting or request is not self.guard.shown:
            return
        want = request.frame.sha256 if request.frame is not None else ""
        unseen = not self.desktop.on_screen
        if self.panel.unseen != unseen:
            self.panel.set_unseen(unseen)
        if unseen or not want:
            self.call_after_refresh(self.guard.screen_shown)  # once the panel is on the terminal
        elif self.desktop.shows(want):
            self.guard.screen_shown()

    @while_open
    def on_desktop_view_refused(self, message: DesktopView.Refused) -> None:
        message.stop()
        self.notify(f"screenshot not shown: {message.reason}", title="desktop", severity="warning", markup=False)

    def on_resize(self, event: events.Resize) -> None:
        self.panel.set_compact(compact_terminal(event.size.width, event.size.height))

    def on_desktop_view_resized(self, message: DesktopView.Resized) -> None:
        message.stop()
        if self.pending is not None:
            # the pending row back in view at the new size (unless read back)
            self.batch_pane.reveal_pending()

    # ---------------------------------------------------------------------------------------------
    # What the App's keys do here
    # ----------------------------------------------------------------------------------------------
    def can(self, action: str, parameters: tuple[object, ...]) -> bool:
        if action in ("approve", "reject", "approve_scope"):
            # while an edit is open, Enter approves the edit and Esc goes back: y / n / a wait
            pending = self.pending if self.editor is None and not self.asked else None
            return pending is not None and (action != "approve_scope" or pending.scope is not None)
        if action == "edit":
            return self.editor is None and self._editable() is not None and self.view.takeover is None
        if action == "kill":
            # While a reason is typed, k is a letter of it: ctrl+k (always bound) is the kill switch
            # there. So is it in the screen-text view's search box, and in an edit's field.
            field = self.editor.field if self.editor is not None else None
            typing = isinstance(self.app.screen, RejectReason | ScreenTextScreen) or (
                field is not None and field.has_focus
            )
            return self.running and (parameters == ("always",) or not typing)
        if action == "zoom":
            if self.view.takeover is not None:
                return self.last_point is not None
            return self._focus_target() is not None
        if action in ("screen_text", "open_screenshot"):
            return self.view.screen is not None
        return action == "help"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("takeover", "hand_back"):
            taken = self.view.takeover is not None or self.asked
            # a soft budget's question is go on or stop: a takeover is no answer to it
            budget = self.pending is not None and self.pending.kind == "budget"
            has_desk = self.source.desk is not None or bool(self.source.no_desk)  # or it says why not
            offered = self.running and has_desk and self.editor is None and not budget
            return offered and taken == (action == "hand_back")
        if action in ("passthrough", "private"):
            return self.running and self.view.takeover is not None
        if action == "grants":
            return self.running and bool(self.view.grants) and self.source.owned
        if action == "alerts_seen":
            return bool(self.view.attention.unseen)
        if action == "back":
            return not self.source.owned
        if action == "leave":
            return self.cua.main.leave_warning() is not None
        if action == "quit_when_done":
            return self.cua.main.leave_warning() is None
        if (possible := self.check_history_action(action)) is not None:
            return possible
        return True

    def guard_for(self) -> DecisionGuard:
        return self.guard

    def _answer(
        self, answer: Answer, *, note: str = "", grant: bool = False, edit: Action | None = None, takeover: bool = False
    ) -> None:
        request = self.pending
        if request is None:
            return
        # what was seen, how long, behind which input guard
        shown, guard, screen = self.guard.shown_ms(), self.guard.ms, self.painted_sha
        if takeover:
            why = self.source.answer(answer, request, takeover=True, screen=screen, shown_ms=shown, guard_ms=guard)
        elif edit is not None:
            why = self.source.answer(answer, request, edit=edit, screen=screen, shown_ms=shown, guard_ms=guard)
        else:
            why = self.source.answer(
                answer, request, note=note, grant=grant, screen=screen, shown_ms=shown, guard_ms=guard
            )
        if why is not None:
            self.refused("", request.turn, request.index, why)
            return
        self.cua.paced(answer, shown)
        # answered: hidden until the stream records the decision
        self._close_request()
        self._show_pending()

    def approve(self, *, scope: bool = False) -> None:
        """``y``; ``a``: this action and every later one of its scope (shown in the panel) for the run."""
        if self.pending is not None and self.pending.kind == "ask":
            self.notify(ASK_NOT_APPROVED, title="nothing to approve", severity="warning", markup=False)
            return
        if not scope or (self.pending is not None and self.pending.scope is not None):
            self._answer(Answer.APPROVE, grant=scope)

    # ---------------------------------------------------------------------------------------------
    # e: the pending action changed, then approved
    # ----------------------------------------------------------------------------------------------
    def _editable(self) -> tuple[DecisionRequest, Size] | None:
        """The pending request if ``e`` can edit it, with the desktop's size (None: it cannot)."""
        request = self.pending
        if request is None or request.kind != "action" or not editable(request.action) or self.source.policy is None:
            return None
        started = self.view.started
        try:
            return request, Size.parse(started.screen) if started is not None else Size(0, 0)
        except ValueError:
            return None

    async def edit(self) -> None:
        """``e``: the editor in the panel's place, the desktop zoomed on the draft a cell a pixel; returns
        once its field has the focus (the App waits, so the keys typed next go to the field)."""
        found, policy = self._editable(), self.source.policy
        if found is None or policy is None or self.editor is not None:
            return
        request, size = found
        editor = self.editor = ActionEditor(request, size, policy, id="editor")
        self.panel.display = False
        self.zoomed = True
        self.desktop.exact = True
        self.app.refresh_bindings()
        await self.panel.parent.mount(editor, after=self.panel)  # type: ignore[union-attr]
        if self.editor is editor:
            # at once (focus() would wait behind the keys already queued)
            self.set_focus(editor.field or editor, scroll_visible=False)

    def _close_editor(self, why: str = "") -> None:
        editor, self.editor = self.editor, None
        if editor is None:
            return
        editor.remove()
        self.desktop.exact = False
        self.panel.display = self.pending is not None
        self.app.refresh_bindings()
        if why:
            self.notify(why, title="edit", severity="warning", markup=False)

    def on_action_editor_changed(self, message: ActionEditor.Changed) -> None:
        message.stop()
        self.render_frame()

    def on_action_editor_confirmed(self, message: ActionEditor.Confirmed) -> None:
        message.stop()
        if message.request is not self.pending:
            self._close_editor("the decision you were editing closed: nothing was sent")
            return
        self._close_editor()
        self._answer(Answer.APPROVE, edit=message.action)

    def on_action_editor_cancelled(self, message: ActionEditor.Cancelled) -> None:
        message.stop()
        self._close_editor()
        self._show_pending()

    def on_desktop_view_pointed(self, message: DesktopView.Pointed) -> None:
        message.stop()
        if self.view.takeover is not None:
            if message.point is not None:
                self.last_point = message.point
                self._send(Action(Kind.CLICK, point=message.point))
            return
        if self.editor is None:
            return
        if message.point is None:
            self.notify(f"not moved: {message.why}", title="edit", markup=False)
            return
        self.editor.place(message.point)

    # ---------------------------------------------------------------------------------------------
    # T: the desktop taken over, then handed back
    # ----------------------------------------------------------------------------------------------
    def action_takeover(self) -> None:
        """``T``: ask for the desktop (the run pauses once nothing is in flight; a pending decision is
        answered by it: its action does not run); ``T`` again hands it back, or cancels the ask."""
        desk = self.source.desk
        if desk is None:
            if self.source.no_desk:
                self.notify(self.source.no_desk, title="takeover", severity="warning", markup=False)
            return
        if self.view.takeover is not None or self.asked:
            desk.hand_back()
            self.asked = False
            self.notify("the desktop goes back to the model", title="takeover", markup=False)
            self._show_takeover()
            return
        why = desk.take_over()
        if why is not None:
            self.notify(f"no takeover: {visible(why, limit=200)}", title="takeover", severity="warning", markup=False)
            return
        self.asked = True
        request = self.pending
        if request is not None:
            # the decision is answered by the takeover: recorded, with the screen shown
            self._answer(Answer.REJECT, takeover=True)
        self._show_takeover()

    def action_hand_back(self) -> None:
        """``T`` while the desktop is the reviewer's (or asked for): back to the model."""
        self.action_takeover()

    def action_passthrough(self) -> None:
        """``p``: every key to the desktop until ctrl+] (the kill chord ctrl+\\ stays ours)."""
        self.passthrough = True
        self.app.push_screen(PassthroughScreen(self._send, self._not_sent), self._passthrough_left)
        self._show_takeover(render=False)

    def _passthrough_left(self, _result: None = None) -> None:
        self.passthrough = False
        self._show_takeover(render=False)

    def action_private(self) -> None:
        desk = self.source.desk
        if desk is not None:
            desk.takeover_private(not self.view.private)

    def _send(self, action: Action) -> None:
        """One input of the reviewer's to the run (it runs in order on the run's thread)."""
        desk = self.source.desk
        why = desk.takeover_input(action) if desk is not None else "this run has no desktop to take over"
        if why is not None:
            self._not_sent(why)

    def _not_sent(self, why: str) -> None:
        self.notify(f"not sent: {visible(why, limit=200)}", title="takeover", severity="warning", markup=False)

    def _show_takeover(self, *, render: bool = True) -> None:
        """The takeover panel, in the decision panel's place while the desktop is the reviewer's (and the
        desktop pane redrawn, unless only the words changed)."""
        taken = self.view.takeover
        panel = self.takeover_panel
        panel.display = self.running and (taken is not None or self.asked)
        if not panel.display:
            self.hover = self.last_point = None
            if self.pending is not None:
                self.panel.display = True
            self.render_frame()
            self.app.refresh_bindings()
            return
        self.panel.display = False
        self.desktop.exact = taken is not None or self.editor is not None
        if taken is None:
            asked = "the run pauses once nothing is in flight (a decision, between two actions, or after the model)"
            panel.update(panel_text("", asked=asked))
        else:
            operator, passthrough = taken.operator or taken.by, self.passthrough
            panel.update(panel_text(operator, private=self.view.private, lands=self._lands(), passthrough=passthrough))
        self.app.refresh_bindings()
        if render:
            self.render_frame()

    def _lands(self) -> str:
        """Where a click on the pane lands now, and how exactly."""
        point, rendered = self.hover, self.desktop.rendered
        if point is None or rendered is None:
            return ""
        if rendered.zoomed:
            return f"a click here lands at ({point[0]}, {point[1]}), exactly (a cell is a screen pixel)"
        width, height = rendered.source
        off_x = round(width / max(1, rendered.image.width) / 2)
        off_y = round(height / max(1, rendered.image.height))
        return f"a click here lands at ({point[0]}, {point[1]}), within {off_x} px across and {off_y} down (z: exact)"

    def on_desktop_view_hovered(self, message: DesktopView.Hovered) -> None:
        message.stop()
        if self.view.takeover is None or message.point == self.hover:
            return
        self.hover = message.point
        self._show_takeover(render=False)
        if not self.zoomed and self._marking is None:
            # the marker follows the mouse, redrawn a few times a second at most
            self._marking = self.set_timer(HOVER_REDRAW_S, self._mark_hover)

    def _mark_hover(self) -> None:
        self._marking = None
        self.render_frame()

    def on_desktop_view_dragged(self, message: DesktopView.Dragged) -> None:
        message.stop()
        if self.view.takeover is not None:
            self.last_point = message.end
            self._send(Action(Kind.DRAG, path=(message.start, message.end)))

    async def reject(self) -> None:
        """``n``: ask for an optional reason first (Enter sends it, Esc skips), then reject."""
        request = self.pending
        if request is None:
            return
        if request.kind in ("budget", "ask"):
            # no to a soft budget stops the run, to a model's call lets it go on: no reason to tell it
            self._answer(Answer.REJECT)
            return

        def done(reason: str | None) -> None:
            if self.pending is request:
                # still the same decision (not killed or timed out meanwhile)
                self._answer(Answer.REJECT, note=reason or "")

        await open_reason(self.app, done)

    def kill(self, how: str = "") -> None:
        if not self.running:
            return
        if isinstance(self.app.screen, PassthroughScreen):
            self.app.screen.dismiss()  # the desktop's keys end with the run
        if isinstance(self.app.screen, RejectReason | ScreenTextScreen):
            self.app.pop_screen()
        # returns at once; the run's own thread ends it and seals the log
        self.source.kill()
        if self.pending is not None:
            self._close_request()  # nobody may answer it any more
            self._show_pending()
        self.status.stopping()
        if not self.source.owned:
            self.notify(
                f"kill switch: {visible(self.source.label, limit=64)} stops (it is sealed as killed)", markup=False
            )

    def zoom(self) -> None:
        self.zoomed = not self.zoomed
        self.desktop.set_zoom(self.zoomed)

    def action_grants(self) -> None:
        """The scoped approvals in force; the one selected is revoked."""

        def done(grant_id: int | None) -> None:
            if grant_id is not None and self.source.revoke(grant_id):
                self.notify(f"grant #{grant_id} revoked: its actions are asked again", markup=False)

        self.app.push_screen(GrantsScreen(list(self.view.grants.values())), done)

    def action_alerts_seen(self) -> None:
        """``x``: the alerts have been seen; the line goes until the next one (the audit log keeps them all)."""
        if self.view.attention.seen():
            self.mutate_reactive(RunScreen.view)
            self.app.refresh_bindings()

    def action_back(self) -> None:
        self.dismiss()

    def action_leave(self) -> None:
        self.cua.action_leave()

    def action_quit_when_done(self) -> None:
        self.cua.action_leave()

    def leave_warning(self) -> str | None:
        if not self.running:
            return None
        return (
            "The run is still going: k is the kill switch. Press q again within 3 s to leave the TUI, which "
            "kills the run (it is sealed as killed)."
        )

    def leave(self) -> None:
        self.source.kill(by="human (left the TUI)")
        self.app.exit(self.cua.result)

    # ---------------------------------------------------------------------------------------------
    # The screen as text (t), the screenshot in a file (o); the bulk is in screen_text.py
    # ----------------------------------------------------------------------------------------------
    def _field(self) -> tuple[int, int] | None:
        """For pending typing: the last click point (the field it focused), else None."""
        return typing_field(self.pending, self.view)

    def _focus_target(self) -> Target | None:
        """What the pane frames at a decision: the action's target, or for typing the focused field."""
        return focus_target(self.pending, self.view)

    def _injection(self) -> Injection | None:
        """The on-screen passage the model's words echo, at a decision (core/injection.py): a hint."""
        allowed = self.source.info.allowed
        return injection_at(self.pending, self.view, self.reading, self._sha(), allowed)

    def _sha(self) -> str | None:
        """The SHA-256 of the newest screenshot (the screen-text cache's key)."""
        return self.view.screen.sha256 if self.view.screen is not None else None

    def _destination(self) -> str | None:
        """The panel's "goes to" line for pending typing (None for anything else)."""
        return destination(self.pending, self.view, self.reading, self._sha())

    def shown_screen(self) -> ShownScreen | None:
        return shown_screen(shot_of(self.view), self._focus_target(), self.source.info.run_id)

    def _read_screen(self) -> None:
        shown = self.shown_screen()
        if shown is not None:
            self.reading.request(shown)

    def screen_text_read(self, message: ScreenTextRead) -> None:
        if message.digest != self._sha() or self.pending is None:
            return
        self.panel.set_injection(self._injection())
        if self._focus_target() is not None:
            self.panel.set_destination(self._destination(), field=self._field() is not None)
            # the panel grew: the row back in view, unless the reviewer has scrolled back to read
            self.batch_pane.reveal_pending()
        if message.text is not None:
            self.render_frame()  # framed with the target's label in view

    def help_lines(self) -> list[str]:
        grants = [f"grant #{g.grant}: {g.label} (given by {g.by})" for g in self.view.grants.values()]
        return [
            *self.source.policy_lines,
            *(["", "Scoped approvals in force (g revokes):", *grants] if grants else []),
        ]

    def key_lines(self) -> list[tuple[str, str]]:
        """A run's keys; while editing or during a takeover, those that work now (T hands back, Enter
        approves the edit) and the mouse on the pane."""
        keys = keys_of(self.HOMES, self.APP_ACTIONS)
        if self.editor is not None:
            # the editor's keys first (its enter and esc, not the audit list's or the view's)
            now = [key for key in keys if self._works_now(key)]
            return help_keys([*keys_of((EDITOR,)), *now], EDITOR_MOUSE)
        if self.view.takeover is not None:
            return help_keys([key for key in keys if self._works_now(key)], TAKEOVER_MOUSE)
        return help_keys([key for key in keys if self._offers(key.action)], RUN_MOUSE)

    def _works_now(self, key: Key) -> bool:
        _, name, params = parse_action(key.action)
        if key.textual:
            return True
        if key.home == APP:
            return bool(self.cua.possible(name, params))
        return bool(self.check_action(name, params))

    def _offers(self, action: str) -> bool:
        """Whether this run's view ever does ``action`` (a lone run has no fleet to go back to; only a lone
        run's grants are revoked here; a run without a desktop to take has no takeover)."""
        if action == "back":
            return not self.source.owned
        if action == "grants":
            return self.source.owned
        if action in ("takeover", "hand_back", "passthrough", "private"):
            return self.source.live
        return True


def supervisor_app(source: RunSource, **settings: Any) -> CuaApp:
    """The App supervising the run ``source`` (``settings``: CuaApp's: theme, graphics, screen reader, ...)."""
    from .app import CuaApp

    return CuaApp(partial(RunScreen, source=source), **settings)
