"""The defaults start a run (issue 21, point 1): with no image configured, the stock ``debian:bookworm-slim``
and the desktop's packages installed at start (apt over HTTPS, checked with the CA bundle mounted beside the
helper, egress to the mirror's host only), its progress told in words of ours; a configured image is probed
once (one exec) and, lacking what the desktop needs, the run ends with one line naming what is missing and
how to build the image. The sandbox's answers come from the hostile service (tests/hostile_sandbox.py):
what the sandbox says is its word, bounded, never shown as it came. The real install on the stock image runs
in tests/e2e/test_cwsandbox_container.py, in a real container."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cua_tui.config import Settings
from cua_tui.core import events as ev
from cua_tui.core.audit import VerifyExit, verify_run
from cua_tui.desktops import cwsandbox as cw
from tests.fakes.cwsandbox_local import HOST_IMAGE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_sandbox import HostileService, form_run, hostile_service

KEY = "cw-start-key-5d1e"


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HostileService]:
    monkeypatch.setenv("GRPC_VERBOSITY", "ERROR")
    monkeypatch.setenv("CUA_TUI_CONFIG", str(tmp_path / "no-config.toml"))
    with hostile_service(tmp_path / "service", monkeypatch, KEY, image=None) as service:
        yield service


def test_no_default_names_an_image_that_does_not_exist(tmp_path: Path) -> None:
    settings = Settings.load({"CUA_TUI_CONFIG": str(tmp_path / "none.toml")})
    assert settings.backend_table("cwsandbox", {}).image is None
    options = cw.SandboxSettings()
    assert options.installs and options.image_name == cw.STOCK_IMAGE == "debian:bookworm-slim"
    assert not cw.SandboxSettings(image="registry.example/cua-tui-desktop:1").installs
    env = {"CUA_TUI_CONFIG": str(tmp_path / "none.toml"), "CUA_TUI_CWSANDBOX_IMAGE": "my/desktop:2"}
    assert Settings.load(env).backend_table("cwsandbox", env).image == "my/desktop:2"


def test_no_image_installs_on_the_stock_image_with_progress(tmp_path: Path, hostile: HostileService) -> None:
    run, recorder = form_run(tmp_path)
    result = run.run()
    assert result.status == "finished" or result.status == "failed", result.reason  # nothing real inside
    (create,) = hostile.creates
    spec = create.sandbox.spec
    container = spec.containers[0]
    assert container.image == "debian:bookworm-slim"
    mounts = {f.path: f.content for f in container.files}
    assert any(path.endswith("/ca.pem") and b"BEGIN CERTIFICATE" in data for path, data in mounts.items())
    assert [rule.https_hostname for rule in spec.network.egress] == ["deb.debian.org"]  # HTTPS to the mirror only
    assert not spec.network.deny_egress
    # one install exec, then the helper's requests; the install's own apt lines never reach a record
    assert hostile.answered.get("install") == 1 and "probe" not in hostile.answered
    notes = [n.message for n in recorder.of(ev.Note)]
    assert any("installing the desktop's packages" in n for n in notes)
    assert any("apt-get update" in n for n in notes) and any("apt-get install" in n for n in notes)
    assert any(n.startswith("installed the desktop's packages in") for n in notes)
    assert not any("Get:" in n or "Setting up" in n for n in notes)
    info = json.loads((run.path / "run.json").read_text())
    assert info["sandbox"]["image"] == "debian:bookworm-slim" and info["sandbox"]["install_at_start"] is True
    assert "deb.debian.org" in info["sandbox"]["network"]
    assert verify_run(run.path).code is VerifyExit.INTACT


def test_an_install_that_fails_ends_the_run_in_one_line(tmp_path: Path, hostile: HostileService) -> None:
    hostile.behave["install"] = "install_fails"
    run, _recorder = form_run(tmp_path)
    result = run.run()
    assert result.status == "error"
    assert "\n" not in result.reason
    assert "installing the desktop's packages in debian:bookworm-slim failed during apt-get update" in result.reason
    assert "E: Unable to locate package chromium" in result.reason  # the last line apt wrote: its reason
    assert "docker build -t REGISTRY/cua-tui-desktop docker/desktop" in result.reason
    assert "helper" not in hostile.answered and "ready" not in hostile.answered  # the helper never started
    assert hostile.live() == []  # the sandbox was stopped
    assert verify_run(run.path).code is VerifyExit.INTACT


def test_a_configured_image_is_probed_once_and_what_it_lacks_is_named(
    tmp_path: Path, hostile: HostileService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUA_TUI_CWSANDBOX_IMAGE", "registry.example/not-a-desktop:1")
    hostile.behave["probe"] = "missing"
    run, _recorder = form_run(tmp_path)
    result = run.run()
    assert result.status == "error"
    assert result.reason.endswith(
        "cwsandbox: the image registry.example/not-a-desktop:1 lacks openbox, python3-xlib: " + cw.BUILD_HINT
    ), result.reason
    assert "evil" not in result.reason and "\x1b" not in result.reason  # the sandbox's own words stay out
    assert hostile.answered == {"probe": 1}  # one exec, and nothing after it
    (create,) = hostile.creates
    container = create.sandbox.spec.containers[0]
    assert container.image == "registry.example/not-a-desktop:1"
    assert not any(f.path.endswith("/ca.pem") for f in container.files)  # no install: no CA bundle
    assert create.sandbox.spec.network.deny_egress  # a lab on a configured image reaches nothing
    assert hostile.live() == []


def test_a_configured_image_that_has_everything_starts_after_one_probe(
    tmp_path: Path, hostile: HostileService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUA_TUI_CWSANDBOX_IMAGE", HOST_IMAGE)
    run, _recorder = form_run(tmp_path)
    run.run()
    assert hostile.answered.get("probe") == 1 and hostile.answered.get("ready") == 1
    assert "install" not in hostile.answered


def test_a_flooding_probe_is_cut_off(tmp_path: Path, hostile: HostileService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUA_TUI_CWSANDBOX_IMAGE", HOST_IMAGE)
    hostile.behave["probe"] = "flood_stdout"
    hostile.flood = 64 * 1024 * 1024
    run, _recorder = form_run(tmp_path)
    result = run.run()
    assert result.status == "error" and "more than 16 MiB" in result.reason, result.reason
    # cancelled well before the end of the flood: what the service pushed before it saw the cancel
    # depends on gRPC's buffers and the load (40 MiB once, beside an install); the controller's own
    # bound is the 16 MiB above
    assert hostile.sent["probe"] < hostile.flood * 3 // 4


def test_the_install_progress_counts_and_never_repeats_apts_words() -> None:
    notes: list[str] = []
    now = [0.0]
    progress = cw.InstallProgress(notes.append, clock=lambda: now[0])
    progress.line("cua-tui: update")
    progress.line("Get:1 https://deb.debian.org/debian bookworm InRelease")  # the lists: not a package
    progress.line("cua-tui: install")
    for k in range(30):
        now[0] += 1
        progress.line(f"Get:{k} https://deb.debian.org/debian \x1b[2J[bold]x[/bold]")
        progress.line("Setting up x ...")
    progress.line("cua-tui: done")
    assert progress.finished and progress.fetched == 30 and progress.set_up == 30
    assert notes[2:] == [
        "installing: 10 downloads, 9 packages set up (10 s)",
        "installing: 20 downloads, 19 packages set up (20 s)",
        "installing: 30 downloads, 29 packages set up (30 s)",
    ]


def test_a_scripts_output_in_tiny_frames_is_cut_into_lines_and_tails_without_copies() -> None:
    """A hostile sandbox may stream one character a frame: lines and tails come out right, and what waits
    is kept in pieces (nothing joined per frame)."""
    lines: list[str] = []
    cutter = cw._Lines(lines.append)
    for char in "one\r\ntwo\n\nthree":
        cutter.add(char)
    assert len(cutter.parts) == 5  # "three", a piece a frame, waiting for its end
    cutter.end()
    assert lines == ["one", "two", "", "three"]
    long: list[str] = []
    cutter = cw._Lines(long.append)
    cutter.add("x" * (cw.LINE_CAP + 10) + "\n")
    assert [len(x) for x in long] == [cw.LINE_CAP + 10]
    tail = cw._Tail(8)
    for char in "abcdefghijklmnopqrstuvwxyz":
        tail.add(char)
        assert len(tail.parts) <= 17
    assert tail.text() == "stuvwxyz"
