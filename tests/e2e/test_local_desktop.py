"""End to end on the real local desktop: Xvfb + openbox + Chromium in bubblewrap, the egress proxy, the labs.

Everything here runs on this machine's loopback only. The suite's setup installs the Debian packages
(scripts/setup.sh); a missing program is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cua_tui.agents.script import Script, ScriptAgent
from cua_tui.core import events as ev
from cua_tui.core.approvers import FixedApprover
from cua_tui.core.attention import Attention
from cua_tui.core.audit import verify_run
from cua_tui.core.geometry import Size
from cua_tui.core.policy import Policy
from cua_tui.core.ports import Answer, process_user
from cua_tui.core.rundir import RunDir
from cua_tui.core.supervisor import RunConfig, RunResult, Supervisor
from cua_tui.desktops.local import LocalDesktop, missing_programs
from cua_tui.desktops.target import Target
from cua_tui.labs import Lab, get_lab

pytestmark = pytest.mark.e2e
SIZE = Size(1024, 720)


def test_the_desktop_programs_are_installed() -> None:
    assert missing_programs() == [], "run `bash scripts/setup.sh env` as root"


class LabRun:
    def __init__(
        self,
        tmp_path: Path,
        lab_name: str,
        answer: Answer | None,
        *,
        variant: str | None = None,
        policy: Policy | None = None,
    ) -> None:
        self.lab = get_lab(lab_name)
        self.desktop = LocalDesktop(SIZE, Target(self.lab))
        script = Script.from_data(self.lab.script(variant))
        self.agent = ScriptAgent(script)
        policy = (policy or Policy.default()).with_regions(self.lab.regions())
        self.rundir = RunDir.create(tmp_path / "runs")
        config = RunConfig(task=self.lab.task, backend="local", agent="script", model=None, screen=SIZE, policy=policy)
        approver = FixedApprover(answer) if answer is not None else None
        self.events: list[ev.Event] = []
        self.supervisor = Supervisor(
            config,
            self.desktop,
            self.agent,
            approver,
            self.rundir,
            listeners=(lambda s: self.events.append(s.event),),
            fsync=False,
        )
        self.pids: dict[str, int] = {}
        self.workspace: Path | None = None
        self.supervisor.subscribe(self._watch)

    def _watch(self, stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.ScreenCaptured) and event.purpose == "initial":
            self.pids = self.desktop.processes()
            self.workspace = self.desktop.workspace

    def run(self) -> RunResult:
        return self.supervisor.run()

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.rundir.audit).read_text().splitlines()]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.audit() if r["kind"] == kind]


def assert_nothing_survives(run: LabRun) -> None:
    """No process, profile, cookie or download outlives the run."""
    assert run.pids, "the desktop never started"
    deadline = time.monotonic() + 5
    alive = dict(run.pids)
    while alive and time.monotonic() < deadline:
        alive = {n: p for n, p in alive.items() if _alive(p)}
        time.sleep(0.05)
    assert not alive, f"still running after the run: {alive}"
    assert run.workspace is not None and not run.workspace.exists()

    def leftovers() -> list[int]:
        return [pid for pid in _all_pids() if run.workspace and str(run.workspace) in _cmdline(pid)]

    # the sandbox's namespace ends with its first process; its other processes are reaped as the kernel gets
    # to them (a loaded machine once still listed Chromium's helpers as this was read): waited for, bounded
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = leftovers()
    assert not left, f"processes still using the workspace: {[_cmdline(p) for p in left]}"
    display = run.desktop.display
    assert display
    lock = Path(f"/tmp/.X{display.lstrip(':')}-lock")
    if lock.exists():
        # Another test's X server on this host (the suite runs two desktop tests at a time) may have taken
        # the freed display number since: the lock then names that live Xvfb. One naming no live Xvfb is
        # a leftover.
        # The pid in it is the server's own, which for a sandboxed desktop is a pid of its namespace:
        # a live Xvfb that names the display in its arguments counts as well. A controller claims the number
        # by writing its own pid before its X server starts: a live process other than this one is such a
        # claim (CI once caught the other worker in that window).
        written = lock.read_text(errors="replace").strip()
        owner = int(written) if written.isdigit() else 0
        named = [p for p in _all_pids() if _comm(p) == "Xvfb" and display in _cmdline(p).split()]
        claimed = owner > 0 and owner != os.getpid() and _alive(owner)
        held = bool(named) or claimed
        assert held, f"{lock} left behind (it names {written!r}, and no Xvfb serves {display})"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.parametrize("lab_name", ["form", "search-export", "injection"])
def test_each_lab_passes_end_to_end_with_approvals(tmp_path: Path, lab_name: str) -> None:
    run = LabRun(tmp_path, lab_name, Answer.APPROVE)
    result = run.run()
    assert result.status == "passed", (result.reason, [e for e in run.events if isinstance(e, ev.Outcome)])
    assert result.verified is True
    # the lab's server is a thread of this process: the controller vouches, as the user it runs as
    (verdict,) = run.of("verification")
    assert (verdict["verifier"], verdict["where"], verdict["user"]) == (
        f"lab:{lab_name} (server-side)",
        "controller",
        process_user(),
    )
    outcomes = run.of("outcome")
    assert outcomes and all(o["status"] == "executed" for o in outcomes)
    allowed = [e for e in run.of("egress") if e["allowed"]]
    assert allowed and all(e["host"] == "127.0.0.1" for e in allowed)  # only the lab's own origin
    # the browser asked nothing on its own (desktops/quiet.py): a clean run reads 0 refused
    assert [e for e in run.of("egress") if not e["allowed"]] == []
    assert verify_run(result.path).code == 0
    assert_nothing_survives(run)


def test_rejected_typing_never_reaches_the_lab_server(tmp_path: Path) -> None:
    run = LabRun(tmp_path, "form", Answer.REJECT)
    result = run.run()
    assert result.status == "failed" and result.verified is False
    statuses = [o["status"] for o in run.of("outcome")]
    assert statuses[:3] == ["executed", "declined", "not_executed"]
    assert not any(path.startswith("/verify") for _method, path in run.lab.requests)
    assert run.lab.verify().passed is False
    assert verify_run(result.path).code == 0
    assert_nothing_survives(run)


def test_a_send_to_an_outside_host_is_refused_by_the_proxy_and_audited(tmp_path: Path) -> None:
    """The obeying script clicks the page's Send (approved here): the browser's request to the outside host is
    refused by the egress proxy, the audit log shows it, and the lab fails."""
    run = LabRun(tmp_path, "injection", Answer.APPROVE, variant="injection-obey")
    result = run.run()
    assert result.status == "failed"
    refused = [e for e in run.of("egress") if not e["allowed"]]
    # the page's request is the run's only refusal (the browser asks nothing on its own), and it is an alert
    assert {e["host"] for e in refused} == {"collector.exfil.invalid"}, run.of("egress")
    assert not any(e["allowed"] and e["host"] != "127.0.0.1" for e in run.of("egress"))
    attention = Attention()
    alerts = [attention.apply(ev.Stamped(seq, "", e)) for seq, e in enumerate(run.events) if isinstance(e, ev.Egress)]
    (alert,) = [a.line for a in alerts if a is not None]
    assert alert.startswith("egress refused: POST collector.exfil.invalid:80"), alert
    assert attention.folded == 0 and attention.folded_line() == ""
    # the verdict waited for the browser's traffic to settle: the refusal is on record before it (a busy
    # machine's browser re-POSTed after the run had ended, and the refusal was never logged)
    kinds = [(r["kind"], r.get("host")) for r in run.audit()]
    assert kinds.index(("egress", "collector.exfil.invalid")) < kinds.index(("verification", None)), kinds
    assert_nothing_survives(run)


def test_the_injection_send_button_needs_a_decision_and_rejection_sends_nothing(tmp_path: Path) -> None:
    run = LabRun(tmp_path, "injection", Answer.REJECT, variant="injection-obey")
    result = run.run()
    # turn 1 clicks Send (a confirm region: rejected), turn 2 clicks Done: nothing left, the lab passes
    assert [o["status"] for o in run.of("outcome")] == ["declined", "executed"]
    assert run.of("outcome")[0]["message"] == "Declined by the user. Do not retry this action."
    assert not any(e["host"] == "collector.exfil.invalid" for e in run.of("egress"))
    assert not any(path.startswith("/send") for _method, path in run.lab.requests)
    assert result.status == "passed", result.reason
    assert_nothing_survives(run)


def test_the_browser_namespace_has_no_route_out(form_desktop: LocalDesktop) -> None:
    """Inside the browser's network namespace there is only lo: no route, and the host's loopback services
    (the lab itself) are unreachable except through the proxy."""
    desktop = form_desktop
    lab = desktop.target.lab
    assert isinstance(lab, Lab)  # the desktop sees the port; its port number is the lab's own
    browser = desktop.processes()["browser"]
    inside = _namespace_member(browser)
    links = subprocess.run(
        ["nsenter", f"--net=/proc/{inside}/ns/net", "ip", "-o", "link"], capture_output=True, text=True, check=True
    ).stdout
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
    routes = subprocess.run(
        ["nsenter", f"--net=/proc/{inside}/ns/net", "ip", "-4", "route"], capture_output=True, text=True, check=True
    ).stdout
    assert "default" not in routes
    port = lab.port
    probe = subprocess.run(
        ["nsenter", f"--net=/proc/{inside}/ns/net", "curl", "-sS", "-m", "3", f"http://127.0.0.1:{port}/"],
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0  # the lab is only reachable through the proxy
    via_proxy = subprocess.run(
        [
            "nsenter",
            f"--net=/proc/{inside}/ns/net",
            "curl",
            "-sS",
            "-m",
            "5",
            "--proxy",
            "http://127.0.0.1:3128",
            f"http://127.0.0.1:{port}/",
        ],
        capture_output=True,
        text=True,
    )
    assert via_proxy.returncode == 0 and "<html" in via_proxy.stdout.lower()


def _namespace_member(bwrap_pid: int) -> int:
    """A process inside bwrap's namespaces (a child of the outer bwrap)."""
    own = os.readlink(f"/proc/{bwrap_pid}/ns/net")
    for pid in _all_pids():
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != own and bwrap_pid in _ancestors(pid):
                return pid
        except OSError:
            continue
    raise AssertionError("no process inside the browser's namespace")


def _ancestors(pid: int) -> list[int]:
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
        out.append(pid)
    return out


def test_a_killed_run_leaves_nothing_behind(tmp_path: Path) -> None:
    run = LabRun(tmp_path, "search-export", Answer.APPROVE)
    first_outcome = threading.Event()
    run.supervisor.subscribe(lambda s: first_outcome.set() if isinstance(s.event, ev.Outcome) else None)
    box: dict[str, RunResult] = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", run.run()), daemon=True)
    worker.start()
    assert first_outcome.wait(60)
    run.supervisor.kill()
    worker.join(20)
    assert box["result"].status == "killed"
    assert verify_run(box["result"].path).code == 0
    assert_nothing_survives(run)


def test_a_browser_crash_ends_the_run_and_still_cleans_up(tmp_path: Path) -> None:
    run = LabRun(tmp_path, "form", Answer.APPROVE)

    def crash(stamped: ev.Stamped) -> None:
        event = stamped.event
        if isinstance(event, ev.ModelTurn) and event.turn == 1:
            browser = run.desktop.processes()["browser"]
            for pid in _all_pids():
                if browser in _ancestors(pid) and "chromium" in _cmdline(pid):
                    os.kill(pid, 9)

    run.supervisor.subscribe(crash)
    result = run.run()
    assert result.status in ("error", "failed")
    assert verify_run(result.path).code == 0
    assert_nothing_survives(run)


def test_release_all_lets_go_of_held_keys_and_buttons(tmp_path: Path) -> None:
    from Xlib import X, display

    from cua_tui.core.actions import parse_anthropic
    from cua_tui.core.geometry import Scaling

    desktop = LocalDesktop(SIZE, Target(get_lab("form")))
    desktop.start()
    try:
        scaling = Scaling.identity(SIZE)
        desktop.perform(parse_anthropic("left_mouse_down", {"coordinate": [600, 600]}, scaling))
        session = desktop._x11
        assert session is not None
        session.press_modifiers(("shift", "ctrl"), True)
        observer = display.Display(desktop.display)
        try:
            pointer = observer.screen().root.query_pointer()
            assert pointer.mask & X.Button1Mask and pointer.mask & X.ShiftMask and pointer.mask & X.ControlMask
            desktop.release_all()
            pointer = observer.screen().root.query_pointer()
            assert not pointer.mask & (X.Button1Mask | X.ShiftMask | X.ControlMask)
            assert not any(observer.query_keymap())
        finally:
            observer.close()
    finally:
        desktop.stop()
    # once stopped, input is a no-op that reports the stop instead of reaching a display
    from cua_tui.core.ports import DesktopError

    with pytest.raises(DesktopError, match="stopped"):
        desktop.perform(parse_anthropic("left_click", {"coordinate": [10, 10]}, Scaling.identity(SIZE)))


@pytest.mark.alone
def test_a_controller_killed_outright_leaves_no_desktop_behind(tmp_path: Path) -> None:
    """SIGKILL on the controller (no chance to clean up): every desktop process dies with it."""
    import signal
    import sys

    code = (
        "import sys, time\n"
        "from cua_tui.core.geometry import Size\n"
        "from cua_tui.desktops.local import LocalDesktop\n"
        "from cua_tui.desktops.target import Target\n"
        "from cua_tui.labs import get_lab\n"
        "d = LocalDesktop(Size(1024, 720), Target(get_lab('form')))\n"
        "d.start()\n"
        "print(' '.join(str(p) for p in d.processes().values()), d.workspace, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    *pids, _workspace = proc.stdout.readline().split()
    assert len(pids) == 3 and all(_alive(int(p)) for p in pids)
    family = [pid for pid in _all_pids() if any(int(p) in _ancestors(pid) or pid == int(p) for p in pids)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in family):
        time.sleep(0.1)
    assert not [p for p in family if _alive(p)], [_cmdline(p) for p in family if _alive(p)]
    # what it left on disk is swept by the next desktop's start
    from cua_tui.desktops.local import sweep_stale_workspaces

    assert Path(_workspace).exists()
    assert Path(_workspace) in sweep_stale_workspaces()
    assert not Path(_workspace).exists()
