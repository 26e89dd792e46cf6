"""Settings: a TOML file plus environment variables, paths from platformdirs.

Order (later wins): built-in defaults, ``config.toml`` in the user config folder (or ``CUA_TUI_CONFIG``),
the environment, then command-line flags. Keys stay in this process: never in a repr, a message or a run.
Every setting: docs/files/settings.md.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from platformdirs import user_cache_path, user_config_path, user_data_path

from .agents.vendors import DEFAULT_RETRIES, DEFAULT_TIMEOUT, KEY_VARIABLES
from .core import tomlfile
from .core.guard import DEFAULT_GUARD_S, check_guard
from .core.policy import check_decision_timeout
from .core.tomlfile import TomlDoc, TomlFileError

APP = "cua-tui"
# A real settings file is a few lines; this bounds what a file that is not one costs.
MAX_SETTINGS_BYTES = 1024 * 1024


class ConfigError(TomlFileError):
    """A settings file that cannot be used; the message names the file and, where known, the line."""


class _File(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    runs_dir: str | None = None
    theme: str | None = None
    policy: str | None = None
    openai_api_key: str | None = None
    anthropic_api_key: str | None = None
    model_timeout: float | None = None  # seconds per model request
    model_retries: int | None = None  # retries on 429, 5xx and connection errors
    # model -> [input, output] USD per million tokens
    model_prices: dict[str, list[float]] | None = None
    cwsandbox_base_url: str | None = None
    cwsandbox_api_key: str | None = None
    cwsandbox_image: str | None = None
    cwsandbox_cpu: str | None = None
    cwsandbox_memory: str | None = None
    cwsandbox_max_lifetime: int | None = None
    cwsandbox_placement: str | None = None
    docker_image: str | None = None
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
    openai_api_key: str | None = field(default=None, repr=False)
    anthropic_api_key: str | None = field(default=None, repr=False)
    model_timeout: float = DEFAULT_TIMEOUT
    model_retries: int = DEFAULT_RETRIES
    model_prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    # the cwsandbox_* settings, without the key
    cwsandbox: dict[str, str | int] = field(default_factory=dict)
    cwsandbox_api_key: str | None = field(default=None, repr=False)
    docker_image: str | None = None  # None: the backend's default
    bell: bool = True
    notify: bool = True
    # seconds a decision just painted ignores y / a / n (k passes)
    decision_guard_s: float = DEFAULT_GUARD_S
    decision_timeout: float = 0.0
    # OTLP/HTTP endpoint for every run's spans (``--otel`` wins); None: no spans are sent
    otel_endpoint: str | None = None

    def sandbox_endpoint(self, env: dict[str, str] | None = None) -> tuple[str | None, str | None]:
        """CoreWeave's endpoint and API key: the client's own variables first, then the settings file."""
        env = dict(os.environ if env is None else env)
        url = (env.get("CWSANDBOX_BASE_URL") or "").strip() or str(self.cwsandbox.get("base_url") or "") or None
        key = (env.get("CWSANDBOX_API_KEY") or "").strip() or self.cwsandbox_api_key or None
        return url, key

    def api_key(self, vendor: str, env: dict[str, str] | None = None) -> str | None:
        """The API key for ``openai`` or ``anthropic``: the environment first, then the settings file."""
        env = dict(os.environ if env is None else env)
        name = KEY_VARIABLES["openai" if vendor == "openai" else "anthropic"]
        stored = self.openai_api_key if vendor == "openai" else self.anthropic_api_key
        return (env.get(name) or "").strip() or stored or None

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
        data = doc.convert(_File)
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
            openai_api_key=(data.openai_api_key or "").strip() or None,
            anthropic_api_key=(data.anthropic_api_key or "").strip() or None,
            model_timeout=data.model_timeout if data.model_timeout is not None else DEFAULT_TIMEOUT,
            model_retries=data.model_retries if data.model_retries is not None else DEFAULT_RETRIES,
            model_prices=prices,
            cwsandbox=_sandbox_settings(doc, data, env),
            cwsandbox_api_key=(data.cwsandbox_api_key or "").strip() or None,
            docker_image=(env.get("CUA_TUI_DOCKER_IMAGE") or data.docker_image or "").strip() or None,
            bell=_switch(env, "CUA_TUI_BELL", data.bell),
            notify=_switch(env, "CUA_TUI_NOTIFY", data.notify),
            decision_guard_s=data.decision_guard_s if data.decision_guard_s is not None else DEFAULT_GUARD_S,
            decision_timeout=data.decision_timeout or 0.0,
            otel_endpoint=otel,
            cache_dir=Path(env.get("CUA_TUI_CACHE_DIR") or user_cache_path(APP)).expanduser(),
        )


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


def _sandbox_settings(doc: TomlDoc, data: _File, env: dict[str, str]) -> dict[str, str | int]:
    out: dict[str, str | int] = {}
    for name in ("base_url", "image", "cpu", "memory", "placement"):
        value = getattr(data, f"cwsandbox_{name}")
        if value is not None and value.strip():
            out[name] = value.strip()
    if (env.get("CUA_TUI_CWSANDBOX_IMAGE") or "").strip():
        # as CUA_TUI_DOCKER_IMAGE for the docker backend
        out["image"] = env["CUA_TUI_CWSANDBOX_IMAGE"].strip()
    if data.cwsandbox_max_lifetime is not None:
        if not 60 <= data.cwsandbox_max_lifetime <= 86400:
            raise doc.error(("cwsandbox_max_lifetime",), "must be 60 to 86400 seconds")
        out["max_lifetime_seconds"] = data.cwsandbox_max_lifetime
    if out.get("placement") not in (None, "serverless", "cks"):
        raise doc.error(("cwsandbox_placement",), "must be serverless or cks")
    return out
