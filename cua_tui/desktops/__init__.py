"""Desktop backends: one record each (``Backend``), registered by name in ``BACKENDS``. Vendor packages
are imported only by the adapter that needs them.

Here, importing nothing heavy, so that ``--help`` starts fast and a remote step's exec (which passes
through this package) loads no more than dataclasses: a record names its builder, its settings table's type
and its leftovers' lister ("module:name", under cua_tui.desktops when it starts with "."), each imported when
first needed. How to add a backend: docs/contributing/backend.md.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType

TYPE_CHECKING = False  # typing itself costs a step's exec ~10 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


BACKENDS: dict[str, Backend] = {}  # by name, in the order registered (below)


@dataclass(frozen=True, slots=True)
class Backend:
    """A desktop backend: everything the command line, the settings, the builder, the fleet and
    ``cua-tui sandboxes`` ask of it."""

    name: str  # --backend NAME, and its settings table [NAME]
    # it opens a lab or a page in a browser: what --lab, --url and a tasks file's lab and url need
    browser: bool
    about: str  # its words in --backend's help
    # "module:function" (size, table, *, target, config_file) -> Desktop; ``table`` is its settings table as
    # decoded (the environment applied), None for a backend without one; ``target`` what it opens
    # (target.py: empty for a backend without a browser)
    builder: str
    # where its desktop runs and what keeps it in, in a few words: docs/backends/index.md's table (checked)
    isolation: str
    # its desktops run on this machine: the fleet counts them against its memory and CPUs
    on_this_machine: bool = False
    # "module:Struct": the msgspec Struct of its [NAME] table in the settings file; None: no table
    settings: str | None = None
    # table key -> the environment variable that wins over it
    environment: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # the table's keys that were flat keys ``NAME_KEY`` before; read for one release, with a note
    flat_keys: tuple[str, ...] = ()
    # "module:function" (config.Settings) -> Leftovers, for ``cua-tui sandboxes``; None: it leaves none
    leftovers: str | None = None
    leftovers_about: str = ""  # whose they are, for that command's --backend help
    sdk: str | None = None  # the distribution its desktop needs, whose version run.json records

    def builder_function(self) -> Callable[..., Any]:
        return _resolve(self.builder)  # type: ignore[no-any-return]

    def settings_type(self) -> type[Any] | None:
        return _resolve(self.settings) if self.settings else None

    def leftovers_of(self, settings: Any) -> Leftovers:
        if self.leftovers is None:
            from ..core.errors import Unavailable

            raise Unavailable(f"the {self.name} backend leaves no sandboxes behind")
        found: Leftovers = _resolve(self.leftovers)(settings)
        return found


@dataclass(frozen=True, slots=True)
class Leftovers:
    """A backend's sandboxes for ``cua-tui sandboxes``: list them, stop one by id, and how to say so."""

    list: Callable[[], list[dict[str, str]]]
    stop: Callable[[str], object]
    what: str  # "tagged cua-tui"
    secret: str = ""  # never printed (the service's key)


def _resolve(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module, package=__package__), attr)


def register(backend: Backend) -> Backend:
    """Add a backend to ``BACKENDS``: a plain name, taken once (else a ValueError: a programming error)."""
    if not backend.name.isidentifier() or BACKENDS.setdefault(backend.name, backend) is not backend:
        raise ValueError(f"backend {backend.name!r}: taken, or not a plain name")
    return backend


def backend_named(name: str) -> Backend:
    found = BACKENDS.get(name)
    if found is None:
        # (imported here: a remote step's exec passes through this package)
        from ..core.errors import Unavailable
        from ..core.text import visible

        shown = visible(name, limit=80)
        raise Unavailable(f"unknown desktop backend {shown!r}; choose one of {', '.join(BACKENDS)}")
    return found


def lab_hosts() -> tuple[str, ...]:
    """The backends that can host a lab (or a URL)."""
    return tuple(name for name, backend in BACKENDS.items() if backend.browser)


def runs_here(name: str) -> bool:
    """Whether the desktops of backend ``name`` run on this machine (the fleet's memory rule)."""
    found = BACKENDS.get(name)
    return found is not None and found.on_this_machine


register(
    Backend(
        "local",
        browser=True,
        about="local Xvfb+Chromium (needs --lab or --url)",
        builder=".local:build",
        isolation="this machine: Xvfb, openbox and Chromium in one bubblewrap sandbox per run",
        on_this_machine=True,
    )
)
register(
    Backend(
        "cwsandbox",
        browser=True,
        about="CoreWeave sandbox",
        builder=".cwsandbox:build",
        isolation="a CoreWeave serverless sandbox",
        settings=".cwsandbox:CWSandboxTable",
        environment=MappingProxyType(
            {"base_url": "CWSANDBOX_BASE_URL", "api_key": "CWSANDBOX_API_KEY", "image": "CUA_TUI_CWSANDBOX_IMAGE"}
        ),
        flat_keys=("base_url", "api_key", "image", "cpu", "memory", "max_lifetime", "placement"),
        leftovers=".cwsandbox:leftovers",
        leftovers_about="CoreWeave's",
        sdk="cwsandbox",
    )
)
register(
    Backend(
        "docker",
        browser=True,
        about="Docker",
        builder=".docker:build",
        isolation="a hardened container on this machine's Docker engine",
        on_this_machine=True,
        settings=".docker:DockerTable",
        environment=MappingProxyType({"image": "CUA_TUI_DOCKER_IMAGE"}),
        flat_keys=("image",),
        leftovers=".docker:leftovers",
        leftovers_about="this machine's Docker engine (containers and networks)",
    )
)
register(
    Backend(
        "dry",
        browser=False,
        about="dry (executes nothing, validates against a blank screen)",
        builder=".dry:build",
        isolation="nowhere: every action is validated and classified against a blank screen",
    )
)
register(
    Backend(
        "sim",
        browser=False,
        about="sim (in-process simulated form app)",
        builder=".sim:build",
        isolation="in-process: a small form application with a server-side style verifier",
    )
)
