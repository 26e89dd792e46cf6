"""A run's OpenTelemetry spans: one mapper from the event vocabulary to GenAI spans, fed live (a run's listener,
through ``Sink``) or after the fact (``send_run``), and the OTLP/HTTP exporter of the official SDK.

No message, typed text or task text is ever put in a span. The mapping, the parents and why: docs/otel.md.
Imported only when spans are asked for (``--otel``, ``otel_endpoint``): the SDK costs start-up time.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from .. import __version__
from ..core import events as ev
from ..core.hand import decider
from ..core.text import visible
from .source import Run, key

# seconds one export request may take (connect, send, answer), retries included
EXPORT_TIMEOUT_S = 3.0
# seconds the end of a process waits for the spans still queued before it drops them
FLUSH_S = 5.0
# a collector that failed is not tried again for this long (its batches are dropped meanwhile)
DOWN_S = 30.0
# ended spans held for sending; past this the oldest are dropped (a run never waits for a collector)
QUEUE_SPANS = 4096
BATCH_SPANS = 512
SCHEDULE_MS = 2000
# characters of a string attribute (reasons, rules, ids): every value is ours or the policy's
TEXT_CAP = 256
TOOL = "computer"
OK_STATUSES = ("passed", "finished")

Attributes = dict[str, AttributeValue]


def _ns(ts: float) -> int:
    """A record's time (seconds, microseconds as written) in nanoseconds."""
    return round(ts * 1e6) * 1000


def _text(value: Any, cap: int = TEXT_CAP) -> str | None:
    return value[:cap] if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _put(target: Attributes, name: str, value: AttributeValue | None) -> None:
    if value is not None:
        target[name] = value


class SpanMapper:
    """One run's events to spans, as they come: each span starts and ends at its events' recorded times.

    ``invoke_agent`` is the run (a new trace); under it ``chat`` per model call and ``execute_tool`` per
    action (linked to the chat that proposed it); under an action, ``cua_tui.decision`` per decision.
    ``run_id`` and ``attributes`` may be functions, asked at the first event (a fleet's run has its id only
    once built). ``systems``: each vendor's ``gen_ai.provider.name`` by its agent name (the vendors'
    records, given by the command line: agents/vendors.py ``otel_systems``)."""

    def __init__(
        self,
        tracer: Tracer,
        run_id: str | Callable[[], str],
        attributes: Mapping[str, AttributeValue] | Callable[[], Mapping[str, AttributeValue]] | None = None,
        systems: Mapping[str, str] | None = None,
    ) -> None:
        self._tracer = tracer
        self._systems = systems or {}
        self._identity = (run_id, attributes)
        self.run_id = ""
        self.root: Span | None = None
        self._context = Context()
        self._model: str | None = None
        self._provider: str | None = None
        self._last = 0
        # when the model call in flight began: its phase record, or (the phase unchanged, so not recorded
        # again) the record before the model's turn
        self._waiting: int | None = None
        self._phase: Any = None
        self._previous = 0
        self._chats: dict[Any, SpanContext] = {}
        self._proposed: dict[tuple[Any, Any], Attributes] = {}
        self._actions: dict[tuple[Any, Any], Span] = {}
        self._verdicts: dict[tuple[Any, Any], Attributes] = {}
        self._asked: dict[tuple[Any, Any, Any], tuple[int, ev.DecisionRequested]] = {}
        self._usage = [0, 0]
        self._cost: float | None = None
        self._egress = [0, 0]
        self.ended = False

    def feed(self, stamped: ev.Stamped) -> None:
        """Map one event (in chain order). Events after the run's end are ignored."""
        if self.ended:
            return
        self._previous = self._last
        now = self._time(stamped.ts)
        event = stamped.event
        if self.root is None:
            self._start_root(now, event if isinstance(event, ev.RunStarted) else None)
        match event:
            case ev.Phase():
                self._phase = event.phase
                self._waiting = now if event.phase == ev.RunPhase.WAITING_MODEL else None
            case ev.ModelTurn():
                self._chat(now, event)
            case ev.ActionProposed():
                self._proposed[(key(event.turn), key(event.index))] = self._proposal(event)
            case ev.PolicyVerdict():
                attrs: Attributes = {}
                _put(attrs, "cua_tui.verdict", _text(str(event.verdict)))
                _put(attrs, "cua_tui.rule", _text(event.rule))
                self._verdicts[(key(event.turn), key(event.index))] = attrs
                self._action(now, event.turn, event.index).set_attributes(attrs)
            case ev.DecisionRequested():
                self._action(now, event.turn, event.index)
                self._asked[(key(event.turn), key(event.index), key(event.subject))] = (now, event)
            case ev.DecisionMade():
                self._decision(now, event)
            case ev.Executing():
                self._action(now, event.turn, event.index).add_event("cua_tui.executing", timestamp=now)
            case ev.Outcome():
                self._outcome(now, event)
            case ev.RunEnded():
                self._end(now, event)
            case _:
                self._root_event(now, event)

    def finish(self, status: str = "unfinished") -> None:
        """End what is still open at the last time seen (a run read back without its end, or cut short)."""
        if not self.ended and self.root is not None:
            self._close(self._last, {"cua_tui.run.status": status})

    # -- the spans ---------------------------------------------------------------------------------------

    def _time(self, ts: float) -> int:
        # a record without a time (an edited line) takes the one before it; never before the one before
        now = _ns(ts) if ts > 0 else self._last or time.time_ns()
        self._last = max(now, self._last)
        return self._last

    def _start_root(self, now: int, started: ev.RunStarted | None) -> None:
        run_id, extra = self._identity
        self.run_id = run_id() if callable(run_id) else run_id
        label = started.agent if started is not None and isinstance(started.agent, str) else ""
        agent = (label.split(":", 1)[0].split() or ["agent"])[0][:64]
        self._provider = self._systems.get(agent)
        self._model = _text(started.model, 128) if started is not None else None
        attrs: Attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
        attrs.update(self._gen_ai())
        attrs["cua_tui.run.id"] = self.run_id
        if started is not None:
            _put(attrs, "cua_tui.backend", _text(started.backend, 64))
            _put(attrs, "cua_tui.policy.name", _text(started.policy))
            _put(attrs, "cua_tui.policy.sha256", _text(started.policy_sha256, 64))
            _put(attrs, "cua_tui.screen", _text(started.screen, 32))
            attrs["cua_tui.signed"] = started.signed is not None
        attrs.update((extra() if callable(extra) else extra) or {})
        self.root = self._tracer.start_span(
            f"invoke_agent {agent}", context=Context(), kind=trace.SpanKind.INTERNAL, attributes=attrs, start_time=now
        )
        self._context = trace.set_span_in_context(self.root, Context())

    def _gen_ai(self) -> Attributes:
        """What every span of the run says of the model: provider, model, conversation (the run id)."""
        attrs: Attributes = {"gen_ai.conversation.id": self.run_id}
        _put(attrs, "gen_ai.provider.name", self._provider)
        _put(attrs, "gen_ai.request.model", self._model)
        return attrs

    def _chat(self, now: int, turn: ev.ModelTurn) -> None:
        attrs: Attributes = {"gen_ai.operation.name": "chat", **self._gen_ai()}
        _put(attrs, "gen_ai.response.id", _text(turn.response_id, 128))
        _put(attrs, "gen_ai.usage.input_tokens", _int(turn.input_tokens))
        _put(attrs, "gen_ai.usage.output_tokens", _int(turn.output_tokens))
        _put(attrs, "cua_tui.turn", _int(turn.turn))
        _put(attrs, "cua_tui.turn.calls", _int(turn.calls))
        _put(attrs, "cua_tui.turn.actions", _int(turn.actions))
        if isinstance(turn.cost_usd, int | float):
            attrs["cua_tui.usage.cost_usd"] = float(turn.cost_usd)
            self._cost = (self._cost or 0.0) + float(turn.cost_usd)
        self._usage[0] += _int(turn.input_tokens) or 0
        self._usage[1] += _int(turn.output_tokens) or 0
        start = self._waiting
        if start is None:
            start = self._previous if self._phase == ev.RunPhase.WAITING_MODEL else now
        self._waiting = None
        name = f"chat {self._model}" if self._model else "chat"
        span = self._tracer.start_span(name, self._context, trace.SpanKind.CLIENT, attrs, start_time=start)
        span.end(end_time=now)
        self._chats[key(turn.turn)] = span.get_span_context()

    def _proposal(self, proposed: ev.ActionProposed) -> Attributes:
        """What an action's span will say of its proposal: never its text, its summary or its raw kind."""
        attrs: Attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL}
        attrs["gen_ai.conversation.id"] = self.run_id
        _put(attrs, "gen_ai.tool.call.id", _text(proposed.call_id, 128))
        _put(attrs, "cua_tui.turn", _int(proposed.turn))
        _put(attrs, "cua_tui.action.index", _int(proposed.index))
        kind = proposed.action.get("kind") if isinstance(proposed.action, dict) else None
        attrs["cua_tui.action.kind"] = _text(kind, 32) or "unparsed"
        _put(attrs, "cua_tui.action.error_code", _text(proposed.error_code, 64))
        attrs["cua_tui.action.proposed_by"] = _text(proposed.by, 64) or "model"
        return attrs

    def _action(self, now: int, turn: Any, index: Any) -> Span:
        """The span of action ``(turn, index)``, started now if this is the first event of its handling."""
        where = (key(turn), key(index))
        span = self._actions.get(where)
        if span is None:
            attrs = self._proposed.pop(where, None) or {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": TOOL,
                "cua_tui.action.kind": "unknown",
            }
            chat = self._chats.get(where[0])
            links = [Link(chat)] if chat is not None else []
            span = self._tracer.start_span(
                f"execute_tool {TOOL}", self._context, trace.SpanKind.INTERNAL, attrs, links, start_time=now
            )
            self._actions[where] = span
        return span

    def _decision(self, now: int, made: ev.DecisionMade) -> None:
        action = self._action(now, made.turn, made.index)
        where = (key(made.turn), key(made.index))
        start, asked = self._asked.pop((*where, key(made.subject)), (now, None))
        by = made.by if isinstance(made.by, str) else ""
        operator = made.operator if isinstance(made.operator, str) else ""
        attrs: Attributes = dict(self._verdicts.get(where, {}))
        attrs["cua_tui.decision.answer"] = str(made.decision)[:16]
        attrs["cua_tui.decided_by"] = by[:TEXT_CAP]
        # the decider, as the reviews name it (core/hand.py); the group is an attribute of its own
        attrs["cua_tui.decision.how"] = decider(by, operator)
        attrs["cua_tui.decision.wait_s"] = round((now - start) / 1e9, 6)
        _put(attrs, "cua_tui.decision.subject", _text(made.subject, 32))
        _put(attrs, "cua_tui.turn", _int(made.turn))
        _put(attrs, "cua_tui.action.index", _int(made.index))
        # The policy's own words only: the request's reason, or the policy's note on its own decision. Left
        # out: a reviewer's note (free text), a safety check's reason (the vendor's message) and a parse
        # error's (it quotes what the model sent).
        reason = asked.reason if asked is not None else made.note if by == "policy" else None
        if made.subject != "safety_check" and not str(attrs.get("cua_tui.rule", "")).startswith("parse:"):
            _put(attrs, "cua_tui.decision.reason", _text(reason))
        if asked is not None and isinstance(asked.deadline_s, int | float):
            attrs["cua_tui.decision.deadline_s"] = float(asked.deadline_s)
        _put(attrs, "cua_tui.decision.operator", _text(operator, 128))
        _put(attrs, "cua_tui.decision.shown_ms", _int(made.shown_ms))
        if made.edited is not None:
            attrs["cua_tui.decision.edited"] = True
        if isinstance(made.group, dict):
            _put(attrs, "cua_tui.decision.group", _text(made.group.get("id"), 64))
        context = trace.set_span_in_context(action, Context())
        span = self._tracer.start_span("cua_tui.decision", context, attributes=attrs, start_time=start)
        span.end(end_time=now)

    def _outcome(self, now: int, outcome: ev.Outcome) -> None:
        span = self._action(now, outcome.turn, outcome.index)
        status = str(outcome.status)[:32]
        attrs: Attributes = {"cua_tui.outcome": status}
        _put(attrs, "cua_tui.step", _int(outcome.step))
        if isinstance(outcome.duration_ms, int | float):
            attrs["cua_tui.action.duration_ms"] = float(outcome.duration_ms)
        span.set_attributes(attrs)
        if status == "failed":
            span.set_status(Status(StatusCode.ERROR, "failed"))
        span.end(end_time=now)
        del self._actions[(key(outcome.turn), key(outcome.index))]

    def _root_event(self, now: int, event: ev.Event) -> None:
        """Run-wide facts: the root's attributes, or events on it (refused egress, safety checks, takeovers)."""
        root = self.root
        assert root is not None
        match event:
            case ev.Egress(allowed=allowed):
                self._egress[0 if allowed is True else 1] += 1
                if allowed is not True:
                    attrs: Attributes = {"cua_tui.egress.port": _int(event.port) or 0}
                    _put(attrs, "cua_tui.egress.host", _text(event.host, 253))
                    _put(attrs, "cua_tui.egress.method", _text(event.method, 16))
                    root.add_event("cua_tui.egress.refused", attrs, timestamp=now)
            case ev.VerificationDone():
                root.set_attribute("cua_tui.verification.passed", event.passed is True)
                _put_on(root, "cua_tui.verification.verifier", _text(event.verifier, 128))
                _put_on(root, "cua_tui.verification.where", _text(str(event.where), 32))
            case ev.Killed():
                _put_on(root, "cua_tui.killed_by", _text(event.by, 128))
            case ev.SafetyChecksRaised():
                codes = [c.get("code") for c in event.checks if isinstance(c, dict)]
                checks: Attributes = {"cua_tui.turn": _int(event.turn) or 0}
                checks["cua_tui.safety_checks"] = [c[:64] for c in codes if isinstance(c, str)][:32]
                root.add_event("cua_tui.safety_checks", checks, timestamp=now)
            case ev.TurnRefused():
                refused: Attributes = {"cua_tui.turn": _int(event.turn) or 0}
                refused["cua_tui.turn.actions"] = _int(event.actions) or 0
                root.add_event("cua_tui.turn_refused", refused, timestamp=now)
            case ev.TakeoverStarted() | ev.TakeoverEnded() | ev.ErrorRaised() | ev.GrantAdded() | ev.GrantRevoked():
                root.add_event(f"cua_tui.{event.kind}", _facts(event), timestamp=now)

    def _end(self, now: int, ended: ev.RunEnded) -> None:
        attrs: Attributes = {"cua_tui.run.status": str(ended.status)[:32]}
        _put(attrs, "cua_tui.run.reason", _text(ended.reason))
        _put(attrs, "cua_tui.run.turns", _int(ended.turns))
        _put(attrs, "cua_tui.run.steps", _int(ended.steps))
        _put(attrs, "cua_tui.run.executed", _int(ended.executed))
        if isinstance(ended.verified, bool):
            attrs["cua_tui.run.verified"] = ended.verified
        self._close(now, attrs)

    def _close(self, now: int, attrs: Attributes) -> None:
        """End the actions still open (outcome unknown), then the run, with its totals and status."""
        root = self.root
        assert root is not None
        for span in self._actions.values():
            span.set_attribute("cua_tui.outcome", "unknown")
            span.end(end_time=now)
        self._actions.clear()
        attrs["gen_ai.usage.input_tokens"] = self._usage[0]
        attrs["gen_ai.usage.output_tokens"] = self._usage[1]
        _put(attrs, "cua_tui.usage.cost_usd", self._cost)
        attrs["cua_tui.egress.allowed"] = self._egress[0]
        attrs["cua_tui.egress.refused"] = self._egress[1]
        root.set_attributes(attrs)
        status = str(attrs["cua_tui.run.status"])
        root.set_status(Status(StatusCode.OK) if status in OK_STATUSES else Status(StatusCode.ERROR, status))
        root.end(end_time=now)
        self.ended = True


def _put_on(span: Span, name: str, value: AttributeValue | None) -> None:
    if value is not None:
        span.set_attribute(name, value)


def _facts(event: ev.Event) -> Attributes:
    """The short fields of a takeover, grant or error record (who, where, scope): no message, no label."""
    fields = {"turn", "by", "where", "how", "actions", "grant", "scope"}
    attrs: Attributes = {}
    for name, value in event.to_record().items():
        if name in fields and (isinstance(value, str) or type(value) is int):
            attrs[f"cua_tui.{name}"] = value[:128] if isinstance(value, str) else value
    return attrs


# -- sending -----------------------------------------------------------------------------------------------


class _Reasons(logging.Handler):
    """Keeps the SDK's first complaint (per thread) since the last ``take`` for the one notice (the first
    names the cause: refused, timed out, an HTTP status; the last only that retries ran out), and keeps them
    all off the terminal."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self.local, "first", ""):
            return
        try:
            self.local.first = record.getMessage()
        except Exception:  # a record whose arguments do not format: no reason, still quiet
            self.local.first = ""

    def take(self) -> str:
        first: str = getattr(self.local, "first", "")
        self.local.first = ""
        return first


_REASONS = _Reasons()
_CODE = re.compile(r"batch code: (\d{3})")


def _cause(message: str) -> str:
    """The SDK's complaint in a few words: refused, no answer, an HTTP status; else as it said it."""
    low = message.lower()
    if "refused" in low:
        return "connection refused"
    if code := _CODE.search(message):
        return f"HTTP {code.group(1)}"
    if "timed out" in low or "timeout" in low:
        return f"no answer within {EXPORT_TIMEOUT_S:g} s"
    if "name or service not known" in low or "name resolution" in low:
        return "host not found"
    return message or "the collector did not accept them"


_QUIET = threading.Lock()


def _quiet_sdk() -> None:
    """The SDK logs every failed export and dropped span (Python's last-resort handler would print each on
    stderr); those go to ``_REASONS`` instead, and the sink says one line."""
    with _QUIET:
        logger = logging.getLogger("opentelemetry")
        if _REASONS not in logger.handlers:
            logger.addHandler(_REASONS)
            logger.propagate = False


def public_endpoint(endpoint: str) -> str:
    """The endpoint as it may be shown: scheme, host, port and path (no query, no user part)."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    return visible(f"{parts.scheme}://{host}{port}{parts.path}", limit=200)


def traces_url(endpoint: str) -> str:
    """The URL spans are posted to: ``endpoint`` itself, or its ``/v1/traces`` when it names no path."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return urlunsplit(parts._replace(path="/v1/traces"))
    return endpoint


def _provider() -> TracerProvider:
    # never the process's global provider: a vendor SDK's own instrumentation (which may record content)
    # must not find its way into these spans
    resource = Resource.create({"service.name": "cua-tui", "service.version": __version__})
    return TracerProvider(resource=resource, shutdown_on_exit=False)


class Refused(requests.exceptions.RequestException):
    """Nothing listens at the collector's address: an answer, not a transient error."""


class _RefusalIsFinal(requests.Session):
    """The exporter's session. The SDK retries a connection error with backoff (1 s, then 2 s, within its
    timeout), which is right for a dropped pooled connection and wasted on a refusal: a collector that is not
    running is not running a second later. A refusal comes back as ``Refused``, which the SDK does not retry,
    so a run with a refusing collector ends as fast as one with none (docs/otel.md)."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        try:
            return super().request(*args, **kwargs)
        except requests.exceptions.ConnectionError as exc:
            if _refused(exc):
                raise Refused("connection refused") from exc
            raise


def _refused(exc: BaseException) -> bool:
    # requests wraps urllib3's wrapping of the socket's error: walk the causes and the urllib3 reason
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop()
        if err is None or id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, ConnectionRefusedError):
            return True
        reason = getattr(err, "reason", None)
        nested = [err.__cause__, err.__context__, *(a for a in err.args if isinstance(a, BaseException))]
        todo.extend([*nested, reason if isinstance(reason, BaseException) else None])
    return False


def _exporter(endpoint: str) -> SpanExporter:
    # headers (authentication) come from OTEL_EXPORTER_OTLP_HEADERS / OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    # read by the exporter itself; nothing here logs or shows them
    return OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT_S, session=_RefusalIsFinal())


class _Noticing(SpanExporter):
    """The OTLP exporter, counting what was sent and saying the first failure once. After a failure the
    collector counts as down for ``DOWN_S``: batches meanwhile are dropped at once, not sent and waited on
    (so the end of a process never waits on a collector already known not to answer)."""

    def __init__(self, inner: SpanExporter, notice: Callable[[str], None]) -> None:
        self.inner = inner
        self.notice = notice
        self.sent = 0
        self.failed = 0
        self.down_until = 0.0  # time.monotonic()
        self.lock = threading.Lock()

    @property
    def down(self) -> bool:
        with self.lock:
            return time.monotonic() < self.down_until

    def refused(self) -> None:
        """Nothing listens at the collector (the sink's probe found it): down, as after a refused export."""
        with self.lock:
            first = self.down_until == 0.0 and self.failed == 0
            self.down_until = time.monotonic() + DOWN_S
        if first:
            self.notice("connection refused")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.down:
            with self.lock:
                self.failed += len(spans)
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # the exporter's own bug: these spans are lost, the run is not
            _REASONS.local.first = type(exc).__name__
            result = SpanExportResult.FAILURE
        # this batch's complaint, taken whatever the result (a retry that went through leaves one too)
        reason = _REASONS.take()
        with self.lock:
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
                return result
            self.failed += len(spans)
            self.down_until = time.monotonic() + DOWN_S
            first = self.failed == len(spans)
        if first:
            self.notice(_cause(reason))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Counting(SpanProcessor):
    """Counts the spans ended, so that the end can say how many were dropped."""

    def __init__(self) -> None:
        self.ended = 0
        self.lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            self.ended += 1


class Sink:
    """Spans of live runs, sent by OTLP/HTTP from a bounded queue on the SDK's own thread: a listener only
    queues (it never waits on the network), a failed send is said once (``say``, or held for ``close``), and
    ``close`` waits at most ``FLUSH_S`` for what is left. One per process: a fleet's runs share it, each run
    its own trace."""

    def __init__(
        self, endpoint: str, *, say: Callable[[str], None] | None = None, systems: Mapping[str, str] | None = None
    ) -> None:
        _quiet_sdk()
        self.endpoint = endpoint
        self._systems = systems
        self._say = say
        self.held: list[str] = []
        self._noticed = False
        self._lock = threading.Lock()
        self._provider = _provider()
        self._counting = _Counting()
        self._exporter = _Noticing(_exporter(endpoint), self._notice)
        self._provider.add_span_processor(self._counting)
        self._provider.add_span_processor(
            BatchSpanProcessor(
                self._exporter,
                max_queue_size=QUEUE_SPANS,
                schedule_delay_millis=SCHEDULE_MS,
                max_export_batch_size=BATCH_SPANS,
            )
        )
        self._tracer = self._provider.get_tracer("cua_tui", __version__)
        threading.Thread(target=self._probe, name="cua-otel-probe", daemon=True).start()

    def _probe(self) -> None:
        """One TCP connect to the collector as the sink opens, off the run's threads: when nothing listens
        there it is down from the start, as after a refused export (said once; its spans dropped at once), so
        the end of a short run does not wait on a first export that can only be refused. Any other failure is
        the exporter's to find and say."""
        from urllib.parse import urlsplit

        parts = urlsplit(traces_url(self.endpoint))
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=EXPORT_TIMEOUT_S):
                pass
        except ConnectionRefusedError:
            self._exporter.refused()
        except (OSError, ValueError):
            pass

    def listener(
        self,
        run_id: str | Callable[[], str],
        attributes: Mapping[str, AttributeValue] | Callable[[], Mapping[str, AttributeValue]] | None = None,
    ) -> Callable[[ev.Stamped], None]:
        """A run's listener (one per run): maps each event as it is written; never raises, never waits."""

        def about() -> Mapping[str, AttributeValue]:
            extra = attributes() if callable(attributes) else attributes
            return {"cua_tui.source": "live", **(extra or {})}

        mapper = SpanMapper(self._tracer, run_id, about, self._systems)
        broken: list[bool] = []

        def listen(stamped: ev.Stamped) -> None:
            if broken:
                return
            try:
                mapper.feed(stamped)
            except Exception as exc:  # a mapping bug stops this run's spans, never the run
                broken.append(True)
                self._notice(f"stopped mapping run {mapper.run_id or '?'} ({type(exc).__name__})")

        return listen

    def _notice(self, why: str) -> None:
        line = (
            f"otel: spans not sent to {public_endpoint(self.endpoint)}: {visible(why, limit=200)} "
            "(the run goes on; spans that cannot be sent are dropped)"
        )
        with self._lock:
            if self._noticed:
                return
            self._noticed = True
            if self._say is None:
                self.held.append(line)
                return
        self._say(line)

    def close(self, wait_s: float = FLUSH_S) -> list[str]:
        """Send what is queued, waiting at most ``wait_s`` (not at all on a collector that just failed: what
        is left is dropped, as said); the lines still to say (held notices, the count)."""
        closing = threading.Thread(target=self._provider.shutdown, name="cua-otel-close", daemon=True)
        closing.start()
        closing.join(0.0 if self._exporter.down else wait_s)
        with self._lock:
            # said already, or to be said now: nothing after this (an export still running past the wait)
            noticed, self._noticed = self._noticed, True
            lines, self.held = self.held, []
        if noticed:
            return lines
        with self._exporter.lock:
            sent = self._exporter.sent
        dropped = self._counting.ended - sent
        line = f"otel: {sent} span(s) sent to {public_endpoint(self.endpoint)}"
        if dropped:
            line += f"; {dropped} dropped (the queue was full, or not sent within {wait_s:g} s)"
        return [*lines, line]


# -- after the fact ----------------------------------------------------------------------------------------


class SendFailed(Exception):
    """The collector did not take the spans; ``str()`` is one line (the endpoint, the SDK's reason)."""


@dataclass(frozen=True)
class Sent:
    spans: int
    trace_id: str


class _Sending(SpanProcessor):
    """Sends ended spans in batches, synchronously (an export command has nothing else to do), and remembers
    the first failure; memory stays at one batch whatever the run's length."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter
        self.batch: list[ReadableSpan] = []
        self.sent = 0
        self.failure: str | None = None

    def on_end(self, span: ReadableSpan) -> None:
        self.batch.append(span)
        if len(self.batch) >= BATCH_SPANS:
            self.flush()

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if not batch or self.failure is not None:
            return
        result = self.exporter.export(batch)
        reason = _REASONS.take()
        if result is SpanExportResult.SUCCESS:
            self.sent += len(batch)
        else:
            self.failure = _cause(reason)


def send_run(run: Run, endpoint: str, systems: Mapping[str, str] | None = None) -> Sent:
    """Send a recorded run's spans, with its recorded times, and the verify verdict on the root span.
    Raises SendFailed (nothing more is sent after the first batch that fails)."""
    _quiet_sdk()
    provider = _provider()
    exporter = _exporter(endpoint)
    sending = _Sending(exporter)
    provider.add_span_processor(sending)
    attrs: Attributes = {"cua_tui.source": "export", "cua_tui.audit.verify": run.report.code.name.lower()}
    attrs["cua_tui.audit.summary"] = run.report.summary[:TEXT_CAP]
    _put(attrs, "cua_tui.fleet.id", _text(run.info.get("fleet"), 128))
    _put(attrs, "cua_tui.fleet.task", _text(run.info.get("fleet_task"), 128))
    mapper = SpanMapper(provider.get_tracer("cua_tui", __version__), run.run_id, attrs, systems)
    try:
        for stamped in run.stamped:
            mapper.feed(stamped)
            if sending.failure is not None:
                break
        mapper.finish()
        sending.flush()
    finally:
        exporter.shutdown()
    if sending.failure is not None:
        raise SendFailed(f"{public_endpoint(endpoint)}: spans not sent ({visible(sending.failure, limit=200)})")
    root = mapper.root
    trace_id = trace.format_trace_id(root.get_span_context().trace_id) if root is not None else ""
    return Sent(sending.sent, trace_id)
