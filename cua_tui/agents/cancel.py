"""Vendor calls that a cancel (the kill switch) makes return at once, bounded by an overall deadline."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from ..core.ports import AgentError
from ..core.threads import Job, spawn


def overall_deadline(timeout: float, retries: int) -> float:
    """How long one logical request may take in all: every attempt's timeout plus the SDK's backoff (a
    Retry-After of up to a minute) between attempts. A safety net against a server that trickles bytes
    (the per-attempt timeout is per read); past it the request is abandoned."""
    return (timeout + 60) * (retries + 1)


class Cancellable:
    """Runs blocking vendor calls on a daemon thread and waits for them, for an overall deadline, or for
    ``cancel()``, whichever comes first. After a cancel every call raises AgentError at once; whatever
    the abandoned thread still does ends with the SDK's own timeout (its client is closed too)."""

    def __init__(self, overall_deadline: float, on_cancel: Callable[[], None] | None = None) -> None:
        self.overall_deadline = overall_deadline
        self._on_cancel = on_cancel
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        if self._cancelled.is_set():
            return
        self._cancelled.set()
        if self._on_cancel is not None:
            on_cancel = self._on_cancel

            def close() -> None:
                try:
                    on_cancel()
                except Exception:  # best effort: a cancel never raises
                    pass

            # On its own thread: closing a client while another thread is inside it must not make
            # the kill switch wait.
            threading.Thread(target=close, name="cua-model-cancel", daemon=True).start()

    def run[T](self, fn: Callable[[], T]) -> T:
        if self._cancelled.is_set():
            raise AgentError("the model request was cancelled")
        job = Job(fn)
        spawn(job, "cua-model-request")
        finished = job.wait(self._cancelled, self.overall_deadline)
        if self._cancelled.is_set():
            raise AgentError("the model request was cancelled")
        if not finished:
            raise AgentError(f"no reply from the model API within {math.ceil(self.overall_deadline)} s")
        return job.result()
