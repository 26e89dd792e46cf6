"""``--backend cwsandbox``: the desktop in a CoreWeave serverless sandbox, one exec round trip per step.

- The sandbox is created with the run's tags (``cua-tui`` and ``cua-tui-run-<run id>``), the helper
  zipapp (``helper_zip.py``, the project's own local desktop code) as a mounted file and the helper as its
  command, run with the ``python3`` on the sandbox's PATH. Labs run with egress denied; ``--url`` grants
  only its host. Its id goes to ``sandbox-id.txt`` and a ``sandbox_created`` event before anything else.
- Each step is one exec (``helper.pyz call ...``): the resident helper performs the action and answers
  with a small header and the PNG, read from ``ProcessResult.stdout_bytes`` (the streamed text is decoded
  with replacement; the bytes are not). The reply is untrusted: lengths checked against the header, a cap
  on bytes, the PNG's header checked against the header's and the screen's size before anything decodes.
  The egress records the proxy made inside come back with each reply and go to the audit log.
- Credentials: ``CWSANDBOX_API_KEY`` / ``CWSANDBOX_BASE_URL`` (the client's own variables) or the settings
  file, passed explicitly to the client; never into the sandbox, the run directory or a message.
  cwsandbox's signal handlers are disabled: the kill switch stays ours.
- ``stop`` (any thread, idempotent) cancels the exec in flight and stops the sandbox; a stop during the
  create stops the sandbox once it exists; a create whose reply was lost is found by its run tag.
  Every cwsandbox error becomes a one-line, fatal DesktopError (the run ends ``error``, sealed).
"""

from __future__ import annotations

import json
import os
import shlex
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..core import events as ev
from ..core.geometry import Size
from ..core.ports import DesktopError, Verification
from ..core.text import one_line, truncate
from .helper_zip import helper_sha256, helper_zipapp
from .remote import Blobs, HelperDesktop, verdict

TAG = "cua-tui"
RUN_TAG_PREFIX = "cua-tui-run-"
DEFAULT_IMAGE = "ghcr.io/cua-tui/cua-tui-desktop:0.1"  # built from docker/desktop/Dockerfile
HELPER_DIR = "/opt/cua-tui"
SOCKET_DIR = "/run/cua-tui"
BOOTSTRAP = (
    "set -eu; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
    "apt-get install -y -qq --no-install-recommends xvfb openbox chromium bubblewrap socat xauth util-linux "
    "fonts-dejavu-core ca-certificates python3 python3-pil python3-xlib python3-pip >/dev/null; "
    "pip install -q --break-system-packages mss==10.2.0; "
)
BOOTSTRAP_HOSTS = ("deb.debian.org", "pypi.org", "files.pythonhosted.org")  # the packages, and mss from PyPI


def run_tag(run_id: str) -> str:
    return RUN_TAG_PREFIX + run_id


@dataclass(frozen=True)
class SandboxSettings:
    """Where and how sandboxes are made. ``api_key`` never appears in a repr, a message or a record."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    image: str = DEFAULT_IMAGE
    cpu: str = "2"
    memory: str = "4Gi"
    max_lifetime_seconds: int = 1800
    placement: str = "serverless"
    bootstrap: bool = False
    create_timeout: float = 180.0  # until the sandbox runs
    start_timeout: float = 120.0  # until the desktop inside shows its page (longer with bootstrap)
    step_timeout: float = 30.0  # one exec

    def client_options(self) -> dict[str, Any]:
        """The endpoint and the credentials, given explicitly to every client call."""
        from cwsandbox import AuthHeaders, SandboxDefaults

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        auth = AuthHeaders(headers=headers, strategy="api_key" if headers else "none")
        defaults = SandboxDefaults(base_url=self.base_url, auth=auth) if self.base_url else SandboxDefaults(auth=auth)
        return {"defaults": defaults}

    def auth_options(self) -> dict[str, Any]:
        """The same, for the calls that take them one by one (``Sandbox.list``, ``Sandbox.delete``)."""
        from cwsandbox import AuthHeaders

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        auth = AuthHeaders(headers=headers, strategy="api_key" if headers else "none")
        return {"auth": auth, **({"base_url": self.base_url} if self.base_url else {})}

    def public(self) -> dict[str, Any]:
        """What run.json records of these settings (no credentials)."""
        return {
            "base_url": self.base_url,
            "image": self.image,
            "resources": {"cpu": self.cpu, "memory": self.memory},
            "max_lifetime_seconds": self.max_lifetime_seconds,
            "placement": self.placement,
            "bootstrap": self.bootstrap,
        }


class CWSandboxDesktop(HelperDesktop):
    """A remote desktop in a CoreWeave sandbox. One instance per run; ``bind_run`` before ``start``."""

    name = "cwsandbox"

    def __init__(
        self,
        size: Size,
        settings: SandboxSettings,
        *,
        lab: str | None = None,
        url: str | None = None,
        allow_domains: tuple[str, ...] = (),
    ) -> None:
        if not lab and not url:
            raise ValueError("the cwsandbox desktop needs --lab NAME or --url URL")
        super().__init__(size, step_timeout=settings.step_timeout)
        self.settings = settings
        self.lab = lab
        self.url = url
        self.allow_domains = tuple(allow_domains)
        self._sandbox: Any = None
        self._sandbox_id: str | None = None
        self._process: Any = None  # the exec in flight
        self._lock = threading.Lock()
        self._stopped = False

    # ------------------------------------------------------------------------------------------------
    @property
    def sandbox_id(self) -> str | None:
        return self._sandbox_id

    @property
    def tags(self) -> list[str]:
        return [TAG, run_tag(self.run_id)]

    @property
    def helper_path(self) -> str:
        return f"{HELPER_DIR}/{self.run_id}/helper.pyz"

    @property
    def socket_path(self) -> str:
        return f"{SOCKET_DIR}/{self.run_id}/helper.sock"

    def record(self) -> dict[str, Any]:
        """For run.json before the start: the sandbox's settings and the helper shipped into it."""
        return {
            **self.settings.public(),
            "tags": self.tags,
            "helper_sha256": helper_sha256(),
            "network": self._network_note(),
        }

    @property
    def isolation(self) -> dict[str, Any]:
        if not self._isolation:
            return {}
        return {
            **self._isolation,
            "remote": "cwsandbox",
            "sandbox_id": self._sandbox_id,
            "image": self.settings.image,
            "helper_sha256": helper_sha256(),
            "sandbox_network": self._network_note(),
        }

    # ------------------------------------------------------------------------------------------------
    # Start
    # ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.run_id:
            raise DesktopError("the cwsandbox desktop was not bound to a run", fatal=True)
        try:
            # gRPC's fork handlers would print errors in every process the controller forks later (an
            # approver command); nothing forked uses gRPC. Read when gRPC loads: set before the import.
            os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
            import cwsandbox  # the vendor SDK: imported only by this backend, only when it starts
        except ImportError:
            raise DesktopError("the cwsandbox backend needs the 'cwsandbox' package", fatal=True) from None
        cwsandbox.disable_signal_handlers()  # before the first sandbox: SIGINT/SIGTERM stay ours
        try:
            self._create(cwsandbox)
            self._check_stopping()
            self._sandbox.wait(timeout=self.settings.create_timeout)
            self._check_stopping()
            wait = self.settings.start_timeout
            header, blobs = self._request({"op": "ready", "wait": wait}, timeout=wait + 30)
        except DesktopError:
            raise
        except Exception as exc:
            raise self._error("starting the sandbox", exc) from None
        self._ready(header, blobs)

    def _create(self, cwsandbox: Any) -> None:
        spec = {
            "socket": self.socket_path,
            "screen": str(self.size),
            "lab": self.lab,
            "url": self.url,
            "allow_domains": list(self.allow_domains),
            "start_timeout": self.settings.start_timeout,
        }
        serve = ["python3", self.helper_path, "serve", json.dumps(spec)]
        argv = serve
        if self.settings.bootstrap:  # the tutorial's way: install the packages at start (minutes)
            argv = ["sh", "-c", BOOTSTRAP + 'exec "$@"', "bootstrap", *serve]
        options = self.settings
        try:
            sandbox = cwsandbox.Sandbox.run(
                *argv,
                container_image=options.image,
                resources={"cpu": options.cpu, "memory": options.memory},
                max_lifetime_seconds=options.max_lifetime_seconds,
                placement_mode=options.placement,
                tags=self.tags,
                mounted_files=[{"mount_path": self.helper_path, "file_content": helper_zipapp()}],
                network=self._network(cwsandbox),
                **options.client_options(),
            )
            sandbox_id = sandbox.sandbox_id
        except Exception as exc:
            self._find_lost(cwsandbox)
            raise self._error("creating the sandbox", exc) from None
        self._adopt(sandbox, sandbox_id)

    def _adopt(self, sandbox: Any, sandbox_id: str) -> None:
        """Record the sandbox before anything else; stop it at once if a stop came during the create."""
        with self._lock:
            self._sandbox, self._sandbox_id = sandbox, sandbox_id
        try:
            if self._rundir is not None:
                self._rundir.write_sandbox_id(sandbox_id)
            if self._sink is not None:
                self._sink(ev.SandboxCreated(self.name, sandbox_id, self.tags))
        finally:
            if self._stopping.is_set():
                self._stop_sandbox()

    def _find_lost(self, cwsandbox: Any) -> None:
        """The create failed, perhaps after the service made the sandbox: look for it by the run's tag."""
        try:
            found = cwsandbox.Sandbox.list(tags=[run_tag(self.run_id)], **self.settings.auth_options()).result(
                timeout=30
            )
        except Exception:
            return  # nothing found now; ``cua-tui sandboxes`` finds it later by the same tag
        for sandbox in found:
            if sandbox.sandbox_id:
                self._adopt(sandbox, sandbox.sandbox_id)
                self._stop_sandbox()

    def _network(self, cwsandbox: Any) -> Any:
        hosts = list(BOOTSTRAP_HOSTS) if self.settings.bootstrap else []
        if self.url:
            host = urlsplit(self.url).hostname
            if host and host not in ("localhost", "127.0.0.1", "::1"):
                hosts.append(host)
        if not hosts:
            return cwsandbox.NetworkOptions(deny_egress=True)
        return cwsandbox.NetworkOptions(egress=[cwsandbox.EgressRule(dns_name=h) for h in hosts])

    def _network_note(self) -> str:
        if self.url:
            return f"egress to {urlsplit(self.url).hostname} only" + (
                " (and the package mirrors)" if self.settings.bootstrap else ""
            )
        return "egress to the package mirrors only (bootstrap)" if self.settings.bootstrap else "egress denied"

    # ------------------------------------------------------------------------------------------------
    # One exec per request
    # ------------------------------------------------------------------------------------------------
    def _request(self, request: dict[str, Any], *, timeout: float) -> tuple[dict[str, Any], Blobs]:
        """One exec: the request in argv (stdin would cost a round trip more), the reply from stdout bytes."""
        self._check_stopping()
        argv = ["python3", "-S", self.helper_path, "call", self.socket_path, json.dumps(request), "20"]
        try:
            with self._lock:
                if self._stopping.is_set():
                    raise DesktopError("the desktop was stopped", fatal=True)
                process = self._process = self._sandbox.exec(argv, timeout_seconds=timeout)
            result = process.result()
        except DesktopError:
            raise
        except Exception as exc:
            raise self._error(f"the sandbox's {request.get('op')} request", exc, argv) from None
        finally:
            self._process = None
        self._check_stopping()
        return self._answer(result.returncode, result.stdout_bytes, result.stderr_bytes)

    def _reply_egress(self, records: Any) -> None:
        """The proxy runs inside the sandbox: its records come back with each reply."""
        if not isinstance(records, list) or self._sink is None:
            return
        for r in records:
            if not isinstance(r, dict):
                continue
            host, port, method, allowed, reason = (r.get(k) for k in ("host", "port", "method", "allowed", "reason"))
            if (
                isinstance(host, str)
                and isinstance(port, int)
                and isinstance(method, str)
                and isinstance(allowed, bool)
            ):
                reason = reason if isinstance(reason, str) else ""
                self._sink(ev.Egress(truncate(host, 300), port, truncate(method, 40), allowed, truncate(reason, 300)))

    def _error(self, what: str, exc: BaseException, argv: list[str] | None = None) -> DesktopError:
        """One line naming the cwsandbox error, with no credential in it, nor the exec's command (the
        client quotes it, and a step's request carries the text to type, which is never recorded)."""
        if self._stopping.is_set():
            return DesktopError("the desktop was stopped", fatal=True)
        detail = str(exc)
        if argv:
            for form in (repr(argv), shlex.join(argv), " ".join(argv)):
                detail = detail.replace(form, "<the helper's command>")
            for item in sorted(argv[3:], key=len, reverse=True):
                for form in (shlex.quote(item), repr(item), item):
                    detail = detail.replace(form, "…")
        message = one_line(f"cwsandbox: {what} failed: {type(exc).__name__}: {detail}")
        if self.settings.api_key:
            message = message.replace(self.settings.api_key, "[redacted]")
        return DesktopError(truncate(message, 300), fatal=True)

    # ------------------------------------------------------------------------------------------------
    # Desktop
    # ------------------------------------------------------------------------------------------------
    def verify(self) -> Verification | None:
        header, _blobs = self._request({"op": "verify"}, timeout=self.settings.step_timeout)
        return verdict(header.get("verification"))

    def release_all(self) -> None:
        """Release held input, unless a stop is under way (the sandbox goes, input with it) or an exec
        is in flight (it is being cancelled)."""
        if self._stopping.is_set() or self._process is not None or self._sandbox is None:
            return
        try:
            self._request({"op": "release"}, timeout=5)
        except DesktopError:
            pass

    def stop(self) -> None:
        """Cancel the exec in flight and stop the sandbox. Any thread, any moment, idempotent."""
        self._stopping.set()
        with self._lock:
            process = self._process
        if process is not None:
            try:
                process.cancel()
            except Exception:  # cancelling is best effort: stopping the sandbox ends the exec anyway
                pass
        self._stop_sandbox()

    def _stop_sandbox(self) -> None:
        with self._lock:
            sandbox = self._sandbox
            if sandbox is None or self._stopped:
                return  # no sandbox yet: the create's end (``_adopt``) stops it
            self._stopped = True
        try:
            sandbox.stop(missing_ok=True).result(timeout=60)
        except Exception as exc:
            message = one_line(f"cwsandbox: stopping sandbox {self._sandbox_id} failed: {type(exc).__name__}: {exc}")
            if self.settings.api_key:
                message = message.replace(self.settings.api_key, "[redacted]")
            raise DesktopError(truncate(message, 300)) from None


def list_sandboxes(settings: SandboxSettings, tags: list[str] | None = None) -> list[dict[str, str]]:
    """This user's sandboxes tagged ``cua-tui`` (the API key says whose): id, state and run id."""
    import cwsandbox

    cwsandbox.disable_signal_handlers()
    found = cwsandbox.Sandbox.list(tags=tags or [TAG], **settings.auth_options()).result(timeout=60)
    out = []
    for sandbox in found:
        tags_of = list(getattr(sandbox, "tags", None) or [])
        run = next((t.removeprefix(RUN_TAG_PREFIX) for t in tags_of if t.startswith(RUN_TAG_PREFIX)), "")
        out.append({"id": str(sandbox.sandbox_id), "state": str(getattr(sandbox, "status", "")), "run": run})
    return out


def stop_sandbox(settings: SandboxSettings, sandbox_id: str) -> None:
    """Stop and delete a sandbox by id; one already gone counts as stopped (running it twice is harmless)."""
    import cwsandbox

    cwsandbox.disable_signal_handlers()
    cwsandbox.Sandbox.delete(sandbox_id, missing_ok=True, **settings.auth_options()).result(timeout=90)
