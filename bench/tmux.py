"""A real terminal for the benchmarks: a tmux server of its own, driven through one control-mode client
(``tmux -C``), which is told of every output the pane gets as tmux takes it (``%output``). A capture of
the pane is then stamped with the last output before it, so a change is timed from when tmux got it, not
from when the benchmark happened to look (docs/benchmarks.md, "replay").
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Capture:
    """The pane's text (``text``, one line per row) as tmux held it after the output it got up to
    ``changed`` (``time.monotonic``; 0.0 when it had got none yet)."""

    text: str
    changed: float


class TmuxError(RuntimeError):
    """tmux answered a command with an error, ended, or the pane never showed what was waited for."""


class Terminal:
    """One pane of ``width`` x ``height`` on a private tmux server, started with a shell that waits; ``run``
    replaces it with a command. ``close`` ends the server and everything in it."""

    def __init__(self, width: int, height: int) -> None:
        if shutil.which("tmux") is None:
            raise TmuxError("tmux is not installed")
        self.socket = f"cua-tui-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # no user configuration; COLUMNS and LINES would override the pane's size in the command
        self._env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
        size = ["-x", str(width), "-y", str(height)]
        self._tmux("-f", "/dev/null", "new-session", "-d", *size, "-s", "bench", "sleep 3600")
        self._tmux("set-option", "-g", "window-size", "manual")
        # a program that ends leaves its last screen (and the server) up for the benchmark to read
        self._tmux("set-option", "-g", "remain-on-exit", "on")
        self._client = subprocess.Popen(
            ["tmux", "-L", self.socket, "-C", "attach-session", "-t", "bench"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=self._env,
        )
        self._answers: queue.Queue[tuple[bool, list[str], float]] = queue.Queue()
        self._output = threading.Condition()
        self.outputs = 0  # %output notifications so far
        self.last_output = 0.0  # when the newest came (time.monotonic)
        threading.Thread(target=self._read, name="tmux-control", daemon=True).start()
        try:
            self._answers.get(timeout=10)  # the attach's own answer comes first
        except queue.Empty:
            raise TmuxError("tmux did not attach the control client") from None

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10, env=self._env, check=False
        )
        if out.returncode:
            raise TmuxError(f"tmux {args[0]}: {out.stderr.strip()}")
        return out.stdout

    def _read(self) -> None:
        """The control client's lines: notifications counted, each command's answer queued with the time of
        the last output tmux had taken before it."""
        assert self._client.stdout is not None
        block: list[str] | None = None
        stamp = 0.0
        for raw in self._client.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if block is not None:
                if line.startswith(("%end ", "%error ")):
                    self._answers.put((line.startswith("%end "), block, stamp))
                    block = None
                else:
                    block.append(line)
            elif line.startswith("%begin "):
                block, stamp = [], self.last_output
            elif line.startswith("%output "):
                with self._output:
                    self.outputs += 1
                    self.last_output = time.monotonic()
                    self._output.notify_all()
            elif line.startswith("%exit"):
                self._answers.put((False, [f"the control client ended ({line})"], 0.0))
                return
        self._answers.put((False, ["the control client ended"], 0.0))

    def command(self, line: str, timeout: float = 10.0) -> tuple[list[str], float]:
        """Run one tmux command through the control client: its output lines, and when the last pane output
        before it came."""
        assert self._client.stdin is not None
        self._client.stdin.write(line.encode() + b"\n")
        self._client.stdin.flush()
        try:
            ok, lines, stamp = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise TmuxError(f"tmux did not answer {line!r}") from None
        if not ok:
            raise TmuxError(f"tmux {line.split()[0]}: {' '.join(lines)}")
        return lines, stamp

    def run(self, command: str) -> None:
        """The pane's program replaced by ``command`` (a shell command line)."""
        self.command(f"respawn-pane -k -t bench {_quoted(command)}")

    def pid(self) -> int:
        """The pane's process."""
        lines, _ = self.command("display-message -p -t bench '#{pane_pid}'")
        return int(lines[0])

    def keys(self, *keys: str) -> float:
        """Send ``keys`` to the pane; when they were sent (time.monotonic, just before)."""
        sent = time.monotonic()
        self.command("send-keys -t bench " + " ".join(_quoted(k) for k in keys))
        return sent

    def capture(self) -> Capture:
        lines, stamp = self.command("capture-pane -p -t bench")
        return Capture("\n".join(lines), stamp)

    def wait(self, found: Callable[[str], bool], what: str, timeout: float) -> Capture:
        """The first capture whose text ``found`` accepts, looking again each time the pane gets output."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.outputs
            shot = self.capture()
            if found(shot.text):
                return shot
            left = deadline - time.monotonic()
            if left <= 0:
                raise TmuxError(f"the pane did not show {what} within {timeout:.0f} s; it showed:\n{shot.text}")
            self._output_after(seen, min(left, 1.0))

    def _output_after(self, seen: int, timeout: float) -> None:
        """Wait until the pane has had output since the ``seen``-th (or ``timeout`` passed)."""
        with self._output:
            self._output.wait_for(lambda: self.outputs != seen, timeout=timeout)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10, check=False)
        try:
            self._client.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._client.kill()


def _quoted(text: str) -> str:
    """``text`` as one argument of a tmux command line."""
    return "'" + text.replace("'", "'\\''") + "'"
