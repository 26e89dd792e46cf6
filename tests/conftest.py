"""Shared fixtures: run the real supervisor on the in-process sim desktop with a scripted agent."""

from __future__ import annotations

import gc
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# gRPC (the cwsandbox client, the local CoreWeave service) installs fork handlers when it loads; a process
# forked afterwards (the crash tests' children, a subprocess with a preexec_fn) then prints epoll errors on
# its stderr, which tests of one-line answers read. Nothing forked here uses gRPC.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# `cua-tui runs` remembers verdicts in this user's cache: the suite keeps its own, never the user's
os.environ.setdefault("CUA_TUI_CACHE_DIR", tempfile.mkdtemp(prefix="cua-tui-test-cache-"))
# nor the user's settings, runs or the cache's key (kept in the config folder): a folder of the suite's own
# for each, whatever the user has set (the processes the tests start inherit them)
os.environ.update(
    {
        name: tempfile.mkdtemp(prefix=f"cua-tui-test-{name[4:8].lower()}-")
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME")
    }
)

from css_cache import share_parsed_css
from lanes import BESIDE_S

from cua_tui.agents.script import Script, ScriptAgent
from cua_tui.core import events as ev
from cua_tui.core.geometry import Size
from cua_tui.core.policy import Policy
from cua_tui.core.ports import Approver, Desktop
from cua_tui.core.rundir import RunDir
from cua_tui.core.supervisor import RunConfig, RunResult, Supervisor
from cua_tui.desktops.sim import SimDesktop

share_parsed_css()  # the Apps of this process parse each stylesheet once (tests/css_cache.py)
# Textual makes many short-lived objects a frame (segments, strips, styles), and at Python's default the
# collector's youngest generation ran thousands of times a test: 17% less CPU in the Pilot tests with
# fewer, larger collections (docs/development.md, "Where the suite's time goes"). Only the suite's own
# processes: what a test starts (a cua-tui in tmux, a controller) collects as a user's does.
gc.set_threshold(50_000, 50, 100)


@dataclass
class Run:
    result: RunResult
    supervisor: Supervisor
    desktop: Any
    agent: ScriptAgent
    events: list[ev.Event] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.result.path

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.path / "audit.jsonl").read_text().splitlines()]

    def of(self, kind: type[ev.Event]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def outcomes(self) -> list[tuple[int, int, str, str]]:
        return [(e.turn, e.index, e.status, e.message) for e in self.of(ev.Outcome)]


def make_supervisor(
    tmp_path: Path,
    turns: list[dict[str, Any]],
    *,
    desktop: Desktop | None = None,
    approver: Approver | None = None,
    policy: Policy | None = None,
    final_text: str = "done",
    **config: Any,
) -> tuple[Supervisor, list[ev.Event], ScriptAgent]:
    desktop = desktop or SimDesktop()
    agent = ScriptAgent(Script.from_data({"turns": turns, "final_text": final_text}))
    rundir = RunDir.create(tmp_path / "runs")
    cfg = RunConfig(
        task=config.pop("task", "test task"),
        backend=desktop.name,
        agent="script",
        model=None,
        screen=desktop.size,
        policy=policy or Policy.default(),
        **config,
    )
    events: list[ev.Event] = []
    sup = Supervisor(cfg, desktop, agent, approver, rundir, listeners=(lambda s: events.append(s.event),), fsync=False)
    return sup, events, agent


RunScript = Callable[..., Run]
"""The type of the ``run_script`` fixture."""


@pytest.fixture
def run_script(tmp_path: Path) -> RunScript:
    """Run turns to the end on a SimDesktop (or the given desktop) and return everything observed."""

    def runner(turns: list[dict[str, Any]], **kwargs: Any) -> Run:
        sup, events, agent = make_supervisor(tmp_path, turns, **kwargs)
        result = sup.run()
        return Run(result, sup, sup.desktop, agent, events)

    return runner


@pytest.fixture
def screen() -> Size:
    return Size(1024, 720)


# ---------------------------------------------------------------------------------------------------
# The suite in three parts (scripts/setup.sh test), by what each test needs (its marks, pyproject.toml):
# 1. the rest on four workers (pytest-xdist): in-process code, the sim desktop, a terminal alone;
# 2. beside it, the tests needing a real desktop (e2e) or the Docker engine, three at a time (they mostly
#    wait on their desktops); the engine's tests one after another (they count the containers labelled
#    cua-tui);
# 3. once the second is done, the tests needing the machine's first call (alone), one at a time, while the
#    first part goes on at the lowest priority (scripts/step_aside.py) and takes only the CPU they leave;
# (the tests of a throwaway PostgreSQL server go with the second: the first is the suite's longest);
# and all along, at the lowest priority, the tests that measure nothing and only need CPU or wait
# (beside: the static checks, an install): on the CPU the other parts leave.
# ---------------------------------------------------------------------------------------------------
AFTER = ("e2e", "engine", "alone", "beside", "pgserver")


@pytest.hookimpl(tryfirst=True)  # before the mark plugin selects by ``-m``
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The long tests first (xdist hands the tests out in this order): one started last would hold its part
    # open alone for its whole length (the type check, over a minute, did).
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    for item in items:
        if item.get_closest_marker("beside") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(BESIDE_S))
        if any(item.get_closest_marker(name) for name in AFTER):
            item.add_marker(pytest.mark.desktops)
        if item.get_closest_marker("pgserver"):
            # one worker runs a file's, on its one server (the worker's session ``pg_server``): the files spread
            # over the part's workers, so that no one worker's chain of them is the part's longest
            item.add_marker(pytest.mark.xdist_group(f"pgserver-{item.path.stem}"))
        if item.get_closest_marker("engine"):
            # one worker runs them all, in turn (xdist's --dist loadgroup)
            item.add_marker(pytest.mark.xdist_group("engine"))


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every image handed to Pillow's decoder by the project's imaging (none may be a refused screen)."""
    from PIL import Image  # what cua_tui.core.imaging decodes with

    calls: list[Any] = []
    real = Image.open

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(Image, "open", spy)
    return calls


@pytest.fixture(scope="session")
def form_desktop() -> Iterator[Any]:
    """One local desktop on the form lab (Xvfb, openbox, Chromium in its sandbox), started once for the
    checks that only look at it (its processes, its sandbox from inside): none may act on its page."""
    from cua_tui.desktops.local import LocalDesktop
    from cua_tui.desktops.target import Target
    from cua_tui.labs import get_lab

    desktop = LocalDesktop(Size(1024, 720), Target(get_lab("form")))
    desktop.start()
    yield desktop
    desktop.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A throwaway PostgreSQL server for the process's tests that need one (tests/fakes/pgserver.py)."""
    from tests.fakes.pgserver import PgServer

    server = PgServer().start()
    yield server
    server.stop()
