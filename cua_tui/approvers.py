"""Headless approvers: ``--on-confirm ask`` (a y/n/k prompt on a plain terminal) and ``approver:CMD``.

Both give way to the kill switch: they wait in short slices and return as soon as ``cancel`` is set.
Untrusted text (typed text, reasons derived from model output) is printed with control characters made
visible, so a hostile string cannot move the cursor, recolour the terminal or fake a prompt.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
import threading
import time
from typing import TextIO

from .core.actions import Kind
from .core.approvers import FixedApprover
from .core.ports import Answer, Approver, DecisionRequest, Ruling
from .core.text import visible


class TerminalApprover:
    """Asks on the terminal: ``y`` approve, ``n`` reject, ``k`` kill. Anything else asks again."""

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stderr
        self._pending = b""  # bytes read past the last answer (piped input arrives in chunks)
        self._eof = False

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        out = self.stdout
        out.write("\n" + "\n".join(describe_request(request)) + "\n")
        while not cancel.is_set():
            out.write("Approve? [y]es / [n]o / [k]ill: ")
            out.flush()
            line = self._readline(cancel)
            if line is None:
                return Ruling(Answer.KILL, "human (terminal)", "cancelled")
            if line == "":
                return Ruling(Answer.REJECT, "human (terminal)", "end of input")
            choice = line.strip().lower()
            if choice in ("y", "yes"):
                return Ruling(Answer.APPROVE, "human (terminal)")
            if choice in ("n", "no"):
                return Ruling(Answer.REJECT, "human (terminal)")
            if choice in ("k", "kill"):
                return Ruling(Answer.KILL, "human (terminal)")
            out.write("Please answer y, n or k.\n")
        return Ruling(Answer.KILL, "human (terminal)", "cancelled")

    def _readline(self, cancel: threading.Event) -> str | None:
        try:
            fd = self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return self.stdin.readline()
        # Read the descriptor ourselves: a buffered ``readline`` would swallow the following lines of piped
        # input into the file object's buffer, where ``select`` cannot see them (the next prompt would hang).
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


def describe_request(request: DecisionRequest) -> list[str]:
    """Lines that show a reviewer exactly what is being decided (typed text in full, made visible)."""
    lines = [f"== Decision needed: turn {request.turn}, action {request.index + 1} =="]
    if request.kind == "safety_check":
        lines.append("The model raised safety checks; approving acknowledges them:")
        lines += [f"  - {visible(c.code)}: {visible(c.message)}" for c in request.safety_checks]
    if request.action is not None:
        lines.append(f"  action: {visible(request.action.describe())}")
        if request.action.kind is Kind.TYPE:
            lines.append(f"  text ({len(request.action.text)} chars): {visible(request.action.text)}")
    lines.append(f"  why: {visible(request.reason)}")
    return lines


class CommandApprover:
    """``approver:CMD``: runs CMD once per decision, JSON request on stdin, ``{"decision": ...}`` on stdout.

    A timeout, a non-zero exit, or an answer that is not exactly approve/reject/kill is a reject.
    """

    def __init__(self, command: str, timeout: float = 120.0) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("approver:CMD needs a command")
        self.timeout = timeout

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        by = "approver command"
        payload = json.dumps(request.to_json()).encode() + b"\n"
        try:
            proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return Ruling(Answer.REJECT, by, f"could not start: {exc.strerror or exc}")
        result: dict[str, bytes] = {}

        def talk() -> None:
            try:
                result["out"], _ = proc.communicate(payload)
            except (OSError, ValueError):
                result["out"] = b""

        talker = threading.Thread(target=talk, daemon=True)
        talker.start()
        deadline = time.monotonic() + self.timeout
        while talker.is_alive():
            if cancel.is_set() or time.monotonic() > deadline:
                _terminate(proc)
                talker.join(2)
                if cancel.is_set():
                    return Ruling(Answer.KILL, by, "cancelled")
                return Ruling(Answer.REJECT, by, f"no answer within {self.timeout:g} s")
            talker.join(0.05)
        if proc.returncode != 0:
            return Ruling(Answer.REJECT, by, f"exited with status {proc.returncode}")
        try:
            answer = json.loads(result.get("out", b"").decode("utf-8"))
            decision = Answer(answer["decision"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return Ruling(Answer.REJECT, by, "malformed answer")
        return Ruling(decision, by)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, 15)
        proc.wait(1)
    except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass


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
