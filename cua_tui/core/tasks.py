"""The fleet's tasks file (TOML): the runs ``cua-tui fleet`` makes, one table per task, validated strictly
with errors that name the line. Which labs exist is the caller's to say (``parse_tasks(..., labs=names)``);
paths are returned as written, and ``TaskSpec.path_of`` resolves them against the file's folder.
The format: docs/files/tasks.md.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from .allowlist import AllowListError, parse_entry
from .errors import UsageError
from .policy import (
    _AT_END,
    _MANY_PARTS_RE,
    _PATH_PART_RE,
    _PATH_RE,
    _TOML_WHERE_RE,
    _UNKNOWN_FIELD,
    MAX_LIMIT,
    MAX_NESTING,
    _depth,
    _Layout,
)
from .safeio import FileProblem, read_small_file, text_of
from .text import visible

MAX_TASKS_BYTES = 1024 * 1024
MAX_TASKS = 1000
MAX_TASK_TEXT = 8000  # characters of task text: a paragraph or two is typical
MAX_FIELD = 4096  # a path, a model name, a URL
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
AGENTS = ("openai", "anthropic")


class TasksError(ValueError, UsageError):
    """A tasks file that cannot be used; the message names the file and, where known, the line. Made
    visible once here (control characters shown), so no caller prints an escape from a hostile file."""

    def __init__(self, message: str) -> None:
        super().__init__(visible(message))


class _Task(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str | None = None
    task: str = ""
    lab: str | None = None
    url: str | None = None
    agent: str | None = None
    model: str | None = None
    policy: str | None = None
    max_turns: int | None = None
    max_steps: int | None = None
    deadline_seconds: int | None = None
    allow_domains: list[str] = msgspec.field(default_factory=list)


class _TasksFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    version: int = 1
    name: str = ""
    tasks: list[_Task] = msgspec.field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task of the file, validated. ``None`` means "not set here": the command line's value applies."""

    name: str
    task: str = ""
    lab: str | None = None
    url: str | None = None
    agent: str | None = None
    model: str | None = None
    policy: str | None = None
    max_turns: int | None = None
    max_steps: int | None = None
    deadline_seconds: int | None = None
    allow_domains: tuple[str, ...] = ()
    line: int | None = None  # where its table starts in the file


@dataclass(frozen=True, slots=True)
class TasksFile:
    """A validated tasks file: its tasks in order, its name, and the SHA-256 of its exact bytes (UTF-8)."""

    source: str
    name: str
    tasks: tuple[TaskSpec, ...]
    sha256: str
    folder: str = "."  # the file's folder: relative paths in it are relative to this

    def path_of(self, written: str) -> str:
        """A path as the file wrote it, resolved against the file's folder (absolute paths stay)."""
        return written if os.path.isabs(written) else os.path.join(self.folder, written)


def load_tasks(path: str | Path, labs: Collection[str] | None = None) -> TasksFile:
    """Read (bounded) and validate a tasks file."""
    path = Path(path)
    data = _read_file(path)
    try:
        text = text_of(data)
    except FileProblem as exc:
        raise TasksError(f"tasks file {path}: {exc}") from None
    parsed = parse_tasks(text, str(path), labs=labs)
    folder = str(path.parent) if str(path.parent) else "."
    return TasksFile(parsed.source, parsed.name, parsed.tasks, hashlib.sha256(data).hexdigest(), folder)


def parse_tasks(text: str, source: str = "<tasks>", labs: Collection[str] | None = None) -> TasksFile:
    """Validate tasks file text. ``labs``: the lab names that exist (unchecked when None)."""
    if len(text) > MAX_TASKS_BYTES:
        raise TasksError(f"tasks file {source}: too large (over {MAX_TASKS_BYTES} characters)")
    layout = _Layout(text)
    if _MANY_PARTS_RE.search(text) and layout.too_deep_line() is not None:
        raise TasksError(_too_deep(source, layout))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TasksError(_toml_error(source, text, str(exc))) from None
    except RecursionError:
        raise TasksError(_too_deep(source, layout)) from None
    if _depth(data) > MAX_NESTING:
        raise TasksError(_too_deep(source, layout))
    tasks_value = data.get("tasks") if isinstance(data, dict) else None
    if isinstance(tasks_value, list) and len(tasks_value) > MAX_TASKS:
        raise TasksError(_at(source, layout, ("tasks", MAX_TASKS), f"more than {MAX_TASKS} tasks"))
    try:
        parsed = msgspec.convert(data, _TasksFile, strict=True)
    except msgspec.ValidationError as exc:
        raise TasksError(_locate_error(source, layout, str(exc))) from None
    if parsed.version != 1:
        raise TasksError(_at(source, layout, ("version",), f"unsupported version {parsed.version} (expected 1)"))
    if len(parsed.name) > 200:
        raise TasksError(_at(source, layout, ("name",), "at most 200 characters"))
    if not parsed.tasks:
        raise TasksError(_at(source, layout, (), "no tasks: add at least one [[tasks]] table"))
    specs: list[TaskSpec] = []
    seen: dict[str, int] = {}
    for i, task in enumerate(parsed.tasks):
        spec = _task(source, layout, i, task, labs)
        if spec.name in seen:
            problem = f"name {spec.name!r} is already used by task {seen[spec.name] + 1}: names must be unique"
            raise TasksError(_at(source, layout, ("tasks", i, "name"), problem))
        seen[spec.name] = i
        specs.append(spec)
    sha = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return TasksFile(source, parsed.name, tuple(specs), sha)


def _task(source: str, layout: _Layout, i: int, task: _Task, labs: Collection[str] | None) -> TaskSpec:
    def fail(key: str, problem: str, item: int | None = None) -> TasksError:
        path: tuple[Any, ...] = ("tasks", i, key) if key else ("tasks", i)
        return TasksError(_at(source, layout, path, problem, item=item))

    name = task.name if task.name is not None else f"task-{i + 1}"
    if not NAME_RE.fullmatch(name):
        raise fail("name", f"{name!r}: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    if len(task.task) > MAX_TASK_TEXT:
        raise fail("task", f"task text of {len(task.task)} characters exceeds {MAX_TASK_TEXT}")
    for key in ("lab", "url", "agent", "model", "policy"):
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
    scripted = task.agent is not None and task.agent.startswith("script:") and task.agent[7:].strip()
    if task.agent is not None and task.agent not in AGENTS and not scripted:
        raise fail("agent", f"{task.agent!r}: openai, anthropic or script:PATH")
    for key in ("max_turns", "max_steps", "deadline_seconds"):
        value = getattr(task, key)
        if value is not None and not 1 <= value <= MAX_LIMIT:
            raise fail(key, f"{key} must be between 1 and {MAX_LIMIT}")
    domains: dict[str, None] = {}
    for n, domain in enumerate(task.allow_domains):
        try:
            domains.setdefault(parse_entry(domain).text)
        except AllowListError as exc:
            raise fail("allow_domains", f"{domain!r} {exc.problem}", item=n) from None
    return TaskSpec(
        name=name,
        task=task.task,
        lab=task.lab,
        url=task.url,
        agent=task.agent,
        model=task.model,
        policy=task.policy,
        max_turns=task.max_turns,
        max_steps=task.max_steps,
        deadline_seconds=task.deadline_seconds,
        allow_domains=tuple(domains),
        line=layout.line_of(("tasks", i)),
    )


# ---------------------------------------------------------------------------------------------------
# Messages with their line (the policy file's scanner finds the line of a key path)
# ---------------------------------------------------------------------------------------------------
def _at(source: str, layout: _Layout, path: tuple[Any, ...], message: str, item: int | None = None) -> str:
    line = layout.line_of(path if item is None else (*path, item))
    where = f"line {line}" if line else "at top level"
    dotted = ".".join(str(p) for p in path)  # 0-based, as the policy file's messages count
    return f"tasks file {source}, {where}: {dotted + ': ' if dotted else ''}{message}"


def _locate_error(source: str, layout: _Layout, message: str) -> str:
    path: tuple[Any, ...] = ()
    cut = message.rfind(" - at `$")
    match = _PATH_RE.fullmatch(message, cut) if cut >= 0 else None
    if match:
        message = message[:cut]
        path = tuple(name if name else int(index) for name, index in _PATH_PART_RE.findall(match.group(1)))
    if message.startswith(_UNKNOWN_FIELD) and message.endswith("`"):
        name = message[len(_UNKNOWN_FIELD) : -1]
        path = (*path, name)
        message = f"unknown key {name!r}"
    return _at(source, layout, path, message)


def _toml_error(source: str, text: str, message: str) -> str:
    where = _TOML_WHERE_RE.search(message)
    if where:
        message = message[: where.start()]
        return f"tasks file {source}, line {where.group(1)}, column {where.group(2)}: invalid TOML: {message}"
    if message.endswith(_AT_END):
        last = text.count("\n") + (0 if text.endswith("\n") else 1)
        return (
            f"tasks file {source}, line {max(last, 1)}: invalid TOML at the end of the file: "
            + message.removesuffix(_AT_END)
        )
    return f"tasks file {source}: invalid TOML: {message}"


def _too_deep(source: str, layout: _Layout) -> str:
    line = layout.too_deep_line()
    where = f", line {line}" if line else ""
    return f"tasks file {source}{where}: nested more than {MAX_NESTING} levels deep (arrays, tables or dotted keys)"


def _read_file(path: Path) -> bytes:
    """The file's bytes (bounded, a regular file only: core.safeio)."""
    try:
        return read_small_file(path, MAX_TASKS_BYTES, "a tasks file")
    except FileProblem as exc:
        raise TasksError(f"tasks file {path}: {exc}") from None
