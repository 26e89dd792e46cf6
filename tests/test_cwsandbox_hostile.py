"""A sandbox that floods or lies cannot hurt or fool the controller (issue 20, points 1 and 2).

The real cwsandbox client talks to a hostile local service (``hostile_sandbox.py``) whose every exec is
answered by the service itself: replies that flood stdout or stderr with hundreds of MB, claim a length over
any cap, carry thousands of egress records or a picture nobody asked for. Each run ends ``error`` with one
line, sealed and intact, and the controller's memory stays near its baseline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.core.geometry import Size
from cua_tui.desktops import cwsandbox as cwsandbox_desktop
from cua_tui.desktops.cwsandbox import MAX_EGRESS_PER_RUN, _Armored
from cua_tui.desktops.remote.replies import egress_events, png_bound, reply_cap
from cua_tui.desktops.remote.wire import MAX_EGRESS_PER_REPLY
from tests.fakes.cwsandbox_local import HOST_IMAGE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_sandbox import HostileService, MiB, form_run, hostile_service

KEY = "cw-hostile-key-41d2"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _quiet_grpc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPC_VERBOSITY", "ERROR")


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileService]:
    with hostile_service(tmp_path / "service", monkeypatch, KEY) as service:
        yield service


def assert_sealed_error(run: Any, result: Any) -> None:
    assert result.status == "error", result.reason
    assert "\n" not in result.reason and len(result.reason) <= 400
    report = verify_run(run.path)
    assert report.code is VerifyExit.INTACT, report.summary
    assert (run.path / "result.json").exists()
    for path in run.path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


# ------------------------------------------------------------------------------------------------------
# 1. A reply is bounded before memory is spent
# ------------------------------------------------------------------------------------------------------
CONTROLLER = textwrap.dedent(
    """
    import json, sys, threading, time
    from pathlib import Path
    import cwsandbox, grpc  # in the baseline: the client is loaded before the run starts
    from cua_tui.build import RunOptions, build_run
    from cua_tui.labs import get_lab

    def status(field):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

    run = build_run(RunOptions(backend="cwsandbox", agent=None, lab="form", script=get_lab("form").script(None),
                               runs_dir=Path(sys.argv[1]), decisions="approve", fsync=False))
    base = status("VmRSS")
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.wait(0.005):
            peak[0] = max(peak[0], status("VmRSS"))

    threading.Thread(target=sample, daemon=True).start()
    started = time.monotonic()
    result = run.run()
    done.set()
    print(json.dumps({"base": base, "peak": max(peak[0], status("VmRSS")), "status": result.status,
                      "reason": result.reason, "path": str(run.path), "seconds": time.monotonic() - started}))
    """
)


@pytest.mark.parametrize("behaviour", ["flood_stdout", "flood_stderr", "flood_declared", "flood_binary"])
def test_a_flooded_reply_is_cut_off_and_the_controller_stays_small(
    tmp_path: Path, hostile: HostileService, behaviour: str
) -> None:
    hostile.behave["perform"] = behaviour
    hostile.flood = 512 * MiB
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CONTROLLER, str(tmp_path / "runs")],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out["status"] == "error", out
    assert "\n" not in out["reason"]
    growth = out["peak"] - out["base"]
    print(f"{behaviour}: the controller grew {growth / MiB:.1f} MiB, the service sent {hostile.sent} bytes")
    assert growth < 48 * MiB, f"the controller grew by {growth / MiB:.0f} MiB on a {behaviour}"
    # cut off early: the service put only a small part of its 512 MB on the wire
    assert hostile.sent.get("perform", 0) < 64 * MiB, hostile.sent
    words = {
        "flood_stdout": "longer than the length it sent",
        "flood_stderr": "KiB to stderr",
        "flood_declared": "over the run's cap",
        "flood_binary": "not ASCII",
    }[behaviour]
    assert words in out["reason"], out["reason"]
    report = verify_run(Path(out["path"]))
    assert report.code is VerifyExit.INTACT, report.summary
    result = json.loads((Path(out["path"]) / "result.json").read_text())
    assert result["status"] == "error"
    assert hostile.live() == []  # the sandbox was stopped


def test_the_armored_reply_reader_checks_as_it_reads() -> None:
    reader = _Armored(cap=100)
    assert reader.feed("8") is None  # a length may come in pieces
    assert reader.feed("\nQUJD") is None
    assert reader.feed("REVG") is None
    assert reader.reply() == b"ABCDEF"
    assert "over the run's cap" in (_Armored(cap=100).feed("101\n") or "")
    assert "not ASCII" in (_Armored(cap=100).feed("\ufffd") or "")
    assert "does not start with its length" in (_Armored(cap=100).feed("x" * 21) or "")
    assert "does not start with its length" in (_Armored(cap=100).feed("12a\n") or "")
    long = _Armored(cap=100)
    assert long.feed("4\nQUJD") is None
    assert "longer than the length" in (long.feed("RA") or "")
    short = _Armored(cap=100)
    short.feed("8\nQUJD")
    with pytest.raises(Exception, match="ended before the length"):
        short.reply()


def test_the_reply_cap_follows_the_runs_screen() -> None:
    small, large = reply_cap(Size(1024, 720)), reply_cap(Size(1920, 1200))
    assert small < large < 24 * MiB
    # an incompressible screen still fits: the raw RGBA rows of the screen, twice (screen and zoom)
    assert png_bound(Size(1024, 720)) > 720 * (1 + 4 * 1024)


# ------------------------------------------------------------------------------------------------------
# 2. What a reply claims is capped and checked in the controller
# ------------------------------------------------------------------------------------------------------
def test_a_reply_with_thousands_of_egress_records_records_at_most_the_cap(
    tmp_path: Path, hostile: HostileService
) -> None:
    hostile.behave["perform"] = "egress_flood"
    hostile.egress_records = 3_000
    run, recorder = form_run(tmp_path)
    run.run()
    egress = recorder.of(ev.Egress)
    performs = hostile.answered["perform"]
    assert 0 < len(egress) <= performs * MAX_EGRESS_PER_REPLY
    notes = [n.message for n in recorder.of(ev.Note) if "egress record" in n.message]
    assert len(notes) == performs
    assert f"{3_000 - MAX_EGRESS_PER_REPLY} egress record(s) over the {MAX_EGRESS_PER_REPLY}" in notes[0]
    assert verify_run(run.path).code is VerifyExit.INTACT
    assert (run.path / "audit.jsonl").stat().st_size < 4 * MiB
    assert_exportable(run.path, tmp_path)


def test_a_runs_egress_records_stop_at_the_runs_cap(
    tmp_path: Path, hostile: HostileService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the run's cap each reply's records are only counted: a long run of floods stays exportable."""
    monkeypatch.setattr(cwsandbox_desktop, "MAX_EGRESS_PER_RUN", 700)
    hostile.behave["perform"] = "egress_flood"
    hostile.egress_records = 400
    run, recorder = form_run(tmp_path)
    run.run()
    assert hostile.answered["perform"] >= 3
    assert len(recorder.of(ev.Egress)) == 700
    notes = [n.message for n in recorder.of(ev.Note) if "egress record" in n.message]
    assert len(notes) == hostile.answered["perform"] - 1  # the first reply fitted whole
    assert verify_run(run.path).code is VerifyExit.INTACT
    assert_exportable(run.path, tmp_path)


def assert_exportable(run_dir: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cua_tui.cli import main

    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}
    for flag, name in (("--html", "run.html"), ("--gif", "run.gif"), ("--script", "run.json")):
        result = CliRunner().invoke(main, ["export", str(run_dir), flag, str(tmp_path / name)], env=env)
        assert result.exit_code == 0, (flag, result.output)
        assert (tmp_path / name).stat().st_size > 0


def test_egress_records_are_checked_one_by_one_and_capped_per_run() -> None:
    records: list[Any] = [
        {"host": "ok.example", "port": 443, "method": "GET", "allowed": True},
        {"host": "x" * 5000, "port": 80, "method": "POST", "allowed": False, "reason": "r" * 5000},
        {"host": "bad", "port": True, "method": "GET", "allowed": True},  # a bool is not a port
        "not a record",
        {"host": "no-allowed", "port": 1, "method": "GET"},
    ]
    events, note = egress_events(records)
    assert next(e.host for e in events) == "ok.example"
    assert len(events) == 2 and len(events[1].host) <= 300 and len(events[1].reason) <= 300
    assert note is not None and "3 malformed" in note.message
    events, note = egress_events([records[1]] * 10, cap=3)
    assert len(events) == 3 and note is not None and "7 egress record(s) over the 3" in note.message
    assert "(7 of them refused)" in note.message
    assert egress_events(None) == ([], None)
    assert 64 * MiB > MAX_EGRESS_PER_RUN * 300  # a run at the cap stays under the exports' audit cap


def test_a_click_whose_reply_carries_an_unasked_picture_ends_the_run(tmp_path: Path, hostile: HostileService) -> None:
    """A 16384 x 2441 picture on a click's reply: refused before anything decodes it, never a zoom screen."""
    hostile.behave["perform"] = "unsolicited_picture"
    run, recorder = form_run(tmp_path)
    result = run.run()
    assert_sealed_error(run, result)
    assert "picture it did not ask for" in result.reason, result.reason
    assert not [s for s in recorder.of(ev.ScreenCaptured) if s.purpose == "zoom"]
    for path in (run.path / "screens").glob("*.png"):
        assert path.stat().st_size < 1 * MiB


def test_a_zoom_takes_only_a_picture_of_its_regions_size(tmp_path: Path, hostile: HostileService) -> None:
    from cua_tui.core.actions import Action, Kind
    from cua_tui.core.ports import DesktopError
    from cua_tui.core.rundir import RunDir
    from cua_tui.desktops.cwsandbox import CWSandboxDesktop, SandboxSettings
    from cua_tui.desktops.target import Target
    from cua_tui.labs import get_lab

    settings = SandboxSettings(
        api_key=KEY, base_url=os.environ["CWSANDBOX_BASE_URL"], step_timeout=10, image=HOST_IMAGE
    )
    desktop = CWSandboxDesktop(Size(1024, 720), Target(get_lab("form")), settings)
    desktop.bind_run(RunDir.create(tmp_path / "runs"))
    desktop.start()
    try:
        desktop.screenshot()
        hostile.behave["perform"] = "oversized_zoom"
        with pytest.raises(DesktopError, match="4096 x 4096 screenshot where 100 x 50 was expected"):
            desktop.perform(Action(Kind.ZOOM, region=(0, 0, 100, 50)))
    finally:
        desktop.stop()


def test_the_exec_inside_caps_what_it_reads_from_the_helpers_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``remote/call.py`` copies the resident helper's reply: a resident that floods its socket is cut off too."""
    import socket
    import threading

    from cua_tui.desktops.remote import call

    monkeypatch.setattr(call, "MAX_REPLY", 1 * MiB)
    path = tmp_path / "h.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    sent = [0]

    def flood() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1 << 16)
            try:
                while sent[0] < 256 * MiB:
                    conn.sendall(b"x" * (1 << 16))
                    sent[0] += 1 << 16
            except OSError:
                pass

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    assert call.main(["call", str(path), '{"op": "screenshot"}', "1", "base64"]) == 3
    thread.join(10)
    assert sent[0] < 8 * MiB
    assert "over 1048576 bytes" in capsys.readouterr().err
    listener.close()


# ------------------------------------------------------------------------------------------------------
# 7. A verdict says who vouched for it
# ------------------------------------------------------------------------------------------------------
def test_a_sandbox_that_did_nothing_and_says_passed_is_shown_as_the_sandboxs_word(
    tmp_path: Path, hostile: HostileService
) -> None:
    from click.testing import CliRunner

    from cua_tui.cli import main
    from cua_tui.core.ports import VerifierPlace

    hostile.behave["verify"] = "passed"
    run, recorder = form_run(tmp_path)
    result = run.run()
    assert result.status == "passed"  # the sandbox says so ...
    (done,) = recorder.of(ev.VerificationDone)
    assert done.where is VerifierPlace.SANDBOX  # ... and every record says whose word it is
    assert json.loads((run.path / "result.json").read_text())["verifier"]["where"] == "sandbox"
    env = {"CUA_TUI_CONFIG": str(tmp_path / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(tmp_path / "runs")}
    listing = CliRunner().invoke(main, ["runs", "--runs-dir", str(tmp_path / "runs"), "--json"], env=env)
    assert json.loads(listing.output)[0]["verifier"]["where"] == "sandbox", listing.output
