"""The command group and what every command shares: the one error form, the RUN argument, the settings,
the next steps after a run, and the handling of the signals that end a run or a fleet."""

from __future__ import annotations

import os
import queue
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, Self, TypeVar

import click

from .. import __version__
from ..core.errors import CommandError, UsageError

F = TypeVar("F", bound=Callable[..., Any])

# One prefix for every error, click's own (a missing option, a bad choice) included.
ERROR_PREFIX = "Error: "
RUNS_HINT = "give a run directory or a run id (`cua-tui runs` lists them)"
# after a run id not found in the runs folder (the reason names it): how to look in another
LOOK_ELSEWHERE = "--runs-dir DIR or CUA_TUI_RUNS_DIR looks up run ids in another folder (`cua-tui runs` lists them)"
# Click (8.2+) answers a bare `cua-tui` with the help as a usage error: that one stays the help.
_HELP_AS_ERROR = getattr(click.exceptions, "NoArgsIsHelpError", ())


def fail(reason: str, *, path: str | Path | None = None, hint: str | None = None) -> NoReturn:
    """Stop the command with a usage error (exit 2): ``Error: PATH: REASON; HINT``."""
    raise UsageError(reason, path=path, hint=hint)


def path_option(*decls: str, help: str, file: bool = False, required: bool = False) -> Callable[[F], F]:
    """An option that names a path (with ``file``, not a folder's): a ``Path``, or None when not given."""
    kind = click.Path(path_type=Path, dir_okay=False) if file else click.Path(path_type=Path)
    return click.option(*decls, type=kind, required=required, help=help)


@contextmanager
def one_form() -> Iterator[None]:
    """Where every error of every command ends, whichever layer raised it: one line on stderr, ``Error: PATH:
    REASON; HINT``, and its exit status (2 for any ``UsageError`` and click's own, 1 for a failure)."""
    try:
        yield
    except CommandError as exc:
        _exit_with(str(exc), exc.exit_code)
    except click.UsageError as exc:
        if isinstance(exc, _HELP_AS_ERROR):
            raise
        # click's "Try 'cua-tui run --help' for help." as the hint, on the same line
        hint = f"see `{exc.ctx.command_path} --help`" if exc.ctx is not None else None
        reason = exc.format_message().removesuffix(".")
        _exit_with(f"{reason}; {hint}" if hint else reason, exc.exit_code)


def _exit_with(text: str, exit_code: int) -> NoReturn:
    from ..core.text import encodable, visible

    # reasons may quote a run directory's or a file's own text: shown literally, on one line
    click.echo(ERROR_PREFIX + encodable(visible(text, limit=1000)), err=True)
    sys.exit(exit_code)


def say(line: str) -> None:
    """One line on stderr, written whole (several threads report), untrusted text made visible."""
    from ..core.text import visible

    sys.stderr.write(visible(line, limit=2000) + "\n")
    sys.stderr.flush()


def settings() -> Any:
    """The user's settings (config file + environment); a broken file is a usage error (ConfigError)."""
    from ..config import Settings

    return Settings.load()


def run_directory(arg: str, runs_dir: Path | None = None) -> Path:
    """RUN as every command takes it (a run directory, a run id or a unique beginning of one in the runs
    directory: ``runs_dir``, else the settings'), checked to be a cua-tui run directory before anything else
    is looked at, so that the same bad folder gets the same error from every command. The settings are read
    only to look up an id."""
    from ..core.rundir import RunNotFound, resolve_run
    from ..core.safeio import RunFileError, RunFolder

    if os.path.lexists(arg):
        path = Path(arg)
    elif os.sep in arg:  # a path, not an id: no settings read
        fail("no such run directory", path=arg, hint=RUNS_HINT)
    else:
        try:
            path = resolve_run(arg, (runs_dir or settings().runs_dir).expanduser())
        except RunNotFound as exc:
            # the reason names the folder looked in
            fail(str(exc), hint=LOOK_ELSEWHERE)
    try:
        with RunFolder.open(path) as folder:
            has_log = folder.kind("audit.jsonl") is not None
    except RunFileError as exc:
        fail(f"not a run directory ({exc.detail})", path=path, hint=RUNS_HINT)
    if not has_log:
        fail("no audit.jsonl (not a cua-tui run directory)", path=path, hint=RUNS_HINT)
    return path


def program() -> str:
    """How to run cua-tui again from this shell: ``cua-tui`` when that is on PATH (set-up links it),
    else the entry point this process was started as."""
    if shutil.which("cua-tui"):
        return "cua-tui"
    started_as = Path(sys.argv[0])
    if started_as.name == "cua-tui" and started_as.exists():
        return shlex.quote(str(started_as.absolute()))
    return f"{shlex.quote(sys.executable)} -m cua_tui.cli"


def run_argument(path: Path, runs_dir: Path | None) -> str:
    """The shortest RUN argument that finds ``path`` again: its run id when it lies in the runs directory
    the settings name, else its path; shell-quoted."""
    path = Path(path)
    if runs_dir is not None and path.parent.absolute() == Path(runs_dir).expanduser().absolute():
        return shlex.quote(path.name)
    return shlex.quote(str(path.absolute()))


def next_steps(path: Path, runs_dir: Path | None) -> list[str]:
    """The lines that end a run: what to do next with it, as commands to copy."""
    prog, run = program(), run_argument(path, runs_dir)
    report = shlex.quote(f"{Path(path).name}.html")
    return [
        "next:",
        f"  step through it:   {prog} replay {run}",
        f"  export a report:   {prog} export {run} --html {report}",
        f"  check its log:     {prog} verify {run}",
    ]


class CommandLine(click.Group):
    """The command group: parsing its own flags and running a command (which parses its flags) are the
    two places an error can come from, and both end in ``one_form``."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with one_form():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with one_form():
            return super().invoke(ctx)


@click.group(cls=CommandLine, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="cua-tui")
def main() -> None:
    """Supervise computer-use agents: every proposed action is classified by a policy, risky ones wait
    for your decision (y approve, n reject, k kill switch), and every run leaves a hash-chained audit
    log that `cua-tui verify` checks offline."""


# after a hangup, once everything was sealed: how long a TUI has to close before the process leaves
HANGUP_GRACE_S = 5.0


class OnSignal:
    """While in effect, SIGINT, SIGTERM and SIGHUP (Ctrl-C, a service manager, the terminal going away) are
    acted on by ``act(signum, count)`` on a thread of its own. The handler only records the signal
    (``SimpleQueue.put`` is safe there, whatever lock the interrupted main thread holds); acting on it takes
    locks (a kill switch) and may wait."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, *, tui: bool = False) -> None:
        self.received: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._previous: dict[int, Any] = {}
        # a TUI is on the terminal: when the terminal goes, the process leaves once sealed (below)
        self.tui = tui

    def __enter__(self) -> Self:
        threading.Thread(target=self._act, name="cua-signals", daemon=True).start()
        self._previous = {s: signal.signal(s, self._on_signal) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self.received.put(None)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received.put(signum)

    def _act(self) -> None:
        count = 0
        while (signum := self.received.get()) is not None:
            self.act(signum, count)
            if signum == signal.SIGHUP and self.tui and count == 0:
                threading.Thread(target=self._leave_once_sealed, name="cua-hangup", daemon=True).start()
            count += 1

    def act(self, signum: int, count: int) -> None:
        """What the ``count``-th signal (from 0) does."""
        raise NotImplementedError

    def sealed(self, timeout: float) -> bool:
        """Whether what the signal ended has sealed itself, waiting up to ``timeout`` seconds."""
        return True

    def _leave_once_sealed(self) -> None:
        """The terminal went away under a TUI. Textual's shutdown can then block for good on its output queue
        (py-spy: the main thread in ``Queue.put`` from ``LinuxDriver.close``; a demo and a fleet TUI whose
        tmux sessions were killed stayed, parentless, for hours). Once everything the signal ended has
        sealed itself, the process has HANGUP_GRACE_S to leave on its own, then leaves with status 1 (a
        signalled run's), with no one left to read what it would have printed."""
        while not self.sealed(0.5):
            pass
        time.sleep(HANGUP_GRACE_S)
        os._exit(1)


@contextmanager
def queued_run(queue: str | None, run: str) -> Iterator[Path]:
    """RUN on a team's queue (``--queue URL``, or the settings'), as a folder made from the database alone
    for as long as the command reads it; one line and exit 2 when it cannot be."""
    from ..team import db
    from ..team.verify import run_folder

    url = db.queue_url(queue, settings().queue)
    try:
        with run_folder(url, run) as path:
            yield path
    except db.QueueError as exc:
        fail(str(exc))
