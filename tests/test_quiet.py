"""The browser's quiet settings (cua_tui/desktops/quiet.py) reach every backend from the one module: the local
desktop's flags and its sandbox's own policies, the Docker image's policy file, the stock image's install.

Whether the browser then asks nothing on its own is measured on the real desktops: tests/e2e/test_local_desktop.py
(local), tests/e2e/test_docker.py and tests/e2e/test_cwsandbox_container.py (the image and the stock install).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cua_tui.core.geometry import Size
from cua_tui.desktops import isolation, quiet
from cua_tui.desktops.cwsandbox import INSTALL
from cua_tui.desktops.local import chromium_flags

ROOT = Path(__file__).resolve().parents[1]


def test_the_docker_image_copies_the_policies_quiet_py_writes() -> None:
    """docker/desktop is a build context of its own (a registry's build sends only it): it holds the policy file
    as a copy, kept equal to the module's here."""
    copy = (ROOT / "docker" / "desktop" / quiet.POLICY_NAME).read_text()
    assert copy == quiet.policy_json(), (
        "run `python -m cua_tui.desktops.quiet > docker/desktop/cua-tui-quiet.json` and rebuild the image"
    )
    dockerfile = (ROOT / "docker" / "desktop" / "Dockerfile").read_text()
    assert f"COPY {quiet.POLICY_NAME} {quiet.POLICY_PATH}\n" in dockerfile
    policies = json.loads(copy)
    assert policies["ComponentUpdatesEnabled"] is False and policies["BrowserNetworkTimeQueriesEnabled"] is False


@pytest.mark.parametrize("sandbox", [True, False])
def test_every_backend_starts_chromium_with_the_quiet_flags(sandbox: bool) -> None:
    """The local desktop in bubblewrap and the in-sandbox helper's (no bubblewrap) share ``chromium_flags``."""
    flags = chromium_flags(Size(1024, 720), Path("/p"), "http://127.0.0.1:8000/", sandbox=sandbox)
    start = flags.index(quiet.FLAGS[0])
    assert tuple(flags[start : start + len(quiet.FLAGS)]) == quiet.FLAGS
    # the three requests no policy stops go where the browser itself refuses to connect
    assert "--component-updater=url-source=data:," in flags
    for name in ("--gaia-url=", "--gcm-checkin-url="):
        (flag,) = [flag for flag in flags if flag.startswith(name)]
        assert urlsplit(flag.removeprefix(name)).port == 1, flag  # ERR_UNSAFE_PORT, before any proxy


def test_the_local_sandbox_sees_its_own_policies_not_the_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = tmp_path / "etc-chromium"
    (host / "policies" / "managed").mkdir(parents=True)
    (host / "policies" / "managed" / "admin.json").write_text('{"ProxyMode": "direct"}')
    (host / "master_preferences").write_text("{}")
    monkeypatch.setattr(isolation, "CHROMIUM_ETC", str(host))
    args = isolation.chromium_etc_args("/run/ours")
    binds = [tuple(args[i + 1 : i + 3]) for i, arg in enumerate(args) if arg == "--ro-bind"]
    assert binds == [
        (f"{host}/master_preferences", f"{host}/master_preferences"),
        ("/run/ours", f"{host}/policies"),
    ]


def test_the_stock_install_writes_the_policies_after_its_packages(tmp_path: Path) -> None:
    """The install script itself, run in a bubblewrap root of its own (apt-get a stand-in that records its
    arguments): the policy file is written where the browser reads it, with the module's text."""
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is missing: run `bash scripts/setup.sh env` as root")
    etc, stub = tmp_path / "etc", tmp_path / "stub"
    (etc / "apt").mkdir(parents=True)
    (etc / "apt" / "sources.list").write_text("deb http://deb.debian.org/debian bookworm main\n")
    stub.mkdir()
    (stub / "apt-get").write_text('#!/bin/sh\necho "$@" >> /etc/apt-calls\n')
    (stub / "apt-get").chmod(0o755)
    go = "/run/cua-tui/run.go"
    argv = [
        "bwrap", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--bind", str(etc), "/etc", "--ro-bind", str(stub), "/stub",
        "--tmpfs", "/run", "--tmpfs", "/var", "--proc", "/proc", "--dev", "/dev", "--unshare-all",
        "--setenv", "PATH", "/stub:/usr/bin:/bin", "--",
        "/bin/sh", "-c", INSTALL + f'test -e {go} && echo go-made\n', "install",
        "/ca.pem", go, quiet.POLICY_PATH, quiet.policy_json(), "xvfb", "chromium",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["cua-tui: done", "go-made"]
    written = etc / quiet.POLICY_PATH.removeprefix("/etc/")
    assert written.read_text() == quiet.policy_json()
    assert written.stat().st_mode & 0o777 == 0o644
    calls = (etc / "apt-calls").read_text().splitlines()
    assert len(calls) == 2 and calls[0].endswith(" update"), calls
    assert calls[1].endswith(" install -y --no-install-recommends xvfb chromium"), calls
    assert (etc / "apt" / "sources.list").read_text().startswith("deb https://deb.debian.org/")
