"""A local CoreWeave Sandboxes service, for the tests and the benchmarks: the real cwsandbox client talks to it.

Built on the package's own gRPC stubs; a sandbox is a local process group (a test double of the service,
never a sandbox); every request is counted and faults can be injected. Design: docs/backends/cwsandbox.md,
"Tested offline with real parts".
"""

from __future__ import annotations

import contextlib
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
from cwsandbox._proto import sandbox_pb2 as pb
from cwsandbox._proto import sandbox_pb2_grpc as pb_grpc

from cua_tui.desktops.cwsandbox import STOCK_IMAGE, helper_request

from .cwsandbox_direct import Admit, DataPath, DirectDataPlane

STATE = pb.State
# The image a run names for this mode's sandboxes: this host's own programs (the helper runs with
# the test's Python, Xvfb and Chromium). The probe at start checks them as it checks any image.
HOST_IMAGE = "cua-tui-host"
STDOUT = pb.ExecStreamOutput.Stream.STREAM_STDOUT
STDERR = pb.ExecStreamOutput.Stream.STREAM_STDERR


class Request(tuple[str, str, str]):
    """One request as recorded: ``(rpc, sandbox id, helper op)``, the tuple the callers unpack, and ``path``:
    ``gateway`` (an RPC of this service) or ``direct`` (the sandbox's data plane, over mTLS)."""

    path: DataPath

    def __new__(cls, rpc: str, sandbox_id: str = "", op: str = "", path: DataPath = "gateway") -> Request:
        self = super().__new__(cls, (rpc, sandbox_id, op))
        self.path = path
        return self

    @property
    def rpc(self) -> str:
        return self[0]

    def __repr__(self) -> str:
        return f"{tuple(self)!r}@{self.path}"


@dataclass
class Fault:
    """What to do to the next request of ``rpc`` (after ``skip`` such requests go through).

    ``kind``: ``abort`` (answer ``code``), ``hang`` (never answer until cancelled), ``no_exit`` (an exec
    that runs but whose stream ends without its exit frame), ``lost_reply`` (create the sandbox, then
    answer ``code`` as if the reply were lost), ``delay`` (wait ``seconds``, then go on)."""

    rpc: str
    kind: str
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE
    seconds: float = 0.0
    skip: int = 0
    # StreamExec only: the helper request it applies to ("perform", ...)
    op: str | None = None


@dataclass
class LocalSandbox:
    sandbox_id: str
    spec: Any
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    files: list[Path]
    state: pb.State = STATE.STATE_RUNNING
    created: float = field(default_factory=time.time)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (now)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _kill_tree(proc: subprocess.Popen[bytes], grace: float = 3.0) -> None:
    """SIGTERM the sandbox's command (its group), then SIGKILL it and everything descended from it."""
    tree = descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    for pid in [proc.pid, *tree, *descendants(proc.pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


class SandboxService(pb_grpc.SandboxServiceServicer):
    """The service. ``path`` is the PATH sandboxes and execs get (where their ``python3`` is found)."""

    def __init__(self, root: Path, path: str) -> None:
        self.root = root
        self.path = path
        self.sandboxes: dict[str, LocalSandbox] = {}
        self.requests: list[Request] = []  # (rpc, sandbox id, helper op for execs), with .path
        self.metadata: list[dict[str, str]] = []  # the gRPC metadata of every request (auth checks)
        self.creates: list[Any] = []  # every CreateSandboxRequest as received
        self.faults: list[Fault] = []
        self.exec_argv: list[list[str]] = []
        # ConnectSandbox answers UNIMPLEMENTED without one
        self.direct: DirectDataPlane | None = None
        self.interceptors: list[Any] = []  # the servers' (``Delay``), the data plane's too
        self._lock = threading.Lock()

    # ---------------------------------------------------------------------------------------------
    # tools
    def inject(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def count(self, rpc: str | None = None, op: str | None = None) -> int:
        with self._lock:
            return sum(1 for r, _s, o in self.requests if (rpc is None or r == rpc) and (op is None or o == op))

    def paths(self, rpc: str = "StreamExec") -> list[DataPath]:
        """The path each request of ``rpc`` took, in order."""
        with self._lock:
            return [r.path for r in self.requests if r.rpc == rpc]

    def live(self) -> list[LocalSandbox]:
        with self._lock:
            return [sb for sb in self.sandboxes.values() if sb.state == STATE.STATE_RUNNING]

    def vanish(self, sandbox_id: str) -> None:
        """The sandbox disappears (evicted, lost): its processes end and the service forgets it."""
        with self._lock:
            sb = self.sandboxes.pop(sandbox_id)
        self._terminate(sb)

    def close(self) -> None:
        for sb in list(self.sandboxes.values()):
            self._terminate(sb)

    def _record(
        self, rpc: str, context: grpc.ServicerContext, sandbox_id: str = "", op: str = "", path: DataPath = "gateway"
    ) -> None:
        with self._lock:
            self.requests.append(Request(rpc, sandbox_id, op, path))
            self.metadata.append({k: v for k, v in context.invocation_metadata()})

    def _count(
        self,
        rpc: str,
        context: grpc.ServicerContext,
        sandbox_id: str,
        path: DataPath,
        admit: Admit | None,
        op: str = "",
    ) -> None:
        """A data call on either path, counted; then, on the direct one, its certificate checked."""
        self._record(rpc, context, sandbox_id, op, path)
        if admit is not None:
            admit(sandbox_id, context)

    def _fault(self, rpc: str, op: str = "") -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.rpc == rpc and (fault.op is None or fault.op == op):
                    if fault.skip:
                        fault.skip -= 1
                        return None
                    self.faults.remove(fault)
                    return fault
        return None

    def _apply(self, fault: Fault | None, context: grpc.ServicerContext) -> None:
        if fault is None:
            return
        if fault.kind == "abort":
            context.abort(fault.code, f"injected {fault.code.name}")
        if fault.kind == "hang":
            while context.is_active():
                time.sleep(0.05)
            context.abort(grpc.StatusCode.CANCELLED, "cancelled")
        if fault.kind == "delay":
            time.sleep(fault.seconds)

    def _get(self, sandbox_id: str, context: grpc.ServicerContext) -> LocalSandbox:
        with self._lock:
            sb = self.sandboxes.get(sandbox_id)
        if sb is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {sandbox_id} not found")
        assert sb is not None
        if sb.state == STATE.STATE_RUNNING and sb.proc.poll() is not None:
            sb.state = STATE.STATE_COMPLETED if sb.proc.returncode == 0 else STATE.STATE_FAILED
        return sb

    def _message(self, sb: LocalSandbox) -> Any:
        return pb.Sandbox(sandbox_id=sb.sandbox_id, spec=sb.spec, status=pb.SandboxStatus(state=sb.state))

    # ---------------------------------------------------------------------------------------------
    # RPCs
    def CreateSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("CreateSandbox", context)
        with self._lock:
            self.creates.append(request)
        fault = self._fault("CreateSandbox")
        if fault is not None and fault.kind != "lost_reply":
            self._apply(fault, context)
        sb = self._launch("sb-" + secrets.token_hex(6), request.sandbox.spec)
        sandbox_id = sb.sandbox_id
        with self._lock:
            self.sandboxes[sandbox_id] = sb
        if fault is not None:
            # lost_reply: the sandbox exists, the client never hears of it
            context.abort(fault.code, "injected: the reply was lost")
        return self._message(sb)

    def _launch(self, sandbox_id: str, spec: Any) -> LocalSandbox:
        """Start the sandbox's main process: here a local process group, its mounted files written at their
        paths first (a subclass may start a container instead)."""
        container = spec.containers[0]
        files = []
        for mount in container.files:
            target = Path(mount.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(mount.content)
            os.chmod(target, 0o444)  # mounted files are read-only
            files.append(target)
        env = {"PATH": self.path, "HOME": "/root", "LANG": "C.UTF-8", **dict(container.environment_variables)}
        log = open(self.root / f"{sandbox_id}.log", "ab")  # noqa: SIM115 (kept open by the process)
        argv = self._sandbox_argv([container.command, *container.args] if container.command else [])
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        return LocalSandbox(sandbox_id, spec, proc, env, files)

    def _end(self, sb: LocalSandbox) -> None:
        """End the sandbox's main process and everything descended from it, and remove its mounted files."""
        _kill_tree(sb.proc)
        for path in sb.files:
            with contextlib.suppress(OSError):
                path.unlink()
            with contextlib.suppress(OSError):
                # the run's own folder (/opt/cua-tui/<run id>), now empty
                path.parent.rmdir()

    def _exec_popen(self, sb: LocalSandbox, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start one exec in the sandbox, its stdin, stdout and stderr piped (a subclass may exec in a container)."""
        if sb.spec.containers[0].image == STOCK_IMAGE:
            # its install at start would run apt on this host, as root
            raise OSError(f"the process-group mode runs execs on this host: it cannot be {STOCK_IMAGE}")
        return subprocess.Popen(
            argv,
            env={**sb.env, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def _sandbox_argv(self, command: list[str]) -> list[str]:
        """What runs as the sandbox's main process (a subclass may run something else)."""
        return command or ["sleep", "infinity"]

    def GetSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("GetSandbox", context, request.sandbox_id)
        self._apply(self._fault("GetSandbox"), context)
        return self._message(self._get(request.sandbox_id, context))

    def ListSandboxes(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("ListSandboxes", context)
        self._apply(self._fault("ListSandboxes"), context)
        wanted = set(request.tags)
        with self._lock:
            found = list(self.sandboxes.values())
        out = []
        for sb in found:
            if wanted and not wanted <= set(sb.spec.tags):
                continue
            if not request.show_terminated and sb.state != STATE.STATE_RUNNING:
                continue
            out.append(self._message(sb))
        return pb.ListSandboxesResponse(sandboxes=out)

    def DeleteSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._record("DeleteSandbox", context, request.sandbox_id)
        self._apply(self._fault("DeleteSandbox"), context)
        with self._lock:
            sb = self.sandboxes.get(request.sandbox_id)
        if sb is None:
            if request.allow_missing:
                return pb.DeleteSandboxResponse()
            context.abort(grpc.StatusCode.NOT_FOUND, f"sandbox {request.sandbox_id} not found")
        assert sb is not None
        self._terminate(sb)
        return pb.DeleteSandboxResponse(sandbox=self._message(sb))

    def _terminate(self, sb: LocalSandbox) -> None:
        if sb.state != STATE.STATE_TERMINATED:
            sb.state = STATE.STATE_TERMINATING
            self._end(sb)
            sb.state = STATE.STATE_TERMINATED

    def ConnectSandbox(self, request: Any, context: grpc.ServicerContext) -> Any:
        """A client certificate for the sandbox's direct data plane (faults apply: the client falls back to
        the gateway on UNAVAILABLE, UNIMPLEMENTED, DEADLINE_EXCEEDED, FAILED_PRECONDITION, RESOURCE_EXHAUSTED)."""
        self._record("ConnectSandbox", context, request.sandbox_id)
        self._apply(self._fault("ConnectSandbox"), context)
        if self.direct is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "direct connect is not offered")
        assert self.direct is not None
        sb = self._get(request.sandbox_id, context)
        if sb.state != STATE.STATE_RUNNING:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"sandbox {sb.sandbox_id} is not running")
        return self.direct.connect(request, context)

    def ReadFile(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._read_file(request, context, "gateway")

    def WriteFile(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._write_file(request, context, "gateway")

    def StreamExec(self, request_iterator: Any, context: grpc.ServicerContext) -> Any:
        yield from self._stream_exec(request_iterator, context, "gateway")

    # The gateway's RPCs and the data plane's (cwsandbox_direct.py) are these, on either path: the
    # same processes, faults and counts. ``admit`` checks a direct request's certificate once it is
    # counted.
    def _read_file(
        self, request: Any, context: grpc.ServicerContext, path: DataPath, admit: Admit | None = None
    ) -> Any:
        self._count("ReadFile", context, request.sandbox_id, path, admit)
        self._apply(self._fault("ReadFile"), context)
        self._get(request.sandbox_id, context)
        try:
            return pb.ReadFileResponse(content=Path(request.path).read_bytes())
        except OSError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{request.path}: {exc.strerror}")

    def _write_file(
        self, request: Any, context: grpc.ServicerContext, path: DataPath, admit: Admit | None = None
    ) -> Any:
        self._count("WriteFile", context, request.sandbox_id, path, admit)
        self._get(request.sandbox_id, context)
        Path(request.path).write_bytes(request.content)
        return pb.WriteFileResponse()

    def _stream_exec(
        self, request_iterator: Any, context: grpc.ServicerContext, path: DataPath, admit: Admit | None = None
    ) -> Any:
        first = next(request_iterator)
        init = first.init
        argv = list(init.command)
        op = _helper_op(argv)
        self._count("StreamExec", context, init.sandbox_id, path, admit, op)
        with self._lock:
            self.exec_argv.append(argv)
        fault = self._fault("StreamExec", op)
        if fault is not None and fault.kind != "no_exit":
            self._apply(fault, context)
        sb = self._get(init.sandbox_id, context)
        if sb.state != STATE.STATE_RUNNING:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"sandbox {sb.sandbox_id} is not running")
        yield pb.ExecStreamResponse(ready=pb.ExecStreamReady())
        yield from self._run_exec(sb, argv, dict(init.env), context, exit_frame=fault is None, stdin=request_iterator)

    def _run_exec(
        self,
        sb: LocalSandbox,
        argv: list[str],
        env: dict[str, str],
        context: grpc.ServicerContext,
        *,
        exit_frame: bool,
        stdin: Any = None,
    ) -> Any:
        """One exec; ``stdin``: the rest of the client's stream (its stdin frames, then close), fed to it."""
        try:
            proc = self._exec_popen(sb, argv, env)
            assert proc.stdin is not None
            if stdin is None:
                proc.stdin.close()
            else:
                threading.Thread(target=_feed, args=(stdin, proc.stdin), daemon=True).start()
        except OSError as exc:
            yield pb.ExecStreamResponse(output=pb.ExecStreamOutput(stream=STDERR, data=str(exc).encode()))
            yield pb.ExecStreamResponse(exit=pb.ExecStreamExit(exit_code=127))
            return
        frames: queue.Queue[tuple[pb.ExecStreamOutput.Stream, bytes] | None] = queue.Queue()

        def pump(pipe: Any, stream: pb.ExecStreamOutput.Stream) -> None:
            while chunk := pipe.read1(1 << 16):
                frames.put((stream, chunk))
            frames.put(None)

        context.add_callback(lambda: _kill_tree(proc, grace=0))  # the client cancelled or went away
        for pipe, stream in ((proc.stdout, STDOUT), (proc.stderr, STDERR)):
            threading.Thread(target=pump, args=(pipe, stream), daemon=True).start()
        open_pipes = 2
        while open_pipes:
            item = frames.get()
            if item is None:
                open_pipes -= 1
                continue
            yield pb.ExecStreamResponse(output=pb.ExecStreamOutput(stream=item[0], data=item[1]))
        code = proc.wait()
        if exit_frame:
            yield pb.ExecStreamResponse(exit=pb.ExecStreamExit(exit_code=code))


def _feed(requests: Any, pipe: Any) -> None:
    """The client's stdin frames into an exec's stdin, closed at the client's close or the stream's end."""
    with contextlib.suppress(Exception):  # the client went away, or the exec ended first
        for request in requests:
            if request.HasField("close"):
                break
            if request.HasField("stdin"):
                pipe.write(request.stdin)
                pipe.flush()
    with contextlib.suppress(OSError):
        pipe.close()


def _helper_op(argv: list[str]) -> str:
    """The helper request an exec carries (a step's relay, or ``... call SOCKET REQUEST WAIT``), for counting."""
    request = helper_request(argv)
    return str(request.get("op", "")) if request is not None else ""


class Delay(grpc.ServerInterceptor):  # type: ignore[misc]
    """``seconds`` each way on every message, as a network between the controller and the sandbox adds:
    a request is handled, and every message of a client's stream reaches the handler, ``seconds`` after it
    was sent; a reply, and every frame of a streamed reply, leaves ``seconds`` after it was made (delay
    lines: frames in flight together are delayed together, not one after another)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        wait = self.seconds
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            def unary(request: Any, context: Any) -> Any:
                time.sleep(wait)
                reply = inner(request, context)
                time.sleep(wait)
                return reply

            return handler._replace(unary_unary=unary)
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            def unary_stream(request: Any, context: Any) -> Any:
                time.sleep(wait)
                yield from _delay_line(inner_us(request, context), wait)

            return handler._replace(unary_stream=unary_stream)
        if handler.stream_stream is not None:
            inner_ss = handler.stream_stream

            def stream_stream(requests: Any, context: Any) -> Any:
                yield from _delay_line(inner_ss(_delay_line(requests, wait), context), wait)

            return handler._replace(stream_stream=stream_stream)
        return handler


def _delay_line(messages: Any, wait: float) -> Any:
    """``messages`` as they come, each given out ``wait`` seconds after it came (read on a thread of its own,
    so that one waiting does not hold back the ones behind it)."""
    line: queue.Queue[tuple[float, Any] | None] = queue.Queue()
    failure: list[BaseException] = []

    def pull() -> None:
        try:
            for message in messages:
                line.put((time.monotonic() + wait, message))
        except BaseException as exc:
            # the stream's own end (a cancel, an abort) is given out in its turn
            failure.append(exc)
        line.put(None)

    threading.Thread(target=pull, name="cwsandbox-delay", daemon=True).start()
    while (item := line.get()) is not None:
        due, message = item
        time.sleep(max(0.0, due - time.monotonic()))
        yield message
    if failure:
        raise failure[0]


class LocalService:
    """The service on 127.0.0.1 (an ephemeral port), with a ``python3`` on its PATH that has the desktop's
    packages (the test machine's). ``bwrap_fails``: a ``bwrap`` that cannot make namespaces comes first
    on PATH, as in a sandbox without user namespaces. ``direct``: ConnectSandbox issues certificates for the
    direct data plane (on its own port), as the real service does; off, the client uses the gateway.
    ``delay``: seconds added each way to every request, on both paths (a region away from the controller)."""

    service_class: type[SandboxService] = SandboxService

    def __init__(
        self, root: Path, *, bwrap_fails: bool = False, workers: int = 64, direct: bool = True, delay: float = 0.0
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        bindir = root / "bin"
        bindir.mkdir(exist_ok=True)
        python3 = bindir / "python3"
        python3.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        python3.chmod(0o755)
        if bwrap_fails:
            fake = bindir / "bwrap"
            fake.write_text('#!/bin/sh\necho "bwrap: No permissions to create a new namespace" >&2\nexit 1\n')
            fake.chmod(0o755)
        self.service = self.service_class(root, f"{bindir}:/usr/local/bin:/usr/bin:/bin")
        self.service.interceptors = [Delay(delay)] if delay > 0 else []
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers), interceptors=self.service.interceptors
        )
        pb_grpc.add_SandboxServiceServicer_to_server(self.service, self.server)  # type: ignore[no-untyped-call]
        self.port: int = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.direct = DirectDataPlane(self.service, workers=workers) if direct else None
        self.service.direct = self.direct

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.service.close()
        self.server.stop(grace=1).wait()
        if self.direct is not None:
            self.direct.stop()

    def __enter__(self) -> LocalService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
