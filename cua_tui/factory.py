"""One factory builds desktops, agents and approvers by name, for the CLI, the tests and the screenshot
script alike. Vendor packages are imported here lazily, only for the backend or agent chosen."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

from .agents.script import Script, ScriptAgent
from .core.geometry import Size
from .core.ports import Agent, Desktop

BACKENDS = ("local", "cwsandbox", "docker", "dry", "sim")
AVAILABLE_BACKENDS = ("local", "dry", "sim")


class UnavailableError(ValueError):
    """A backend or agent that this build cannot provide (yet, or on this machine)."""


def make_desktop(
    name: str, size: Size, *, lab: Any = None, url: str | None = None, allow_domains: tuple[str, ...] = ()
) -> Desktop:
    if name == "local":
        from .desktops.local import LocalDesktop

        if lab is None and not url:
            raise UnavailableError("the local desktop needs --lab NAME or --url URL")
        return LocalDesktop(size, lab=lab, url=url, allow_domains=allow_domains)
    if lab is not None or url:
        raise UnavailableError(f"--lab and --url need the local desktop, not {name!r}")
    if name == "dry":
        from .desktops.dry import DryDesktop

        return DryDesktop(size)
    if name == "sim":
        from .desktops.sim import SimDesktop

        return SimDesktop(size)
    if name in BACKENDS:
        raise UnavailableError(
            f"the {name!r} desktop backend is not part of this build yet; available: {', '.join(AVAILABLE_BACKENDS)}"
        )
    raise UnavailableError(f"unknown desktop backend {name!r}; choose one of {', '.join(BACKENDS)}")


def make_agent(spec: str) -> tuple[Agent, str]:
    """Build the agent named by ``--agent``; return it with a label for run.json."""
    if spec.startswith("script:"):
        path = Path(spec.removeprefix("script:")).expanduser()
        return ScriptAgent(Script.load(path)), f"script:{path}"
    if spec in ("openai", "anthropic"):
        raise UnavailableError(f"the {spec!r} agent is not part of this build yet; use --agent script:FILE")
    raise UnavailableError(f"unknown agent {spec!r}; use openai, anthropic or script:FILE")


def versions() -> dict[str, str]:
    out = {}
    for name in ("cua-tui", "textual", "textual-image", "openai", "cwsandbox", "pillow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
