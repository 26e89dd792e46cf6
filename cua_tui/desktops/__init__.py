"""Desktop adapters, chosen by name. Vendor packages are imported only by the adapter that needs them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backend:
    """A desktop backend as the command line names it (its adapter is imported only when one is built)."""

    name: str
    # it opens a lab or a page in a browser: what --lab, --url and a tasks file's lab and url need
    browser: bool


# Every backend the command line names (``--backend``). Here, importing nothing, so that ``--help``
# starts fast.
REGISTRY = (
    Backend("local", browser=True),
    Backend("cwsandbox", browser=True),
    Backend("docker", browser=True),
    Backend("dry", browser=False),
    Backend("sim", browser=False),
)
BACKENDS = tuple(backend.name for backend in REGISTRY)
# the backends that can host a lab (or a URL)
LAB_HOSTS = tuple(backend.name for backend in REGISTRY if backend.browser)
