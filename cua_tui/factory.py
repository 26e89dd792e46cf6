"""Desktops and agents by name, for the one builder (build.py), which makes every run.

Vendor packages are imported here lazily, only for the backend or agent chosen."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agents.prices import price_for
from .agents.redaction import public_url
from .agents.script import Script, ScriptAgent
from .agents.vendors import BASE_URL_VARIABLES, DEFAULT_MODELS, KEY_VARIABLES
from .core.errors import UsageError
from .core.geometry import Size
from .core.policy import Policy
from .core.ports import Agent, Desktop
from .core.text import either
from .desktops import BACKENDS, LAB_HOSTS

if TYPE_CHECKING:
    from .config import Settings


class UnavailableError(ValueError, UsageError):
    """A backend or agent that this build cannot provide on this machine (a usage error: exit 2)."""


def make_desktop(
    name: str,
    size: Size,
    *,
    lab: Any = None,
    url: str | None = None,
    allow_domains: tuple[str, ...] = (),
    settings: Settings,
) -> Desktop:
    if name == "cwsandbox":
        return _cwsandbox_desktop(size, lab, url, allow_domains, settings)
    if name == "docker":
        return _docker_desktop(size, lab, url, allow_domains, settings)
    if name == "local":
        from .desktops.local import LocalDesktop

        if lab is None and not url:
            raise UnavailableError("the local desktop needs --lab NAME or --url URL")
        return LocalDesktop(size, lab=lab, url=url, allow_domains=allow_domains)
    if (lab is not None or url) and name not in LAB_HOSTS:
        raise UnavailableError(
            f"--lab and --url need a desktop with a browser (--backend {either(LAB_HOSTS)}), not {name!r}"
        )
    if name == "dry":
        from .desktops.dry import DryDesktop

        return DryDesktop(size)
    if name == "sim":
        from .desktops.sim import SimDesktop

        return SimDesktop(size)
    raise UnavailableError(f"unknown desktop backend {name!r}; choose one of {', '.join(BACKENDS)}")


def _cwsandbox_desktop(
    size: Size, lab: Any, url: str | None, allow_domains: tuple[str, ...], settings: Settings
) -> Desktop:
    """The CoreWeave sandbox desktop, its endpoint and key from cwsandbox's variables or the settings file."""
    from .desktops.cwsandbox import CWSandboxDesktop

    if lab is None and not url:
        raise UnavailableError("the cwsandbox desktop needs --lab NAME or --url URL")
    options = sandbox_settings(settings)
    return CWSandboxDesktop(
        size, options, lab=lab.name if lab is not None else None, url=url, allow_domains=allow_domains
    )


def _docker_desktop(
    size: Size, lab: Any, url: str | None, allow_domains: tuple[str, ...], settings: Settings
) -> Desktop:
    """The desktop in a hardened container; an engine that is missing, not running or without the image
    is refused here, in one line, before anything starts."""
    from .desktops.docker import DockerDesktop, DockerSettings
    from .desktops.docker_engine import Engine

    if lab is None and not url:
        raise UnavailableError("the docker desktop needs --lab NAME or --url URL")
    options = DockerSettings(image=settings.docker_image) if settings.docker_image else DockerSettings()
    problem = Engine(options.docker).problem(options.image)
    if problem:
        raise UnavailableError(problem)
    return DockerDesktop(size, options, lab=lab, url=url, allow_domains=allow_domains)


def sandbox_settings(settings: Settings) -> Any:
    """CoreWeave's endpoint, key and sandbox options (a ``desktops.cwsandbox.SandboxSettings``)."""
    from .desktops.cwsandbox import SandboxSettings

    base_url, key = settings.sandbox_endpoint()
    if not key:
        raise UnavailableError(
            "the cwsandbox backend needs an API key: set CWSANDBOX_API_KEY in the environment "
            f"(or cwsandbox_api_key in {settings.config_file})"
        )
    if base_url and not base_url.startswith(("http://", "https://")):
        raise UnavailableError(f"CWSANDBOX_BASE_URL must be an http:// or https:// URL, not {public_url(base_url)!r}")
    extra = {k: v for k, v in settings.cwsandbox.items() if k != "base_url"}
    return SandboxSettings(base_url=base_url, api_key=key, **extra)  # type: ignore[arg-type]


def make_agent(
    spec: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    policy: Policy,
    settings: Settings,
    texts: dict[str, str] | None = None,
) -> tuple[Agent, str]:
    """Build the agent named by ``--agent``; return it with a label for run.json.

    Model agents take their key from the environment or the settings file (a missing key is an
    UnavailableError naming the variable), their base URL from ``base_url`` or the vendor's variable, and
    the policy's withheld kinds (the Anthropic toolset disables those members). ``texts`` fills a script's
    typed-text placeholders (``run --texts``)."""
    if spec.startswith("script:"):
        if model or base_url:
            unused = [flag for flag, value in (("--model", model), ("--base-url", base_url)) if value]
            raise UnavailableError(f"{', '.join(unused)}: only for the openai and anthropic agents, not {spec}")
        path = Path(spec.removeprefix("script:")).expanduser()
        return ScriptAgent(Script.load(path, texts)), f"script:{path}"
    if spec not in DEFAULT_MODELS:
        raise UnavailableError(f"unknown agent {spec!r}; use openai, anthropic or script:FILE")
    model = model or DEFAULT_MODELS[spec]
    key = settings.api_key(spec)
    if not key:
        raise UnavailableError(
            f"the {spec} agent needs an API key: set {KEY_VARIABLES[spec]} in the environment "
            f"(or {spec}_api_key in {settings.config_file})"
        )
    base_url = base_url or os.environ.get(BASE_URL_VARIABLES[spec]) or None
    if base_url and not base_url.startswith(("http://", "https://")):
        raise UnavailableError(f"--base-url must be an http:// or https:// URL, not {public_url(base_url)!r}")
    if policy.limits.max_cost_usd and price_for(model, settings.model_prices) is None:
        raise UnavailableError(
            f"the policy caps the cost at ${policy.limits.max_cost_usd:g}, but no price is known for model "
            f"{model!r}: cap max_tokens instead, or add the model under [model_prices] in {settings.config_file}"
        )
    options = {
        "base_url": base_url,
        "timeout": settings.model_timeout,
        "max_retries": settings.model_retries,
        "prices": settings.model_prices,
    }
    return _vendor_agent(spec, key, model, policy, options), spec


def _vendor_agent(spec: str, key: str, model: str, policy: Policy, options: dict[str, Any]) -> Agent:
    """The SDK-backed agent, its SDK imported only now (a missing package is an UnavailableError)."""
    try:
        if spec == "openai":
            from .agents.openai_agent import OpenAIAgent

            return OpenAIAgent(key, model, **options)
        from .agents.anthropic_agent import AnthropicAgent

        return AnthropicAgent(key, model, withheld=policy.withheld, **options)
    except ImportError as exc:
        raise UnavailableError(
            f"the {spec} agent needs the {exc.name or spec!r} package, which is not installed"
        ) from None


def versions() -> dict[str, str]:
    out = {}
    for name in ("cua-tui", "textual", "textual-image", "openai", "anthropic", "cwsandbox", "pillow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
