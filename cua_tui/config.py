"""Settings: a TOML file plus environment variables, paths from platformdirs.

Order (later wins): built-in defaults, ``config.toml`` in the user config folder (or ``CUA_TUI_CONFIG``),
environment variables ``CUA_TUI_RUNS_DIR`` / ``CUA_TUI_THEME``, then command-line flags.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import msgspec
from platformdirs import user_config_path, user_data_path

APP = "cua-tui"


class ConfigError(ValueError):
    """A settings file that cannot be used."""


class _File(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    runs_dir: str | None = None
    theme: str | None = None
    policy: str | None = None


@dataclass(frozen=True)
class Settings:
    """Where things live and which defaults apply."""

    config_dir: Path
    config_file: Path
    runs_dir: Path
    themes_dir: Path
    theme: str = "cua-dark"
    policy: Path | None = None

    @classmethod
    def load(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        config_dir = user_config_path(APP)
        config_file = Path(env.get("CUA_TUI_CONFIG") or config_dir / "config.toml")
        data = _File()
        if config_file.is_file():
            try:
                raw = tomllib.loads(config_file.read_text(encoding="utf-8"))
                data = msgspec.convert(raw, _File, strict=True)
            except (tomllib.TOMLDecodeError, msgspec.ValidationError, OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"settings file {config_file}: {exc}") from None
        runs_dir = Path(env.get("CUA_TUI_RUNS_DIR") or data.runs_dir or user_data_path(APP) / "runs").expanduser()
        return cls(
            config_dir=config_dir,
            config_file=config_file,
            runs_dir=runs_dir,
            themes_dir=config_dir / "themes",
            theme=env.get("CUA_TUI_THEME") or data.theme or "cua-dark",
            policy=Path(data.policy).expanduser() if data.policy else None,
        )
