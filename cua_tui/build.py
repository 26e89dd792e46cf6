"""The one builder: RunOptions -> a ready Run (policy, audit key, approver, run directory, desktop, agent).

The command line, the tests, the screenshot scenes and the benchmarks all make their runs here, so a run
built for a picture or a test is the run a user gets. Every check of the options happens here, before
anything is created; a problem is a BuildError naming the option (the command line turns it into exit 2).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.approvers import HandshakeApprover
from .core.errors import UsageError
from .core.ports import Agent, Approver, Desktop
from .core.supervisor import Listener, RunConfig, RunResult, Supervisor

if TYPE_CHECKING:
    from .config import Settings
    from .core.audit import AuditKey
    from .core.drills import Drill, DrillPlan
    from .core.geometry import Size
    from .core.policy import Policy
    from .core.rundir import RunDir
    from .labs.base import Lab

# ``RunOptions.decisions`` for a front end that answers through the handshake (the TUI)
HANDSHAKE = "tui"
TUI_REVIEWER = "human (TUI)"


class BuildError(ValueError, UsageError):
    """Options that cannot make a run. ``exit_code`` 2 is bad usage or configuration; 1 a run directory
    that could not be written (the one build error that is not the user's)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class RunOptions:
    """Everything a run is made of, as the command line's flags name it.

    ``script`` gives recorded turns directly (the demo, the scenes); ``desktop`` and ``agent_impl`` give
    ready-made adapters (tests that need a special desktop or agent); both bypass the lookup by name and
    nothing else: policy, approver, audit and run directory are built as for any run."""

    task: str = ""
    backend: str = "local"
    screen: str = "1024x720"
    agent: str | None = "openai"  # a registered vendor's --agent value (agents/vendors.py)
    script: dict[str, Any] | None = None
    # typed texts for a script's placeholders (JSON: sha256 -> text), ``run --texts``
    texts: Path | None = None
    agent_label: str | None = None
    model: str | None = None
    base_url: str | None = None
    grammar: str | None = None  # an open-weight model's (--agent openai-compatible); None: from its name
    # drills before real requests (a tasks file's setting, which wins over the settings file's); the seed of
    # their random source (None: the system's)
    drill_rate: float | None = None
    drill_seed: int | None = None
    drill_library: Path | None = None  # the library's folder (None: the settings')
    drill_shipped: bool | None = None  # the shipped drills join it (None: as the settings say)
    drills: bool = True  # False: none, whatever the settings say (a team's worker: its queue is shared)
    lab: str | None = None
    url: str | None = None
    allow_domains: tuple[str, ...] = ()
    policy_path: Path | None = None
    # the policy's text itself (a team's task carries it) and the SHA-256 it must have
    policy_text: tuple[str, str] | None = None
    regions: tuple[dict[str, Any], ...] = ()  # more confirmation regions on top of the policy's
    max_turns: int | None = None
    max_steps: int | None = None
    deadline: int | None = None
    # seconds a decision waits before it is rejected (a tasks file's task); None: the policy's, else
    # the settings'
    decision_timeout: float | None = None
    runs_dir: Path | None = None
    run_id: str | None = None
    audit_key: Path | None = None
    # reject | approve | ask | approver:CMD | tui (the handshake)
    decisions: str = "reject"
    operator: str | None = None  # who reviews; default user@host
    listeners: tuple[Listener, ...] = ()
    fsync: bool = True
    desktop: Desktop | None = None
    agent_impl: Agent | None = None
    # a ready-made approver (a team's worker: the queue's), instead of ``decisions``
    approver: Approver | None = None
    # asked before every action runs: None, or why nothing may run any more (a worker's lapsed lease)
    fence: Callable[[], str | None] | None = None
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time
    settings: Any = None  # config.Settings; loaded when not given
    extra: dict[str, Any] = field(default_factory=dict)  # more for run.json


@dataclass
class Run:
    """A run ready to start: ``supervisor.run()`` drives it; ``handshake`` is the approver a TUI answers."""

    supervisor: Supervisor
    approver: Approver
    options: RunOptions

    @property
    def run_id(self) -> str:
        return self.supervisor.run_id

    @property
    def path(self) -> Path:
        return self.supervisor.rundir.path

    @property
    def handshake(self) -> HandshakeApprover | None:
        return self.approver if isinstance(self.approver, HandshakeApprover) else None

    def run(self) -> RunResult:
        return self.supervisor.run()

    def subscribe(self, listener: Listener) -> None:
        self.supervisor.subscribe(listener)


def build_run(options: RunOptions) -> Run:
    """Check the options and make the run. Raises BuildError; creates the run directory last."""
    settings = _settings(options)
    size = _screen(options.screen)
    _check_allow_domains(options.allow_domains)
    _check_url(options.url)
    lab = _lab(options.lab)
    policy = _policy(options, settings, lab)
    runs = (options.runs_dir or settings.runs_dir).expanduser()
    key = _audit_key(options.audit_key, runs)
    approver = options.approver or _approver(options.decisions)
    agent, label = _agent(options, policy, settings)
    desktop = options.desktop or _desktop(options, size, lab, policy, settings)
    rundir = _rundir(runs, options.run_id)
    # A remote desktop tags its sandbox with the run id and writes sandbox-id.txt in the run's
    # directory.
    desktop.bind_run(rundir)
    from .factory import versions

    extra = _extra(options, agent, lab, desktop)
    config = RunConfig(
        task=options.task or (lab.task if lab is not None else "scripted run"),
        backend=options.backend,
        agent=label,
        model=agent.model,
        screen=size,
        policy=policy,
        audit_key=key,
        extra=extra,
        versions=versions(),
        operator=options.operator or default_operator(),
        fence=options.fence,
        drills=_drills(options, settings),
    )
    if config.drills is not None:
        # stated in run.json: a reader of the record knows drills may be among its requests
        extra["drills"] = {"rate": config.drills.rate, "library": len(config.drills.library)}
    try:
        supervisor = Supervisor(
            config,
            desktop,
            agent,
            approver,
            rundir,
            listeners=options.listeners,
            fsync=options.fsync,
            clock=options.clock,
            wall_clock=options.wall_clock,
        )
    except OSError as exc:
        raise BuildError(f"run directory {rundir.path}: cannot write it ({exc.strerror or exc})", 1) from None
    return Run(supervisor, approver, options)


def _drills(options: RunOptions, settings: Settings) -> DrillPlan | None:
    """The run's drills: the task's rate, else the settings'. None when off, and for a team's worker, whose
    requests go to a shared queue (drills are each analyst's own)."""
    rate = options.drill_rate if options.drill_rate is not None else settings.drill_rate
    if not rate or not options.drills:
        return None
    return drill_plan(rate, settings, folder=options.drill_library, shipped=options.drill_shipped,
                      seed=options.drill_seed)  # fmt: skip


def drill_plan(
    rate: float, settings: Settings, *, folder: Path | None = None, shipped: bool | None = None, seed: int | None = None
) -> DrillPlan:
    """Drills at ``rate``: the ones the project ships (unless the settings, or ``shipped``, leave them out) and
    those of the library folder (``folder``, else the settings'), whose drill replaces a shipped one of its
    id; BuildError when there are none, or a library cannot be read."""
    import random

    from .core.drills import DrillError, DrillPlan
    from .labs import SHIPPED_DRILLS

    folder = folder or settings.drill_library
    try:
        own = _library(folder) if folder is not None else ()
        with_shipped = shipped if shipped is not None else settings.drill_shipped
        bundled = _library(SHIPPED_DRILLS) if with_shipped else ()
    except DrillError as exc:
        raise BuildError(str(exc)) from None
    mine = {drill.id for drill in own}
    library = (*(drill for drill in bundled if drill.id not in mine), *own)
    if not library:
        raise BuildError(
            f"drills are on (drill_rate {rate:g}) but the library {folder} holds none and the shipped drills are "
            "left out (drill_shipped = false): make some with `cua-tui drill add`, or set drill_library"
        )
    return DrillPlan(rate, library, random.Random(seed))


def _library(folder: Path) -> tuple[Drill, ...]:
    """A drill library read once for the runs that share it (a fleet's: each would hold its screens), read
    again when its drills.json changes."""
    from .core.drills import LIBRARY_FILE

    try:
        info = (folder / LIBRARY_FILE).stat()
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
    except OSError:
        stamp = (0, 0, 0)
    return _read_library(str(folder), stamp)


@functools.lru_cache(maxsize=4)
def _read_library(folder: str, stamp: tuple[int, int, int]) -> tuple[Drill, ...]:
    from .core.drills import load_library

    return load_library(Path(folder))


def _settings(options: RunOptions) -> Settings:
    from .config import ConfigError, Settings

    try:
        return options.settings or Settings.load()
    except ConfigError as exc:
        raise BuildError(str(exc)) from None


def _screen(text: str) -> Size:
    from .core.geometry import Size

    try:
        return Size.parse(text)
    except ValueError as exc:
        raise BuildError(str(exc)) from None


def _extra(options: RunOptions, agent: Agent, lab: Lab | None, desktop: Desktop) -> dict[str, Any]:
    """What run.json records beyond the run's config: the model's endpoint, the lab, the sandbox."""
    from .agents.redaction import public_url
    from .agents.vendor_agent import VendorAgent

    return {
        "model_base_url": public_url(agent.base_url) if isinstance(agent, VendorAgent) else None,
        **(agent.run_facts if isinstance(agent, VendorAgent) else {}),
        "lab": options.lab,
        "url": options.url,
        "allow_domains": list(options.allow_domains),
        "lab_regions": lab.regions() if lab is not None else [],
        **({"sandbox": sandbox} if (sandbox := desktop.record()) else {}),
        **options.extra,
    }


def default_operator() -> str:
    """``user@host``: who is recorded with each decision a person makes, unless ``--operator`` says."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for this uid (a container)
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def _check_url(url: str | None) -> None:
    """``--url`` must be an http or https URL with a host: anything else is refused before anything starts."""
    if url is None:
        return
    from urllib.parse import urlsplit

    from .core.text import visible

    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise BuildError(f"--url must be an http:// or https:// URL with a host, not {visible(url, limit=100)!r}")


def _check_allow_domains(entries: tuple[str, ...]) -> None:
    from .core.allowlist import AllowList, AllowListError

    try:
        # the same grammar as the policy file's allow_domains and the proxy: refused here, not at
        # start
        AllowList.parse(entries)
    except AllowListError as exc:
        raise BuildError(f"--allow-domain: {exc}") from None


def _lab(name: str | None) -> Lab | None:
    if not name:
        return None
    from .labs import get_lab

    try:
        return get_lab(name)
    except ValueError as exc:
        raise BuildError(str(exc)) from None


def _policy(options: RunOptions, settings: Settings, lab: Lab | None) -> Policy:
    from .core.policy import Policy, PolicyError

    try:
        path = options.policy_path or settings.policy
        if options.policy_text is not None:
            policy = _given_policy(*options.policy_text)
        else:
            policy = Policy.load(path) if path else Policy.default()
        # the task's deadline for decisions, else the policy's, else the user's settings'
        timeout = options.decision_timeout
        if timeout is None and not policy.limits.decision_timeout and settings.decision_timeout:
            timeout = settings.decision_timeout
        policy = policy.with_limits(
            max_turns=options.max_turns, max_steps=options.max_steps, deadline_seconds=options.deadline,
            decision_timeout=timeout,
        )  # fmt: skip
        if lab is not None or options.regions:
            policy = policy.with_regions([*(lab.regions() if lab is not None else []), *options.regions])
    except PolicyError as exc:
        raise BuildError(str(exc)) from None
    return policy


def _given_policy(text: str, sha256: str) -> Policy:
    """A policy given as its text (a team's task), which must be the text its SHA-256 names."""
    import hashlib

    from .core.policy import Policy

    if hashlib.sha256(text.encode()).hexdigest() != sha256:
        raise BuildError("the task's policy text does not match its SHA-256: refused")
    return Policy.from_toml(text, source=f"task policy {sha256[:12]}")


def _audit_key(path: Path | None, runs: Path) -> AuditKey | None:
    if path is None:
        return None
    from .core.audit import AuditKey, AuditKeyError

    try:
        key = AuditKey.load(path, for_signing=True)
    except AuditKeyError as exc:
        raise BuildError(str(exc)) from None
    if not key.can_sign:
        raise BuildError(f"audit key {path}: a public key cannot sign; pass the private key or an HMAC secret")
    if path.resolve().is_relative_to(runs.resolve()):
        raise BuildError(
            f"audit key {path}: inside the runs directory {runs}, where run directories are shared and read; "
            "keep the key elsewhere (e.g. the config folder, `cua-tui locate`)"
        )
    return key


def _approver(decisions: str) -> Approver:
    from .headless_approvers import headless_approver

    if decisions == HANDSHAKE:
        # its answers carry the screen the reviewer was shown
        return HandshakeApprover(by=TUI_REVIEWER)

    try:
        return headless_approver(decisions)
    except ValueError as exc:
        raise BuildError(str(exc)) from None


def _agent(options: RunOptions, policy: Policy, settings: Settings) -> tuple[Agent, str]:
    from .agents.script import Script, ScriptAgent, ScriptError, load_texts
    from .agents.vendors import models
    from .factory import UnavailableError, make_agent

    try:
        scripted = options.script is not None or (options.agent or "").startswith("script:")
        if options.texts is not None and (options.agent_impl is not None or not scripted):
            raise BuildError("--texts: only for a script agent (--agent script:PATH)")
        texts = load_texts(options.texts) if options.texts is not None else None
        if options.agent_impl is not None:
            return options.agent_impl, options.agent_label or options.agent or "agent"
        if options.script is not None:
            label = options.agent_label or "script"
            return ScriptAgent(Script.from_data(options.script, source=label, texts=texts)), label
        if options.agent is None:
            raise BuildError("no agent: give --agent, a script or an agent")
        # a model with nothing to do: the real reason, before the key it would need
        if options.agent in models() and not options.task.strip() and options.lab is None:
            raise BuildError(
                "no task: the model has nothing to do; give --task TEXT (with --url URL for a page), "
                "or --lab NAME, which brings its own task"
            )
        return make_agent(
            options.agent, model=options.model, base_url=options.base_url, policy=policy, settings=settings,
            texts=texts, grammar=options.grammar,
        )  # fmt: skip
    except (ValueError, ScriptError, UnavailableError) as exc:
        if isinstance(exc, BuildError):
            raise
        raise BuildError(str(exc)) from None


def _desktop(options: RunOptions, size: Size, lab: Lab | None, policy: Policy, settings: Settings) -> Desktop:
    from .desktops.target import Target
    from .factory import UnavailableError, make_desktop

    # what it opens: the lab or the page, and the policy's domains and --allow-domain's beyond its origin
    target = Target(lab, options.url, (*policy.allow_domains, *options.allow_domains))
    try:
        return make_desktop(options.backend, size, target=target, settings=settings)
    except (ValueError, UnavailableError) as exc:
        raise BuildError(str(exc)) from None


def _rundir(runs: Path, run_id: str | None) -> RunDir:
    from .core.rundir import RunDir

    try:
        return RunDir.create(runs, run_id=run_id)
    except ValueError as exc:
        raise BuildError(f"run id: {exc}") from None
    except OSError as exc:
        raise BuildError(f"runs directory {runs}: {exc.strerror or exc}") from None
