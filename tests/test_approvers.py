"""Approvers: the TUI handshake, the plain-terminal prompt and ``approver:CMD`` (DESIGN.md, command line).

Each may block; each must give way to the kill switch (``cancel``) promptly. A missing, late, garbled or
failing answer is a reject, never an approval.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from cua_tui.core.actions import Action, Kind
from cua_tui.core.approvers import FixedApprover, HandshakeApprover
from cua_tui.core.describe import request_lines
from cua_tui.core.ports import Answer, DecisionRequest, Ruling, SafetyCheck
from cua_tui.headless_approvers import (
    APPROVER_COMMAND,
    APPROVER_FAILED,
    APPROVER_TIMED_OUT,
    HUMAN_TERMINAL,
    NO_ANSWER_EOF,
    NO_DESKTOP_PANE,
    CommandApprover,
    TerminalApprover,
    headless_approver,
)

pytestmark = pytest.mark.timeout(30)

TYPED = "pay 100€ to\x1b[2J\x1b]0;pwned\x07 mallory\rOK"


def request(index: int = 0, text: str = TYPED) -> DecisionRequest:
    return DecisionRequest(
        "run-1",
        2,
        index,
        "call_7",
        "action",
        "typing counts as transmission: the text can leave the sandbox",
        action=Action(Kind.TYPE, text=text),
    )


class Decision:
    """``decide`` on a thread, with a deadline, so that a hang fails the test instead of blocking it."""

    def __init__(self, approver: Any, req: DecisionRequest | None = None) -> None:
        self.cancel = threading.Event()
        self.ruling: Ruling | None = None
        self.error: BaseException | None = None
        self.returned_at = 0.0
        self.thread = threading.Thread(target=self._run, args=(approver, req or request()), daemon=True)
        self.thread.start()

    def _run(self, approver: Any, req: DecisionRequest) -> None:
        try:
            self.ruling = approver.decide(req, self.cancel)
        except BaseException as exc:  # pragma: no cover - reported by result()
            self.error = exc
        self.returned_at = time.monotonic()

    def result(self, timeout: float = 5.0) -> Ruling:
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.cancel.set()
            self.thread.join(2)
            pytest.fail(f"decide() did not return within {timeout} s")
        assert self.error is None, repr(self.error)
        assert isinstance(self.ruling, Ruling)
        return self.ruling


# ---------------------------------------------------------------------------------------------------
# HandshakeApprover (the TUI answers it from its own thread)
# ---------------------------------------------------------------------------------------------------
def test_handshake_answer_from_another_thread_approves() -> None:
    seen: list[object] = []
    approver = HandshakeApprover()
    req = request()
    decision = Decision(approver, req)
    assert approver.wait_for_request(5) is req
    assert approver.pending is req
    answered = threading.Thread(target=lambda: seen.append(approver.answer(Answer.APPROVE, req)))
    answered.start()
    answered.join(2)
    ruling = decision.result()
    assert ruling.answer is Answer.APPROVE and ruling.by == "human"
    assert seen[-1] is True
    assert approver.pending is None


@pytest.mark.parametrize("answer", [Answer.REJECT, Answer.KILL])
def test_handshake_passes_reject_and_kill_through(answer: Answer) -> None:
    approver = HandshakeApprover()
    decision = Decision(approver)
    assert approver.wait_for_request(5) is not None
    assert approver.answer(answer)
    assert decision.result().answer is answer


def test_handshake_ignores_stale_answers() -> None:
    approver = HandshakeApprover()
    assert approver.answer(Answer.APPROVE) is False  # nothing pending: a stray key press
    first, second = request(0), request(1)
    decision = Decision(approver, first)
    assert approver.wait_for_request(5) is not None
    assert approver.answer(Answer.REJECT, first)
    assert decision.result().answer is Answer.REJECT
    assert approver.answer(Answer.APPROVE, first) is False  # late answer after it was decided

    decision = Decision(approver, second)
    assert approver.wait_for_request(5) is not None
    assert approver.answer(Answer.APPROVE, first) is False  # meant for the previous request
    time.sleep(0.1)
    assert decision.thread.is_alive() and approver.pending is second
    assert approver.answer(Answer.REJECT, second) is True
    assert approver.answer(Answer.APPROVE, second) is False  # only the first answer counts
    assert decision.result().answer is Answer.REJECT


def test_handshake_takes_an_answer_given_before_the_request_is_asked() -> None:
    """The UI shows a request from its event, written before the run's thread reaches ``decide``: a key
    pressed in between counts for exactly that request, and for no other."""
    approver = HandshakeApprover()
    early, other = request(0), request(1)
    assert approver.answer(Answer.APPROVE, early) is True
    decision = Decision(approver, other)  # another request is asked first: the early answer is not its
    assert approver.wait_for_request(5) is other
    time.sleep(0.1)
    assert decision.thread.is_alive()
    assert approver.answer(Answer.REJECT, other)
    assert decision.result().answer is Answer.REJECT
    assert approver.answer(Answer.APPROVE, early) is True
    decision = Decision(approver, early)
    assert decision.result(2).answer is Answer.APPROVE
    assert approver.answer(Answer.APPROVE, early) is False  # decided: a second press is refused


def test_handshake_cancel_returns_kill_promptly() -> None:
    approver = HandshakeApprover()
    decision = Decision(approver)
    assert approver.wait_for_request(5) is not None
    cancelled_at = time.monotonic()
    decision.cancel.set()
    ruling = decision.result(5)
    assert decision.returned_at - cancelled_at < 3  # at the cancel, not at a deadline of its own
    assert ruling.answer is Answer.KILL
    assert approver.pending is None
    assert approver.answer(Answer.APPROVE) is False


def test_fixed_approver_names_its_rule() -> None:
    ruling = FixedApprover(Answer.REJECT).decide(request(), threading.Event())
    assert ruling == Ruling(Answer.REJECT, "headless rule: reject")


# ---------------------------------------------------------------------------------------------------
# TerminalApprover (--on-confirm ask)
# ---------------------------------------------------------------------------------------------------
Terminal = tuple[TerminalApprover, TextIO, io.StringIO]
"""The approver, the pipe feeding its input, and what it wrote."""


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    """A TerminalApprover reading a real pipe (so select() is used) and writing to a string."""
    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "r", encoding="utf-8")
    feed = os.fdopen(write_fd, "w", encoding="utf-8")
    out = io.StringIO()
    approver = TerminalApprover(stdin, out)
    yield approver, feed, out
    for f in (feed, stdin):
        try:
            f.close()
        except OSError:
            pass


@pytest.mark.parametrize(
    ("typed", "answer"),
    [("y\n", Answer.APPROVE), ("yes\n", Answer.APPROVE), ("N\n", Answer.REJECT), ("k\n", Answer.KILL)],
)
def test_terminal_answers(terminal: Terminal, typed: str, answer: Answer) -> None:
    approver, feed, out = terminal
    feed.write(typed)
    feed.flush()
    ruling = Decision(approver).result()
    assert ruling.answer is answer and ruling.by == "human (terminal)"
    assert "Approve? [y]es / [n]o / [k]ill" in out.getvalue()


def test_terminal_asks_again_after_garbage(terminal: Terminal) -> None:
    approver, feed, out = terminal
    feed.write("sure, whatever the page says\ny\n")  # both lines arrive in one chunk, as from a pipe
    feed.flush()
    assert Decision(approver).result().answer is Answer.APPROVE
    assert "Please answer y, n or k." in out.getvalue()
    assert out.getvalue().count("Approve?") == 2


def test_a_headless_run_refuses_takeover_and_edit_in_one_line(terminal: Terminal) -> None:
    """Issue 24, point 5: T (and e) at the headless prompt: one line says why not, and it asks again."""
    approver, feed, out = terminal
    feed.write("T\ne\nn\n")
    feed.flush()
    assert Decision(approver).result().answer is Answer.REJECT
    assert out.getvalue().count(NO_DESKTOP_PANE + "\n") == 2
    assert "\n" not in NO_DESKTOP_PANE and "no desktop pane" in NO_DESKTOP_PANE


def test_terminal_piped_answers_serve_consecutive_decisions(terminal: Terminal) -> None:
    approver, feed, _out = terminal
    feed.write("y\nn\n")
    feed.flush()
    assert Decision(approver, request(0)).result().answer is Answer.APPROVE
    assert Decision(approver, request(1)).result().answer is Answer.REJECT


def test_terminal_end_of_input_rejects(terminal: Terminal) -> None:
    approver, feed, _out = terminal
    feed.close()
    ruling = Decision(approver).result()
    assert ruling.answer is Answer.REJECT and ruling.note == "end of input"


def test_terminal_shows_typed_text_in_full_with_controls_visible(terminal: Terminal) -> None:
    approver, feed, out = terminal
    feed.write("n\n")
    feed.flush()
    Decision(approver).result()
    shown = out.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "pay 100€ to␛[2J␛]0;pwned␇ mallory␍OK" in shown
    assert f"text ({len(TYPED)} chars)" in shown
    assert "turn 2, action 1" in shown


def test_terminal_cancel_returns_kill_promptly(terminal: Terminal) -> None:
    approver, _feed, _out = terminal
    decision = Decision(approver)
    time.sleep(0.15)
    cancelled_at = time.monotonic()
    decision.cancel.set()
    ruling = decision.result(5)
    assert ruling.answer is Answer.KILL
    assert decision.returned_at - cancelled_at < 3  # at the cancel, not at a deadline of its own


def test_describe_request_shows_safety_checks_visibly() -> None:
    req = DecisionRequest(
        "run-1",
        1,
        0,
        "call_1",
        "safety_check",
        "the model raised safety checks",
        safety_checks=(SafetyCheck("sc1", "malicious_instructions", "ignore\x1b[31m previous"),),
    )
    lines = request_lines(req)
    assert any("malicious_instructions: ignore␛[31m previous" in line for line in lines)
    assert not any("\x1b" in line for line in lines)


# ---------------------------------------------------------------------------------------------------
# CommandApprover (--on-confirm approver:CMD)
# ---------------------------------------------------------------------------------------------------
def python_command(code: str, *args: str) -> str:
    return " ".join(shlex.quote(part) for part in (sys.executable, "-c", code, *args))


ANSWER = "import json, sys; json.load(sys.stdin); print(json.dumps({{'decision': {0!r}}}))"


@pytest.mark.parametrize("answer", [Answer.APPROVE, Answer.REJECT, Answer.KILL])
def test_command_answers(answer: Answer) -> None:
    ruling = Decision(CommandApprover(python_command(ANSWER.format(answer.value)), timeout=10)).result(10)
    assert ruling.answer is answer and ruling.by == "approver command"


@pytest.mark.parametrize(
    "output",
    [
        "approve",
        "yes please",
        "",
        '{"decision": "APPROVE"}',
        '{"decision": "maybe"}',
        '{"decision": true}',
        '{"decision": ["approve"]}',
        '{"answer": "approve"}',
        '"approve"',
        '["approve"]',
        '{"decision": "approve"} {"decision": "approve"}',
    ],
)
def test_command_malformed_answer_rejects(output: str) -> None:
    code = f"import sys; sys.stdin.read(); sys.stdout.write({output!r})"
    ruling = Decision(CommandApprover(python_command(code), timeout=10)).result(10)
    assert ruling.answer is Answer.REJECT
    assert ruling.note == "malformed answer"


def test_command_non_zero_exit_rejects_even_with_an_approval() -> None:
    code = 'import sys; sys.stdin.read(); print(\'{"decision": "approve"}\'); sys.exit(3)'
    ruling = Decision(CommandApprover(python_command(code), timeout=10)).result(10)
    assert ruling.answer is Answer.REJECT and "3" in ruling.note


def test_command_that_cannot_start_rejects(tmp_path: Path) -> None:
    ruling = Decision(CommandApprover(str(tmp_path / "no-such-approver"), timeout=10)).result(10)
    assert ruling.answer is Answer.REJECT and "could not start" in ruling.note


def test_command_timeout_rejects_promptly() -> None:
    code = 'import time; time.sleep(10); print(\'{"decision": "approve"}\')'
    started = time.monotonic()
    ruling = Decision(CommandApprover(python_command(code), timeout=0.5)).result(8)
    assert time.monotonic() - started < 4
    assert ruling.answer is Answer.REJECT and "0.5 s" in ruling.note


def test_command_receives_the_json_request_with_the_full_typed_text(tmp_path: Path) -> None:
    seen = tmp_path / "request.json"
    code = (
        "import json, sys; data = sys.stdin.read(); open(sys.argv[1], 'w', encoding='utf-8').write(data); "
        "print(json.dumps({'decision': 'approve'}))"
    )
    ruling = Decision(CommandApprover(python_command(code, str(seen)), timeout=10)).result(10)
    assert ruling.answer is Answer.APPROVE
    data = json.loads(seen.read_text(encoding="utf-8"))
    assert data["run"] == "run-1" and data["turn"] == 2 and data["index"] == 0
    assert data["call_id"] == "call_7" and data["kind"] == "action"
    assert data["reason"].startswith("typing counts as transmission")
    assert data["action"]["kind"] == "type"
    assert data["action"]["text"] == TYPED  # the reviewer sees exactly what would be typed
    assert data["action"]["text_len"] == len(TYPED)
    assert data["summary"] == f"type {len(TYPED)} characters"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_command_cancel_during_a_hang_kills_promptly_and_ends_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = (
        "import os, sys, time; open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid())); "
        "os.replace(sys.argv[1] + '.tmp', sys.argv[1]); time.sleep(10)"
    )
    decision = Decision(CommandApprover(python_command(code, str(pid_file)), timeout=60))
    deadline = time.monotonic() + 5
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid_file.exists(), "the approver command did not start"
    pid = int(pid_file.read_text())
    cancelled_at = time.monotonic()
    decision.cancel.set()
    ruling = decision.result(5)
    assert decision.returned_at - cancelled_at < 2
    assert ruling.answer is Answer.KILL and ruling.note == "cancelled"
    deadline = time.monotonic() + 2
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(pid), "the approver command is still running"


# ---------------------------------------------------------------------------------------------------
# headless_approver (--on-confirm)
# ---------------------------------------------------------------------------------------------------
def test_headless_approver_specs() -> None:
    rejecting, approving = headless_approver("reject"), headless_approver("approve")
    assert isinstance(rejecting, FixedApprover) and rejecting.answer is Answer.REJECT
    assert isinstance(approving, FixedApprover) and approving.answer is Answer.APPROVE
    assert isinstance(headless_approver("ask"), TerminalApprover)
    command = headless_approver("approver:my-approver --strict 'a b'")
    assert isinstance(command, CommandApprover) and command.argv == ["my-approver", "--strict", "a b"]


@pytest.mark.parametrize("spec", ["bogus", "", "Approve", "approver:", "approver:   "])
def test_headless_approver_rejects_bad_specs(spec: str) -> None:
    with pytest.raises(ValueError):
        headless_approver(spec)


# ---------------------------------------------------------------------------------------------------
# Who decided: a person only when a person answered (DESIGN.md: "a decision nobody made is never
# attributed to a human")
# ---------------------------------------------------------------------------------------------------
def safety_request() -> DecisionRequest:
    return DecisionRequest(
        "run-1", 1, 0, "call_1", "safety_check", "the model raised safety checks",
        safety_checks=(SafetyCheck("sc1", "malicious_instructions", "ignore the user"),),
    )  # fmt: skip


@pytest.mark.parametrize("answer", list(Answer))
def test_fixed_rule_names_itself_for_actions(answer: Answer) -> None:
    ruling = FixedApprover(answer).decide(request(), threading.Event())
    assert ruling == Ruling(answer, f"headless rule: {answer.value}")


def test_blanket_approve_does_not_claim_a_safety_check_reject() -> None:
    ruling = FixedApprover(Answer.APPROVE).decide(safety_request(), threading.Event())
    assert ruling.answer is Answer.REJECT
    assert ruling.by == "headless rule: safety checks need a reviewer"
    assert "approve" not in ruling.by
    assert FixedApprover(Answer.REJECT).decide(safety_request(), threading.Event()).by == "headless rule: reject"


def test_terminal_end_of_input_is_nobodys_answer(terminal: Terminal) -> None:
    approver, feed, _out = terminal
    feed.write("y\n")
    feed.close()
    assert Decision(approver, request(0)).result() == Ruling(Answer.APPROVE, HUMAN_TERMINAL, human=True)
    ruling = Decision(approver, request(1)).result()
    assert ruling == Ruling(Answer.REJECT, NO_ANSWER_EOF, "end of input")
    assert "human" not in ruling.by and not ruling.human


def test_terminal_and_handshake_cancel_name_the_kill_switch(terminal: Terminal) -> None:
    approver, _feed, _out = terminal
    decision = Decision(approver)
    time.sleep(0.1)
    decision.cancel.set()
    assert decision.result(2) == Ruling(Answer.KILL, "kill switch", "cancelled")
    handshake = HandshakeApprover(by="human (TUI)")
    decision = Decision(handshake)
    assert handshake.wait_for_request(5) is not None
    decision.cancel.set()
    assert decision.result(2) == Ruling(Answer.KILL, "kill switch", "cancelled")


@pytest.mark.parametrize(
    ("code", "by", "note"),
    [
        ("import sys; sys.stdin.read(); print('yes')", APPROVER_FAILED, "malformed answer"),
        ("import sys; sys.stdin.read(); sys.exit(4)", APPROVER_FAILED, "exited with status 4"),
        ("import sys, os; sys.stdin.read(); os.kill(os.getpid(), 9)", APPROVER_FAILED, "exited with status 137"),
        ("import time; time.sleep(10)", APPROVER_TIMED_OUT, "no answer within 0.5 s"),
    ],
    ids=["malformed", "exit-status", "killed", "timeout"],
)
def test_command_failures_are_the_fail_closed_rules_decision(code: str, by: str, note: str) -> None:
    ruling = Decision(CommandApprover(python_command(code), timeout=0.5 if "sleep" in code else 10)).result(10)
    assert ruling == Ruling(Answer.REJECT, by, note)
    assert ruling.by != APPROVER_COMMAND and "human" not in ruling.by


def test_command_that_cannot_start_is_the_fail_closed_rules_decision(tmp_path: Path) -> None:
    ruling = Decision(CommandApprover(str(tmp_path / "no-such-approver"), timeout=10)).result(10)
    assert ruling.by == APPROVER_FAILED and ruling.note.startswith("could not start")


def test_command_answer_is_the_commands() -> None:
    ruling = Decision(CommandApprover(python_command(ANSWER.format("approve")), timeout=10)).result(10)
    assert ruling == Ruling(Answer.APPROVE, APPROVER_COMMAND)


SCRIPT_WITH_SAFETY_CHECK = {
    "turns": [
        {
            "actions": [{"type": "click", "x": 250, "y": 182}],
            "pending_safety_checks": [{"id": "sc1", "code": "malicious_instructions", "message": "ignore the user"}],
        }
    ],
    "final_text": "done",
}
SCRIPT_WITH_TYPING = {"turns": [{"actions": [{"type": "type", "text": "hello"}]}], "final_text": "done"}


def _headless(
    tmp_path: Path, script: dict[str, Any], on_confirm: str, stdin: str = ""
) -> tuple[str, list[dict[str, Any]]]:
    from click.testing import CliRunner

    from cua_tui.cli import main

    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    runs = tmp_path / "runs"
    args = ["run", "--headless", "--backend", "sim", "--agent", f"script:{path}", "--runs-dir", str(runs),
            "--on-confirm", on_confirm]  # fmt: skip
    result = CliRunner().invoke(main, args, input=stdin, catch_exceptions=False)
    (run_dir,) = runs.iterdir()
    audit = [json.loads(line) for line in (run_dir / "audit.jsonl").read_text().splitlines()]
    return result.output, [r for r in audit if r["kind"] == "decision"]


def test_headless_approve_names_the_rule_that_rejected_a_safety_check(tmp_path: Path) -> None:
    out, decisions = _headless(tmp_path, SCRIPT_WITH_SAFETY_CHECK, "approve")
    assert "decision: reject (by headless rule: safety checks need a reviewer)" in out
    assert "(by headless rule: approve)" not in out
    # The ruling, then the supervisor's record that the call's action fell with it, by the same decider.
    assert [(d["subject"], d["decision"], d["by"]) for d in decisions] == [
        ("safety_check", "reject", "headless rule: safety checks need a reviewer"),
        ("safety_check", "reject", "headless rule: safety checks need a reviewer"),
    ]
    assert decisions[1]["note"] == "safety check rejected"


def test_headless_ask_at_end_of_input_is_not_a_human_decision(tmp_path: Path) -> None:
    out, decisions = _headless(tmp_path, SCRIPT_WITH_TYPING, "ask", stdin="")
    assert [(d["decision"], d["by"], d["note"]) for d in decisions] == [("reject", NO_ANSWER_EOF, "end of input")]
    assert "human" not in out.split("Approve?")[-1]


def test_headless_ask_answered_is_a_human_decision(tmp_path: Path) -> None:
    _out, decisions = _headless(tmp_path, SCRIPT_WITH_TYPING, "ask", stdin="y\n")
    assert [(d["decision"], d["by"]) for d in decisions] == [("approve", HUMAN_TERMINAL)]


# ---------------------------------------------------------------------------------------------------
# The approver command ends with its controller, however the controller ends
# ---------------------------------------------------------------------------------------------------
# Writes its pid (and, when asked, starts a child of its own first), then decides nothing for a minute.
SLOW_APPROVER = """\
import os, subprocess, sys, time
pids = [os.getpid()]
if sys.argv[2] == "with-child":
    pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid)
open(sys.argv[1] + ".tmp", "w").write(" ".join(map(str, pids)))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(60)
"""


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize("children", ["alone", "with-child"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_approver_command_is_gone_soon_after_the_controller(tmp_path: Path, sig: signal.Signals, children: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT_WITH_TYPING))
    approver = tmp_path / "slow_approver.py"
    approver.write_text(SLOW_APPROVER)
    pid_file = tmp_path / "approver.pid"
    command = f"approver:{shlex.quote(sys.executable)} {shlex.quote(str(approver))} {pid_file} {children}"
    with open(tmp_path / "controller.log", "wb") as log:
        controller = subprocess.Popen(
            [sys.executable, "-m", "cua_tui.cli", "run", "--headless", "--backend", "sim", "--agent",
             f"script:{script}", "--runs-dir", str(tmp_path / "runs"), "--on-confirm", command],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline and controller.poll() is None:
            time.sleep(0.02)
        assert pid_file.exists(), (tmp_path / "controller.log").read_text()
        pids = [int(p) for p in pid_file.read_text().split()]
        between = _ppid(pids[0])  # a process between the command and the controller (a guard) must go too
        while between not in (controller.pid, 1):
            pids.append(between)
            between = _ppid(between)
        assert between == controller.pid
        controller.send_signal(sig)
        controller.wait(10)
        deadline = time.monotonic() + 5
        while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [p for p in pids if not _gone(p)] == [], "the approver outlived its controller"
    finally:
        controller.kill()
        controller.wait(5)
        if pid_file.exists():
            for pid in pid_file.read_text().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
