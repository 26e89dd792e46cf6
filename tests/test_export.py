"""cua-tui export: the HTML report, the film strip and the replayable script, from real sim runs; and
``run --texts``, which fills an exported script's typed-text placeholders."""

from __future__ import annotations

import base64
import hashlib
import html as htmllib
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from export_runs import (
    CLICK_FIELD,
    HOSTILE_FINAL,
    HOSTILE_KIND,
    HOSTILE_SAYS,
    HOSTILE_TASK,
    TYPED,
    audit_records,
    sim_run,
)
from PIL import Image
from runlogs import UNSIGNED, write_run

from cua_tui.cli import main
from cua_tui.core import events as ev
from cua_tui.core.runlog import RunLog
from cua_tui.core.safeio import RunFolder
from cua_tui.export import animation, open_run
from cua_tui.export import html as html_export
from cua_tui.export import script as script_export


def invoke(args: list[object], home: Path) -> Result:
    env = {"CUA_TUI_CONFIG": str(home / "no-config.toml"), "CUA_TUI_RUNS_DIR": str(home / "runs")}
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("export")


@pytest.fixture(scope="module")
def run_dir(home: Path) -> Path:
    return sim_run(home / "runs")


@pytest.fixture(scope="module")
def document(run_dir: Path, home: Path) -> str:
    out = home / "run.html"
    result = invoke(["export", run_dir, "--html", out], home)
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------------
def test_html_says_what_the_run_did(document: str, run_dir: Path) -> None:
    records = audit_records(run_dir)
    head = hashlib.sha256((run_dir / "audit.jsonl").read_bytes().splitlines()[-1]).hexdigest()
    assert "record intact" in document and head in document  # the record's state and the chain head
    assert document.index(head) < document.index("<h2>Timeline")  # near the top
    steps = [r for r in records if r["kind"] == "proposal"]
    for number in range(1, len(steps) + 1):
        assert f'id="step-{number}"' in document
    assert "headless rule: approve" in document  # who decided the typing
    assert "typing counts as transmission" in document and "actions.type" in document  # verdict and rule
    assert "Refused by sandbox policy. Stop and report." in document  # the exact message the model heard
    assert "Not executed: an earlier action in this turn did not run." in document
    duration = next(r["duration_ms"] for r in records if r["kind"] == "outcome" and r["status"] == "executed")
    assert f"{duration:.1f} ms" in document


def test_typed_text_appears_only_as_its_length_and_hash(document: str) -> None:
    assert TYPED not in document
    assert hashlib.sha256(TYPED.encode()).hexdigest() in document
    assert f"{len(TYPED)} characters, never stored" in document


def test_every_untrusted_string_is_escaped_and_made_visible(document: str) -> None:
    body = document.split("</style>", 1)[1]
    assert "<script" not in document.lower() and "<img" not in body and "<b>" not in body
    assert "</style><style>" not in body
    assert htmllib.escape('<script>alert("task")</script>') in body  # shown, not run
    assert htmllib.escape("<img src=x onerror=alert(1)>") in body
    assert htmllib.escape(HOSTILE_FINAL.split(" ")[0]) in body
    assert "\x1b" not in document and "\u202e" not in document  # escapes and bidi overrides made visible
    # each stand-in marked, drawn reversed: a real U+202E is not the six characters \u202e
    assert '<mark class="esc">␛</mark>[31mred' in body and '<mark class="esc">\\u202e</mark>' in body
    assert htmllib.escape(HOSTILE_KIND) in body  # the malformed action's kind, quoted by its refusal


def test_each_screen_is_embedded_once_and_the_style_is_allowed_by_hash(document: str, run_dir: Path) -> None:
    screens = sorted(p.name[:-4] for p in (run_dir / "screens").iterdir())
    style = document.split("<style>", 1)[1].split("</style>", 1)[0]
    for sha in screens:
        png = (run_dir / "screens" / f"{sha}.png").read_bytes()
        assert document.count(base64.b64encode(png).decode()) == 1
    assert document.count("data:image/png;base64,") == len(screens)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', document)
    assert csp is not None
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert csp.group(1).startswith("default-src 'none'; img-src data:; style-src 'sha256-" + digest + "'")
    assert "unsafe-inline" not in document and " style=" not in document and "<script" not in document


def test_targets_are_drawn_over_the_frames(document: str) -> None:
    assert f'<circle class="mk mk-allow" cx="{CLICK_FIELD[0]}" cy="{CLICK_FIELD[1]}"' in document  # a click
    assert '<polyline class="mk mk-allow" points="10,10 100,200"/>' in document  # the drag's path
    assert '<line class="mk mk-allow" x1="300" y1="300"' in document  # the scroll's direction
    assert "mk-block" in document  # the blocked key press's step is drawn in red


def test_egress_refusals_and_a_tampered_verdict_are_shown(tmp_path: Path) -> None:
    records = [
        ("model_turn", {"turn": 1, "text": "", "calls": 1, "actions": 1}),
        ("proposal", {"turn": 1, "index": 0, "call_id": "c", "action": {"kind": "wait"}, "summary": "wait"}),
        ("egress", {"host": "evil.<i>example</i>", "port": 443, "method": "CONNECT", "allowed": False, "reason": "x"}),
        ("outcome", {"turn": 1, "index": 0, "call_id": "c", "status": "executed", "message": "OK"}),
    ]
    folder = write_run(tmp_path / "r", None, records, signed=UNSIGNED)
    with open_run(folder) as run:
        page = html_export.render(run)
    assert "CONNECT evil.&lt;i&gt;example&lt;/i&gt;:443" in page and "egress" in page
    lines = (folder / "audit.jsonl").read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"calls":1', b'"calls":2')  # the model_turn record, after run_started
    (folder / "audit.jsonl").write_bytes(b"\n".join(lines))
    with open_run(folder) as run:
        assert run.tampered
        page = html_export.render(run)
    assert '<section class="verdict claim"' in page and "<strong>record TAMPERED</strong>: line 2: edited" in page
    # exported up to its first bad line: no end is shown, and nothing vouched for
    assert '<strong class="tone-claim">no end before the bad line</strong>' in page


# --------------------------------------------------------------------------------------------------
# The verdict first (issue 35, point 2): the status, then the record, then who checked it where
# --------------------------------------------------------------------------------------------------
def body(page: str) -> str:
    return page.split("</style>", 1)[1]


def verdict_box(page: str) -> str:
    return page.split('<section class="verdict', 1)[1].split("</section>", 1)[0]


def test_the_report_leads_with_the_status_then_the_record_then_who_checked_it(document: str) -> None:
    box = verdict_box(document)
    assert document.index('<section class="verdict') < document.index("<h2>Run</h2>")  # before anything else
    status, record, checked = box.index('class="status"'), box.index('class="record'), box.index('class="checked"')
    assert status < record < checked
    # a passed run on an intact, sealed record: the one green box
    assert box.startswith(' good" id="verdict"><p class="status"><strong class="tone-good">passed</strong> · ')
    assert re.search(r"<strong>record intact</strong> · \d+ events, sealed, unsigned, head [0-9a-f]{16}…</p>", box)
    assert re.search(r'<p class="checked">checked by sim form server in the controller, as [^<]+: passed · ', box)


def damaged(run_dir: Path, tmp_path: Path, how: str) -> Path:
    """A copy of the passed sim run: its log edited, or its seal (result.json) gone."""
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    if how == "tampered":
        log = copy / "audit.jsonl"
        log.write_bytes(log.read_bytes().replace(b'"turn":1', b'"turn":9', 1))
    else:
        (copy / "result.json").unlink()
    return copy


@pytest.mark.parametrize(("how", "record"), [("tampered", "record TAMPERED"), ("unsealed", "record unsealed")])
def test_a_passed_run_whose_record_does_not_vouch_for_it_is_a_claim_never_green(
    run_dir: Path, tmp_path: Path, how: str, record: str
) -> None:
    with open_run(damaged(run_dir, tmp_path, how)) as run:
        page = html_export.render(run)
    box = verdict_box(page)
    assert box.startswith(' claim" id="verdict"><p class="status"><strong class="tone-claim">claimed: passed</strong>')
    assert f"<strong>{record}</strong>" in box and box.index("claimed: passed") < box.index(record)
    assert "tone-good" not in body(page) and "verdict good" not in body(page)


def test_a_failed_run_never_opens_under_a_green_box(home: Path) -> None:
    turns = [{"actions": [{"type": "click", "button": "left", "x": 250, "y": 182}]}]  # never submits: failed
    failed = sim_run(home / "failed-runs", turns)
    with open_run(failed) as run:
        page = html_export.render(run)
    box = verdict_box(page)
    assert box.startswith(' bad" id="verdict"><p class="status"><strong class="tone-bad">failed</strong> · ')
    assert "<strong>record intact</strong>" in box and "checked by sim form server" in box and ": failed · " in box
    assert "tone-good" not in body(page)


# --------------------------------------------------------------------------------------------------
# Film strip
# --------------------------------------------------------------------------------------------------
def rgb(image: Image.Image, xy: tuple[int, int]) -> tuple[int, ...]:
    """The colour at ``xy`` of an RGB image."""
    pixel = image.getpixel(xy)
    assert isinstance(pixel, tuple)
    return pixel


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_film_strip_has_a_frame_per_step_with_markers(run_dir: Path, fmt: str) -> None:
    with open_run(run_dir) as run:
        data = animation.render(run, fmt)
        steps = len(run.timeline.steps)
    with Image.open(io.BytesIO(data)) as image:
        # the initial screen, then one per step (n_frames: only multi-frame images have it)
        assert getattr(image, "n_frames", 1) == steps + 1
        assert image.width <= animation.MAX_WIDTH
        image.seek(1)  # step 1: the click on the field, marked in magenta
        frame = image.convert("RGB")
        scale = image.width / 1024
        x, y = round(CLICK_FIELD[0] * scale), round(CLICK_FIELD[1] * scale)
        ring = [rgb(frame, (x + dx, y)) for dx in range(-16, 17)]
    assert any(r > 150 and g < 90 and b > 150 for r, g, b in ring), ring


def test_film_strip_is_capped(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert animation.sample(1000, 100)[:2] == [0, 10] and animation.sample(1000, 100)[-1] == 999
    assert len(animation.sample(1000, 100)) == 100 and animation.sample(5, 100) == [0, 1, 2, 3, 4]
    monkeypatch.setattr(animation, "MAX_FRAMES", 3)
    with open_run(run_dir) as run:
        data = animation.render(run, "gif")
    with Image.open(io.BytesIO(data)) as image:
        assert getattr(image, "n_frames", 1) == 3
    monkeypatch.setattr(animation, "MAX_BYTES", 100)
    with open_run(run_dir) as run, pytest.raises(animation.AnimationError, match="stays over"):
        animation.render(run, "gif")


# --------------------------------------------------------------------------------------------------
# Script, and run --texts
# --------------------------------------------------------------------------------------------------
def proposals(path: Path) -> list[tuple[int, int, object, str]]:
    with RunFolder.open(path) as folder, RunLog(folder) as log:
        return [
            (e.turn, e.index, e.action, e.error[:20])
            for e in (s.event for s in log)
            if isinstance(e, ev.ActionProposed)
        ]


def test_an_exported_script_replays_the_run_with_its_texts(run_dir: Path, home: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    result = invoke(["export", run_dir, "--script", out], home)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert TYPED not in out.read_text()
    sha = hashlib.sha256(TYPED.encode()).hexdigest()
    assert {"type": "type", "text_sha256": sha, "text_len": len(TYPED)} in data["turns"][0]["actions"]
    assert data["turns"][0]["text"] == HOSTILE_SAYS and data["task"] == HOSTILE_TASK
    assert "not_replayable" in out.read_text() and "warning:" in result.output  # the malformed action
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps({sha: TYPED}))
    runs = tmp_path / "again"
    args = ["run", "--backend", "sim", "--agent", f"script:{out}", "--texts", texts, "--runs-dir", runs]
    result = invoke([*args, "--headless", "--on-confirm", "approve"], home)
    assert result.exit_code == 0, result.output  # passed: the sim form server recorded the typed phrase
    (again,) = list(runs.iterdir())
    original, replayed = proposals(run_dir), proposals(again)
    assert [p[:3] for p in replayed if not p[3]] == [p[:3] for p in original if not p[3]]  # the same actions
    assert [p[:2] for p in replayed if p[3]] == [p[:2] for p in original if p[3]]  # refused where it was
    outcomes = [(r["turn"], r["index"], r["status"]) for r in audit_records(again) if r["kind"] == "outcome"]
    assert outcomes == [(r["turn"], r["index"], r["status"]) for r in audit_records(run_dir) if r["kind"] == "outcome"]


def test_run_refuses_a_placeholder_without_its_text_before_anything_runs(
    run_dir: Path, home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "replay.json"
    assert invoke(["export", run_dir, "--script", out], home).exit_code == 0
    runs = tmp_path / "runs"
    base = ["run", "--backend", "sim", "--agent", f"script:{out}", "--runs-dir", runs, "--headless"]
    result = invoke(base, home)
    assert result.exit_code == 2 and "types a text that is not stored" in result.output
    assert "--texts FILE" in result.output
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    result = invoke([*base, "--texts", empty], home)
    assert result.exit_code == 2 and "not in the --texts file" in result.output
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({hashlib.sha256(TYPED.encode()).hexdigest(): "something else"}))
    result = invoke([*base, "--texts", wrong], home)
    assert result.exit_code == 2 and "does not have that SHA-256" in result.output
    assert not runs.exists()  # refused before the run directory was even created
    result = invoke(["run", "--backend", "sim", "--texts", empty, "--runs-dir", runs, "--headless"], home)
    assert result.exit_code == 2 and "only for a script agent" in result.output


def test_kinds_the_openai_format_lacks_are_placeholders_the_rerun_refuses() -> None:
    assert script_export.to_openai({"kind": "triple_click", "x": 1, "y": 2}) == (
        "a triple_click action (not in the OpenAI computer format)"
    )
    assert isinstance(script_export.to_openai({"kind": "keypress", "keys": "ctrl+a", "repeat": 3}), str)
    assert script_export.to_openai({"kind": "keypress", "keys": "ctrl++"}) == {
        "type": "keypress",
        "keys": ["ctrl", "+"],
    }
    assert script_export.to_openai({"kind": "click", "x": 1, "y": 2, "button": "middle", "hold": ["shift"]}) == {
        "type": "click",
        "button": "wheel",
        "x": 1,
        "y": 2,
        "keys": ["shift"],
    }
    scroll = script_export.to_openai({"kind": "scroll", "x": 1, "y": 2, "scroll_x": -2, "scroll_y": 0})
    assert isinstance(scroll, dict) and scroll["scroll_x"] == -200


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------
def test_export_by_run_id_and_its_usage_errors(run_dir: Path, home: Path, tmp_path: Path) -> None:
    out = tmp_path / "by-id.html"
    result = invoke(["export", run_dir.name[:15], "--html", out], home)
    assert result.exit_code == 0 and out.exists(), result.output
    assert invoke(["export", run_dir], home).exit_code == 2  # nothing asked for
    inside = invoke(["export", run_dir, "--html", run_dir / "x.html"], home)
    assert inside.exit_code == 2 and "inside the run directory" in inside.output
    assert not (run_dir / "x.html").exists()
    missing = invoke(["export", tmp_path / "nope", "--html", out], home)
    assert missing.exit_code == 2 and "Traceback" not in missing.output


def test_a_tampered_run_is_still_exported_with_exit_1(run_dir: Path, home: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    audit = copy / "audit.jsonl"
    audit.write_bytes(audit.read_bytes().replace(b'"message":"OK"', b'"message":"OK!"', 1))
    out = tmp_path / "t.html"
    result = invoke(["export", copy, "--html", out, "--script", tmp_path / "t.json"], home)
    assert result.exit_code == 1 and "TAMPERED" in result.output
    page = out.read_text()
    assert page.index("TAMPERED") < page.index("<h2>Run")
    assert (tmp_path / "t.json").exists()
