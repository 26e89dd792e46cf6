"""Replay: a recorded run in the same panes as a live one, read-only, fed by the same events.

The events come back from the run directory (core/runlog) and go through the same reducer (RunView) and
the same widgets as a live run: desktop pane, batch pane, audit pane, status bar; the decision panel's
place shows the selected step (core/timeline, worded by core/describe). Keys walk the run: steps, turns,
the previous/next decision, refusal, error or refused egress, start and end; ``b`` flips between the
screen before and after the selected action (its target marked), ``z`` zooms. Nothing answers or kills:
y, n and k do not exist here. With ``follow`` the App polls the run directory and shows new events
within a poll interval, following the newest step until the run ends.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypedDict, Unpack, overload

from rich.text import Text
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.widgets import Static

from ..core import describe, ending
from ..core import timeline as tl
from ..core.events import Stamped
from ..core.imaging import ScreenLimit
from ..core.run_view import RunView
from ..core.runindex import RunIndex
from ..core.runlog import RunReader
from ..core.safeio import RunFileError
from ..core.text import visible
from ..core.threads import GiveWay, paced
from .app import CuaApp, ViewScreen, desktop_beside
from .audit_pane import AuditPane
from .batch import BatchPane
from .decision_panel import role_style
from .desktop_view import DesktopView, Shot
from .footer import KeysFooter
from .frames import Target
from .goal import GoalBar
from .keys import APP, REPLAY, bindings
from .messages import while_open
from .screen_text import (
    ShownScreen,
)
from .status import RunInfo, StatusBar, tone_colour, tone_style

# audit lines shown up to the selected step (the pane shows about 20)
AUDIT_TAIL = 40
# --follow: how often the run directory is read for new lines; also how often the panes learn how far
# the background reading of a long log has got
POLL_S = 0.1
VERIFYING = ending.VERIFYING
BACKGROUND_AFTER_S = 0.5
# the background work waits this long after a step's frame is painted: Textual writes the frame to the
# terminal on a thread of its own, which the busy background threads slowed by up to 0.4 s
SETTLE_S = 0.1
# While a replay reads and verifies in the background, the UI thread takes the interpreter back this soon
# after asking (Python's default: 5 ms). A key passes through the event loop dozens of times before its
# step is drawn, each time waiting for the busy threads: through tmux a step of a 100,000-step run still
# being read took 150 ms at 5 ms, 56 ms at 0.2 ms (docs/benchmarks.md, replay), the reading no slower.
SWITCH_S = 0.0002
# while a long log is read (not followed), how often the banner and the step panel say how far: each time
# is UI-thread work a key arriving then waits for
PROGRESS_S = 0.5
# the background reader's slice of the log: the most a key waits for once its step holds the reading
SLICE_BYTES = 8 << 10
# leaving: how long the replay waits for the reader's slice under way (a slice is milliseconds)
LEAVE_WAIT_S = 2.0


@dataclass(frozen=True)
class ChainState:
    """What ``verify`` said of the run's record, for the banner: ``state`` is intact (and sealed), unsealed,
    tampered, unusable or verifying (core/ending.py), ``text`` what more it said; steps whose events come at
    or after ``bad_seq`` are untrusted. ``lines`` and ``head``: what it checked (the first ``lines`` lines,
    the last hashing to ``head``), which the index is held to."""

    state: str
    text: str
    bad_seq: int | None = None
    lines: int = 0
    head: str = ""


def changed_since(state: ChainState, line: int, why: str) -> ChainState:
    """The banner once the lines read from ``line`` on are found not to be the lines the verdict checked
    (``why``: what was found there)."""
    if state.state not in ("intact", "unsealed", VERIFYING):
        if state.bad_seq is None or line >= state.bad_seq:
            return state
        return ChainState(state.state, state.text, line, state.lines, state.head)
    text = f"line {line + 1}: {why} (steps from there on are untrusted)"
    return ChainState("tampered", text, line, state.lines, state.head)


def chain_state(path: Path, *, follow: bool = False) -> ChainState:
    """What ``verify`` says of the run's record, for the banner; steps after a bad line are marked untrusted."""
    from ..core.audit import VerifyExit, verify_run

    report = verify_run(path)
    if report.code == VerifyExit.INTACT:
        if report.sealed:
            how = "signed" if report.signed else "not signed"
            text = f"sealed ({how}) · head {report.head[:16]}…"
            return ChainState(ending.INTACT, text, lines=report.events, head=report.head)
        unknown = len(report.unknown_outcomes)
        state = "live, so far" if follow else "interrupted"
        extra = f" · {unknown} action(s) with outcome unknown" if unknown else ""
        text = f"{state}, the lines so far chained{extra} · head {report.head[:16]}…"
        return ChainState(ending.UNSEALED, text, lines=report.events, head=report.head)
    finding = report.finding
    bad = finding.line - 1 if finding is not None and finding.line is not None else 0
    state = ending.TAMPERED if report.code == VerifyExit.TAMPERED else ending.UNUSABLE
    said = str(finding) if finding is not None else report.summary
    return ChainState(state, f"{said} (steps from there on are untrusted)", bad)


class ReplayOptions(TypedDict, total=False):
    """How a replay opens: ``follow`` a run still being written, ``reverify`` (the chain checked again,
    on demand), ``start`` (the step shown first; the newest when following)."""

    follow: bool
    reverify: Callable[[], ChainState] | None
    start: int


class _Lazy[T](Sequence[T]):
    """Items of the run as far as read (its steps, its events), each fetched from the index when asked for:
    a long run holds none of them."""

    def __init__(self, length: Callable[[], int], items: Callable[[int, int], list[T]]) -> None:
        self._length, self._items = length, items

    def __len__(self) -> int:
        return self._length()

    @overload
    def __getitem__(self, number: int) -> T: ...
    @overload
    def __getitem__(self, number: slice) -> list[T]: ...
    def __getitem__(self, number: int | slice) -> T | list[T]:
        if isinstance(number, slice):
            start, stop, _step = number.indices(len(self))
            return self._items(start, stop)
        if number < 0:
            number += len(self)
        found = self._items(number, number + 1) if 0 <= number < len(self) else []
        if not found:
            raise IndexError(number)
        return found[0]


class ReplayScreen(ViewScreen):
    """A recorded run, read-only. ``reader`` is open on its directory; ``chain`` is verify's verdict, or
    how to get it: the chain is then verified in the background, the banner saying so until it is done.

    The log is read in the background too, a block at a time (core/runindex): the first step shows as
    soon as its lines are read, and the others as far as the reading has got."""

    BINDINGS = bindings(REPLAY)  # tui/keys.toml
    HOMES = (REPLAY, APP)
    # nothing is answered or killed here: y, n and k do not exist in a replay
    APP_ACTIONS = ("zoom", "screen_text", "open_screenshot", "help")
    # The run at the selected step (folded from the nearest snapshot): the panes render from it.
    view: reactive[RunView] = reactive(RunView, init=False, layout=False, repaint=False)

    def __init__(
        self,
        app: CuaApp,
        reader: RunReader,
        chain: ChainState | Callable[[], ChainState],
        **options: Unpack[ReplayOptions],
    ) -> None:
        super().__init__()
        self.cua = app
        self.reader = reader
        self._verify = None if isinstance(chain, ChainState) else chain
        self.chain = chain if isinstance(chain, ChainState) else ChainState(VERIFYING, "")
        self.follow = options.get("follow", False)
        self.reverify = options.get("reverify")
        self.graphics = app.graphics
        self.index = RunIndex(reader.log)
        index = self.index
        self.events: Sequence[Stamped] = _Lazy(lambda: index.lines, index.events)
        self._steps: Sequence[tl.Step] = _Lazy(lambda: index.count, lambda a, b: [index.step(n) for n in range(a, b)])
        self._stop = threading.Event()
        # the background reading and verification wait while a step is being shown
        self.give_way = GiveWay()
        self._switch = sys.getswitchinterval()
        self._read_to = (0, 0, False)  # (lines, steps, at the end) the panes have been told of
        self._newest_told = 0
        self._told_at = 0.0  # when the panes were last told how far the reading has got
        self._background = False  # the log's reader and the chain's verifier have been started
        self._reading: threading.Thread | None = None  # the log's reader, joined as the replay leaves
        self.verified_at = 0.0  # when the background verification was done (time.monotonic)
        self.selected = options.get("start", 0)
        self.showing = "after"
        self.zoomed = False
        self._reader_lock = threading.Lock()
        self.redraw_started = 0.0  # when the last move began
        # from a move's start until its frame was on screen (the benchmark)
        self.redraw_ms: list[float] = []
        self.ended_seen = False
        self.sealed_seen = False
        self.reading = app.reading  # the shown screen as text (t; none: it says so)
        # result.json's status: the run's claim until its end is read from a record verified intact
        said = reader.result().get("status")
        self.claimed: str | None = said if isinstance(said, str) and said else None

    # ---------------------------------------------------------------------------------------------
    @property
    def steps(self) -> Sequence[tl.Step]:
        return self._steps

    @property
    def timeline(self) -> tl.Timeline:
        """The run's start, end, verification and event count as far as read (its steps: ``steps``)."""
        return self.index.timeline

    def compose(self) -> ComposeResult:
        # The panes, held (not queried): the step panel, the banner and the audit tail are fed here.
        self.banner, self.step_panel = Static(id="banner"), Static(id="step")
        self.desktop = DesktopView(graphics=self.graphics, id="desktop")
        self.batch_pane, self.audit = BatchPane(id="batch"), AuditPane(id="audit")
        self.status = StatusBar(self._info(), clock=self._clock, id="status")
        yield self.banner
        yield GoalBar(self._info(), live=False, id="goal")
        batch = self.batch_pane.data_bind(view=ReplayScreen.view)
        yield from desktop_beside(self.desktop, self.step_panel, batch, self.audit)
        yield self.status.data_bind(view=ReplayScreen.view)
        yield KeysFooter()

    def _info(self) -> RunInfo:
        info = self.reader.info

        def table(value: Any) -> dict[str, Any]:
            return value if isinstance(value, dict) else {}

        limits = table(info.get("limits"))

        def number(value: Any) -> int:
            return value if type(value) is int else 0

        def text(key: str) -> str:
            value = info.get(key)
            return value if isinstance(value, str) else ""

        policy = table(info.get("policy"))
        allowed = info.get("allow_domains")
        allowed = allowed if isinstance(allowed, list) else []
        sha = policy.get("sha256")
        sha = sha if isinstance(sha, str) else ""
        return RunInfo(
            visible(str(info.get("run_id", "?")), limit=40),
            visible(str(info.get("backend", "?")), limit=20),
            visible(str(info.get("agent", "?")), limit=60),
            visible(str(info["model"]), limit=40) if isinstance(info.get("model"), str) else None,
            number(limits.get("max_turns")),
            number(limits.get("max_steps")),
            number(limits.get("deadline_seconds")),
            task=text("task"),
            target=f"lab {text('lab')}" if text("lab") else text("url") or f"the {text('backend') or '?'} desktop",
            allowed=tuple(str(a) for a in allowed[:20]),
            policy=f"{policy.get('name', '?')} ({sha[:12]})",
        )

    def _clock(self) -> float:
        return 0.0  # a recorded run: no clock runs

    def on_mount(self) -> None:
        self._switch = sys.getswitchinterval()  # put back on unmount
        sys.setswitchinterval(min(self._switch, SWITCH_S))
        self.desktop.border_title = "Recorded screen"
        self.batch_pane.border_title = "Turn"
        # the first block at once (the first steps), the rest in the background
        self.index.advance()
        if self._verify is None:
            self.index.confirm(self.chain.lines, self.chain.head, more=self.follow)
            self._held()
        self._read_to = (self.index.lines, self.index.count, self.index.done)
        self._newest_told = self._newest()  # the step under way when the panes were last told
        self._show_banner()
        self.select(self._newest() if self.follow else self.selected)
        # the background readers start once the first frame is up (they would slow it down), or soon anyway
        self.set_timer(BACKGROUND_AFTER_S, self._start_background)
        self.set_interval(POLL_S, self._poll)

    def _start_background(self) -> None:
        if self._background:
            return
        self._background = True
        self._reading = threading.Thread(target=self._read_log, name="replay-index", daemon=True)
        self._reading.start()
        if self._verify is not None:
            threading.Thread(target=self._verify_chain, args=(self._verify,), name="replay-verify", daemon=True).start()

    def on_unmount(self) -> None:
        self._stop.set()
        self.give_way.go()
        # the reader closes the log once the replay has left: a slice read meanwhile would find it closed
        if self._reading is not None:
            self._reading.join(timeout=LEAVE_WAIT_S)
        sys.setswitchinterval(self._switch)

    def _read_log(self) -> None:
        """Read the log to its end (and on, when following a run still being written). A read that fails
        ends the reading and is said; the steps read so far stay."""
        while not self._stop.is_set():
            self.give_way.wait()
            try:
                more = self.index.advance(SLICE_BYTES)
            except RunFileError as exc:
                if not self._stop.is_set():
                    with contextlib.suppress(RuntimeError):  # the App has gone
                        self.app.call_from_thread(self._unreadable, "the rest of the log", exc)
                return
            if not more:
                if self.index.done and not self.follow:
                    return
                self._stop.wait(POLL_S)

    def _verify_chain(self, verify: Callable[[], ChainState]) -> None:
        self.give_way.wait()  # its first imports and reads too
        with paced(self.give_way):
            state = verify()
        with contextlib.suppress(RuntimeError):  # the App has gone
            self.app.call_from_thread(self._verified, state)

    def _verified(self, state: ChainState) -> None:
        self.verified_at = time.monotonic()
        self._take_chain(state)
        self._show_banner()
        self._show_again()  # the steps after a bad line are marked now

    def _show_again(self) -> None:
        """The selected step's panel and audit lines again (a verdict came, or lines were read since)."""
        if not self.steps:
            return
        try:
            self._show_step(self.steps[self.selected])
            self._show_status_and_audit()
        except RunFileError as exc:
            self._unreadable(f"step {self.selected + 1}", exc)

    # ---------------------------------------------------------------------------------------------
    # Events in
    # ----------------------------------------------------------------------------------------------
    def _take_chain(self, state: ChainState) -> None:
        """A verdict: what the index reads is held to the lines it checked (and stays TAMPERED where the
        index found lines changed since)."""
        self.chain = state
        if state.state in ("intact", "unsealed"):
            self.index.confirm(state.lines, state.head, more=self.follow)
        self._held()

    def _held(self) -> bool:
        """Whether the index has found lines that are not what the verdict checked, and the banner and
        the steps from there on say so now (True when that is news)."""
        line = self.index.untrusted
        if line is None:
            return False
        if line == self.index.log.broken:
            why = "its prev is not the hash of the line before (edited, inserted or deleted)"
        else:
            why = "the log changed after it was verified"
        before = self.chain
        self.chain = changed_since(before, line, why)
        return self.chain != before

    @while_open
    def _poll(self) -> None:
        if self._held():
            # lines read since (the background pass, --follow) do not chain to those verified
            self._show_banner()
            self._show_again()
        if self.ended_seen and not self.sealed_seen and self.follow and self.reader.result():
            # The seal (result.json) is written after the last event: verify once more when it is
            # there.
            self.sealed_seen = True
            if self.reverify is not None:
                self._take_chain(self.reverify())
            self._show_banner()
        told_lines, told_steps, _told_done = self._read_to
        lines, count, done = self.index.lines, self.index.count, self.index.done
        if (lines, count, done) == self._read_to:
            return
        if told_steps and not (done or self.follow) and time.monotonic() - self._told_at < PROGRESS_S:
            return
        self._told_at = time.monotonic()
        self._read_to = (lines, count, done)
        if (lines, count) == (told_lines, told_steps):
            self._show_banner()  # the reading has got to the end
            return
        # following the run's step under way
        at_end = self.follow and (not told_steps or self.selected == self._newest_told)
        self._newest_told = self._newest()
        ended = self.timeline.ended
        if ended is not None and not self.ended_seen and self.follow:
            self.ended_seen = True
            # markup=False: the reason is the run's own text (a sandbox's error), and "[/]" as
            # markup kills the App
            reason = visible(ended.reason, limit=80)
            self.notify(f"the run ended: {visible(str(ended.status))} · {reason}", markup=False)
        self._show_banner()
        if at_end and count:
            self.select(self._newest())
        elif count and not told_steps:
            self.select(self.selected)
        elif count and self.follow:
            # the step looked at may have moved on (decided, run)
            self._show_step(self.steps[self.selected])
            self._show_status_and_audit()
        elif count != told_steps:
            self._show_step(self.steps[self.selected])  # "step N of M": M as far as read

    def _newest(self) -> int:
        """The step a followed run is at: the one its newest events belong to (in a batch, the one awaiting
        its decision or running, not the last one proposed)."""
        current = self.index.current()
        return current if current is not None else len(self.steps) - 1

    @property
    def live(self) -> bool:
        """Following a run that has not ended: a step without an outcome is still under way."""
        return self.follow and self.timeline.ended is None

    # ---------------------------------------------------------------------------------------------
    # Showing a step
    # ----------------------------------------------------------------------------------------------
    def select(self, number: int) -> None:
        """Show step ``number``. A step whose lines can no longer be read (the log gone or failing under the
        replay) is said in one line; the step shown before stays selected."""
        before = self.selected
        try:
            self._select(number)
        except RunFileError as exc:
            self.selected = before
            self.give_way.go()
            self._unreadable(f"step {number + 1}", exc)

    def _unreadable(self, what: str, exc: RunFileError) -> None:
        self.notify(f"{what} could not be read: {visible(str(exc))}", severity="error", timeout=5, markup=False)

    def _select(self, number: int) -> None:
        self.redraw_started = time.perf_counter()
        self.give_way.hold()  # until the step's frame is painted
        steps = self.steps
        if not steps:
            self._show_empty()
            return
        self.selected = max(0, min(number, len(steps) - 1))
        step = steps[self.selected]
        view = self.index.view(step.last_seq + 1)
        self._show_view(view)
        self.batch_pane.mark_pending(step.index)
        held = self._held()  # the lines read again for the step and its view are not those verified
        for _ in range(2):
            self._show_step(step)
            if self.live and self.selected == self._newest():  # the status says what the run does now
                self._show_status_and_audit(upto=self.index.lines)
            else:
                self._show_status_and_audit(view, step.last_seq + 1)
            if not self._held():  # the audit lines read again: once more when they are not
                break
            held = True
        if held:
            self._show_banner()
        self.render_frame()

    def _untrusted(self, step: tl.Step) -> bool:
        bad = self.chain.bad_seq
        return bad is not None and step.last_seq >= bad

    def _show_step(self, step: tl.Step) -> None:
        text = Text()
        for part, role in describe.step_panel(
            step, len(self.steps), showing=self.showing, untrusted=self._untrusted(step), live=self.live
        ):
            text.append(part, style=role_style(role))
        self.step_panel.update(text)

    def _show_view(self, view: RunView) -> None:
        """The panes bound to the view render the run at the selected step (the same folded object, moved)."""
        self.set_reactive(ReplayScreen.view, view)
        self.mutate_reactive(ReplayScreen.view)

    def _show_status_and_audit(self, view: RunView | None = None, upto: int | None = None) -> None:
        events = self.events
        if upto is None:
            upto = (self.steps[self.selected].last_seq + 1) if self.steps else len(events)
        status = self.status
        if view is None:
            # the status alone says what the run does now; the batch stays at the step
            view = self.index.view(upto)
            status.view = view
        newest = not self.steps or self.selected == self._newest()
        label = describe.replay_phase(view.phase, live=self.live, newest=newest)
        if label:
            # a replay never awaits its viewer's decision: it says what the run was doing
            status.phase = label
            status.redraw()
        audit = self.audit
        audit.state = ending.record_words(self.chain.state)
        audit.show_tail(events, upto, AUDIT_TAIL)

    def status_of(self) -> tuple[str | None, str]:
        """The run's status and the record state it stands on: its end as the log records it, once read;
        until then result.json's word, which no seal covers (a claim whatever the record)."""
        ended = self.timeline.ended
        if ended is not None:
            return str(ended.status), self.chain.state
        if self.index.done:
            return None, self.chain.state
        return self.claimed, ending.UNCHECKED

    def _show_banner(self) -> None:
        """How the run ended first (a claim in the warning colour unless the record vouches for it), then
        its record, then who checked it where (core/ending.py)."""
        text = Text()
        state = self.chain.state
        status, standing = self.status_of()
        no_end = "not ended yet" if self.follow else "no end recorded"
        said = ending.headline(status, standing, no_end=no_end)
        text.append(f" {visible(said.text, limit=60)} ", style=tone_style(self, said.tone))
        text.append(" · ")
        text.append(ending.record_label(state), style=f"bold {tone_colour(self, ending.record_tone(state))}".strip())
        if self.chain.text:
            joint = ": " if state in (ending.TAMPERED, ending.UNUSABLE) else " · "
            text.append(joint + visible(self.chain.text, limit=200))
        line = self.timeline
        text.append(f" · {len(self.steps):,} steps · {line.events:,} events")
        if not self.index.done:
            text.append(f" · reading the log… {self.index.progress():.0%}")
        if line.verification is not None:
            # who checked it where: the sandbox's own word stands out
            text.append(" · ")
            checked = ending.checked_by(line.verification)
            text.append(checked, style=None if ending.ours(line.verification) else "bold reverse")
        if self.follow:
            text.append(" · following" if line.ended is None else " · the run has ended")
        self.banner.update(text)
        if self.status.record != state:
            # the status bar's end reads as a claim too while the record does not vouch for it
            self.status.record = state
            self.status.redraw()

    def _show_empty(self) -> None:
        self.step_panel.update(Text("no action was proposed in this run"))
        self._show_status_and_audit(upto=self.index.lines)
        sha = self.timeline.first_screen
        if sha is not None:
            self._show_shot(sha, None)

    # ---------------------------------------------------------------------------------------------
    # Frames
    # ----------------------------------------------------------------------------------------------
    def render_frame(self) -> None:
        if not self.steps:
            return
        step = self.steps[self.selected]
        self._show_shot(tl.screens(step).pick(self.showing), self._target(step))
        # the neighbours' frames ahead (the next step first), so that stepping shows them at once
        ahead = []
        for number in (self.selected + 1, self.selected - 1, self.selected + 2):
            if 0 <= number < len(self.steps):
                near = self.steps[number]
                if (sha := tl.screens(near).pick(self.showing)) is not None:
                    ahead.append((self._shot(sha), self._target(near)))
        self.desktop.prefetch(ahead)

    def _target(self, step: tl.Step) -> Target | None:
        """The step's target; for typing, the focused field (core/focus.py, the rule of a live run)."""
        target = Target.from_record(step.ran)
        if target is not None or (step.proposal.action or {}).get("kind") != "type":
            return target
        field = self._field_before(step.number)
        return Target(point=field, kind="type") if field is not None else None

    def _field_before(self, number: int) -> tuple[int, int] | None:
        """The focused field when step ``number`` was run: the run's state (core/focus.py, the rule of a
        live run) after the outcomes before its own, folded from the index's nearest checkpoint."""
        step = self.steps[number]
        own = step.outcome is not None
        return self.index.probe(step.last_seq if own else step.last_seq + 1).focused

    def _show_shot(self, sha: str | None, target: Target | None) -> None:
        if sha is None:
            self.desktop.blank("no screenshot recorded for this step")
            self.call_after_refresh(self._redrawn)
            return
        self.desktop.show_shot(self._shot(sha), target, zoom=self.zoomed)

    def _shot(self, sha: str) -> Shot:
        def load() -> bytes | str:
            with self._reader_lock:
                # the reader's screen cache is shared by the frame workers
                png = self.reader.screen(sha)
                return png if png is not None else self.reader.screen_problem.get(sha, "") or "missing"

        return Shot(sha, load, self.screen_limit)

    @property
    def screen_limit(self) -> ScreenLimit:
        """The run's screen as run.json and run_started record it: no screenshot larger than it is decoded."""
        started = self.timeline.started
        return ScreenLimit.of_run(self.reader.info.get("screen"), started.screen if started is not None else None)

    def on_desktop_view_painted(self, message: DesktopView.Painted) -> None:
        self._redrawn()

    def _redrawn(self) -> None:
        self.redraw_ms.append((time.perf_counter() - self.redraw_started) * 1000)
        self.give_way.go(after=SETTLE_S)
        self._start_background()

    # ---------------------------------------------------------------------------------------------
    # Keys
    # ----------------------------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        self.select(self.selected + delta)

    def action_turn(self, delta: int) -> None:
        firsts = self.index.turn_firsts()
        if not firsts:
            return
        current = max((i for i, first in enumerate(firsts) if first <= self.selected), default=0)
        target = max(0, min(len(firsts) - 1, current + delta))
        self.select(firsts[target])

    def action_jump_to(self, number: int) -> None:
        self.select(len(self.steps) - 1 if number < 0 else number)

    def action_find(self, flag: str, direction: int) -> None:
        found = self.index.find(flag, self.selected, direction)
        if found is not None:
            self.select(found)
            return
        self.notify(f"no {'later' if direction > 0 else 'earlier'} {flag}", timeout=3, markup=False)

    def action_flip(self) -> None:
        self.showing = "before" if self.showing == "after" else "after"
        if self.steps:
            try:
                self._show_step(self.steps[self.selected])
            except RunFileError as exc:
                self._unreadable(f"step {self.selected + 1}", exc)
        self.render_frame()

    def can(self, action: str, parameters: tuple[object, ...]) -> bool:
        return action in self.APP_ACTIONS

    def zoom(self) -> None:
        self.zoomed = not self.zoomed
        self.render_frame()

    def shown_screen(self) -> ShownScreen | None:
        """The screenshot the pane shows (the selected step's, before or after), its action's target."""
        if not self.steps:
            return None
        try:
            step = self.steps[self.selected]
        except RunFileError as exc:
            self._unreadable(f"step {self.selected + 1}", exc)
            return None
        sha = tl.screens(step).pick(self.showing)
        if sha is None:
            return None
        target = self._target(step)

        def load() -> bytes | None:
            png = self._shot(sha).load()
            return png if isinstance(png, bytes) else None

        point = target.point if target is not None else None
        run_id = self._info().run_id
        field = target is not None and target.kind == "type"
        label = "the field (last click point)" if field else "the action's target"
        return ShownScreen(sha, load, point, label if point else "", run_id, limit=self.screen_limit)

    def screen_text(self) -> None:
        if self.shown_screen() is None:
            self.notify("no screenshot recorded for this step", timeout=3, markup=False)
        super().screen_text()

    def open_screenshot(self) -> None:
        if self.shown_screen() is None:
            self.notify("no screenshot recorded for this step", timeout=3, markup=False)
        super().open_screenshot()

    def help_lines(self) -> list[str]:
        policy = self.reader.info.get("policy")
        return [f"policy {visible(str(policy.get('name', '?')))}"] if isinstance(policy, dict) else []

    def action_quit(self) -> None:
        self.app.exit()


def replay_app(
    reader: RunReader,
    chain: ChainState | Callable[[], ChainState],
    *,
    follow: bool = False,
    reverify: Callable[[], ChainState] | None = None,
    start: int = 0,
    **settings: Any,
) -> CuaApp:
    """The App showing the run ``reader`` is open on (``settings``: CuaApp's: theme, graphics, screen reader)."""
    screen = partial(ReplayScreen, reader=reader, chain=chain, follow=follow, reverify=reverify, start=start)
    return CuaApp(screen, title="cua-tui replay", tell_theme=False, **settings)
