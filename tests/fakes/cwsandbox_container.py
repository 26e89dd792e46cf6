"""The local CoreWeave Sandboxes service (``cwsandbox_local.py``) in container mode: each sandbox is a real
container of the image the client asked for, on this machine's Docker engine, driven through the ``docker``
command line. ``ContainerService(root)`` starts it. Design: docs/backends/cwsandbox.md, "The container
mode in detail".
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from cwsandbox._proto import sandbox_pb2 as pb

from cua_tui.desktops.docker_engine import EngineError, first_line, run_bounded

from .cwsandbox_local import LocalSandbox, LocalService, SandboxService

SERVICE_LABEL = "cua-tui-local.service"  # = the service's id, on every container it makes
SANDBOX_LABEL = "cua-tui-local.sandbox"  # = the sandbox id
TAGS_LABEL = "cua-tui-local.tags"  # = the sandbox's tags, a JSON list
NAME_PREFIX = "cua-tui-local-"  # + the sandbox id: the container's name
SHM_MIN, SHM_MAX = 64 * 1024**2, 1024**3
# seconds for a control command (create, start, rm, ps)
CONTROL_TIMEOUT = 60.0
FILE_CAP = 64 * 1024 * 1024  # bytes a ReadFile answers at most
# bytes of a container's output kept when it is removed
LOG_CAP = 256 * 1024
# The watcher: the container's exit status, once it exits; then its last output kept, and the
# container removed.
WATCH = """status=$("$1" wait "$2") || exit 125
"$1" logs --tail 200 "$2" > "$3" 2>&1
"$1" rm --force "$2" > /dev/null 2>&1
exit "$status"
"""
_UNITS = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1000, "M": 1000**2, "G": 1000**3}


class LaunchError(RuntimeError):
    """A sandbox that cannot be made (no such image, a spec Docker cannot take). One line."""


@dataclass
class ContainerSandbox(LocalSandbox):
    """A sandbox and its container; ``proc`` is the watcher that ends with it (its status the container's)."""

    container: str = ""
    expiry: threading.Timer | None = field(default=None, repr=False)


def quantity(text: str, *, cpu: bool) -> Decimal:
    """A Kubernetes quantity (``2``, ``500m``, ``4Gi``, ``512M``) as a number (of CPUs, of bytes)."""
    text = text.strip()
    try:
        if cpu and text.endswith("m"):
            return Decimal(text[:-1]) / 1000
        for suffix, factor in sorted(_UNITS.items(), key=lambda kv: -len(kv[0])):
            if text.endswith(suffix):
                return Decimal(text[: -len(suffix)]) * factor
        return Decimal(text)
    except InvalidOperation:
        raise LaunchError(f"unusable resource quantity {text!r}") from None


def resources(container: Any) -> tuple[Decimal | None, int | None]:
    """The CPUs and the bytes of memory a container may use: its limits, else its requests, else the older
    ``resources`` field; None where nothing was asked."""
    cpu = memory = ""
    for source in (
        container.resource_requirements.limits,
        container.resource_requirements.requests,
        container.resources,
    ):
        cpu, memory = cpu or source.cpu, memory or source.memory
    cpus = quantity(cpu, cpu=True) if cpu else None
    size = int(quantity(memory, cpu=False)) if memory else None
    if (cpus is not None and cpus <= 0) or (size is not None and size < 6 * 1024**2):
        # Docker's own minimum
        raise LaunchError(f"resources the engine cannot give: cpu {cpu!r}, memory {memory!r}")
    return cpus, size


def shm_size(memory: int | None) -> int:
    """``/dev/shm``: a quarter of the memory, at least Docker's 64 MiB default, at most 1 GiB."""
    return SHM_MAX if memory is None else max(SHM_MIN, min(SHM_MAX, memory // 4))


def _mount_path(path: str) -> str:
    """A path the engine can bind a file at (``--mount`` splits on commas; quotes and newlines do not belong)."""
    if not path.startswith("/") or any(c in path for c in ',"\n') or "/../" in f"{path}/":
        raise LaunchError(f"a mounted file's path the engine cannot take: {path!r}")
    return path


class ContainerSandboxService(SandboxService):
    """The service in container mode (see the module's docstring). ``path`` is unused: a container has the
    image's own PATH."""

    docker = "docker"

    def __init__(self, root: Path, path: str) -> None:
        super().__init__(root, path)
        self.service_id = secrets.token_hex(6)
        # every container this service created (ids), removed or not
        self.made: list[str] = []
        # the containers' CPU weight (Docker's default 1024; 2 yields to all)
        self.cpu_shares: int | None = None

    @property
    def label(self) -> str:
        """``key=value`` of the label on every container this service makes (for ``docker ps --filter``)."""
        return f"{SERVICE_LABEL}={self.service_id}"

    def _docker(self, *args: str, timeout: float = CONTROL_TIMEOUT, stdin: bytes = b"", cap: int = 1 << 20) -> bytes:
        try:
            code, out, err = run_bounded([self.docker, *args], timeout=timeout, stdin=stdin, cap=cap)
        except EngineError as exc:
            raise LaunchError(str(exc)) from None
        if code != 0:
            raise LaunchError(f"docker {args[0]}: {first_line(err) or f'status {code}'}")
        return out

    # ---------------------------------------------------------------------------------------------
    # hooks
    def CreateSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return super().CreateSandbox(request, context)
        except LaunchError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))

    def _launch(self, sandbox_id: str, spec: Any) -> LocalSandbox:
        container = spec.containers[0]
        if not container.image:
            raise LaunchError("the sandbox's container names no image")
        folder = self.root / sandbox_id
        folder.mkdir(parents=True)
        argv = self._create_argv(sandbox_id, spec, container, folder)
        ident = self._docker(*argv).decode().strip()
        with self._lock:
            self.made.append(ident)
        try:
            self._docker("start", ident)
        except LaunchError:
            with contextlib.suppress(LaunchError):
                self._docker("rm", "--force", ident)
            raise
        # its status: the container's, once it exits; it then removes the container
        watcher = subprocess.Popen(
            ["sh", "-c", WATCH, "watch", self.docker, ident, str(self.root / f"{sandbox_id}.log")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        env = dict(container.environment_variables)
        sb = ContainerSandbox(sandbox_id, spec, watcher, env, sorted(folder.iterdir()), container=ident)
        if spec.max_lifetime_seconds > 0:
            sb.expiry = threading.Timer(spec.max_lifetime_seconds, self._expire, args=(sb,))
            sb.expiry.daemon = True
            sb.expiry.start()
        return sb

    def _create_argv(self, sandbox_id: str, spec: Any, container: Any, folder: Path) -> list[str]:
        cpus, memory = resources(container)
        tags = json.dumps(list(spec.tags))
        argv = ["create", "--pull", "never", "--name", NAME_PREFIX + sandbox_id]
        argv += ["--label", self.label, "--label", f"{SANDBOX_LABEL}={sandbox_id}", "--label", f"{TAGS_LABEL}={tags}"]
        if cpus is not None:
            argv += ["--cpus", str(cpus)]
        if self.cpu_shares is not None:
            argv += ["--cpu-shares", str(self.cpu_shares)]
        if memory is not None:
            argv += ["--memory", str(memory), "--memory-swap", str(memory)]
        argv += ["--shm-size", str(shm_size(memory))]
        argv += ["--network", "none" if spec.network.deny_egress else "bridge"]
        for key, value in container.environment_variables.items():
            if not key or "=" in key:
                raise LaunchError(f"an environment variable's name the engine cannot take: {key!r}")
            argv += ["--env", f"{key}={value}"]
        for n, mount in enumerate(container.files):
            source = folder / f"file-{n}"
            source.write_bytes(mount.content)
            source.chmod(0o444)
            argv += ["--mount", f"type=bind,source={source},target={_mount_path(mount.path)},readonly"]
        if container.working_dir:
            argv += ["--workdir", container.working_dir]
        if container.command:
            argv += ["--entrypoint", container.command]
        return [*argv, "--", container.image, *container.args]

    def _expire(self, sb: LocalSandbox) -> None:
        """The sandbox's lifetime ran out: it ends as a stop ends it."""
        if sb.state == pb.State.STATE_RUNNING:
            self._terminate(sb)

    def _end(self, sb: LocalSandbox) -> None:
        """Remove the container (its last output kept in ``root/<sandbox id>.log``) and the mounted files."""
        assert isinstance(sb, ContainerSandbox)
        if sb.expiry is not None:
            sb.expiry.cancel()
        if sb.proc.poll() is None:
            # the container runs: the watcher goes first (it would keep the output too)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(sb.proc.pid, signal.SIGKILL)
            sb.proc.wait()
            with contextlib.suppress(EngineError, OSError):
                _code, out, err = run_bounded([self.docker, "logs", "--tail", "200", sb.container], timeout=10)
                (self.root / f"{sb.sandbox_id}.log").write_bytes(out[-LOG_CAP:] + err[-LOG_CAP:])
        with contextlib.suppress(LaunchError):
            self._docker("rm", "--force", sb.container)
        for path in sb.files:
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            (self.root / sb.sandbox_id).rmdir()

    def _exec_popen(self, sb: LocalSandbox, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        assert isinstance(sb, ContainerSandbox)
        return subprocess.Popen(
            [self.docker, "exec", "-i", *(f"--env={k}={v}" for k, v in env.items()), sb.container, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def close(self) -> None:
        super().close()
        with contextlib.suppress(LaunchError):
            # whatever is left of this service's containers, by label
            for ident in self._left():
                with contextlib.suppress(LaunchError):
                    self._docker("rm", "--force", ident)
            # a removal already under way (the watcher's, a stop's) answers the rm above at once and
            # can take long: deleting a large written layer on a loaded disk
            deadline = time.monotonic() + CONTROL_TIMEOUT
            while self._left() and time.monotonic() < deadline:
                time.sleep(0.2)

    def _left(self) -> list[str]:
        """This service's containers the engine still has, removal under way or not."""
        return self._docker("ps", "--all", "--quiet", "--no-trunc", "--filter", f"label={self.label}").decode().split()

    # ---------------------------------------------------------------------------------- files,
    # inside ``_read_file``/``_write_file``: what either data path calls (the gateway's RPCs below,
    # the direct plane).
    def ReadFile(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._read_file(request, context, "gateway")

    def WriteFile(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._write_file(request, context, "gateway")

    def _read_file(self, request: Any, context: grpc.ServicerContext, path: Any = "gateway", admit: Any = None) -> Any:
        self._record("ReadFile", context, request.sandbox_id, **_by(path))
        if admit is not None:
            admit(request.sandbox_id, context)
        self._apply(self._fault("ReadFile"), context)
        sb = self._running(request.sandbox_id, context)
        try:
            content = self._docker("exec", sb.container, "cat", "--", request.path, cap=FILE_CAP)
        except LaunchError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{request.path}: {exc}")
        return pb.ReadFileResponse(content=content)

    def _write_file(self, request: Any, context: grpc.ServicerContext, path: Any = "gateway", admit: Any = None) -> Any:
        self._record("WriteFile", context, request.sandbox_id, **_by(path))
        if admit is not None:
            admit(request.sandbox_id, context)
        sb = self._running(request.sandbox_id, context)
        script = 'cat > "$1"'
        try:
            self._docker("exec", "-i", sb.container, "sh", "-c", script, "write", request.path, stdin=request.content)
        except LaunchError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.path}: {exc}")
        return pb.WriteFileResponse()

    def _running(self, sandbox_id: str, context: grpc.ServicerContext) -> ContainerSandbox:
        sb = self._get(sandbox_id, context)
        if sb.state != pb.State.STATE_RUNNING:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"sandbox {sandbox_id} is not running")
        assert isinstance(sb, ContainerSandbox)
        return sb


def _by(path: Any) -> dict[str, Any]:
    """The data path a request came by, for ``_record`` (which takes it only where there is a direct plane)."""
    return {} if path == "gateway" else {"path": path}


class ContainerService(LocalService):
    """The local service in container mode, on 127.0.0.1 (an ephemeral port). ``label`` filters ``docker ps``
    to the containers it made."""

    service_class = ContainerSandboxService
    service: ContainerSandboxService

    @property
    def label(self) -> str:
        return self.service.label

    def containers(self, *, running: bool = False) -> list[str]:
        """The ids of the containers this service made that the engine still has (running only, if asked)."""
        args = ["ps", "--quiet", "--no-trunc", "--filter", f"label={self.label}"]
        return self.service._docker(*args, *([] if running else ["--all"])).decode().split()


def engine_problem(docker: str = "docker") -> str | None:
    """Why no container can be made here (no ``docker`` command, an engine that does not answer); None when
    one can."""
    try:
        code, _out, err = run_bounded([docker, "version", "--format", "{{.Server.Version}}"], timeout=15)
    except (EngineError, OSError) as exc:
        return f"no Docker engine answers: {exc}"
    return None if code == 0 else f"no Docker engine answers: {first_line(err) or f'status {code}'}"
