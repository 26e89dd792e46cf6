"""Private screens in exports (issue 34, point 6): a screen seen only inside a takeover's private stretch is
left out of the HTML report, the film strip and the ATIF trajectory unless ``--include-private`` asks for it,
each export says how many it left out and that the first screen after hand-back may still show what was
typed; a screen also seen outside the stretch is not private.

A real supervisor run on the sim desktop: the reviewer takes over, types a one-time code in a private
stretch, erases it, and hands back. Which picture is which is worked out from a second sim desktop driven
the same way, not from the log, so the tests do not restate the rule they check."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import make_supervisor
from PIL import Image, ImageSequence, ImageStat
from runlogs import UNSIGNED, write_run

from cua_tui.cli import main
from cua_tui.core import events as ev
from cua_tui.core.actions import Action, Kind
from cua_tui.core.ports import Answer, DecisionRequest, Ruling
from cua_tui.core.private import HAND_BACK, private_screens
from cua_tui.desktops.sim import PHRASE, SimDesktop
from cua_tui.export import animation, atif, open_run
from cua_tui.export import html as html_export

CODE = "493817"  # the one-time code typed in the private stretch
FIELD = (250, 182)
VERIFY = (550, 182)
SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64


def sha_of(png: bytes) -> str:
    return hashlib.sha256(png).hexdigest()


def picture(*actions: Action) -> str:
    """The SHA-256 of the sim desktop's screen after ``actions`` (the sim draws the same screen alike)."""
    desktop = SimDesktop()
    frame = desktop.screenshot()
    for action in actions:
        frame = desktop.perform(action).frame
    return sha_of(frame.png)


FOCUSED = picture(Action(Kind.CLICK, point=FIELD))  # before, inside and after the stretch: not private
WITH_CODE = picture(Action(Kind.CLICK, point=FIELD), Action(Kind.TYPE, text=CODE))  # only inside it


class TakingOver:
    """At the first decision, takes the desktop (as ``T`` does), then feeds the reviewer's inputs."""

    def __init__(self, inputs: list[Action | bool]) -> None:
        self.inputs = inputs
        self.supervisor: Any = None
        self.asked = 0

    def decide(self, request: DecisionRequest, cancel: threading.Event) -> Ruling:
        self.asked += 1
        if self.asked == 1:
            assert self.supervisor.take_over() is None
            return Ruling(Answer.REJECT, "human (TUI)", human=True, takeover=True)
        return Ruling(Answer.APPROVE, "human (TUI)", human=True)

    def feed(self) -> None:
        for item in self.inputs:
            if isinstance(item, bool):
                self.supervisor.takeover_private(item)
            else:
                assert self.supervisor.takeover_input(item) is None
        self.supervisor.hand_back()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    inputs: list[Action | bool] = [
        True,
        Action(Kind.CLICK, point=FIELD),
        Action(Kind.TYPE, text=CODE),
        Action(Kind.CLICK, point=FIELD),
        Action(Kind.KEYPRESS, chord="BackSpace", repeat=len(CODE)),
        False,
        Action(Kind.TYPE, text=PHRASE),
        Action(Kind.CLICK, point=VERIFY),
    ]
    approver = TakingOver(inputs)
    turns: list[dict[str, Any]] = [
        {"actions": [{"type": "click", "button": "left", "x": FIELD[0], "y": FIELD[1]}, {"type": "type", "text": "x"}]},
        {"actions": [{"type": "wait"}]},
    ]
    sup, _events, _agent = make_supervisor(tmp_path_factory.mktemp("private"), turns, approver=approver, operator="o")
    approver.supervisor = sup

    def on_event(stamped: ev.Stamped) -> None:
        if isinstance(stamped.event, ev.TakeoverStarted):
            threading.Thread(target=approver.feed, daemon=True).start()

    sup.subscribe(on_event)
    result = sup.run()
    assert result.status == "passed", result.reason
    path: Path = sup.rundir.path
    return path


def invoke(args: list[object], home: Path) -> Result:
    env = {"CUA_TUI_CONFIG": str(home / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(home / "runs")}
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def test_the_run_has_a_screen_seen_only_in_the_stretch_and_one_seen_on_both_sides(run_dir: Path) -> None:
    stored = {p.stem for p in (run_dir / "screens").iterdir()}
    assert {WITH_CODE, FOCUSED} <= stored
    with open_run(run_dir) as run:
        assert run.private == {WITH_CODE}
        # the hand-back screen is the model's: never private, and here it is the verified form
        (ended,) = run.events(ev.TakeoverEnded)
        assert ended.screen not in run.private


def screens_in_html(document: str) -> set[str]:
    return {sha_of(base64.b64decode(data)) for data in _data_urls(document)}


def _data_urls(document: str) -> list[str]:
    marker = 'url("data:image/png;base64,'
    parts = document.split(marker)[1:]
    return [part.split('")', 1)[0] for part in parts]


def test_html_leaves_the_private_screen_out_and_says_so(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    result = invoke(["export", run_dir, "--html", out], tmp_path)
    assert result.exit_code == 0, result.output
    document = out.read_text(encoding="utf-8")
    embedded = screens_in_html(document)
    assert FOCUSED in embedded and WITH_CODE not in embedded
    assert f"screen {WITH_CODE[:12]}…: private: left out" in document
    assert "1 private screen(s) left out" in document and HAND_BACK in document
    assert "note: 1 private screen(s) left out" in result.output and HAND_BACK in result.output
    assert "refused" not in result.output  # left out is not refused

    result = invoke(["export", run_dir, "--html", out, "--include-private"], tmp_path)
    assert result.exit_code == 0, result.output
    document = out.read_text(encoding="utf-8")
    assert {WITH_CODE, FOCUSED} <= screens_in_html(document)
    assert f"screen {WITH_CODE[:12]} · private" in document  # marked where it is shown
    assert f"screen {FOCUSED[:12]} · private" not in document
    assert "1 private screen(s) included as asked" in document
    assert "note: 1 private screen(s) included as asked" in result.output


def atif_images(out: Path) -> set[str]:
    return {p.stem for p in atif.images_folder(out).iterdir()}


def screen_facts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``extra.cua_tui.screen`` of the trajectory's messages and results."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            screen = node.get("extra", {}).get("cua_tui", {}).get("screen") if "extra" in node else None
            if isinstance(screen, dict):
                found.append(screen)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data["steps"])
    return found


def image_paths(data: dict[str, Any]) -> set[str]:
    text = json.dumps(data["steps"])
    return {sha for sha in (WITH_CODE, FOCUSED) if f"{sha}.png" in text}


def test_atif_leaves_the_private_screen_out_and_says_so(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = invoke(["export", run_dir, "--atif", out], tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert FOCUSED in atif_images(out) and WITH_CODE not in atif_images(out)
    assert image_paths(data) == {FOCUSED}  # no image part names it either
    assert {"sha256": WITH_CODE, "private": True, "left_out": True} in screen_facts(data)
    assert "1 private screen(s) left out" in data["notes"] and HAND_BACK in data["notes"]
    facts = data["extra"]["cua_tui"]
    assert facts["private_screens"]["count"] == 1 and facts["private_screens"]["included"] is False
    assert facts["screens_refused"] == []
    assert "note: 1 private screen(s) left out" in result.output

    result = invoke(["export", run_dir, "--atif", out, "--include-private"], tmp_path)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert {WITH_CODE, FOCUSED} <= atif_images(out)
    assert image_paths(data) == {WITH_CODE, FOCUSED}
    marked = [s for s in screen_facts(data) if s["sha256"] == WITH_CODE]
    assert marked and all(s == {"sha256": WITH_CODE, "private": True} for s in marked)
    assert all("private" not in s for s in screen_facts(data) if s["sha256"] == FOCUSED)
    assert data["extra"]["cua_tui"]["private_screens"]["included"] is True
    assert "1 private screen(s) included as asked" in data["notes"]


def frames_of(data: bytes) -> list[Image.Image]:
    with Image.open(io.BytesIO(data)) as strip:
        return [frame.convert("RGB") for frame in ImageSequence.Iterator(strip)]


def bright(frame: Image.Image) -> float:
    """The mean brightness of a frame's picture area (the sim's page is near white, a placeholder dark)."""
    grey = frame.crop((0, 40, frame.width, frame.height - 40)).convert("L")
    return float(ImageStat.Stat(grey).mean[0])


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_the_film_strip_shows_a_placeholder_for_the_private_screen(run_dir: Path, tmp_path: Path, fmt: str) -> None:
    with open_run(run_dir) as run:
        shots = animation._shots(run)
        private_at = [i for i, shot in enumerate(shots) if shot.sha == WITH_CODE]
        assert private_at  # the strip has frames of it
        left_out = frames_of(animation.render(run, fmt))
        run.include_private = True
        included = frames_of(animation.render(run, fmt))
    assert len(left_out) == len(included) == len(shots)
    for i, (out, kept) in enumerate(zip(left_out, included, strict=True)):
        if i in private_at:
            assert bright(out) < 100 < bright(kept), i  # a dark placeholder; the picture when asked
            band = kept.crop((kept.width - 8, 0, kept.width, 8)).convert("RGB")
            red, green, _blue = ImageStat.Stat(band).mean
            assert red > 180 > 80 > green  # the red PRIVATE band at the top
        else:
            assert bright(out) > 150 and abs(bright(out) - bright(kept)) < 1, i
    strip = tmp_path / f"run.{fmt}"
    result = invoke(["export", run_dir, f"--{fmt}", strip], tmp_path)
    assert result.exit_code == 0, result.output
    assert "note: 1 private screen(s) left out" in result.output


def test_html_helpers_see_no_private_picture_without_being_asked(run_dir: Path) -> None:
    with open_run(run_dir) as run:
        screen = run.screen(WITH_CODE)
        assert screen.png is None and screen.private and screen.refused == "private: left out"
        assert run.refused() == []
        assert WITH_CODE not in screens_in_html(html_export.render(run))
        run.include_private = True
        screen = run.screen(WITH_CODE)
        assert screen.png is not None and sha_of(screen.png) == WITH_CODE and screen.private
        assert not run.screen(FOCUSED).private


# --------------------------------------------------------------------------------------------------
# The rule itself, and forged logs
# --------------------------------------------------------------------------------------------------
def shot(sha: str) -> ev.ScreenCaptured:
    return ev.ScreenCaptured(sha, 4, 4, 10, 1, 0)


def test_a_screen_is_private_only_when_every_reference_is_inside_a_stretch() -> None:
    events: list[ev.Event] = [
        shot(SHA_A),
        ev.TakeoverPrivate(1, True),
        shot(SHA_A),  # seen before the stretch too: not private
        shot(SHA_B),
        ev.TakeoverPrivate(1, False),
        shot(SHA_C),
    ]
    assert private_screens(events) == {SHA_B}
    # named by a decision outside the stretch: not private
    assert private_screens([*events, ev.DecisionMade(2, 0, Answer.APPROVE, "human", screen=SHA_B)]) == frozenset()
    # the hand-back's screen counts as a reference too
    assert private_screens([*events, ev.TakeoverEnded(1, 2, "told", SHA_B)]) == frozenset()
    # a stretch that never ends (a kill, a cut log) keeps everything after it private
    assert private_screens([ev.TakeoverPrivate(1, True), shot(SHA_A), shot(SHA_C)]) == {SHA_A, SHA_C}
    # inside a stretch, a decision's screen is a private reference like any
    inside = [ev.TakeoverPrivate(1, True), ev.DecisionMade(1, 0, Answer.APPROVE, "h", screen=SHA_A)]
    assert private_screens(inside) == {SHA_A}


def test_in_doubt_a_stretch_is_private() -> None:
    # anything but an explicit end starts (or keeps) a stretch
    forged = ev.TakeoverPrivate(1, "no")  # type: ignore[arg-type]
    assert private_screens([forged, shot(SHA_A)]) == {SHA_A}
    # a takeover_private record this version cannot read, or a line that cannot be read at all
    for message in ("takeover_private record whose private is not what it should be", "line 7: unreadable (x)"):
        assert private_screens([ev.Note(message), shot(SHA_A)]) == {SHA_A}
        assert private_screens([ev.Note(message), ev.TakeoverPrivate(1, False), shot(SHA_A)]) == frozenset()
    # other notes change nothing
    assert private_screens([ev.Note("run stopped: killed"), shot(SHA_A)]) == frozenset()
    # names of the wrong type are no references
    odd = [ev.TakeoverPrivate(1, True), ev.ScreenCaptured(["x"], 4, 4, 1, 1, 0)]  # type: ignore[arg-type]
    assert private_screens(odd) == frozenset()


def forged_run(tmp_path: Path, private: Any, *, raw: bytes | None = None) -> Path:
    """A sealed run whose takeover_private record holds ``private``; its one screen is named only after it."""
    png = SimDesktop().screenshot().png
    sha = sha_of(png)
    records: list[tuple[str, dict[str, Any]]] = [
        ("takeover", {"turn": 1, "by": "human (takeover)", "operator": "o", "where": "w"}),
        ("takeover_private", {"turn": 1, "private": private} if private is not None else {"turn": 1}),
        ("proposal", {"turn": 1, "index": 0, "call_id": "t", "action": {"kind": "wait"}, "by": "human (takeover)"}),
        ("outcome", {"turn": 1, "index": 0, "call_id": "t", "status": "executed", "message": "OK"}),
        ("screen", {"sha256": sha, "width": 1024, "height": 720, "bytes": len(png), "turn": 1, "step": 1, "index": 0}),
        ("takeover_ended", {"turn": 1, "actions": 1, "told": "told"}),
    ]
    run = write_run(tmp_path / "run", None, records, signed=UNSIGNED)
    (run / "screens").mkdir(exist_ok=True)
    (run / "screens" / f"{sha}.png").write_bytes(png)
    return run


@pytest.mark.parametrize("private", [None, "yes", 1, [True], {"private": False}])
def test_a_forged_takeover_private_record_keeps_the_screen_out_and_crashes_nothing(
    tmp_path: Path, private: Any
) -> None:
    run_dir = forged_run(tmp_path, private)
    for args in (["--html", tmp_path / "r.html"], ["--atif", tmp_path / "r.json"], ["--gif", tmp_path / "r.gif"]):
        result = invoke(["export", run_dir, *args], tmp_path)
        assert result.exit_code == 0, result.output
        assert "note: 1 private screen(s) left out" in result.output
    assert not any(atif.images_folder(tmp_path / "r.json").iterdir())
    assert 'url("data:image/png' not in (tmp_path / "r.html").read_text(encoding="utf-8")
