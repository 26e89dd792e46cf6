"""What a desktop with a browser opens (``Target``): a lab, served by this process, or a page at a URL, and
the other domains its browser may reach. build.py makes it once from the run's options; the backend's builder
hands it to its desktop, and every rule the desktops share about it is here: one of lab and URL is needed,
the URL the browser opens and the egress proxy's allow-list, the lab's verdict, its stop, and the keys the
remote helper's spec carries it in.

Shipped in the remote helper (``remote/zipapp.py``): it imports the standard library and the core only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core.allowlist import AllowList
from ..core.errors import Unavailable
from ..core.events import Egress
from ..core.ports import DesktopError, Lab, Verification


def url_allow_entry(url: str) -> tuple[str, str]:
    """The URL to open and the allow-list entry for its origin. ``localhost`` becomes 127.0.0.1: the proxy
    refuses names that resolve to loopback or private addresses, but allows an explicit loopback IP."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DesktopError(f"--url must be an http(s) URL, not {url!r}", fatal=True)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise DesktopError(f"--url has an invalid port: {url!r}", fatal=True) from None
    host = parts.hostname
    if host == "localhost":
        host = "127.0.0.1"
        netloc = f"127.0.0.1:{port}" if parts.port else "127.0.0.1"
        url = parts._replace(netloc=netloc).geturl()
    entry = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return url, entry


@dataclass(frozen=True, slots=True)
class Target:
    """A lab or a page (``url``), and ``allow_domains``: the policy's and ``--allow-domain``'s entries beyond
    its origin. Empty (neither lab nor URL) for a desktop without a browser."""

    lab: Lab | None = None
    url: str | None = None
    allow_domains: tuple[str, ...] = ()

    @property
    def given(self) -> bool:
        """A lab or a page: what a desktop with a browser needs and one without refuses."""
        return self.lab is not None or bool(self.url)

    def require(self, backend: str) -> None:
        """The ``backend`` desktop opens a lab or a page: refuse one with neither, in the command line's words."""
        if not self.given:
            raise Unavailable(f"the {backend} desktop needs --lab NAME or --url URL")

    def open(self) -> tuple[str, AllowList]:
        """Start the lab (if any); the URL the browser opens and the proxy's allow-list (its origin and
        ``allow_domains``). A page starts nothing here."""
        if self.lab is not None:
            self.lab.start()
            start_url, entry = self.lab.start_url, self.lab.allow_entry
        else:
            assert self.url is not None
            start_url, entry = url_allow_entry(self.url)
        return start_url, AllowList.parse([entry, *self.allow_domains])

    def verify(self, downloads: Path | None, egress: Iterable[Egress]) -> Verification | None:
        """The lab's verdict from what its server saw, the files downloaded and the egress; None for a page.
        The lab's server is a thread of this process, so this process judged. Inside a remote sandbox's
        helper this process is the sandbox's: the helper sends only the verdict, the controller says where."""
        if self.lab is None:
            return None
        verdict: Verification = self.lab.verify(downloads, egress)
        return verdict.in_controller()

    def stop(self) -> None:
        """Stop the lab's server, if any; a desktop's stop goes on whatever it raises."""
        if self.lab is not None:
            with contextlib.suppress(Exception):
                self.lab.stop()

    def spec(self) -> dict[str, Any]:
        """The remote helper's spec keys for it (``from_spec`` reads them): the lab by name, served inside."""
        lab = self.lab.name if self.lab is not None else None
        return {"lab": lab, "url": self.url, "allow_domains": list(self.allow_domains)}

    @classmethod
    def from_spec(cls, spec: dict[str, Any], get_lab: Callable[[str], Lab]) -> Target:
        """The target a helper's spec names (a missing key: none; the Docker backend's gives the URL alone)."""
        lab = get_lab(spec["lab"]) if spec.get("lab") else None
        return cls(lab, spec.get("url"), tuple(spec.get("allow_domains", ())))
