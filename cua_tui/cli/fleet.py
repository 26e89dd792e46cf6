"""``cua-tui fleet``: the tasks of a tasks file as independent runs, at most N at a time, one approval queue.

Without ``--headless`` the fleet TUI (cua_tui.tui.fleet_screen's ``run_fleet_tui``) answers the queue. Headless,
every decision of every run goes to the same ``--on-confirm`` rule or approver command (whose JSON request
carries the run id), one at a time in the queue's order once its screen is read; the fleet's changes are
printed as lines, and a summary lists each run's status and directory. Exit status: 0 when every run ended
passed (or finished where no verifier exists), 1 otherwise, 2 for bad usage or configuration.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from ..core.errors import CommandError
from .base import OnSignal, fail, next_steps, program, settings
from .flags import flag, queue_flag, run_flags, run_options
from .otel import close_sink, open_sink


@click.command("fleet")
@click.option(
    "--tasks",
    "tasks_path",
    type=click.Path(path_type=Path),
    callback=lambda ctx, param, value: _needed(ctx, param, value),
    help="Tasks file (TOML): one [[tasks]] table per run (see the README's fleet section).",
)
@flag("backend", help="Desktop of every run.")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 1000),
    default=None,
    help="Runs at once (default: for local and docker, the desktops this machine fits; else 8). The next "
    "run starts when one ends.",
)
@flag("agent", help="Agent of the tasks that name none: openai, anthropic or script:PATH.")
@flag("model", help="Model of the tasks that name none (openai/anthropic agents).")
@flag("policy_path", help="Policy of the tasks that name none (default: the settings' policy, else the built-in one).")
@flag("screen", help="Screen size WIDTHxHEIGHT of every run.")
@run_flags("runs_dir")
@flag("audit_key", help="Key kept outside the runs directory that signs every run's seal.")
@run_flags("headless", "theme", "operator")
@flag(
    "otel",
    help="Send every run's OpenTelemetry spans to this OTLP/HTTP endpoint, each run its own trace (default: the "
    "settings' otel_endpoint). No message or typed text is ever in a span.",
)
@flag(
    "on_confirm",
    help="Headless decisions of every run: reject, approve or approver:CMD (one command for the whole fleet; "
    'its JSON request names the run in "run").',
)
@queue_flag(
    help="Put the fleet on a team's queue (a PostgreSQL URL; default: CUA_TUI_QUEUE, else the settings' "
    "queue) for its workers to run: with --detach. TLS unless the server is on this machine.",
)
@click.option(
    "--detach",
    is_flag=True,
    help="Submit the fleet to the queue, print its id and return: workers run it (`cua-tui worker`), analysts "
    "answer it (`cua-tui attach`).",
)
@click.option(
    "--retry",
    metavar="RUN",
    default=None,
    is_eager=True,
    help="With a queue: run an ended run's task again, as a new run of its fleet (a lost run is never re-run "
    "by itself: a re-run repeats what it did outside).",
)
def command(tasks_path: Path | None, concurrency: int | None, **values: Any) -> None:
    """Run every task of a tasks file as its own supervised run, at most --concurrency at a time, with one
    approval queue across runs (risk first, then age).

    Each run is the run `cua-tui run` would make alone (own run directory, audit chain, seal, sandbox);
    <runs-dir>/fleet.json lists them (under the fleet id) with the tasks file's SHA-256. Exit status: 0 when every
    run ended passed or finished, 1 otherwise, 2 for bad usage or configuration."""
    headless, theme = values["headless"], values["theme"]
    teamed = values["detach"] or values["retry"] or values["queue"]
    if teamed:
        _on_queue(tasks_path, values)
        return
    assert tasks_path is not None  # _needed
    if values["on_confirm"] == "ask":
        fail("--on-confirm ask: one terminal prompt cannot serve many runs", hint="use approver:CMD")
    # Imported here: the builder pulls in the core, and --help should start fast.
    from dataclasses import replace

    from ..fleet_runner import Fleet, concurrency_for, fleet_tasks

    config = settings()
    # a lab on a desktop without a browser is refused here, not by each run at its first screen
    tasks = _load(tasks_path, values["backend"])
    if not headless:
        from .session import check_theme

        check_theme(theme, config)
    base = run_options(values, settings=config)
    specs = fleet_tasks(tasks, base)
    _check_tasks(specs)
    # a task may name its own backend: the machine's limit holds if any of them runs here
    from ..desktops import runs_here

    backends = [t.options.backend for t in specs]
    local = next((b for b in backends if runs_here(b)), base.backend)
    limit, message = concurrency_for(local, concurrency, len(specs))
    if message:
        click.echo(message, err=True)
    runs = (base.runs_dir or config.runs_dir).expanduser()
    sink = open_sink(values["otel"], config, headless=headless)
    made: list[Any] = []  # the fleet, which knows each run's id once the run is built
    try:
        fleet = Fleet(
            _traced([replace(t, options=replace(t.options, runs_dir=runs)) for t in specs], sink, made),
            runs_dir=runs,
            concurrency=limit,
            backend=base.backend,
            tasks_source=str(tasks_path),
            tasks_sha256=tasks.sha256,
            name=tasks.name,
            in_order=_in_order() if headless else None,
        )
    except ValueError as exc:
        fail(str(exc))
    made.append(fleet)
    try:
        if headless:
            fleet.subscribe(_printer())
            _run_headless(fleet)
        else:
            _run_in_tui(fleet, theme or config.theme, config)
        code = _summary(fleet, config.runs_dir)
    finally:
        close_sink(sink)
    sys.exit(code)


def _needed(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """``--tasks`` is required, except by ``--retry`` (parsed first: it is eager)."""
    if value is None and not ctx.params.get("retry"):
        raise click.MissingParameter(ctx=ctx, param=param)
    return value


def _load(tasks_path: Path, backend: str) -> Any:
    """The tasks file, checked against the labs, agents and backends this program has."""
    from ..agents.vendors import VENDORS
    from ..core.tasks import load_tasks
    from ..desktops import BACKENDS, lab_hosts
    from ..labs import LABS

    agents = [vendor.spec for vendor in VENDORS.values()]
    return load_tasks(
        tasks_path, labs=LABS.keys(), backend=(backend, lab_hosts()), agents=agents, backends=tuple(BACKENDS)
    )


def _on_queue(tasks_path: Path | None, values: dict[str, Any]) -> None:
    """``--queue``/``--detach``/``--retry``: the fleet goes to a team's queue, its workers run it."""
    from ..team import db

    if values["operator"] is not None:
        fail(
            "--operator: with a queue, who answers is the role the database authenticates (its session_user), "
            "never a name given here"
        )
    config = settings()
    url = db.queue_url(values["queue"], config.queue)
    if values["retry"] is not None:
        from ..team.submit import retry

        fleet_id, run_id = retry(url, values["retry"])
        click.echo(run_id)
        click.echo(f"run {run_id} queued in {fleet_id}: a new run of the task of {values['retry']}", err=True)
        return
    if not values["detach"]:
        fail(
            "--queue: a fleet is put on a team's queue with --detach",
            hint="then answer it with `cua-tui attach --queue URL FLEET --headless --on-confirm ...`",
        )
    assert tasks_path is not None  # _needed
    if values["headless"]:
        fail("--detach: the fleet runs on the workers; --headless belongs to `cua-tui attach`")
    from ..fleet_runner import fleet_tasks
    from ..team.payload import SpecError
    from ..team.submit import specs_of, submit

    tasks = _load(tasks_path, values["backend"])
    base = run_options(values, settings=config)
    try:
        specs = specs_of(fleet_tasks(tasks, base), config.policy)
    except SpecError as exc:
        fail(str(exc))
    done = submit(url, specs, tasks_sha256=tasks.sha256, name=tasks.name)
    click.echo(done.fleet_id)
    click.echo(
        f"fleet {done.fleet_id}: {len(done.runs)} run{'s' if len(done.runs) != 1 else ''} queued on "
        f"{db.shown(url)} by {done.role}; answer it with `{program()} attach {done.fleet_id}`",
        err=True,
    )


def _in_order() -> Any:
    """A headless fleet's order: each request put to the approver once its screen is read, in the queue's
    order (a possible injection first), as the fleet TUI lists it."""
    from ..headless_approvers import InOrder
    from ..ocr import ScreenReader

    return InOrder(ScreenReader())


def _traced(specs: list[Any], sink: Any, made: list[Any]) -> list[Any]:
    """Each task with a span listener of its own (so each run is its own trace), or as it is without a sink.
    A run's id is asked of the fleet at its first event, when the run has been built."""
    if sink is None:
        return specs
    from dataclasses import replace

    traced = []
    for task in specs:
        listen = sink.listener(
            lambda name=task.name: made[0].row(name).run_id,
            lambda name=task.name: {"cua_tui.fleet.id": made[0].fleet_id, "cua_tui.fleet.task": name},
        )
        traced.append(replace(task, options=replace(task.options, listeners=(*task.options.listeners, listen))))
    return traced


def _run_in_tui(fleet: Any, theme: str, config: Any) -> None:
    """The fleet in its TUI, which answers the queue. Leaving it (or a signal) kills every run; the seals
    are waited for before the summary."""
    from ..ocr import ScreenReader
    from ..tui.fleet_screen import run_fleet_tui

    apps: list[Any] = []
    closing: list[bool] = []

    # After a signal killed every run: the seals are waited for below.
    def close_tui() -> None:
        closing.append(True)
        for app in apps:
            # thread-safe: Textual posts it to the App's loop
            app.exit()

    def started(app: Any) -> None:
        apps.append(app)
        # the signal came while the fleet started: the App ends as soon as it runs
        if closing:
            app.exit()

    # In effect while the seals are waited for too, after the TUI.
    with StopOnSignal(fleet, then=close_tui):
        try:
            run_fleet_tui(fleet, theme=theme, settings=config, screen_reader=ScreenReader(), on_start=started)
        except OSError as exc:
            # the fleet could not start: nothing ran
            raise CommandError(f"cannot start the fleet ({exc.strerror or exc})", path=fleet.runs_dir) from None
        # leaving the fleet TUI kills every run, each sealed
        if not fleet.done:
            fleet.kill_all(by="human (left the fleet TUI)")
        # bounded once every run was killed (Fleet.kill_all)
        while not fleet.wait(0.2):
            pass


def _check_tasks(specs: list[Any]) -> None:
    """What can be checked of every task before any run starts: each policy file and each script (a task
    150 runs later must not be the first to find its file missing)."""
    from ..agents.script import Script, ScriptError
    from ..core.policy import Policy, PolicyError

    policies: set[Path] = set()
    scripts: set[str] = set()
    for task in specs:
        options = task.options
        if options.policy_path is not None and options.policy_path not in policies:
            try:
                Policy.load(options.policy_path)
            except PolicyError as exc:
                fail(f"task {task.name}: {exc}")
            policies.add(options.policy_path)
        agent = options.agent or ""
        if agent.startswith("script:") and agent not in scripts:
            try:
                Script.load(Path(agent.removeprefix("script:")))
            except (ScriptError, OSError, ValueError) as exc:
                fail(f"task {task.name}: {exc}")
            scripts.add(agent)


def _printer() -> Any:
    """A fleet listener printing one line per change worth a line (stderr), untrusted text made visible."""
    from ..core import fleet_queue as cf
    from ..core.text import visible

    def write(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    said_running: set[str] = set()

    def listen(event: Any) -> None:
        if isinstance(event, cf.RunChanged) and event.row.run_id and event.row.task not in said_running:
            said_running.add(event.row.task)
            write(f"[{event.row.task}] run {event.row.run_id} · {event.row.path}")
        elif isinstance(event, cf.RequestQueued):
            item, request = event.item, event.item.request
            what = request.action.describe() if request.action is not None else "the model's safety checks"
            write(
                f"[{item.task}] waits: turn {request.turn} #{request.index + 1} {visible(what, limit=120)} · "
                f"{visible(request.reason, limit=120)} ({item.priority.label}: {visible(item.priority.rule)})"
            )
        elif isinstance(event, cf.RequestClosed):
            request = event.item.request
            write(f"[{event.item.task}] turn {request.turn} #{request.index + 1}: {visible(event.why, limit=160)}")
        elif isinstance(event, cf.RunFinished):
            row = event.row
            write(f"[{row.task}] ended {row.status} · {visible(row.reason, limit=200)}")

    return listen


def _run_headless(fleet: Any) -> None:
    """Run the fleet; Ctrl-C (SIGINT), SIGTERM or SIGHUP kill every run (each ends killed, sealed)."""
    with StopOnSignal(fleet):
        try:
            fleet.start()
        except OSError as exc:
            raise CommandError(f"cannot start the fleet ({exc.strerror or exc})", path=fleet.runs_dir) from None
        click.echo(f"fleet {fleet.fleet_id} · {fleet.manifest_path}", err=True)
        while not fleet.wait(0.2):
            # a timed wait: the main thread runs the signal handler at once
            pass


class StopOnSignal(OnSignal):
    """While in effect, SIGINT, SIGTERM and SIGHUP end the fleet: the first kills every run (each ends
    ``killed`` and seals itself; the fleet ends within their stop timeouts, see ``Fleet.kill_all``), a second
    stops waiting for the seals still to come. ``then`` runs after the first (the fleet TUI's exit)."""

    def __init__(self, fleet: Any, then: Any = None) -> None:
        super().__init__(tui=then is not None)
        self.fleet = fleet
        self.then = then

    def act(self, signum: int, count: int) -> None:
        import threading

        if count:
            self.fleet.stop_waiting()
            return
        by = "signal " + signal.Signals(signum).name
        # On a thread of its own: a kill switch held up by a wedged run must not hold up a second
        # signal.
        killer = threading.Thread(target=self.fleet.kill_all, args=(by,), name="cua-fleet-kill-all", daemon=True)
        killer.start()
        # the kill switches first, so that each run records the signal as its killer
        killer.join(1.0)
        if self.then is not None:
            try:
                self.then()
            except Exception:  # the fleet's end does not depend on it
                pass

    def sealed(self, timeout: float) -> bool:
        return bool(self.fleet.wait(timeout))


def _summary(fleet: Any, settings_runs: Path | None = None) -> int:
    """Print each run's status and directory, then what to do next (with the first run that did not pass,
    else the first); the exit status (0 only when every run passed or finished)."""
    import shlex

    from ..core.text import visible

    rows = fleet.rows()
    width = max(len(r.task) for r in rows)
    runs = f"{len(rows)} run{'s' if len(rows) != 1 else ''}"
    click.echo(f"fleet {fleet.fleet_id}: {runs} · manifest {fleet.manifest_path}", err=True)
    if fleet.manifest_problem:
        # the runs are complete run directories; only the index is behind
        click.echo(f"warning: {visible(fleet.manifest_problem)}", err=True)
    for row in rows:
        record = {True: "intact", False: "NOT INTACT", None: "-"}[row.intact]
        where = row.path or "(no run directory)"
        # where its status was checked, when not in the controller (docs/commands/run.md)
        checked = {"sandbox": " (checked inside the sandbox)", "unknown": " (checked in a place not recorded)"}
        status = row.status + checked.get(row.verifier, "")
        click.echo(f"  {row.task:<{width}}  {status:<8}  record {record:<10}  {visible(where)}", err=True)
    passed = sum(1 for r in rows if r.status in ("passed", "finished"))
    click.echo(f"{passed} of {len(rows)} passed", err=True)
    made = [r for r in rows if r.path]
    if made:
        example = next((r for r in made if r.status not in ("passed", "finished")), made[0])
        prog = program()
        runs_dir = fleet.runs_dir
        elsewhere = settings_runs is None or runs_dir.absolute() != Path(settings_runs).expanduser().absolute()
        listing = f"{prog} runs --fleet {shlex.quote(fleet.fleet_id)}"
        if elsewhere:
            listing += f" --runs-dir {shlex.quote(str(runs_dir))}"
        lines = next_steps(Path(example.path), settings_runs)
        lines[0] = f"next, with the run of task {visible(example.task)} ({example.status or 'not ended'}):"
        lines.insert(0, f"list the fleet's runs: {listing}")
        for line in lines:
            click.echo(line, err=True)
    return 0 if passed == len(rows) else 1
