"""The Docker engine as the Docker backend uses it: the ``docker`` command line, every read bounded.

No Docker SDK: the CLI is on every machine with an engine (Debian's ``docker.io`` brings it), takes an argv
list (never a shell string), and costs no new dependency; what the backend needs of the API is a handful
of commands (create, start, exec, inspect, rm, ps and network ls by label). Each one runs with a deadline
and a cap on what it may print; the one that carries the desktop's steps keeps an attached exec open
(``Channel``) so a step costs no process start on either side.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from ..core.ports import DesktopError
from ..core.text import one_line, truncate

LABEL = "cua-tui"  # on every container and network the backend makes
RUN_LABEL = "cua-tui.run"  # = the run id
SETUP = "run `bash scripts/setup.sh docker` as root"
OUTPUT_CAP = 4 * 1024 * 1024  # what a control command (inspect, ps) may print
ERROR_CAP = 64 * 1024  # what any command may print on stderr


class EngineError(RuntimeError):
    """A docker command that failed, timed out or printed more than it may. One line."""


@dataclass(frozen=True)
class EngineSecurity:
    """The engine's own confinement of a container that asks for none: its default seccomp profile,
    AppArmor (the host has it, and the engine applies ``docker-default``), user namespace remapping."""

    seccomp_default: bool
    apparmor: bool
    userns_remap: bool = False


def run_bounded(
    argv: list[str],
    *,
    timeout: float,
    cap: int = OUTPUT_CAP,
    stdin: bytes = b"",
    started: Callable[[subprocess.Popen[bytes] | None], None] | None = None,
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with ``stdin``; its exit status, stdout (at most ``cap`` bytes) and stderr (at most
    ``ERROR_CAP``). Over the deadline or the cap the process group is killed and EngineError raised.
    ``started`` gets the process when it starts and None when it is over (so another thread can kill it)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if started is not None:
        started(proc)
    out, err = bytearray(), bytearray()
    try:
        returncode = _exchange(proc, argv, stdin, out, err, timeout=timeout, cap=cap)
    except (EngineError, subprocess.TimeoutExpired) as exc:
        kill(proc)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise EngineError(f"`{_name(argv)}` did not end within {timeout:g} s") from None
        raise
    finally:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if started is not None:
            started(None)
    return returncode, bytes(out), bytes(err)


def _exchange(
    proc: subprocess.Popen[bytes],
    argv: list[str],
    stdin: bytes,
    out: bytearray,
    err: bytearray,
    *,
    timeout: float,
    cap: int,
) -> int:
    """Write ``stdin``, read stdout into ``out`` and stderr into ``err`` until both close, then reap the
    process: its exit status. EngineError past the deadline or a cap."""
    with selectors.DefaultSelector() as sel:
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        pending = memoryview(stdin)
        if stdin:
            assert proc.stdin is not None
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, None)
        deadline = time.monotonic() + timeout
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineError(f"`{_name(argv)}` did not answer within {timeout:g} s")
            for key, _mask in sel.select(left):
                if key.data is None:
                    assert proc.stdin is not None
                    pending = _feed(sel, proc.stdin, pending)
                    continue
                chunk = os.read(key.fd, 1 << 20)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.extend(chunk)
                if len(out) > cap or len(err) > ERROR_CAP:
                    raise EngineError(f"`{_name(argv)}` printed more than {cap} bytes")
        return proc.wait(max(0.1, deadline - time.monotonic()))


def _feed(sel: selectors.BaseSelector, stream: IO[bytes], pending: memoryview) -> memoryview:
    """Write to ``stream`` what its pipe takes of ``pending``; closed once all is written (or the reader
    left). What remains to write."""
    try:
        pending = pending[os.write(stream.fileno(), pending) :]
    except BrokenPipeError:
        pending = pending[:0]
    if not pending:
        sel.unregister(stream)
        stream.close()
    return pending


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``proc`` leads, then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def _name(argv: list[str]) -> str:
    """The command's name for a message: never its arguments (a step's request carries typed text)."""
    words = [os.path.basename(argv[0]), *argv[1:2]]
    return " ".join(words)


def first_line(data: bytes) -> str:
    text = one_line(data.decode("utf-8", "replace").strip())
    return truncate(text.removeprefix("Error response from daemon: "), 200)


@dataclass(frozen=True)
class Engine:
    """The ``docker`` command and the answers the backend needs from it."""

    docker: str = "docker"
    timeout: float = 60.0

    def run(self, *args: str, timeout: float | None = None, cap: int = OUTPUT_CAP) -> str:
        """A control command's stdout, or EngineError with the command's own one-line reason."""
        code, out, err = run_bounded([self.docker, *args], timeout=timeout or self.timeout, cap=cap)
        if code != 0:
            raise EngineError(f"docker {args[0]}: {first_line(err) or f'status {code}'}")
        return out.decode("utf-8", "replace")

    def problem(self, image: str | None = None) -> str | None:
        """Why the backend cannot run here (no engine, or not the ``image``), in one line with how to set
        it up; None when it can."""
        if shutil.which(self.docker) is None:
            return f"the docker backend needs a Docker engine, and there is no `{self.docker}` command: {SETUP}"
        try:
            self.run("version", "--format", "{{.Server.Version}}", timeout=15)
        except EngineError as exc:
            return f"the docker backend needs a running Docker engine, and it does not answer ({exc}): {SETUP}"
        if image is None:
            return None
        try:
            self.run("image", "inspect", "--format", "{{.Id}}", image, timeout=15)
        except EngineError:
            return f"the docker backend needs the image {image}, which this engine does not have: {SETUP}"
        return None

    def inspect(self, ident: str) -> dict[str, Any]:
        data = json.loads(self.run("inspect", "--type", "container", ident))
        if not isinstance(data, list) or len(data) != 1 or not isinstance(data[0], dict):
            raise EngineError(f"docker inspect: no single container {ident}")
        return data[0]

    def security(self) -> EngineSecurity:
        """What the engine applies to a container that asks for nothing (``docker info``)."""
        options = json.loads(self.run("info", "--format", "{{json .SecurityOptions}}")) or []
        if not isinstance(options, list):
            raise EngineError("docker info: its security options are not a list")
        fields = [dict(p.split("=", 1) for p in str(o).split(",") if "=" in p) for o in options]
        names = {f.get("name") for f in fields}
        # the profile the engine ships: "default" on older engines (20.10 here), "builtin" on newer
        # ones
        seccomp = any(f.get("name") == "seccomp" and f.get("profile") in ("default", "builtin") for f in fields)
        return EngineSecurity(seccomp_default=seccomp, apparmor="apparmor" in names, userns_remap="userns" in names)

    def by_label(self, label: str) -> list[dict[str, str]]:
        """Containers and networks carrying ``label`` (``key`` or ``key=value``): kind, id, name, state, run."""
        run = '{{.Label "' + RUN_LABEL + '"}}'
        found = []
        for kind, command, fields in (
            ("container", ("ps", "--all"), ("{{.ID}}", "{{.Names}}", "{{.State}}", run)),
            ("network", ("network", "ls"), ("{{.ID}}", "{{.Name}}", "network", run)),
        ):
            out = self.run(*command, "--no-trunc", "--filter", f"label={label}", "--format", "\t".join(fields))
            for line in out.splitlines():
                ident, name, state, of_run = [*line.split("\t"), "", "", ""][:4]
                if ident:
                    found.append({"kind": kind, "id": ident, "name": name, "state": state, "run": of_run})
        return found

    def remove(self, ident: str) -> bool:
        """Remove a container (killing it) or a network by id or name; False if there was none (harmless)."""
        code, _out, err = run_bounded([self.docker, "rm", "--force", "--volumes", ident], timeout=self.timeout)
        if b"No such container" in err:
            # (--force says so and exits 0): a network, or gone already
            code, _out, err = run_bounded([self.docker, "network", "rm", ident], timeout=self.timeout)
            if code == 0:
                return True
            if b"No such network" in err or b"not found" in err:
                return False
            raise EngineError(f"docker network rm: {first_line(err)}")
        if code == 0 or b"already in progress" in err:
            # the engine removes it already (--rm, after its end)
            return True
        raise EngineError(f"docker rm: {first_line(err)}")

    def remove_run(self, run_id: str) -> list[str]:
        """Remove every container and network of a run (by its label): their ids."""
        rows = self.by_label(f"{RUN_LABEL}={run_id}")
        for row in sorted(rows, key=lambda r: r["kind"] != "container"):
            # containers before their networks
            self.remove(row["id"])
        return [row["id"] for row in rows]


class Channel:
    """One attached ``docker exec -i``: requests down its stdin (a line each), replies up its stdout as
    ``<length>\\n`` and the bytes (``remote/call.py``, ``stream``). Reads are bounded in bytes and time."""

    def __init__(self, argv: list[str], *, stderr_path: str) -> None:
        self._err = open(stderr_path, "wb")  # noqa: SIM115 (closed in close())
        # setpriv: the exec's client dies with this controller, even killed outright; its stdin then
        # ends, and the helper inside shuts the container down (and the engine removes it: --rm)
        self.proc = subprocess.Popen(
            ["setpriv", "--pdeathsig", "KILL", "--", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        self._fd = self.proc.stdout.fileno()
        self._buffer = bytearray()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._fd, selectors.EVENT_READ)

    def ask(self, request: bytes, *, timeout: float, cap: int) -> bytes:
        assert self.proc.stdin is not None
        deadline = time.monotonic() + timeout
        try:
            self.proc.stdin.write(request + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise self._gone() from None
        head = self._read_until_newline(deadline, limit=20)
        if not head.isdigit():
            raise DesktopError("the sandbox's stream sent no reply length", fatal=True)
        length = int(head)
        if length > cap:
            raise DesktopError(f"the reply is {length} bytes, over the {cap}-byte cap", fatal=True)
        return self._read_exactly(length, deadline)

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0 or not self._sel.select(left):
            raise DesktopError("the sandbox's helper did not answer in time", fatal=True)
        chunk = os.read(self._fd, 1 << 20)
        if not chunk:
            raise self._gone()
        self._buffer += chunk

    def _read_until_newline(self, deadline: float, *, limit: int) -> bytes:
        while (at := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > limit:
                raise DesktopError("the sandbox's stream sent no reply length", fatal=True)
            self._fill(deadline)
        line = bytes(self._buffer[:at])
        del self._buffer[: at + 1]
        return line

    def _read_exactly(self, length: int, deadline: float) -> bytes:
        while len(self._buffer) < length:
            self._fill(deadline)
        data = bytes(self._buffer[:length])
        del self._buffer[:length]
        return data

    def _gone(self) -> DesktopError:
        code = self.proc.poll()
        return DesktopError(
            "the sandbox's stream closed" + (f" (status {code})" if code is not None else ""), fatal=True
        )

    def kill(self) -> None:
        """End the exec's client (a read in flight then ends at once). Idempotent, any thread."""
        kill(self.proc)

    def dispose(self) -> None:
        """Close the pipes, once no request is in flight."""
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        with contextlib.suppress(OSError, ValueError, KeyError):
            self._sel.close()
        self._err.close()
