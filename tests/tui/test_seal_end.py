"""Issue #20 point 9 in the TUI: the end of a live run is shown sealed only once its seal is on disk.

The run's last record (``run_ended``) is written before result.json; when result.json cannot be written the
audit pane says NOT sealed and the status bar shows the run's real end (error, why), never a sealed end.
Live runs are real: the one builder, the sim desktop, decisions through the handshake as ``cua-tui run``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from live_guard import no_run_outlives_its_test, track  # noqa: F401 (an autouse fixture)
from pilot_helpers import answer, live_app, plain, run_screen, sim_run, until, until_ended
from textual.widgets import Static

from cua_tui.core.audit import verify_run
from cua_tui.tui.app import CuaApp
from cua_tui.tui.audit_pane import AuditPane
from cua_tui.tui.source import LiveRun
from cua_tui.tui.status import StatusBar

pytestmark = pytest.mark.timeout(60)

SIZE = (160, 50)
TYPING = {"text": "typing", "actions": [{"type": "type", "text": "hello"}]}


def chain(app: CuaApp) -> str:
    return plain(app.query_one(AuditPane).query_one("#chain", Static))


async def test_a_run_whose_result_json_cannot_be_written_is_shown_not_sealed(tmp_path: Path) -> None:
    app = live_app(sim_run(tmp_path, [TYPING]))
    main = run_screen(app)
    source = main.source
    assert isinstance(source, LiveRun)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision on the typed text")
        (source.run_dir / "result.json").mkdir()  # a folder in the way: the seal cannot be written
        await pilot.pause()
        await answer(pilot, "n", "escape")  # reject, without a reason
        await until_ended(pilot, app)
        assert app.result is not None and not app.result.sealed and app.result.exit_code == 1
        assert main.final_status == "error"
        assert chain(app).startswith("record NOT sealed · ")
        status = plain(app.query_one(StatusBar))
        assert "claimed: error · storage: " in status  # not sealed: a claim; the reason in full is notified
        notes = [str(n.message) for n in app._notifications]
        assert any(n.startswith("not sealed: storage: could not write result.json: Is a directory") for n in notes)
    report = verify_run(source.run_dir)
    assert not report.sealed


async def test_a_sealed_run_is_shown_sealed_once_result_json_is_written(tmp_path: Path) -> None:
    app = live_app(sim_run(tmp_path, [TYPING]))
    main = run_screen(app)
    source = main.source
    assert isinstance(source, LiveRun)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: main.pending is not None, "the decision on the typed text")
        await pilot.pause()
        await answer(pilot, "n", "escape")  # reject, without a reason
        await until_ended(pilot, app)
        assert app.result is not None and app.result.sealed
        assert chain(app).startswith("record sealed · ")
        assert (source.run_dir / "result.json").is_file()
        assert not any("not sealed" in str(n.message) for n in app._notifications)
