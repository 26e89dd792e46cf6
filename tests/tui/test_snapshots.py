"""SVG snapshots of the supervision TUI's main states (pytest-textual-snapshot), at a fixed 160x50 size.

The scenes are recorded runs from ``tests/scenes.py`` (fixed run id, frozen clock, screenshots drawn
by the sim desktop), the same ones ``scripts/screenshots.py`` draws for the README. ``snap_compare`` runs
the App in its own event loop, so these tests are synchronous. Update after a deliberate change with
``pytest tests/tui/test_snapshots.py --snapshot-update`` and look at the pictures before committing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from scenes import SCENES, SIZE, settle

pytestmark = pytest.mark.timeout(60)

SnapCompare = Callable[..., bool]


def snap_scene(snap_compare: SnapCompare, name: str, **kwargs: Any) -> bool:
    scene = SCENES[name]
    # A generous deadline for the recording to settle: a loaded machine converts screenshots slowly.
    # The scene's keys are pressed here and the screen settles again after them (a key that selects
    # another request starts a new frame and a new reading of the screen), as scenes.save does.
    ready = partial(settle, timeout=45.0)

    async def run_before(pilot: Any) -> None:
        await ready(pilot)
        if scene.press:
            await pilot.press(*scene.press)
            await ready(pilot)

    return snap_compare(scene.app(**kwargs), terminal_size=SIZE, run_before=run_before)


def test_awaiting_a_decision_on_typed_text(snap_compare: SnapCompare) -> None:
    """Decision panel with the full typed text, the pending row marked, status AWAITING YOUR DECISION,
    footer with y / n / k."""
    assert snap_scene(snap_compare, "awaiting-decision")


def test_refused_action_and_not_executed_rows(snap_compare: SnapCompare) -> None:
    """A blocked key chord: its row highlighted as BLOCK / REFUSED, the later row NOT EXECUTED."""
    assert snap_scene(snap_compare, "refused")


def test_finished_passed(snap_compare: SnapCompare) -> None:
    """The run ended passed: status bar 'status: passed', audit record sealed, footer with q only."""
    assert snap_scene(snap_compare, "finished")


def test_help_screen(snap_compare: SnapCompare) -> None:
    """? over a pending decision: the keys and the active policy's summary."""
    assert snap_scene(snap_compare, "help")


def test_replay_of_a_refused_step(snap_compare: SnapCompare) -> None:
    """Replay of a real run's directory: the chain banner, the refused chord's step (verdict, rule, what the
    model heard), its turn's batch with the step marked, the audit tail up to it."""
    assert snap_scene(snap_compare, "replay")


@pytest.mark.long
def test_fleet_queue_and_decision_view(snap_compare: SnapCompare) -> None:
    """The fleet TUI over four real sim runs, three at a time: the queue in risk order (safety check,
    transmission, other) with the rule behind each place, the typed text's request selected in the decision
    view with its framed field, the runs table (the fourth queued, under the table's cursor)."""
    assert snap_scene(snap_compare, "fleet")
