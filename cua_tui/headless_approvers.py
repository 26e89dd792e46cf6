"""Headless approvers: ``--on-confirm ask`` (a y/n/k prompt on a plain terminal) and ``approver:CMD``; and
a headless fleet's order (``InOrder``): its runs' requests put to their approvers one at a time, in the queue's
order.

Both give way to the kill switch: they wait in short slices and return as soon as ``cancel`` is set.
Untrusted text (typed text, reasons derived from model output) is printed with control characters made
visible, so a hostile string cannot move the cursor, recolour the terminal or fake a prompt.

A ruling names who or what actually decided: a person only when a person answered; otherwise the rule that
decided in their place (no answer at the end of input, an approver command that failed, the kill switch).
"""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import threading
from typing import Any, TextIO

from .core.approvers import KILL_SWITCH, FixedApprover
from .core.describe import request_lines
from .core.fleet_queue import FleetControl, QueueItem
from .core.imaging import ScreenLimit
from .core.ports import Answer, Approver, DecisionRequest, Ruling
from .core.queue_rules import QueueRules
from .core.screentext import ScreenText, ScreenTextReader, ScreenTextUnavailable
from .core.threads import Job, spawn
from .procs import kill_group

HUMAN_TERMINAL = "human (terminal)"
NO_ANSWER_EOF = "no answer: end of input"
# a headless run's one line for T and e
NO_DESKTOP_PANE = (
    "No takeover or edit here: a headless run has no desktop pane (run it in the TUI, without --headless, to take "
    "over the desktop or edit an action)."
)
APPROVER_COMMAND = "approver command"
APPROVER_TIMED_OUT = "no answer: approver command timed out"
APPROVER_FAILED = "fail closed: no valid answer from the approver command"


class TerminalApprover:
    """Asks on the terminal: ``y`` approve, ``n`` reject, ``k`` kill. Anything else asks again."""

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stderr
        # bytes read past the last answer (piped input arrives in chunks)
        self._pending = b""
        self._eof = False

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        out = self.stdout
        out.write("\n" + "\n".join(request_lines(request)) + "\n")
        while not cancel.is_set():
            out.write("Approve? [y]es / [n]o / [k]ill: ")
            out.flush()
            line = self._readline(cancel)
            if line is None:
                return Ruling(Answer.KILL, KILL_SWITCH, "cancelled")
            if line == "":
                # nobody answered: the prompt's fail-closed default, not a person, rejects
                return Ruling(Answer.REJECT, NO_ANSWER_EOF, "end of input")
            choice = line.strip().lower()
            if choice in ("y", "yes"):
                return Ruling(Answer.APPROVE, HUMAN_TERMINAL, human=True)
            if choice in ("n", "no"):
                return Ruling(Answer.REJECT, HUMAN_TERMINAL, human=True)
            if choice in ("k", "kill"):
                return Ruling(Answer.KILL, HUMAN_TERMINAL, human=True)
            if choice in ("t", "takeover", "e", "edit"):
                out.write(f"{NO_DESKTOP_PANE}\n")
                continue
            out.write("Please answer y, n or k.\n")
        return Ruling(Answer.KILL, KILL_SWITCH, "cancelled")

    def _readline(self, cancel: threading.Event) -> str | None:
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return self.stdin.readline()
        # Read the descriptor ourselves: a buffered ``readline`` would swallow the following lines
        # of piped input into the file object's buffer, where ``select`` cannot see them (the next
        # prompt would hang).
        while not cancel.is_set():
            end = self._pending.find(b"\n")
            if end >= 0 or (self._eof and self._pending):
                cut = end + 1 if end >= 0 else len(self._pending)
                line, self._pending = self._pending[:cut], self._pending[cut:]
                return line.decode("utf-8", "replace")
            if self._eof:
                return ""
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                chunk = os.read(fd, 4096)
                self._pending += chunk
                self._eof = not chunk
        return None


# Runs as `python -I -S -c _GUARD WATCH_FD CMD...`, the leader of the approver's process group: it
# starts CMD and waits for it, and if the read end WATCH_FD of a pipe whose only writer is the
# controller reports end of file, the controller has died (even by SIGKILL: the kernel closes its
# descriptors), and it kills the group.
#
# Why not PR_SET_PDEATHSIG (prctl in preexec_fn, or `setpriv --pdeathsig`): it fires when the
# *thread* that forked exits, not the process, and decisions run on a helper thread; it leaves a
# window between fork and prctl in which the controller's death goes unseen; it signals one process,
# not the command's children; and preexec_fn is unsafe in a threaded program. The pipe exists before
# the fork, so there is no window, and nothing but the process's end closes it.
_GUARD = r"""
import os, select, signal, sys
watch = int(sys.argv[1])
os.set_inheritable(watch, False)
try:
    child = os.posix_spawnp(sys.argv[2], sys.argv[2:], dict(os.environ))
except OSError:
    sys.exit(127)
try:
    waitable = [os.pidfd_open(child)]
except (AttributeError, OSError):
    waitable = []
while True:
    ready, _, _ = select.select([watch, *waitable], [], [], None if waitable else 0.05)
    done, status = os.waitpid(child, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(status)
        sys.exit(code if code >= 0 else 128 - code)
    if watch in ready:
        os.killpg(0, signal.SIGKILL)
"""


# the longest a team's request is set aside for (the queue's bound)
ASIDE_MAX_MIN = 1440


class CommandApprover:
    """``approver:CMD``: runs CMD once per decision, JSON request on stdin, ``{"decision": ...}`` on stdout.

    A timeout, a non-zero exit, or an answer that is not exactly approve/reject/kill is a reject, recorded as
    the fail-closed rule's decision, not the command's. The command ends with the decision, with the run,
    and with the controller, however the controller ends (see ``_GUARD``).
    """

    def __init__(self, command: str, timeout: float = 120.0) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("approver:CMD needs a command")
        self.timeout = timeout

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        return self.ask(request.to_json(), cancel)

    def ask(self, request: dict[str, Any], cancel: threading.Event) -> Ruling:
        """The command's answer to ``request`` (its JSON on stdin): a local run's, or a team queue's row."""
        ruling = self.ask_team(request, cancel, aside=False)
        assert isinstance(ruling, Ruling)
        return ruling

    def ask_team(self, request: dict[str, Any], cancel: threading.Event, *, aside: bool = True) -> Ruling | float:
        """As ``ask``; on a team's queue the command may also answer ``{"decision": "aside", "minutes": N}``
        (0 < N <= 1440): the minutes it sets the request aside for, which answers nothing."""
        if shutil.which(self.argv[0]) is None:
            return Ruling(Answer.REJECT, APPROVER_FAILED, f"could not start: no executable {self.argv[0]!r}")
        payload = json.dumps(request).encode() + b"\n"
        # both ends close on exec: only the guard gets ``watch``, through pass_fds
        watch, alive = os.pipe()
        try:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _GUARD, str(watch), *self.argv],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    pass_fds=(watch,),
                )
            except OSError as exc:
                return Ruling(Answer.REJECT, APPROVER_FAILED, f"could not start: {exc.strerror or exc}")
            finally:
                os.close(watch)
            return self._converse(proc, payload, cancel, aside)
        finally:
            os.close(alive)

    def _converse(
        self, proc: subprocess.Popen[bytes], payload: bytes, cancel: threading.Event, aside: bool
    ) -> Ruling | float:
        talk = Job(proc.communicate, payload)
        spawn(talk, "cua-approver-command")
        if not talk.wait(cancel, self.timeout):
            kill_group(proc, grace=1.0)
            talk.done.wait(2)
            if cancel.is_set():
                return Ruling(Answer.KILL, KILL_SWITCH, "cancelled")
            return Ruling(Answer.REJECT, APPROVER_TIMED_OUT, f"no answer within {self.timeout:g} s")
        if proc.returncode != 0:
            return Ruling(Answer.REJECT, APPROVER_FAILED, f"exited with status {proc.returncode}")
        try:
            out, _ = talk.result()
            answer = json.loads(out.decode("utf-8"))
            if aside and answer["decision"] == "aside":
                minutes = answer["minutes"]
                if type(minutes) in (int, float) and 0 < minutes <= ASIDE_MAX_MIN:
                    return float(minutes)
                raise ValueError("minutes")
            decision = Answer(answer["decision"])
        except Exception:
            # a broken pipe, no output, not JSON, not one of the three answers
            return Ruling(Answer.REJECT, APPROVER_FAILED, "malformed answer")
        return Ruling(decision, APPROVER_COMMAND)


def headless_approver(spec: str) -> Approver:
    """Build the approver named by ``--on-confirm``: reject, approve, ask or approver:CMD."""
    if spec == "reject":
        return FixedApprover(Answer.REJECT)
    if spec == "approve":
        return FixedApprover(Answer.APPROVE)
    if spec == "ask":
        return TerminalApprover()
    if spec.startswith("approver:"):
        return CommandApprover(spec.removeprefix("approver:"))
    raise ValueError(f"--on-confirm must be reject, approve, ask or approver:CMD, not {spec!r}")


# ------------------------------------------------------------------------------------------------
# A headless fleet: its runs' requests put to their approvers one at a time, in the queue's order
# --------------------------------------------------------------------------------------------------
class InOrder:
    """A headless fleet's queue order: each run's request is put to its approver (the ``--on-confirm`` rule or
    approver command) once every pending request's screen has been read (or the reader is missing or failed
    on it), one request at a time, the first in the core's order first (core/queue_rules.py: a possible
    injection before every tier, then safety checks, the tiers, age), as the fleet TUI lists its queue. The
    threads that wait read the screens meanwhile, one at a time. ``attach`` it to the fleet, then wrap each
    run's approver with ``approver``."""

    def __init__(self, reader: ScreenTextReader | None) -> None:
        self.reader = reader
        self.rules = QueueRules(grouping=False, reading=reader is not None)
        self.fleet: FleetControl | None = None
        self._cond = threading.Condition()
        self._asking: DecisionRequest | None = None
        self._reading = False

    def attach(self, fleet: FleetControl) -> None:
        self.fleet = fleet
        fleet.subscribe(self._changed)

    def approver(self, inner: Approver) -> Approver:
        """``inner``, asked only in its turn."""
        return _InTurn(self, inner)

    def _changed(self, event: object) -> None:
        # a request queued or closed: the first to decide may be another now (the dispatcher thread)
        with self._cond:
            self._cond.notify_all()

    def wait_turn(self, request: DecisionRequest, cancel: threading.Event) -> bool:
        """Block until ``request`` is the first to decide and nobody else is being asked (True), or until
        ``cancel`` (False). A request the queue does not hold (not a fleet's) is asked at once."""
        fleet = self.fleet
        if fleet is None:
            return True
        with self._cond:
            while not cancel.is_set():
                self.rules.pending(fleet.queue())
                mine = next((item for item in self.rules.items if item.request is request), None)
                if mine is None:
                    return True
                if not self._reading and (item := self.rules.to_read()) is not None:
                    self._reading = True
                    self._cond.release()
                    try:
                        text, model_text, allowed = self._read(fleet, item)
                    finally:
                        self._cond.acquire()
                        self._reading = False
                    self.rules.read(item, text, model_text, allowed)
                    self._cond.notify_all()
                    continue
                if self._asking is None and self.rules.first() is mine:
                    self._asking = request
                    return True
                self._cond.wait(0.1)
        return False

    def done(self, request: DecisionRequest) -> None:
        with self._cond:
            if self._asking is request:
                self._asking = None
            self._cond.notify_all()

    def _read(self, fleet: FleetControl, item: QueueItem) -> tuple[ScreenText | None, str, tuple[str, ...]]:
        """The text of ``item``'s screen (None: not read), the model's words for its turn, and the hosts its
        task lets the browser reach (outside the lock: reading takes a while)."""
        view = fleet.view(item.task)
        allowed = fleet.row(item.task).allowed
        frame, reader = item.request.frame, self.reader
        if frame is None or reader is None:
            return None, view.batch_text, allowed
        limit = ScreenLimit.of_run(view.started.screen if view.started is not None else None)
        try:
            return reader.read(frame.png, frame.sha256, limit=limit), view.batch_text, allowed
        except ScreenTextUnavailable:
            # no engine: nothing more is tried, and no request waits to be read
            self.reader = None
            self.rules.reading = False
        except Exception:  # this screen could not be read: its request is asked all the same
            pass
        return None, view.batch_text, allowed


class _InTurn:
    """An approver asked only in its turn (``InOrder``); the kill switch gives way as the approver's own."""

    def __init__(self, order: InOrder, inner: Approver) -> None:
        self.order = order
        self.inner = inner

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        if not self.order.wait_turn(request, cancel):
            return Ruling(Answer.KILL, KILL_SWITCH, "cancelled")
        try:
            return self.inner.decide(request, cancel)
        finally:
            self.order.done(request)
