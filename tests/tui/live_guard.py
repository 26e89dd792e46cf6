"""No live run may outlive its TUI test.

The App drives a live run in a Textual thread worker, and Textual runs thread workers in the asyncio loop's
default executor, whose threads are not daemons. A run that outlived its App (its kill on leaving lost)
would keep such a thread waiting for a decision until the run's deadline (1800 s by default): the test's
loop teardown waits for it (up to 300 s), then the interpreter's exit waits for it, and pytest hangs for
half an hour after the summary. This guard kills any run a test left behind while the loop is still open,
and fails that test instead.

Use: ``track(supervisor)`` for every live run a test builds, and import ``no_run_outlives_its_test`` into
the test module (an autouse fixture; async, so its teardown runs before the loop's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cua_tui.core.supervisor import Supervisor

TEARDOWN = "the test teardown (a run outlived its test)"
_runs: list[Supervisor] = []


def track(supervisor: Supervisor) -> Supervisor:
    _runs.append(supervisor)
    return supervisor


@pytest.fixture(autouse=True)
async def no_run_outlives_its_test() -> AsyncIterator[None]:
    _runs.clear()
    yield
    runs, leaked = list(_runs), []
    _runs.clear()
    for supervisor in runs:
        supervisor.kill(by=TEARDOWN)  # a no-op for a run that has ended or is ending
    for supervisor in runs:
        result = supervisor.wait(60)
        if result is None or result.reason == f"killed by {TEARDOWN}":
            leaked.append(supervisor.run_id)
    if leaked:
        pytest.fail(f"live run(s) {', '.join(leaked)} outlived the test and had to be killed by its teardown")
