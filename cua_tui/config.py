"""Settings: a TOML file plus environment variables, paths from platformdirs.

Order (later wins): built-in defaults, ``config.toml`` in the user config folder (or ``CUA_TUI_CONFIG``),
the environment, then command-line flags. Keys stay in this process: never in a repr, a message or a run.
Every setting: docs/files/settings.md.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from platformdirs import user_cache_path, user_config_path, user_data_path

from .agents.vendors import DEFAULT_RETRIES, DEFAULT_TIMEOUT, VENDORS, UnknownVendor, Vendor, models
from .core import tomlfile
from .core.drills import DrillError, rate_of
from .core.guard import DEFAULT_GUARD_S, check_guard
from .core.policy import check_decision_timeout
from .core.text import one_line, visible
from .core.tomlfile import TomlFileError
from .desktops import BACKENDS, Backend, backend_named

APP = "cua-tui"
# A real settings file is a few lines; this bounds what a file that is not one costs.
MAX_SETTINGS_BYTES = 1024 * 1024


class ConfigError(TomlFileError):
    """A settings file that cannot be used; the message names the file and, where known, the line."""


class _Base(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The settings every install has; the vendors' and backends' tables are added to it by name (``_schema``)."""

    runs_dir: str | None = None
    theme: str | None = None
    policy: str | None = None
    model_timeout: float | None = None  # seconds per model request
    model_retries: int | None = None  # retries on 429, 5xx and connection errors
    # model -> [input, output] USD per million tokens
    model_prices: dict[str, list[float]] | None = None
    # ring the terminal bell when a decision starts waiting
    bell: bool | None = None
    # and send a desktop notification escape where the terminal shows one
    notify: bool | None = None
    # seconds a new decision ignores y / a / n (never below the floor)
    decision_guard_s: float | None = None
    # seconds a decision waits before it is rejected, where the policy sets none (0 or absent: none)
    decision_timeout: float | None = None
    # where runs send their OpenTelemetry spans (OTLP over HTTP); absent: nowhere
    otel_endpoint: str | None = None
    # a team's queue: the PostgreSQL URL that ``worker``, ``attach`` and ``fleet --queue`` use by default
    queue: str | None = None
    on_escalate: str | None = None
    # drills (core/drills.py): the chance of one before each real request, or one every N on average
    drill_rate: float | None = None
    drill_every: float | None = None
    # the drill library (a folder with drills.json); absent: the user data folder's drills/
    drill_library: str | None = None
    # whether the drills the project ships (recorded from its labs) join the library's; absent: they do
    drill_shipped: bool | None = None


class ModelTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A model vendor's table (``[openai]``, ``[anthropic]``): its key and base URL, each optional. The key
    is never in its repr."""

    api_key: str | None = None
    base_url: str | None = None

    def __repr__(self) -> str:
        return f"ModelTable(api_key={'set' if self.api_key else None}, base_url={self.base_url!r})"


@dataclass(frozen=True)
class _Table:
    """One registered table of the settings file: its name, type, flat keys of old and environment."""

    name: str
    schema: type[Any]
    flat_keys: tuple[str, ...]
    environment: Mapping[str, str]


@dataclass(frozen=True)
class Settings:
    """Where things live and which defaults apply."""

    config_dir: Path
    config_file: Path
    runs_dir: Path
    themes_dir: Path
    theme: str = "cua-dark"
    # this user's cache (``runs`` remembers the verdicts of unchanged runs there); None: nothing kept
    cache_dir: Path | None = None
    policy: Path | None = None
    model_timeout: float = DEFAULT_TIMEOUT
    model_retries: int = DEFAULT_RETRIES
    model_prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    bell: bool = True
    notify: bool = True
    # seconds a decision just painted ignores y / a / n (k passes)
    decision_guard_s: float = DEFAULT_GUARD_S
    decision_timeout: float = 0.0
    # OTLP/HTTP endpoint for every run's spans (``--otel`` wins); None: no spans are sent
    otel_endpoint: str | None = None
    # a team's queue (a PostgreSQL URL, which may hold a password: never in a repr); CUA_TUI_QUEUE wins
    queue: str | None = field(default=None, repr=False)
    # run when a request escalates to this analyst's group (``attach``): read from this file only, never from
    # the environment, a task, a policy or the database; it gets the request and can never answer it
    on_escalate: str | None = None
    # drills before real requests: the chance of one (0: off), and the library's folder
    drill_rate: float = 0.0
    drill_library: Path | None = None
    drill_shipped: bool = True
    # the vendors' and backends' tables as the file has them (keys among them: never in a repr)
    tables: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def vendor_table(self, vendor: str, env: Mapping[str, str] | None = None) -> Any:
        """A registered vendor's ``[vendor]`` table (a ModelTable, or the vendor's own type), its environment
        variables winning (key, base URL)."""
        found = VENDORS.get(vendor)
        if found is None or not found.key_variable:
            raise UnknownVendor(f"vendor {vendor!r} has no settings; model vendors: {', '.join(models())}")
        return self._table(_vendor_table(found), env)

    def api_key(self, vendor: str, env: Mapping[str, str] | None = None) -> str | None:
        """The API key of a registered vendor: the environment first, then the settings file."""
        key: str | None = self.vendor_table(vendor, env).api_key
        return key

    def backend_table(self, backend: str, env: Mapping[str, str] | None = None) -> Any:
        """A registered backend's ``[backend]`` table (None for one without a table), the environment's
        variables winning."""
        table = _backend_table(backend_named(backend))
        return self._table(table, env) if table is not None else None

    def _table(self, table: _Table, env: Mapping[str, str] | None) -> Any:
        env = os.environ if env is None else env
        found = self.tables.get(table.name) or table.schema()
        given = {
            name: value for name, variable in table.environment.items() if (value := (env.get(variable) or "").strip())
        }
        return msgspec.structs.replace(found, **given) if given else found

    @classmethod
    def load(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        config_dir = user_config_path(APP)
        config_file = Path(env.get("CUA_TUI_CONFIG") or config_dir / "config.toml")
        label = f"settings file {config_file}"
        # No file (or something that is not one, such as /dev/null): the defaults.
        if config_file.is_file():
            doc = tomlfile.load(config_file, label, cap=MAX_SETTINGS_BYTES, what="a settings file", error=ConfigError)
        else:
            doc = tomlfile.parse("", label, error=ConfigError)
        tables = _present_tables(doc.data)
        data: Any = doc.convert(_schema(tables))
        runs_dir = Path(env.get("CUA_TUI_RUNS_DIR") or data.runs_dir or user_data_path(APP) / "runs").expanduser()
        if data.model_timeout is not None and not (math.isfinite(data.model_timeout) and data.model_timeout > 0):
            raise doc.error(("model_timeout",), "must be a positive number of seconds")
        if data.model_retries is not None and not 0 <= data.model_retries <= 10:
            raise doc.error(("model_retries",), "must be between 0 and 10")
        if data.decision_guard_s is not None and (why := check_guard(data.decision_guard_s)) is not None:
            raise doc.error(("decision_guard_s",), why)
        if data.decision_timeout is not None and (why := check_decision_timeout(data.decision_timeout)) is not None:
            raise doc.error(("decision_timeout",), why)
        otel = (data.otel_endpoint or "").strip() or None
        if otel is not None and (why := check_otel_endpoint(otel)) is not None:
            raise doc.error(("otel_endpoint",), why)
        on_escalate = (data.on_escalate or "").strip() or None
        if on_escalate is not None and (why := check_command(on_escalate)) is not None:
            raise doc.error(("on_escalate",), why)
        try:
            drill_rate = rate_of(data.drill_rate, data.drill_every, f"settings file {config_file}")
        except DrillError as exc:
            which = "drill_rate" if data.drill_rate is not None else "drill_every"
            raise doc.error((which,), str(exc).split(": ", 1)[-1]) from None
        prices: dict[str, tuple[float, float]] = {}
        for model, pair in (data.model_prices or {}).items():
            if len(pair) != 2 or not all(math.isfinite(p) and p >= 0 for p in pair):
                raise doc.error(("model_prices", model), "must be [input, output] USD per million tokens")
            prices[model] = (float(pair[0]), float(pair[1]))
        return cls(
            config_dir=config_dir,
            config_file=config_file,
            runs_dir=runs_dir,
            themes_dir=config_dir / "themes",
            theme=env.get("CUA_TUI_THEME") or data.theme or "cua-dark",
            policy=Path(data.policy).expanduser() if data.policy else None,
            model_timeout=data.model_timeout if data.model_timeout is not None else DEFAULT_TIMEOUT,
            model_retries=data.model_retries if data.model_retries is not None else DEFAULT_RETRIES,
            model_prices=prices,
            bell=_switch(env, "CUA_TUI_BELL", data.bell),
            notify=_switch(env, "CUA_TUI_NOTIFY", data.notify),
            decision_guard_s=data.decision_guard_s if data.decision_guard_s is not None else DEFAULT_GUARD_S,
            decision_timeout=data.decision_timeout or 0.0,
            otel_endpoint=otel,
            queue=(env.get("CUA_TUI_QUEUE") or data.queue or "").strip() or None,
            on_escalate=on_escalate,
            cache_dir=Path(env.get("CUA_TUI_CACHE_DIR") or user_cache_path(APP)).expanduser(),
            tables={table.name: _read_table(table, data, config_file) for table in tables},
            drill_rate=drill_rate,
            drill_library=Path(data.drill_library or user_data_path(APP) / "drills").expanduser(),
            drill_shipped=data.drill_shipped is not False,
        )


# ------------------------------------------------------------------------------------------------
# The tables of the registered vendors and backends: ``[name]``, and the flat ``name_key`` of old
# --------------------------------------------------------------------------------------------------
def _vendor_table(vendor: Vendor) -> _Table:
    environment = {"api_key": vendor.key_variable, "base_url": vendor.base_url_variable}
    schema = vendor.settings_type() or ModelTable
    return _Table(vendor.name, schema, vendor.flat_keys, {k: v for k, v in environment.items() if v})


def _backend_table(backend: Backend) -> _Table | None:
    schema = backend.settings_type()
    return _Table(backend.name, schema, backend.flat_keys, backend.environment) if schema is not None else None


def _present_tables(data: Mapping[str, Any]) -> list[_Table]:
    """The registered tables the file sets (by table or flat key): a backend's type is imported only then."""
    tables: list[_Table] = []
    for vendor in VENDORS.values():
        if vendor.key_variable:
            tables.append(_vendor_table(vendor))
    for backend in BACKENDS.values():
        named = backend.name in data or any(f"{backend.name}_{key}" in data for key in backend.flat_keys)
        if backend.settings is not None and named and (table := _backend_table(backend)) is not None:
            tables.append(table)
    return [t for t in tables if t.name in data or any(f"{t.name}_{key}" in data for key in t.flat_keys)]


def _schema(tables: list[_Table]) -> type[Any]:
    """The settings file's schema: the fixed keys, and each table present with its flat keys of old (typed
    as the table's own, so that every error names its line)."""
    fields: list[tuple[str, Any, Any]] = []
    for table in tables:
        types = {f.name: f.type for f in msgspec.structs.fields(table.schema)}
        fields.append((_attr(table.name), table.schema | None, None))
        fields.extend((f"{_attr(table.name)}_{key}", types[key], None) for key in table.flat_keys)
    # a table named with a hyphen ([openai-compatible]) is an attribute with an underscore, read by its name
    rename = {_attr(t.name): t.name for t in tables if _attr(t.name) != t.name}
    return msgspec.defstruct(
        "_File", fields, bases=(_Base,), forbid_unknown_fields=True, kw_only=True, rename=rename or None
    )


def _attr(name: str) -> str:
    return name.replace("-", "_")


def _read_table(table: _Table, data: Any, config_file: Path) -> Any:
    """A table as the file sets it: its own keys over the flat ones of old (said once, on stderr); text
    trimmed, an empty string as absent."""
    flat = {key: value for key in table.flat_keys if (value := getattr(data, f"{_attr(table.name)}_{key}")) is not None}
    if flat:
        old = ", ".join(f"{table.name}_{key}" for key in flat)
        deprecated(
            f"{config_file}: {old}: deprecated, write {', '.join(flat)} under [{table.name}] "
            "(the flat keys are read until the next release)"
        )
    found = getattr(data, _attr(table.name)) or table.schema()
    values = {**flat, **{f: v for f in found.__struct_fields__ if (v := getattr(found, f)) is not None}}
    values = {k: v.strip() if isinstance(v, str) else v for k, v in values.items()}
    return table.schema(**{k: v for k, v in values.items() if v != ""})


_NOTED: set[str] = set()


def deprecated(note: str) -> None:
    """A deprecation note: one line on stderr, once per process (it names keys, never their values)."""
    if note not in _NOTED:
        _NOTED.add(note)
        print(f"cua-tui: note: {visible(one_line(note, 400))}", file=sys.stderr)


def check_command(command: str) -> str | None:
    """Why ``command`` cannot be run as a command line (None: it can)."""
    import shlex

    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"is not a command line ({exc})"
    return None if argv else "is an empty command"


def check_otel_endpoint(url: str) -> str | None:
    """Why ``url`` cannot receive spans (None: it can): an http:// or https:// URL with a host and no user
    part (credentials go in OTEL_EXPORTER_OTLP_HEADERS, never in a URL that is shown)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host (an OTLP/HTTP endpoint, e.g. http://localhost:4318)"
    if parts.username is not None or parts.password is not None:
        return "must not hold a user or password: give credentials in OTEL_EXPORTER_OTLP_HEADERS"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "must not hold spaces or control characters"
    return None


def _switch(env: dict[str, str], name: str, stored: bool | None) -> bool:
    """An on/off setting: the environment (``0``, ``off``, ``false``, ``no``: off) over the file; on by default."""
    value = env.get(name)
    if value is not None and value.strip():
        return value.strip().lower() not in ("0", "off", "false", "no")
    return True if stored is None else stored
