"""The verdict first, one meaning per word (issue 35, point 2): replay's banner leads with how the run ended,
then its record; a status the record does not (yet) vouch for reads ``claimed: ...`` in the theme's warning
colour, never a green ``passed``; and the three words (status, record, checked in) are the same in replay,
the status bar, the audit pane, `runs`, the HTML report, `run`'s end line and the manual.

Runs are real sim runs (test_replay's turns fill the form: it passes), damaged the way an attacker or a crash would; the
background verifier is the real ``chain_state``, held by an Event (test_replay_background's HeldVerifier)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pilot_helpers import plain, replay_screen, until
from rich.text import Text
from test_replay import banner, recorded, shown
from test_replay_background import HeldVerifier
from textual.widgets import Static
from verdict_runs import SANDBOX
from verdict_runs import recorded as by_hand

from cua_tui.cli import main as cli_main
from cua_tui.cli.session import end_line
from cua_tui.core import describe, ending
from cua_tui.core import events as ev
from cua_tui.core.runlog import RunReader
from cua_tui.export import atif, open_run
from cua_tui.export import html as html_export
from cua_tui.tui.app import CuaApp
from cua_tui.tui.audit_pane import AuditPane
from cua_tui.tui.replay import chain_state, replay_app
from cua_tui.tui.status import StatusBar

pytestmark = pytest.mark.timeout(90)

SIZE = (200, 48)  # the status bar holds the status and where it was checked
DOCS = Path(__file__).parents[2] / "docs"


def headline(app: CuaApp) -> tuple[str, str]:
    """The banner's first part (the status) and its style."""
    content = app.query_one("#banner", Static).content
    assert isinstance(content, Text)
    first = content.spans[0]
    return content.plain[first.start : first.end], str(first.style)


def colour(app: CuaApp, name: str) -> str:
    return f"bold reverse {app.get_css_variables()[name]}"


def status_field(app: CuaApp) -> Text:
    """The status bar's field that says how the run ended."""
    (found,) = [t for _rank, t in app.query_one(StatusBar)._fields() if t.plain.startswith(("status: ", "claimed: "))]
    return found


def copy_of(path: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name / path.name
    shutil.copytree(path, target)
    return target


@pytest.fixture(scope="module")
def passed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(tmp_path_factory.mktemp("passed"))


async def test_while_the_record_is_being_verified_the_status_is_a_claim_then_a_green_passed(
    passed: Path, tmp_path: Path
) -> None:
    path = copy_of(passed, tmp_path, "held")
    verifier = HeldVerifier(path)
    app = replay_app(RunReader(path), verifier)
    main = replay_screen(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await shown(pilot, app)
            await until(pilot, verifier.asked.is_set, "the verifier started in the background")
            assert headline(app) == (" claimed: passed ", colour(app, "warning"))
            assert banner(app).startswith(" claimed: passed  · record being verified…")
            verifier.released.set()
            await until(pilot, lambda: "record intact" in banner(app), "the verdict in the banner")
            assert headline(app) == (" passed ", colour(app, "success"))  # now, and only now, green
            assert banner(app).startswith(" passed  · record intact · sealed (not signed) · head ")
            assert banner(app).index(" passed ") < banner(app).index("record") < banner(app).index("checked by")
            assert main.chain.state == ending.INTACT
    finally:
        verifier.released.set()


async def test_the_status_bar_of_a_replay_claims_what_the_record_does_not_vouch_for(tmp_path: Path) -> None:
    """A run without steps shows its end in the status bar (no step to stop at): a claim in the warning
    colour while its record is being verified, the status in the success colour once it is intact."""
    path = by_hand(tmp_path / "runs", "20261201-000000-aaaaaa", {**SANDBOX, "where": "controller", "user": "alice"})
    verifier = HeldVerifier(path)
    app = replay_app(RunReader(path), verifier)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, verifier.asked.is_set, "the verifier started in the background")
            await until(pilot, lambda: replay_screen(app).index.done, "the whole log read")
            await pilot.pause()
            assert status_field(app).plain == "claimed: passed"
            assert str(status_field(app).style) == colour(app, "warning")
            verifier.released.set()
            await until(pilot, lambda: "record intact" in banner(app), "the verdict in the banner")
            assert status_field(app).plain == "status: passed"
            assert str(status_field(app).style) == colour(app, "success")
            assert "checked in the controller, as alice" in plain(app.query_one(StatusBar))
    finally:
        verifier.released.set()
    tampered_path = tampered(path, line=1)
    app = replay_app(RunReader(tampered_path), chain_state(tampered_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: replay_screen(app).index.done, "the whole log read")
        await pilot.pause()
        assert banner(app).startswith(" claimed: passed  · record TAMPERED: line 2: edited")
        assert status_field(app).plain == "claimed: passed"  # the end read past the bad line: a claim
        assert str(status_field(app).style) == colour(app, "warning")


def tampered(path: Path, line: int = 3) -> Path:
    log = path / "audit.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[line] = lines[line].replace(b'"ts":', b'"ts":1', 1)  # an edit: the next line's prev no longer matches
    log.write_bytes(b"\n".join(lines))
    return path


def unsealed(path: Path) -> Path:
    (path / "result.json").unlink()  # interrupted before its seal was written (or the seal deleted)
    return path


@pytest.mark.parametrize(("damage", "record"), [(tampered, "record TAMPERED: line 4: "), (unsealed, "record unsealed")])
async def test_a_passed_run_whose_record_does_not_vouch_for_it_reads_as_a_claim(
    passed: Path, tmp_path: Path, damage: Callable[[Path], Path], record: str
) -> None:
    path = damage(copy_of(passed, tmp_path, "damaged"))
    app = replay_app(RunReader(path), chain_state(path))
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        await until(pilot, lambda: replay_screen(app).index.done, "the whole log read")
        await pilot.pause()
        assert headline(app) == (" claimed: passed ", colour(app, "warning"))
        assert banner(app).startswith(f" claimed: passed  · {record}")
        content = app.query_one("#banner", Static).content
        assert isinstance(content, Text)
        assert not any(colour(app, "success") == str(span.style) for span in content.spans)  # nothing green


async def test_a_failed_run_leads_with_failed_in_the_error_colour(tmp_path: Path) -> None:
    turns = [{"text": "looking", "actions": [{"type": "wait"}]}]  # never fills the form
    path = recorded(tmp_path, turns, status="failed")
    app = replay_app(RunReader(path), chain_state(path))
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        await until(pilot, lambda: replay_screen(app).index.done, "the whole log read")
        await pilot.pause()
        assert headline(app) == (" failed ", colour(app, "error"))
        assert banner(app).startswith(" failed  · record intact")


async def test_each_meaning_has_one_word_in_every_view(passed: Path, tmp_path: Path) -> None:
    """status (how it ended), record (the audit log as verify finds it), checked in (where the verifier ran):
    replay's banner, its status bar and audit pane, `runs`, the HTML report, the headless line and `run`'s
    end line all say them so, and none says "verified by" (the word that meant all three)."""
    runs = tmp_path / "runs"
    path = copy_of(passed, runs.parent, "runs")
    with open_run(path) as run:
        (done,) = run.events(ev.VerificationDone)
        page = html_export.render(run)
        (ended,) = run.events(ev.RunEnded)
        notes = atif.build(run, "x.images").data["notes"]
    assert " Record intact: " in notes  # the ATIF trajectory's notes
    checked = ending.checked_by(done)
    assert re.fullmatch(r"checked by sim form server in the controller, as \S+", checked)
    place = ending.checked_in(done.where, done.user, short=True)
    # the HTML report
    assert '<strong class="tone-good">passed</strong>' in page and "<strong>record intact</strong>" in page
    assert f"{checked}: passed" in page
    # the headless line and `run`'s end line
    assert describe.event_line(done) == f"{checked}: passed · {done.detail}"
    result = type("R", (), {"status": ended.status, "reason": ended.reason, "verification": done})()
    assert end_line(result) == f"status: passed · {ended.reason} · {checked}"
    # `runs`
    listing = CliRunner().invoke(cli_main, ["runs", "--runs-dir", str(path.parent)])
    header, row = listing.stdout.splitlines()
    assert header.startswith("STATUS  RECORD  RUN ") and "  CHECKED IN  " in header
    assert row.startswith("passed  intact  ") and f"  {place}  " in row
    # replay: the banner, the status bar, the audit pane
    app = replay_app(RunReader(path), chain_state(path))
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app)
        await pilot.press("end")
        await shown(pilot, app)
        assert banner(app).startswith(" passed  · record intact · ") and checked in banner(app)
        pane = plain(app.query_one(AuditPane).query_one("#chain", Static))
        assert pane.startswith("record intact · ")
        shown_everywhere = [page, listing.stdout, banner(app), pane, end_line(result), notes]
    for text in shown_everywhere:
        assert "verified by" not in text and "VERIFIED" not in text and "VERIFIER" not in text, text
    # and the manual
    for doc in DOCS.rglob("*.md"):
        words = doc.read_text(encoding="utf-8")
        for retired in ("verified by lab", "`VERIFIED`", "`VERIFIER`", "finished: passed", "who vouched"):
            assert retired not in words, (doc, retired)
    assert "## Status, record, checked in" in (DOCS / "commands" / "run.md").read_text(encoding="utf-8")
