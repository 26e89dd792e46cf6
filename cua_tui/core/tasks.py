"""The fleet's tasks file (TOML): the runs ``cua-tui fleet`` makes, one table per task, validated strictly
with errors that name the line. Which labs and agents exist, and which backends can host a lab, are the
caller's to say (``parse_tasks(..., labs=names, agents=forms, backend=(name, hosts))``); paths are returned
as written, and ``TaskSpec.path_of`` resolves them against the file's folder. The format: docs/files/tasks.md.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from . import tomlfile
from .allowlist import AllowListError, parse_entry
from .drills import DrillError, rate_of
from .policy import MAX_LIMIT, check_decision_timeout
from .text import either
from .tomlfile import KeyPath, TomlDoc, TomlFileError

MAX_TASKS_BYTES = 1024 * 1024
MAX_TASKS = 1000
# characters of task text: a paragraph or two is typical
MAX_TASK_TEXT = 8000
MAX_FIELD = 4096  # a path, a model name, a URL
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class TasksError(TomlFileError):
    """A tasks file that cannot be used; the message names the file and, where known, the line (and is
    made visible: core.tomlfile)."""


class _Settings(msgspec.Struct, frozen=True, kw_only=True):
    """What a task may set for its run. ``None`` means "not set here": the command line's value applies."""

    task: str = ""
    lab: str | None = None
    url: str | None = None
    agent: str | None = None
    model: str | None = None
    policy: str | None = None
    max_turns: int | None = None
    max_steps: int | None = None
    deadline_seconds: int | None = None
    # this task's decisions are rejected after so many seconds without an answer (0: none)
    decision_timeout: float | None = None
    allow_domains: tuple[str, ...] = ()
    # the desktop of this task's run (a registered backend); None: the command line's --backend
    backend: str | None = None
    # drills before this task's real requests (core/drills.py): a chance, or one every N on average; they
    # win over the analyst's settings
    drill_rate: float | None = None
    drill_every: float | None = None


class _Task(_Settings, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A ``[[tasks]]`` table as written."""

    name: str | None = None


class _TasksFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = 1
    name: str = ""
    tasks: list[_Task] = msgspec.field(default_factory=list)


class TaskSpec(_Settings, frozen=True, kw_only=True):
    """One task of the file, validated: its settings, its name, and where its table starts in the file."""

    name: str
    line: int | None = None


@dataclass(frozen=True, slots=True)
class TasksFile:
    """A validated tasks file: its tasks in order, its name, and the SHA-256 of its exact bytes (UTF-8)."""

    source: str
    name: str
    tasks: tuple[TaskSpec, ...]
    sha256: str
    # the file's folder: relative paths in it are relative to this
    folder: str = "."

    def path_of(self, written: str) -> str:
        """A path as the file wrote it, resolved against the file's folder (absolute paths stay)."""
        return written if os.path.isabs(written) else os.path.join(self.folder, written)


# the backend every run of the fleet gets, and the backends that can host a lab or a URL
Backend = tuple[str, Collection[str]]


def load_tasks(
    path: str | Path,
    labs: Collection[str] | None = None,
    backend: Backend | None = None,
    agents: Collection[str] | None = None,
    backends: Collection[str] | None = None,
) -> TasksFile:
    """Read (bounded) and validate a tasks file."""
    path = Path(path)
    label = f"tasks file {path}"
    data = tomlfile.read_bytes(path, label, cap=MAX_TASKS_BYTES, what="a tasks file", error=TasksError)
    text = tomlfile.decode(data, label, TasksError)
    parsed = parse_tasks(text, str(path), labs=labs, backend=backend, agents=agents, backends=backends)
    folder = str(path.parent) if str(path.parent) else "."
    return TasksFile(parsed.source, parsed.name, parsed.tasks, hashlib.sha256(data).hexdigest(), folder)


def parse_tasks(
    text: str,
    source: str = "<tasks>",
    labs: Collection[str] | None = None,
    backend: Backend | None = None,
    agents: Collection[str] | None = None,
    backends: Collection[str] | None = None,
) -> TasksFile:
    """Validate tasks file text. ``labs``: the lab names that exist (unchecked when None); ``backend``: the
    runs' backend and those that can host a lab or a URL (a task naming one on another is refused);
    ``agents``: the registered agents as ``--agent`` takes them ("openai", "script:PATH"; unchecked when
    None); ``backends``: the registered backends a task may name (unchecked when None)."""
    doc = tomlfile.parse(text, f"tasks file {source}", cap=MAX_TASKS_BYTES, error=TasksError)
    tasks_value = doc.data.get("tasks")
    if isinstance(tasks_value, list) and len(tasks_value) > MAX_TASKS:
        raise doc.error(("tasks", MAX_TASKS), f"more than {MAX_TASKS} tasks")
    parsed = doc.convert(_TasksFile)
    if parsed.version != 1:
        raise doc.error(("version",), f"unsupported version {parsed.version} (expected 1)")
    if len(parsed.name) > 200:
        raise doc.error(("name",), "at most 200 characters")
    if not parsed.tasks:
        raise doc.error((), "no tasks: add at least one [[tasks]] table")
    # Where each task's table starts, found in one pass over the text.
    lines = doc.lines_of([("tasks", i) for i in range(len(parsed.tasks))])
    specs: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for i, task in enumerate(parsed.tasks):
        spec = _task(doc, i, task, labs, lines[("tasks", i)])
        if agents is not None and spec.agent is not None and not _agent_known(spec.agent, agents):
            raise doc.error(("tasks", i, "agent"), f"{spec.agent!r}: {either(tuple(agents))}")
        if spec.backend is not None and backends is not None and spec.backend not in backends:
            raise doc.error(("tasks", i, "backend"), f"{spec.backend!r}: {either(tuple(backends))}")
        if backend is not None:
            _hosted(doc, i, spec, spec.backend or backend[0], backend[1])
        if spec.name in seen:
            problem = f"name {spec.name!r} is already used by task {seen[spec.name] + 1}: names must be unique"
            raise doc.error(("tasks", i, "name"), problem)
        seen[spec.name] = i
        specs.append(spec)
    sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return TasksFile(source, parsed.name, tuple(specs), sha)


def _task(doc: TomlDoc, i: int, task: _Task, labs: Collection[str] | None, line: int | None) -> TaskSpec:
    def fail(key: str, problem: str, item: int | None = None) -> TomlFileError:
        path: KeyPath = ("tasks", i, key) if key else ("tasks", i)
        return doc.error(path, problem, item=item)

    name = task.name if task.name is not None else f"task-{i + 1}"
    if not NAME_RE.fullmatch(name):
        raise fail("name", f"{name!r}: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    if len(task.task) > MAX_TASK_TEXT:
        raise fail("task", f"task text of {len(task.task)} characters exceeds {MAX_TASK_TEXT}")
    for key in ("lab", "url", "agent", "model", "policy", "backend"):
        value = getattr(task, key)
        if value is not None and not value.strip():
            raise fail(key, "must not be empty")
        if value is not None and len(value) > MAX_FIELD:
            raise fail(key, f"at most {MAX_FIELD} characters")
    if task.lab is not None and task.url is not None:
        raise fail("url", "give lab or url, not both")
    if task.lab is not None and labs is not None and task.lab not in labs:
        raise fail("lab", f"unknown lab {task.lab!r}; known: {', '.join(sorted(labs))}")
    if task.url is not None:
        try:
            parts = urlsplit(task.url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise fail("url", f"{task.url!r}: an http:// or https:// URL with a host")
    if task.lab is None and not task.task.strip():
        raise fail("task", 'a task needs its text (task = "...") unless it names a lab, which has its own')
    for key in ("max_turns", "max_steps", "deadline_seconds"):
        value = getattr(task, key)
        if value is not None and not 1 <= value <= MAX_LIMIT:
            raise fail(key, f"{key} must be between 1 and {MAX_LIMIT}")
    if task.decision_timeout is not None:
        timeout = task.decision_timeout
        why = "decision_timeout must be a finite number" if not math.isfinite(timeout) else None
        if (why := why or check_decision_timeout(timeout)) is not None:
            raise fail("decision_timeout", why)
    try:
        rate_of(task.drill_rate, task.drill_every, "drills")
    except DrillError as exc:
        raise fail(
            "drill_rate" if task.drill_rate is not None else "drill_every", str(exc).split(": ", 1)[-1]
        ) from None
    domains: dict[str, None] = {}
    for n, domain in enumerate(task.allow_domains):
        try:
            domains.setdefault(parse_entry(domain).text)
        except AllowListError as exc:
            raise fail("allow_domains", f"{domain!r} {exc.problem}", item=n) from None
    settings = msgspec.structs.asdict(task) | {"name": name, "allow_domains": tuple(domains), "line": line}
    return TaskSpec(**settings)


def _agent_known(agent: str, forms: Collection[str]) -> bool:
    """``agent`` is one of ``forms``, or a ``name:ARGUMENT`` form's name with an argument."""
    name, colon, rest = agent.partition(":")
    return agent in forms or (bool(colon) and bool(rest.strip()) and any(f.startswith(name + ":") for f in forms))


def _hosted(doc: TomlDoc, i: int, spec: TaskSpec, backend: str, hosts: Collection[str]) -> None:
    """A task's lab or URL on a backend that cannot open it (sim, dry): refused before any run starts, in
    one line naming the backends that can (each of its runs would fail at its first screen)."""
    if backend in hosts or (spec.lab is None and spec.url is None):
        return
    key, what = ("lab", f"lab {spec.lab!r}") if spec.lab is not None else ("url", "a URL")
    can = either(tuple(hosts)) if hosts else "none"
    raise doc.error(("tasks", i, key), f"{what} needs a desktop with a browser: --backend {can}, not {backend}")
