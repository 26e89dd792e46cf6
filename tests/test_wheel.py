"""Only the product in the wheel (issue 36): the wheel built from this checkout, offline, as a release would
build it, holds the ``cua_tui`` package, every module of it and nothing else (no benchmark, scene or test
double); and its command line, with the checkout's other packages out of reach, lists the sandboxes of the
local CoreWeave service (the test double the tests keep in tests/fakes/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import cwsandbox
import pytest
from cwsandbox import AuthHeaders, SandboxDefaults

from cua_tui.desktops.cwsandbox import RUN_TAG_PREFIX, TAG
from tests.fakes.cwsandbox_local import LocalService

ROOT = Path(__file__).resolve().parents[1]
KEY = "cw-wheel-key-91d4"


def build_wheel(out: Path) -> Path:
    """``uv build --wheel`` (the set-up's uv, else one on PATH) with the environment's hatchling: no
    network, no isolated build environment to download; without uv, hatchling's own PEP 517 hook."""
    uv = ROOT / ".cache" / "uv" / "bin" / "uv"
    found = str(uv) if uv.exists() else shutil.which("uv")
    if found:
        command = [found, "build", "--wheel", "--offline", "--no-build-isolation", "--python", sys.executable]
        command += ["--out-dir", str(out), "--quiet", str(ROOT)]
    else:
        hook = "import sys; from hatchling.build import build_wheel; build_wheel(sys.argv[1])"
        command = [sys.executable, "-c", hook, str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = out.glob("cua_tui-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


def test_the_wheel_holds_the_package_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    modules = sorted(n for n in names if n.endswith(".py"))
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"cua_tui", wheel.name.split("-py3")[0] + ".dist-info"}, tops
    # every module of the checkout's package, no more and no fewer
    package = sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "cua_tui").rglob("*.py") if "__pycache__" not in p.parts
    )
    assert modules == package
    not_product = [n for n in modules if n.split("/")[1] in ("bench", "scenes.py") or "cwsandbox_local" in n]
    assert not not_product and "cua_tui/tui/app.py" in modules and "cua_tui/themes/" in "".join(names)
    lines = sum(zipfile.ZipFile(wheel).read(n).count(b"\n") for n in modules)
    print(f"{wheel.name}: {len(modules)} modules, {lines} lines")


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalService]:
    monkeypatch.setenv("GRPC_VERBOSITY", "ERROR")
    cwsandbox.disable_signal_handlers()
    with LocalService(tmp_path / "service") as svc:
        yield svc


# The wheel's modules first on the path; the checkout's bench and tests (which an editable install puts on
# the path too) made unimportable; then the command line, as its entry point calls it.
RUN_FROM_WHEEL = """
import sys
sys.path.insert(0, sys.argv[1])
sys.modules["bench"] = sys.modules["tests"] = None
from cua_tui.cli import main
try:
    main(sys.argv[2:])
finally:
    mine = [m.__file__ for n, m in list(sys.modules.items()) if n.split(".")[0] == "cua_tui"]
    sys.stderr.write("\\nFROM " + repr(sorted({f.startswith(sys.argv[1]) for f in mine if f})))
"""


def test_the_wheels_command_line_needs_no_test_double(wheel: Path, tmp_path: Path, service: LocalService) -> None:
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    defaults = SandboxDefaults(
        base_url=service.base_url, auth=AuthHeaders(headers={"Authorization": f"Bearer {KEY}"}, strategy="api_key")
    )
    leftover = cwsandbox.Sandbox.run(defaults=defaults, tags=[TAG, RUN_TAG_PREFIX + "wheel-check"])
    leftover.wait(timeout=30)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CWSANDBOX_", "CUA_TUI_"))},
        "CWSANDBOX_BASE_URL": service.base_url,
        "CWSANDBOX_API_KEY": KEY,
        "CUA_TUI_CONFIG": str(tmp_path / "no-settings.toml"),
        "CUA_TUI_RUNS_DIR": str(tmp_path / "runs"),
        "GRPC_VERBOSITY": "ERROR",
    }
    done = subprocess.run(
        [sys.executable, "-I", "-c", RUN_FROM_WHEEL, str(unpacked), "sandboxes", "--backend", "cwsandbox"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{leftover.sandbox_id}  " in done.stdout and "run wheel-check" in done.stdout, done.stdout
    # every cua_tui module it loaded came from the wheel, and the service heard it (with the key)
    assert done.stderr.rstrip().endswith("FROM [True]"), done.stderr
    assert service.service.count("ListSandboxes") == 1
    assert json.dumps(service.service.metadata[-1]).count(KEY) == 1
