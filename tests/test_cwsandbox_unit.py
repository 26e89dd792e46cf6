"""The cwsandbox backend's pure parts: the helper's reply format (untrusted input), the screenshot checks,
the helper zipapp (what it ships and imports), the settings (credentials never shown)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from cua_tui.core.actions import Action, Kind
from cua_tui.core.geometry import Size
from cua_tui.core.imaging import blank_frame
from cua_tui.core.ports import DesktopError
from cua_tui.desktops.cwsandbox import CWSandboxDesktop, SandboxSettings
from cua_tui.desktops.remote.replies import picture
from cua_tui.desktops.remote.wire import (
    ReplyError,
    action_from_wire,
    action_to_wire,
    encode_reply,
    parse_reply,
)
from cua_tui.desktops.remote.zipapp import helper_sha256, helper_zipapp
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab

SIZE = Size(64, 48)


def test_actions_travel_whole_typed_text_included() -> None:
    for action in (
        Action(Kind.TYPE, text="héllo\nwörld"),
        Action(Kind.DRAG, path=((1, 2), (3, 4)), hold=("ctrl",)),
        Action(Kind.ZOOM, region=(0, 0, 10, 10)),
        Action(Kind.CLICK, point=(5, 6), button="right"),
    ):
        assert action_from_wire(action_to_wire(action)) == action


def test_a_reply_round_trips_and_every_length_is_checked() -> None:
    frame = blank_frame(SIZE)
    data = encode_reply({"ok": True}, {"screen": (frame.png, 64, 48)})
    header, blobs = parse_reply(data, cap=1 << 20)
    assert header["ok"] is True and blobs["screen"] == (frame.png, 64, 48)
    with pytest.raises(ReplyError, match="cap"):
        parse_reply(data, cap=100)
    with pytest.raises(ReplyError, match="more bytes than it carries"):
        parse_reply(data[:-1], cap=1 << 20)
    with pytest.raises(ReplyError, match="bytes more"):
        parse_reply(data + b"x", cap=1 << 20)
    for bad in (b"", b"PNG", b"CUA1 99999999\n{}", b"CUA1 2\n[]", b"CUA1 3\n{x}", frame.png):
        with pytest.raises(ReplyError):
            parse_reply(bad, cap=1 << 20)
    lying = encode_reply({"ok": True}).replace(b'"blobs":[]', b'"blobs":[{"name":"screen","bytes":-1}]')
    with pytest.raises(ReplyError):
        parse_reply(lying.replace(lying.split(b"\n")[0], b"CUA1 %d" % len(lying.split(b"\n", 1)[1])), cap=1 << 20)


def desktop() -> CWSandboxDesktop:
    return CWSandboxDesktop(SIZE, Target(get_lab("form")), SandboxSettings(api_key="k"))


def test_the_target_travels_in_the_helper_spec_keys_it_always_had() -> None:
    """The helper in the sandbox reads "lab" (by name: it serves the lab inside), "url" and "allow_domains",
    each optional: a spec written before ``Target`` and the Docker backend's (its URL alone) read the same."""
    spec = Target(get_lab("form"), None, ("docs.example.org",)).spec()
    assert spec == {"lab": "form", "url": None, "allow_domains": ["docs.example.org"]}
    read = Target.from_spec(spec, get_lab)
    assert read.lab is not None and read.lab.name == "form" and read.allow_domains == ("docs.example.org",)
    old = {"socket": "/run/s", "screen": "1024x720", "lab": None, "url": "http://localhost:8000/"}
    assert Target.from_spec(old, get_lab) == Target(url="http://localhost:8000/")
    assert Target.from_spec({"url": "http://127.0.0.1:9/"}, get_lab) == Target(url="http://127.0.0.1:9/")
    with pytest.raises(ValueError, match=r"^the cwsandbox desktop needs --lab NAME or --url URL$"):
        CWSandboxDesktop(SIZE, Target(allow_domains=("docs.example.org",)), SandboxSettings(api_key="k"))


def test_screenshots_from_the_sandbox_are_checked_before_decoding() -> None:
    good = blank_frame(SIZE)
    assert picture({"screen": (good.png, 64, 48)}, SIZE).sha256 == good.sha256
    other = blank_frame(Size(32, 48))
    cases = {
        "header and PNG disagree": {"screen": (other.png, 64, 48)},
        "not the screen's size": {"screen": (other.png, 32, 48)},
        "not a PNG": {"screen": (b"GIF89a" + b"\0" * 40, 64, 48)},
        "missing": {},
    }
    for blobs in cases.values():
        with pytest.raises(DesktopError) as caught:
            picture(blobs, SIZE)
        assert caught.value.fatal


def test_settings_never_show_the_key() -> None:
    settings = SandboxSettings(base_url="http://127.0.0.1:1", api_key="sekrit-123")
    assert "sekrit-123" not in repr(settings) and "sekrit-123" not in str(settings.public())
    error = desktop()._error("x", RuntimeError("boom with k in it"))
    assert error.fatal and "\n" not in str(error)


def test_the_zipapp_is_reproducible_and_ships_only_the_desktop_code() -> None:
    data = helper_zipapp()
    names = zipfile.ZipFile(BytesIO(data)).namelist()
    assert "__main__.py" in names and "cua_tui/desktops/local.py" in names and "cua_tui/labs/form.py" in names
    assert not [n for n in names if "cwsandbox.py" in n or n.startswith(("cua_tui/tui", "cua_tui/agents"))]
    assert len(helper_sha256()) == 64


def test_the_helper_imports_only_what_the_zipapp_ships(tmp_path: Path) -> None:
    """Run in a fresh interpreter with the zipapp first on the path: every cua_tui module comes from it,
    and nothing beyond the standard library and Pillow, mss, python-xlib (and six, which it needs) is
    loaded: no vendor SDK."""
    pyz = tmp_path / "helper.pyz"
    pyz.write_bytes(helper_zipapp())
    check = f"""
import sys
sys.path.insert(0, {str(pyz)!r})
import cua_tui.desktops.remote.helper, cua_tui.desktops.local, cua_tui.labs, cua_tui.desktops.remote.call
ours = [m for m in sys.modules if m.startswith("cua_tui")]
assert all(sys.modules[m].__file__.startswith({str(pyz)!r}) for m in ours), ours
allowed = {{"cua_tui", "PIL", "mss", "Xlib", "six"}}
third = {{m.split(".")[0] for m in sys.modules}} - set(sys.stdlib_module_names) - allowed
assert not {{m for m in third if not m.startswith("_")}}, third
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


def test_a_steps_exec_loads_the_standard_library_alone(tmp_path: Path) -> None:
    """Each step is one exec of ``remote/call.py``: from the zipapp it imports no other module of ours (the
    packages on its way import nothing) and nothing beyond the standard library, so it starts fast."""
    pyz = tmp_path / "helper.pyz"
    pyz.write_bytes(helper_zipapp())
    check = f"""
import sys
sys.path.insert(0, {str(pyz)!r})
import cua_tui.desktops.remote.call
ours = sorted(m for m in sys.modules if m.startswith("cua_tui"))
assert ours == ["cua_tui", "cua_tui.desktops", "cua_tui.desktops.remote", "cua_tui.desktops.remote.call"], ours
third = {{m.split(".")[0] for m in sys.modules}} - set(sys.stdlib_module_names) - {{"cua_tui"}}
assert not {{m for m in third if not m.startswith("_")}}, third
print("ok")
"""
    done = subprocess.run([sys.executable, "-S", "-c", check], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
