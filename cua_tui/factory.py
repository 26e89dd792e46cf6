"""Desktops and agents by name, for the one builder (build.py), which makes every run: each looked up in its
registry (desktops.BACKENDS, agents.vendors.VENDORS), never by an if-chain on its name.

Vendor packages are imported here lazily, only for the backend or agent chosen."""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from .agents.prices import price_for
from .agents.redaction import public_url
from .agents.vendors import VENDORS, AgentRequest, vendor_of
from .core.errors import Unavailable
from .core.geometry import Size
from .core.policy import Policy
from .core.ports import Agent, Desktop
from .core.text import either
from .desktops import BACKENDS, backend_named, lab_hosts

if TYPE_CHECKING:
    from .config import Settings
    from .desktops.target import Target


# A backend or agent that this build cannot provide on this machine (a usage error: exit 2): the core's,
# which the desktops' builders raise too.
UnavailableError = Unavailable


def make_desktop(name: str, size: Size, *, target: Target, settings: Settings) -> Desktop:
    """The desktop of the backend registered as ``name``, built by its record's builder with its settings
    table; a lab or a URL (``target``) only on a backend with a browser, which needs one of them; empty,
    ``Target()``, for one without."""
    backend = backend_named(name)
    if backend.browser:
        target.require(name)
    elif target.given:
        raise UnavailableError(
            f"--lab and --url need a desktop with a browser (--backend {either(lab_hosts())}), not {name!r}"
        )
    build = backend.builder_function()
    desktop: Desktop = build(size, settings.backend_table(name), target=target, config_file=settings.config_file)
    return desktop


def make_agent(
    spec: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    policy: Policy,
    settings: Settings,
    texts: dict[str, str] | None = None,
    grammar: str | None = None,
) -> tuple[Agent, str]:
    """Build the agent named by ``--agent``; return it with a label for run.json.

    A vendor's options are its own: a flag its record does not take is refused. Model agents take their
    key from the environment or the settings' table (a missing key is an UnavailableError naming the
    variable), their base URL from ``base_url``, the vendor's variable or its table, and the policy's
    withheld kinds (the Anthropic toolset disables those members). ``texts`` fills a script's typed-text
    placeholders (``run --texts``)."""
    vendor, argument = vendor_of(spec)
    given = {"model": model, "base_url": base_url, "grammar": grammar}
    unused = [name for name, value in given.items() if value and name not in vendor.options]
    if unused:
        *most, last = [v.name for v in VENDORS.values() if unused[0] in v.options] or ["no"]
        takers = f"{', '.join(most)} and {last}" if most else last
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in unused)
        raise UnavailableError(f"{flags}: only for the {takers} agents, not {spec}")
    request = AgentRequest(vendor, argument, withheld=policy.withheld, texts=texts)
    if vendor.key_variable:
        table = settings.vendor_table(vendor.name)
        key = table.api_key or _named_key(table)
        if not key and not vendor.key_optional:
            raise UnavailableError(
                f"the {vendor.name} agent needs an API key: set {vendor.key_variable} in the environment "
                f"(or api_key under [{vendor.name}] in {settings.config_file})"
            )
        base_url = base_url or table.base_url
        if base_url and not base_url.startswith(("http://", "https://")):
            raise UnavailableError(f"--base-url must be an http:// or https:// URL, not {public_url(base_url)!r}")
        model = model or getattr(table, "model", None) or vendor.default_model
        grammar = grammar or getattr(table, "grammar", None)
        if "grammar" in vendor.options:
            _check_open_weight(vendor.name, model, base_url, grammar, settings)
        request = AgentRequest(
            vendor,
            argument,
            key=key,
            model=model,
            base_url=base_url,
            withheld=policy.withheld,
            timeout=settings.model_timeout,
            retries=settings.model_retries,
            prices=settings.model_prices,
            texts=texts,
            grammar=grammar,
        )
    free = vendor.free and model is not None
    if (
        model
        and policy.limits.max_cost_usd
        and not free
        and price_for(model, settings.model_prices, vendor.prices) is None
    ):
        raise UnavailableError(
            f"the policy caps the cost at ${policy.limits.max_cost_usd:g}, but no price is known for model "
            f"{model!r}: cap max_tokens instead, or add the model under [model_prices] in {settings.config_file}"
        )
    label = f"{vendor.name}:{Path(argument).expanduser()}" if vendor.argument else vendor.name
    try:
        return request.build(), label
    except ImportError as exc:
        # the vendor's SDK, imported only now
        raise UnavailableError(
            f"the {vendor.name} agent needs the {exc.name or vendor.name!r} package, which is not installed"
        ) from None


def _named_key(table: object) -> str | None:
    """The key in the environment variable a vendor's table names (``api_key_variable``), if any."""
    variable = getattr(table, "api_key_variable", None)
    return (os.environ.get(variable) or "").strip() or None if variable else None


def _check_open_weight(
    name: str, model: str | None, base_url: str | None, grammar: str | None, settings: Settings
) -> None:
    """An open-weight model's run names its server and model, and its grammar is known (given, or inferred
    from the model's name; never a default): each missing one a one-line usage error."""
    from .core.grammars import UnknownGrammar, grammar_for

    if not base_url:
        raise UnavailableError(
            f"the {name} agent needs --base-url: the address of your vLLM or SGLang server (e.g. "
            f"http://127.0.0.1:8000/v1; or base_url under [{name}] in {settings.config_file})"
        )
    if not model:
        raise UnavailableError(f"the {name} agent needs --model: the name the server serves the model under")
    try:
        grammar_for(model, grammar)
    except UnknownGrammar as exc:
        raise UnavailableError(str(exc)) from None


def versions() -> dict[str, str]:
    """The versions run.json records: ours, the UI's, each vendor's and backend's SDK (their records')."""
    sdks = [v.sdk for v in VENDORS.values() if v.sdk] + [b.sdk for b in BACKENDS.values() if b.sdk]
    out = {}
    for name in ("cua-tui", "textual", "textual-image", *sdks, "pillow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out
