"""``--backend cwsandbox``: the desktop in a CoreWeave serverless sandbox, one exec round trip per step.

The resident helper (``remote/helper.py``) runs the local desktop inside; each reply is consumed as a
bounded stream (``_consume``) and checked by the base (``remote/replies.py``). Design: docs/backends/cwsandbox.md.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import itertools
import json
import os
import shlex
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec

from ..core import events as ev
from ..core.errors import Unavailable
from ..core.geometry import Size
from ..core.ports import DesktopError, Verification
from ..core.text import one_line, truncate
from . import Leftovers, quiet
from .egress.proxy import MAX_RECORDS
from .remote.desktop import HelperDesktop
from .remote.replies import STDERR_CAP, egress_events, verdict
from .remote.sealed import new_key, seal
from .remote.wire import MAX_EGRESS_PER_REPLY, Blobs
from .remote.zipapp import helper_sha256, helper_zipapp
from .target import Target

TAG = "cua-tui"
RUN_TAG_PREFIX = "cua-tui-run-"
# what every CoreWeave user has (the tutorial's): the packages go in at start
STOCK_IMAGE = "debian:bookworm-slim"
HELPER_DIR = "/opt/cua-tui"
SOCKET_DIR = "/run/cua-tui"
# What the desktop needs from Debian (the tutorial's list, less its xdotool and scrot: the helper
# does both). mss is not packaged in bookworm: it travels in the helper zipapp.
INSTALL_PACKAGES = (
    "xvfb", "openbox", "chromium", "bubblewrap", "socat", "xauth", "util-linux", "fonts-dejavu-core",
    "python3", "python3-pil", "python3-xlib", "ca-certificates",
)  # fmt: skip
# Reached over HTTPS only: a dns_name egress rule grants TCP 443 alone, so apt's http:// sources are
# rewritten.
INSTALL_HOSTS = ("deb.debian.org",)
BUILD_HINT = (
    "build the desktop image (docker build -t REGISTRY/cua-tui-desktop docker/desktop), push it and set image "
    "under [cwsandbox] in the settings"
)
# an install's output, counted as it streams (apt writes about 200 KB)
INSTALL_OUTPUT_CAP = 16 * 1024 * 1024
# A step's exec: the request to the resident helper's socket, its (armored) reply to stdout. -t: how
# long socat waits for the reply once the request is sent (its default, 0.5 s, is shorter than a
# settle can be).
RELAY = 'printf "%s\\n" "$1" | exec socat -t 120 - UNIX-CONNECT:"$2"'
# The sandbox's command waits for this file before it starts the helper: the probe or the install
# makes it.
WAIT_THEN_SERVE = 'while [ ! -e "$1" ]; do sleep 0.05; done; shift; exec "$@"'
# One exec at start for a configured image: is everything the desktop needs there?
PROBE = """missing=""
for p in Xvfb openbox chromium socat xauth setpriv; do command -v "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || missing="$missing python3>=3.11"
  python3 -c 'import PIL' 2>/dev/null || missing="$missing python3-pil"
  python3 -c 'import Xlib' 2>/dev/null || missing="$missing python3-xlib"
else
  missing="$missing python3"
fi
if [ -n "$missing" ]; then echo "missing:$missing"; exit 1; fi
mkdir -p "$(dirname "$1")" && : > "$1" && echo ok
"""
PROBED = (
    "Xvfb",
    "openbox",
    "chromium",
    "socat",
    "xauth",
    "setpriv",
    "python3>=3.11",
    "python3-pil",
    "python3-xlib",
    "python3",
)
# The tutorial's way, for the stock image: apt over HTTPS, verified with the CA bundle mounted
# beside the helper; then the browser's managed policies (quiet.py), as the built image has them.
INSTALL = r"""set -eu
ca=$1; go=$2; policy=$3; policy_text=$4; shift 4
export DEBIAN_FRONTEND=noninteractive
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do
  [ -f "$f" ] || continue
  sed -i -e 's#http://deb\.debian\.org#https://deb.debian.org#g' \
    -e 's#http://security\.debian\.org#https://deb.debian.org#g' "$f"
done
apt="apt-get -q -o Acquire::https::CAInfo=$ca -o Acquire::Retries=3 -o Dpkg::Use-Pty=0"
echo "cua-tui: update"
$apt update
echo "cua-tui: install"
$apt install -y --no-install-recommends "$@"
rm -rf /var/lib/apt/lists/*
mkdir -p "$(dirname "$policy")"
printf '%s' "$policy_text" > "$policy"
chmod 644 "$policy"
mkdir -p "$(dirname "$go")" && : > "$go"
echo "cua-tui: done"
"""
# about 4 MB of audit log: past it, each reply's records are only counted (the local and Docker
# desktops' proxy keeps as many: egress/proxy.py)
MAX_EGRESS_PER_RUN = MAX_RECORDS
# seconds a stop waits for a create in flight, to stop the sandbox it makes (within the kill's 15)
CREATE_WAIT = 10.0
# after a lost create: the most sandboxes of the run's tag that the run itself stops
LOST_MAX = 8


def run_tag(run_id: str) -> str:
    return RUN_TAG_PREFIX + run_id


@dataclass(frozen=True, slots=True)
class SandboxFiles:
    """Where a run's files are inside its sandbox: the helper and the CA bundle shipped with it, the
    helper's socket, and ``go``, the file the sandbox's command waits for (WAIT_THEN_SERVE)."""

    helper: str
    ca: str
    socket: str
    go: str

    @classmethod
    def of(cls, run_id: str) -> SandboxFiles:
        shipped, sockets = f"{HELPER_DIR}/{run_id}", f"{SOCKET_DIR}/{run_id}"
        return cls(f"{shipped}/helper.pyz", f"{shipped}/ca.pem", f"{sockets}/helper.sock", f"{sockets}.go")


def helper_request(argv: list[str]) -> dict[str, Any] | None:
    """The helper request an exec of this backend carries (a step's relay or ``remote/call.py``'s ``call``),
    for the services that count them; None for any other exec."""
    raw: str | None = None
    if argv[:3] == ["sh", "-c", RELAY] and len(argv) > 4:
        raw = argv[4]
    elif "call" in argv and argv.index("call") + 2 < len(argv):
        raw = argv[argv.index("call") + 2]
    try:
        request = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


class CWSandboxTable(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The settings file's ``[cwsandbox]`` table (each key optional: absent, the SandboxSettings default).
    ``api_key`` is never in its repr."""

    base_url: str | None = None
    api_key: str | None = None
    image: str | None = None  # None: the stock image, its packages installed at start
    cpu: str | None = None
    memory: str | None = None
    max_lifetime: Annotated[int, msgspec.Meta(ge=60, le=86400)] | None = None  # seconds
    placement: Literal["serverless", "cks"] | None = None

    def __repr__(self) -> str:
        key = "set" if self.api_key else None
        return f"CWSandboxTable(base_url={self.base_url!r}, image={self.image!r}, api_key={key})"


def sandbox_options(table: CWSandboxTable | None, config_file: object) -> SandboxSettings:
    """The sandboxes' settings from the ``[cwsandbox]`` table (the environment applied): a missing key or an
    endpoint that is no http(s) URL is refused here, in one line naming where to set it."""
    table = table or CWSandboxTable()
    if not table.api_key:
        raise Unavailable(
            "the cwsandbox backend needs an API key: set CWSANDBOX_API_KEY in the environment "
            f"(or api_key under [cwsandbox] in {config_file})"
        )
    if table.base_url and not table.base_url.startswith(("http://", "https://")):
        # not quoted: a URL can carry a user's credentials
        raise Unavailable(
            f"CWSANDBOX_BASE_URL (or base_url under [cwsandbox] in {config_file}) must be an http:// or https:// URL"
        )
    default = SandboxSettings()
    return SandboxSettings(
        base_url=table.base_url,
        api_key=table.api_key,
        image=table.image,
        cpu=table.cpu or default.cpu,
        memory=table.memory or default.memory,
        max_lifetime_seconds=table.max_lifetime or default.max_lifetime_seconds,
        placement=table.placement or default.placement,
    )


def build(size: Size, table: CWSandboxTable | None, *, target: Target, config_file: object) -> CWSandboxDesktop:
    """The backend's builder (desktops/__init__.py): the endpoint and key from cwsandbox's variables or the
    settings' table."""
    return CWSandboxDesktop(size, target, sandbox_options(table, config_file))


def leftovers(settings: Any) -> Leftovers:
    """``cua-tui sandboxes --backend cwsandbox``: this key's sandboxes tagged cua-tui (``settings`` is the
    program's, config.Settings)."""
    options = sandbox_options(settings.backend_table("cwsandbox"), settings.config_file)
    return Leftovers(
        lambda: list_sandboxes(options),
        lambda ident: stop_sandbox(options, ident),
        "tagged cua-tui",
        options.api_key or "",
    )


@dataclass(frozen=True)
class SandboxSettings:
    """Where and how sandboxes are made. ``api_key`` never appears in a repr, a message or a record."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # None: the stock image, its packages installed at start
    image: str | None = None
    cpu: str = "2"
    memory: str = "4Gi"
    max_lifetime_seconds: int = 1800
    placement: str = "serverless"
    create_timeout: float = 180.0  # until the sandbox runs
    start_timeout: float = 120.0  # until the desktop inside shows its page
    install_timeout: float = 900.0  # the stock image's install at start
    step_timeout: float = 30.0  # one exec

    @property
    def installs(self) -> bool:
        """No image configured: the stock image, with the desktop's packages installed at start."""
        return not self.image

    @property
    def image_name(self) -> str:
        return self.image or STOCK_IMAGE

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
            "image": self.image_name,
            "install_at_start": self.installs,
            "resources": {"cpu": self.cpu, "memory": self.memory},
            "max_lifetime_seconds": self.max_lifetime_seconds,
            "placement": self.placement,
        }


class CWSandboxDesktop(HelperDesktop):
    """A remote desktop in a CoreWeave sandbox. One instance per run; ``bind_run`` before ``start``."""

    name = "cwsandbox"

    def __init__(self, size: Size, target: Target, settings: SandboxSettings) -> None:
        target.require(self.name)
        super().__init__(size, step_timeout=settings.step_timeout)
        self.settings = settings
        # the lab is served inside, by the helper: it travels by name (``Target.spec``)
        self.target = target
        self._process: Any = None  # the exec in flight
        self._egress_recorded = 0
        self.wire_timing: dict[str, float] = {}
        # typed text travels sealed under it (remote/sealed.py); it stays in memory
        self._text_key = new_key()
        self._no_create = threading.Event()  # clear while a create is in flight
        self._no_create.set()

    # ---------------------------------------------------------------------------------------------
    @property
    def tags(self) -> list[str]:
        return [TAG, run_tag(self.run_id)]

    @property
    def files(self) -> SandboxFiles:
        return SandboxFiles.of(self.run_id)

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
            "sandbox_id": self.sandbox_id,
            "image": self.settings.image_name,
            "helper_sha256": helper_sha256(),
            "sandbox_network": self._network_note(),
        }

    # ---------------------------------------------------------------------------------------------
    # Start
    # ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.run_id:
            raise DesktopError("the cwsandbox desktop was not bound to a run", fatal=True)
        try:
            # gRPC's fork handlers would print errors in every process the controller forks later
            # (an approver command); nothing forked uses gRPC. Read when gRPC loads: set before the
            # import.
            os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
            # the vendor SDK: imported only by this backend, only when it starts
            import cwsandbox
        except ImportError:
            raise DesktopError("the cwsandbox backend needs the 'cwsandbox' package", fatal=True) from None
        cwsandbox.disable_signal_handlers()  # before the first sandbox: SIGINT/SIGTERM stay ours
        try:
            self._create(cwsandbox)
            self._check_stopping()
            self._sandbox.wait(timeout=self.settings.create_timeout)
            self._check_stopping()
            if self.settings.installs:
                self._install()
            else:
                self._probe()
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
            "socket": self.files.socket,
            "screen": str(self.size),
            **self.target.spec(),
            "start_timeout": self.settings.start_timeout,
        }
        serve = ["python3", self.files.helper, "serve", json.dumps(spec)]
        # The helper starts once the probe (a configured image) or the install (the stock image)
        # says so.
        argv = ["sh", "-c", WAIT_THEN_SERVE, "cua-tui-wait", self.files.go, *serve]
        # before the stopping check: a stop either waits for this create or prevents it
        self._no_create.clear()
        try:
            self._check_stopping()
            self._create_sandbox(cwsandbox, argv)
        finally:
            self._no_create.set()

    def _create_sandbox(self, cwsandbox: Any, argv: list[str]) -> None:
        options = self.settings
        try:
            sandbox = cwsandbox.Sandbox.run(
                *argv,
                container_image=options.image_name,
                resources={"cpu": options.cpu, "memory": options.memory},
                max_lifetime_seconds=options.max_lifetime_seconds,
                placement_mode=options.placement,
                tags=self.tags,
                mounted_files=self._mounted_files(),
                network=self._network(cwsandbox),
                **options.client_options(),
            )
            sandbox_id = sandbox.sandbox_id
        except Exception as exc:
            self._find_lost(cwsandbox)
            raise self._error("creating the sandbox", exc) from None
        self._adopt(sandbox, sandbox_id, self.tags)

    def _find_lost(self, cwsandbox: Any) -> None:
        """The create failed, perhaps after the service made the sandbox: look for it by the run's tag."""
        try:
            found = cwsandbox.Sandbox.list(tags=[run_tag(self.run_id)], **self.settings.auth_options()).result(
                timeout=30
            )
        except Exception:
            # nothing found now; ``cua-tui sandboxes`` finds it later by the same tag
            return
        # the service's answer, bounded: a create makes one sandbox; a few more are a retry's, not a list to
        # walk for ever (``cua-tui sandboxes`` stops any beyond, by the same tag)
        for sandbox in list(itertools.islice(found, LOST_MAX)):
            if sandbox.sandbox_id:
                self._adopt(sandbox, sandbox.sandbox_id, self.tags)
                self._discard_sandbox()

    def _mounted_files(self) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = [{"mount_path": self.files.helper, "file_content": helper_zipapp()}]
        if self.settings.installs:
            # the stock image has no CA certificates: apt checks its mirror with ours
            files.append({"mount_path": self.files.ca, "file_content": ca_bundle()})
        return files

    def _hosts(self) -> list[str]:
        hosts = list(INSTALL_HOSTS) if self.settings.installs else []
        if self.target.url:
            host = urlsplit(self.target.url).hostname
            if host and host not in ("localhost", "127.0.0.1", "::1") and host not in hosts:
                hosts.append(host)
        return hosts

    def _network(self, cwsandbox: Any) -> Any:
        hosts = self._hosts()
        if not hosts:
            return cwsandbox.NetworkOptions(deny_egress=True)
        return cwsandbox.NetworkOptions(egress=[cwsandbox.EgressRule(dns_name=h) for h in hosts])

    def _network_note(self) -> str:
        hosts = self._hosts()
        if not hosts:
            return "egress denied"
        note = "egress to " + ", ".join(hosts) + " only (HTTPS)"
        if self.settings.installs:
            note += f"; {', '.join(INSTALL_HOSTS)} is for the install at start and stays for the sandbox's life"
        return note

    # ---------------------------------------------------------------------------------------------
    # Before the helper: probe a configured image, or install on the stock one
    # ----------------------------------------------------------------------------------------------
    def _probe(self) -> None:
        """One exec: does the configured image have what the desktop needs? Then the helper may start."""
        image = self.settings.image_name
        code, out, err = self._run_script(PROBE, [self.files.go], timeout=60, what="probing the image")
        if code == 0 and out.strip() == "ok":
            return
        said = out.strip().removeprefix("missing:").split() if out.startswith("missing:") else []
        # the sandbox's words, kept to names we know
        missing = [name for name in PROBED if name in said]
        if missing:
            raise DesktopError(f"cwsandbox: the image {image} lacks {', '.join(missing)}: {BUILD_HINT}", fatal=True)
        detail = one_line(err.strip().splitlines()[-1] if err.strip() else f"status {code}", 200)
        raise DesktopError(f"cwsandbox: probing the image {image} failed: {detail}; {BUILD_HINT}", fatal=True)

    def _install(self) -> None:
        """The tutorial's way on the stock image: the desktop's packages installed with apt, its progress
        told as notes in words of ours (apt's own lines are the sandbox's words: counted, never shown)."""
        self._note(f"installing the desktop's packages in the sandbox ({STOCK_IMAGE}, apt over HTTPS)")
        progress = InstallProgress(self._note)
        code, _out, err = self._run_script(
            INSTALL,
            [self.files.ca, self.files.go, quiet.POLICY_PATH, quiet.policy_json(), *INSTALL_PACKAGES],
            timeout=self.settings.install_timeout,
            what="installing the desktop's packages",
            on_line=progress.line,
        )
        if code != 0 or not progress.finished:
            last = err.strip().splitlines()[-1] if err.strip() else f"status {code}"
            raise DesktopError(
                one_line(
                    f"cwsandbox: installing the desktop's packages in {STOCK_IMAGE} failed during "
                    f"{progress.stage}: {truncate(one_line(last), 200)}; or {BUILD_HINT}"
                ),
                fatal=True,
            )
        self._note(f"installed the desktop's packages in {progress.elapsed():.0f} s")

    def _note(self, message: str) -> None:
        if self._sink is not None:
            self._sink(ev.Note(message))

    def _run_script(
        self,
        script: str,
        args: list[str],
        *,
        timeout: float,
        what: str,
        on_line: Callable[[str], None] | None = None,
    ) -> tuple[int, str, str]:
        """One exec of a shell script, its output read as it streams (bounded: cut off past its cap)."""
        argv = ["sh", "-c", script, "cua-tui", *args]
        result: tuple[int, str, str] = self._exec(
            argv, timeout=timeout, what=what, read=lambda process: _consume_lines(process, timeout, on_line)
        )
        return result

    def _exec(
        self,
        argv: list[str],
        *,
        timeout: float,
        what: str,
        read: Callable[[Any], Any],
        stdin_line: str | None = None,
        quoted: list[str] | None = None,
    ) -> Any:
        """One exec in the sandbox, the one a stop cancels, its output consumed by ``read``; any client error
        becomes one line (``quoted``: a command whose words the line must not repeat)."""
        self._check_stopping()
        try:
            with self._lock:
                if self._stopping.is_set():
                    raise DesktopError("the desktop was stopped", fatal=True)
                process = self._process = self._sandbox.exec(
                    argv, timeout_seconds=timeout, stdin=stdin_line is not None
                )
            if stdin_line is not None:
                process.stdin.writeline(stdin_line).result(timeout=timeout)
                process.stdin.close().result(timeout=timeout)
            result = read(process)
        except DesktopError:
            raise
        except Exception as exc:
            raise self._error(what, exc, quoted) from None
        finally:
            self._process = None
        self._check_stopping()
        return result

    # ---------------------------------------------------------------------------------------------
    # One exec per request
    # ----------------------------------------------------------------------------------------------
    def _request(self, request: dict[str, Any], *, timeout: float) -> tuple[dict[str, Any], Blobs]:
        """One exec: the request in argv (stdin would cost a round trip more), the reply streamed from stdout.
        A step's exec is socat relaying to the resident helper, which armors its reply itself (a Python
        start per step cost more than the rest of the exec); ``ready``, which waits for the helper to come
        up, goes through ``remote/call.py``."""
        self._check_stopping()
        ready = request.get("op") == "ready"
        if ready:
            # the run's key for sealed text goes on stdin, once (one round trip more, at the start
            # only)
            request = {**request, "key": "stdin"}
            argv = ["python3", "-S", self.files.helper, "call", self.files.socket, json.dumps(request), "20", "base64"]
        else:
            argv = [
                "sh",
                "-c",
                RELAY,
                "cua-tui",
                json.dumps({**self._sealed(request), "armor": True}),
                self.files.socket,
            ]
        returncode, stdout, stderr = self._exec(
            argv,
            timeout=timeout,
            what=f"the sandbox's {request.get('op')} request",
            read=lambda process: self._consume(process, timeout),
            stdin_line=self._text_key.hex() if ready else None,
            quoted=argv,
        )
        return self._answer(returncode, stdout, stderr)

    def _sealed(self, request: dict[str, Any]) -> dict[str, Any]:
        """A typing action's text sealed under the run's key: the command line carries no typed text."""
        action = request.get("action")
        if not isinstance(action, dict) or not action.get("text"):
            return request
        sealed = {k: v for k, v in action.items() if k != "text"}
        return {**request, "action": {**sealed, "text": "", "sealed_text": seal(self._text_key, action["text"])}}

    def _consume(self, process: Any, timeout: float) -> tuple[int, bytes, bytes]:
        """The exec's reply and stderr read against their caps (``read_capped``); then its exit status.
        Returns the status, the reply (decoded) and stderr."""
        armored = _Armored(4 * -(-self.reply_cap // 3))  # the cap in base64 characters
        errors = _Stderr(STDERR_CAP)
        asked = first = time.perf_counter()

        def reply(text: str) -> str | None:
            nonlocal first
            if armored.declared is None:
                first = time.perf_counter()
            return armored.feed(text)

        def stderr(text: str) -> str | None:
            over = not errors.add(text)
            return f"the sandbox's helper wrote more than {STDERR_CAP // 1024} KiB to stderr" if over else None

        cut = read_capped(process, reply, stderr, "cwsandbox-stderr")
        # where the step's time went on our side, for the benchmarks: until the reply began, and its
        # transfer
        self.wire_timing = {"to_reply": (first - asked) * 1000, "transfer": (time.perf_counter() - first) * 1000}
        if cut is not None:
            last = errors.last_line()  # a traceback's last line says what went wrong
            raise DesktopError(one_line(cut + (f": {truncate(last, 200)}" if last else "")), fatal=True)
        result = process.result(timeout=timeout + 5)
        if result.returncode != 0:
            return result.returncode, b"", errors.data()
        return result.returncode, armored.reply(), errors.data()

    def _reply_egress(self, records: Any) -> None:
        """The proxy runs inside the sandbox: its records come back with each reply. They are claims of an
        untrusted sandbox: bounded a reply and a run (``egress_events``), the rest only counted."""
        if self._sink is None:
            return
        left = max(0, MAX_EGRESS_PER_RUN - self._egress_recorded)
        events, note = egress_events(records, cap=min(left, MAX_EGRESS_PER_REPLY))
        self._egress_recorded += len(events)
        for event in events:
            self._sink(event)
        if note is not None:
            self._sink(note)

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

    # ---------------------------------------------------------------------------------------------
    # Desktop
    # ----------------------------------------------------------------------------------------------
    def verify(self) -> Verification | None:
        header, _blobs = self._request({"op": "verify"}, timeout=self.settings.step_timeout)
        return verdict(header.get("verification"))

    def release_all(self) -> None:
        """Release held input, unless a stop is under way (the sandbox goes, input with it) or an exec
        is in flight (it is being cancelled)."""
        if self._stopping.is_set() or self._process is not None or self._sandbox is None or not self._isolation:
            # (no ``ready`` reply yet: the helper never took input, and may not be running at all)
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
            except Exception:
                # cancelling is best effort: stopping the sandbox ends the exec anyway
                pass
        # A create in flight stops its sandbox the moment it exists (``_adopt``): wait for that, so
        # that a stop that returned (a killed run, a fleet that then exits) leaves no sandbox
        # behind.
        self._no_create.wait(CREATE_WAIT)
        self._discard_sandbox()

    def _discard(self, sandbox: Any) -> None:
        try:
            sandbox.stop(missing_ok=True).result(timeout=60)
        except Exception as exc:
            message = one_line(f"cwsandbox: stopping sandbox {self.sandbox_id} failed: {type(exc).__name__}: {exc}")
            if self.settings.api_key:
                message = message.replace(self.settings.api_key, "[redacted]")
            raise DesktopError(truncate(message, 300)) from None


class _Armored:
    """The helper's streamed reply: ``<length>\\n`` then that many base64 characters, checked as it comes."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = ""
        self.declared: int | None = None
        self.parts: list[str] = []
        self.size = 0

    def feed(self, text: str) -> str | None:
        """Take one streamed piece; a reason to cut the exec off, or None."""
        if not text.isascii():
            return "the sandbox's reply is not in the helper's form (it is not ASCII)"
        if self.declared is None:
            self.head += text
            line, newline, text = self.head.partition("\n")
            if not newline:
                return "the sandbox's reply does not start with its length" if len(self.head) > 20 else None
            if not line.isdigit() or len(line) > 20:
                return "the sandbox's reply does not start with its length"
            self.declared, self.head = int(line), ""
            if self.declared > self.cap:
                return (
                    f"the sandbox's reply would be {self.declared * 3 // 4} bytes, over the run's cap of "
                    f"{self.cap * 3 // 4} bytes"
                )
        self.size += len(text)
        if self.size > self.declared:
            return "the sandbox's reply is longer than the length it sent"
        self.parts.append(text)
        return None

    def reply(self) -> bytes:
        if self.declared is None or self.size != self.declared:
            raise DesktopError("the sandbox's reply ended before the length it sent", fatal=True)
        try:
            return base64.b64decode("".join(self.parts), validate=True)
        except (binascii.Error, ValueError):
            raise DesktopError("the sandbox's reply is not in the helper's form (bad base64)", fatal=True) from None


class _Stderr:
    """An exec's stderr, kept to ``cap`` bytes (counted as UTF-8, never fewer than the bytes sent)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, text: str) -> bool:
        data = text.encode("utf-8", "replace")
        self.size += len(data)
        if self.size > self.cap:
            return False
        self.parts.append(data)
        return True

    def data(self) -> bytes:
        return b"".join(self.parts)

    def last_line(self) -> str:
        lines = self.data().decode("utf-8", "replace").strip().splitlines()
        return one_line(lines[-1]) if lines else ""


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


# ------------------------------------------------------------------------------------------------
# The start's scripts: their output, their progress, the CA bundle the install checks its mirror
# with
# --------------------------------------------------------------------------------------------------
# a longer "line" is cut into pieces of about this size
LINE_CAP = 64 * 1024
# what is kept of a script's stdout and stderr: their ends, where the reasons are
TAIL_CAP = 64 * 1024
NOTE_EVERY = 10.0  # seconds between two progress notes of an install


def read_capped(
    process: Any, stdout: Callable[[str], str | None], stderr: Callable[[str], str | None], name: str
) -> str | None:
    """An exec's stdout (here) and stderr (on a thread named ``name``) read as they stream, each piece
    handed to its reader, which answers a reason to cut the exec off or None. The exec is cancelled the
    moment one does (``Process.result()`` alone would hold all of a flood before anything is checked).
    Returns the first reason, or None when both streams ended within their caps."""
    cut: list[str] = []

    def cut_off(why: str) -> None:
        if not cut:
            cut.append(why)
        with contextlib.suppress(Exception):
            process.cancel()

    def drain_stderr() -> None:
        with contextlib.suppress(Exception):
            # the stream's own failure reaches the caller's ``result()``
            for text in process.stderr:
                if (why := stderr(text)) is not None:
                    cut_off(why)
                    return

    reader = threading.Thread(target=drain_stderr, name=name, daemon=True)
    reader.start()
    try:
        for text in process.stdout:
            if (why := stdout(text)) is not None:
                cut_off(why)
            if cut:
                break
    finally:
        reader.join(5)
    return cut[0] if cut else None


def _consume_lines(process: Any, timeout: float, on_line: Callable[[str], None] | None) -> tuple[int, str, str]:
    """A script's stdout line by line as it streams, and its stderr, each kept to its last ``TAIL_CAP``
    characters; the exec is cancelled past ``INSTALL_OUTPUT_CAP`` in all (``read_capped``). Returns the
    exit status and the two tails."""
    out, err = _Tail(TAIL_CAP), _Tail(TAIL_CAP)
    lines = _Lines(on_line or (lambda line: None))
    total = 0
    lock = threading.Lock()

    def counted(tail: _Tail, text: str) -> str | None:
        nonlocal total
        tail.add(text)
        with lock:  # both streams count against one cap
            total += len(text)
            over = total > INSTALL_OUTPUT_CAP
        return f"the sandbox's script wrote more than {INSTALL_OUTPUT_CAP // (1024 * 1024)} MiB" if over else None

    def stdout(text: str) -> str | None:
        if (why := counted(out, text)) is None:
            lines.add(text)
        return why

    cut = read_capped(process, stdout, lambda text: counted(err, text), "cwsandbox-script-stderr")
    if cut is not None:
        raise DesktopError(one_line(cut), fatal=True)
    lines.end()
    result = process.result(timeout=timeout + 5)
    return result.returncode, out.text(), err.text()


class _Tail:
    """The last ``cap`` characters of a stream, kept in pieces: joined only when read or when twice the cap
    has come, so that a sandbox streaming tiny frames costs no copy of the tail per frame."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size > 2 * self.cap:
            kept = "".join(self.parts)[-self.cap :]
            self.parts, self.size = [kept], len(kept)

    def text(self) -> str:
        return "".join(self.parts)[-self.cap :]


class _Lines:
    """A stream cut into lines for ``emit`` (a longer one in pieces of about ``LINE_CAP``), each frame looked
    at once: what is not yet a whole line waits in pieces, never copied per frame."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        while text:
            head, newline, text = text.partition("\n")
            self.parts.append(head)
            self.size += len(head)
            if newline or self.size > LINE_CAP:
                self._flush()

    def end(self) -> None:
        if self.size:
            self._flush()

    def _flush(self) -> None:
        line = "".join(self.parts)
        self.parts, self.size = [], 0
        self.emit(line.rstrip("\r"))


class InstallProgress:
    """An install's progress read from its output, told in words of ours (apt's lines are the sandbox's:
    only counted), a note at each stage and at most every ``NOTE_EVERY`` seconds between."""

    def __init__(self, note: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.note = note
        self.clock = clock
        self.started = self.last = clock()
        self.stage = "the start"
        self.fetched = self.set_up = 0
        self.finished = False

    def elapsed(self) -> float:
        return self.clock() - self.started

    def line(self, text: str) -> None:
        if text == "cua-tui: update":
            self.stage = "apt-get update"
            self.note(f"installing: apt-get update (the package lists, from {', '.join(INSTALL_HOSTS)})")
        elif text == "cua-tui: install":
            self.stage = "apt-get install"
            self.note(f"installing: apt-get install ({len(INSTALL_PACKAGES)} packages and what they need)")
        elif text == "cua-tui: done":
            self.finished = True
        elif self.stage == "apt-get install" and text.startswith("Get:"):
            # (update's Get lines are its lists)
            self.fetched += 1
        elif self.stage == "apt-get install" and text.startswith("Setting up "):
            self.set_up += 1
        now = self.clock()
        if self.stage == "apt-get install" and not self.finished and now - self.last >= NOTE_EVERY:
            self.last = now
            self.note(
                f"installing: {self.fetched} downloads, {self.set_up} packages set up ({now - self.started:.0f} s)"
            )


CA_PLACES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
CA_CAP = 4 * 1024 * 1024


@functools.cache
def ca_bundle() -> bytes:
    """This machine's CA certificates (PEM), for the stock image's apt to check its mirror over HTTPS."""
    found = ssl.get_default_verify_paths()
    for place in (found.cafile, found.openssl_cafile, *CA_PLACES):
        if not place:
            continue
        try:
            with open(place, "rb") as fh:
                data = fh.read(CA_CAP + 1)
        except OSError:
            continue
        if len(data) <= CA_CAP and b"-----BEGIN CERTIFICATE-----" in data:
            return data
    raise DesktopError(
        "cwsandbox: no CA certificate bundle on this machine for the sandbox's install to check "
        f"{', '.join(INSTALL_HOSTS)} with (install ca-certificates), or {BUILD_HINT}",
        fatal=True,
    )
