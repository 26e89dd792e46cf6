"""Typed text sealed for its trip into a remote sandbox (cua_tui/desktops/remote/sealed.py): it opens only under
the run's key and unchanged; the helper opens it; a command line never carries it."""

from __future__ import annotations

import base64
import json

import pytest

from cua_tui.core.actions import Action, Kind
from cua_tui.core.geometry import Size
from cua_tui.desktops.cwsandbox import CWSandboxDesktop, SandboxSettings
from cua_tui.desktops.remote.call import _with_key
from cua_tui.desktops.remote.sealed import SealError, new_key, seal, unseal
from cua_tui.desktops.remote.wire import action_to_wire
from cua_tui.desktops.target import Target
from cua_tui.labs import get_lab


@pytest.mark.parametrize("text", ["", "hello", "héllo\nwörld\t✓", "\ud800 lone", "x" * 100_000])
def test_sealed_text_opens_under_its_key_only(text: str) -> None:
    key = new_key()
    sealed = seal(key, text)
    assert unseal(key, sealed) == text
    if text.isascii() and len(text) > 4:
        assert text not in json.dumps(sealed)
    with pytest.raises(SealError):
        unseal(new_key(), sealed)


def test_a_changed_or_malformed_seal_does_not_open() -> None:
    key = new_key()
    sealed = seal(key, "transfer 100 to alice")
    data = bytearray(base64.b64decode(sealed["data"]))
    data[0] ^= 1
    flipped = {**sealed, "data": base64.b64encode(bytes(data)).decode()}
    for bad in (flipped, {**sealed, "nonce": "AAAA"}, {**sealed, "tag": "!!"}, {"data": "x"}, None, "text"):
        with pytest.raises(SealError):
            unseal(key, bad)


def test_two_seals_of_the_same_text_differ() -> None:
    key = new_key()
    assert seal(key, "same")["data"] != seal(key, "same")["data"]  # a fresh nonce each time


def test_a_step_request_carries_the_text_sealed() -> None:
    desktop = CWSandboxDesktop(Size(64, 48), Target(get_lab("form")), SandboxSettings(api_key="k"))
    request = {"op": "perform", "action": action_to_wire(Action(Kind.TYPE, text="correct horse"))}
    wire = desktop._sealed(request)
    assert "correct horse" not in json.dumps(wire)
    assert wire["action"]["text"] == "" and unseal(desktop._text_key, wire["action"]["sealed_text"]) == "correct horse"
    click = {"op": "perform", "action": action_to_wire(Action(Kind.CLICK, point=(1, 2)))}
    assert desktop._sealed(click) == click  # nothing to seal


def test_the_ready_request_takes_its_key_from_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    key = new_key().hex()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{key}\nmore\n".encode())))
    out = json.loads(_with_key(json.dumps({"op": "ready", "key": "stdin"}).encode()))
    assert out == {"op": "ready", "key": key}
    assert _with_key(b'{"op": "screenshot"}') == b'{"op": "screenshot"}'  # no key asked: untouched
