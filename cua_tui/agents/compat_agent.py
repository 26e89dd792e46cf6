"""``--agent openai-compatible``: an open-weight computer-use model (UI-TARS, Qwen3-VL, Qwen2.5-VL, Fara, GLM-V,
OpenCUA) served by vLLM, SGLang or any OpenAI-compatible server, through the ``openai`` package's chat
completions. The grammar (core/grammars) names the family: its prompt and conversation are built here
(compat_prompts.py), its reply is read by the core's strict reader, and its actions reach the supervisor as
units in the model's coordinates, with the Scaling that maps them to the display.

The key, when the server wants one, is the one its record names (CUA_TUI_COMPAT_API_KEY or the variable the
settings name), never OPENAI_API_KEY: with none, no Authorization header is sent at all, and the SDK's own
environment (OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_ADMIN_KEY) never reaches the server either.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from PIL import Image

from ..core.geometry import Scaling, Size
from ..core.grammars import Grammar, Reply, ReplyError
from ..core.grammars.reply import MAX_REPLY_CHARS
from ..core.ports import AgentError, Call, CallResult, Frame, OutcomeStatus, Shown, Turn, Usage
from ..core.text import encodable, one_line
from .compat_prompts import DIALECTS, Step
from .images import data_url
from .prices import count, estimate_cost
from .vendor_agent import VendorAgent, VendorOptions
from .vendors import AgentRequest

if TYPE_CHECKING:
    import openai  # noqa: F401


# more past screenshots than any family's history replays (UI-TARS' 5 at most)
KEPT_SCREENSHOTS = 8


@dataclass(slots=True)
class _Later:
    """A control that came after the actions of the same reply (Qwen's terminate after a click): it
    applies once they have all run, and is dropped (the model hears why) otherwise."""

    end: str | None = None
    gave_up: bool = False
    asks: str | None = None


class CompatAgent(VendorAgent["openai.OpenAI"]):
    """One run's conversation with an open-weight model. Not reusable across runs."""

    name = "openai-compatible"
    sdk = "openai"
    client_class = "OpenAI"
    key_required = False

    def __init__(
        self, api_key: str, model: str, grammar: Grammar, *, inferred: bool = False, **options: Unpack[VendorOptions]
    ) -> None:
        super().__init__(api_key, model, **options)
        self.grammar = grammar
        self.inferred = inferred
        self.dialect = DIALECTS[grammar.name]
        self.price = self.price or (0.0, 0.0)  # a model on one's own GPU costs nothing unless a price is set
        self._task = ""
        self._past: list[Step] = []
        self._cursor: tuple[float, float] | None = None
        self._later: _Later | None = None
        self._pending: int = 0  # actions of the last turn, each owed a result

    @classmethod
    def from_request(cls, request: AgentRequest) -> CompatAgent:
        from ..core.grammars import grammar_for

        grammar, inferred = grammar_for(request.model or "", request.grammar)
        return cls(request.key or "", request.model or "", grammar, inferred=inferred, **cls.request_options(request))

    def _client_options(self, sdk: Any, api_key: str) -> dict[str, Any]:
        # explicit headers win over what the SDK would add from its environment (openai/lib/_client_auth.py);
        # without a key, each request omits Authorization itself (the SDK refuses a request that names none)
        self._no_key = {"Authorization": sdk.Omit()} if not api_key else None
        return {"default_headers": {"OpenAI-Organization": sdk.Omit(), "OpenAI-Project": sdk.Omit()}}

    @property
    def run_facts(self) -> dict[str, Any]:
        return {"grammar": self.grammar.name, "grammar_inferred": self.inferred, "coordinates": self.grammar.space}

    # ---------------------------------------------------------------------------------------------
    # Agent protocol
    # ----------------------------------------------------------------------------------------------
    def start(self, task: str, frame: Frame) -> Turn:
        self._task = task
        return self._turn(frame, "")

    def next_turn(self, results: tuple[CallResult, ...], frame: Frame, note: str = "") -> Turn:
        report = _report(results, self._pending)
        later, self._later = self._later, None
        if later is not None and not report and not note:
            # every action of the reply ran: its control applies now, without asking the model again
            if later.asks is not None:
                return Turn(text="", asks=later.asks)
            return Turn(text=_claim(later.end or "", later.gave_up))
        if later is not None:
            report = " ".join(
                w for w in (report, "Your reply's last step was not taken: the actions before it did not all run.") if w
            )
        told = " ".join(words for words in (report, encodable(note)) if words)
        return self._turn(frame, told)

    # ---------------------------------------------------------------------------------------------
    def _turn(self, frame: Frame, note: str) -> Turn:
        sent, scaling = self.grammar.sizes(frame.size)
        image = _resized(frame, sent)
        now = Step(data_url(image), note=note)
        if self.dialect.half_images:
            now.half = data_url(_resized(frame, Size(max(1, sent.width // 2), max(1, sent.height // 2))))
        messages = self.dialect.build(self._task, self._past, now, sent)
        params = dict(self.dialect.params)
        extra = params.pop("extra_body", None)
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, **params}
        if extra:
            kwargs["extra_body"] = extra
        if self._no_key:
            kwargs["extra_headers"] = self._no_key
        data = self._send(lambda: self._client.chat.completions.with_raw_response.create(**kwargs), lambda d: d)
        text, response_id = _content(data)
        usage = self._compat_usage(data)
        shown = Shown(sent, self.grammar.resize(sent), scaling.space)
        self._past.append(now)
        # what the history replays of it: bounded as the reader bounds it (a refused 10 MB reply is not sent
        # back whole each turn), and only the screenshots a family can still replay kept in memory
        now.reply = text[:MAX_REPLY_CHARS]
        for old in self._past[:-KEPT_SCREENSHOTS]:
            old.image = old.half = ""
        try:
            reply = self.grammar.read(text, self._cursor)
        except ReplyError as exc:
            self._count_turn([], "")
            self._pending = 0
            return Turn(text="", response_id=response_id, usage=usage, refused=exc.reason, shown=shown)
        self._count_turn([], "")
        now.thought, now.written, now.memory = reply.thought, reply.written, reply.memory
        self._cursor = reply.cursor
        return self._from_reply(reply, scaling, response_id, usage, shown)

    def _from_reply(self, reply: Reply, scaling: Scaling, response_id: str, usage: Usage, shown: Shown) -> Turn:
        words = "\n".join([reply.thought, *(f"Memorized: {fact}" for fact in reply.memos)]).strip()
        self._pending = len(reply.units)
        if not reply.units:
            if reply.end is not None:
                return Turn(text=_claim(reply.end, reply.gave_up), response_id=response_id, usage=usage, shown=shown)
            if reply.asks is not None:
                return Turn(text=words, response_id=response_id, usage=usage, asks=reply.asks, shown=shown)
            if reply.memos:
                return Turn(text=words, response_id=response_id, usage=usage, goes_on=True, shown=shown)
            return Turn(
                text=words, response_id=response_id, usage=usage, refused="the reply holds no action", shown=shown
            )
        if reply.end is not None or reply.asks is not None:
            self._later = _Later(reply.end, reply.gave_up, reply.asks)
        call = Call(f"turn-{self.turns}", "grammar", reply.units, (), scaling)
        return Turn((call,), text=words, response_id=response_id, usage=usage, shown=shown)

    def _compat_usage(self, data: dict[str, Any]) -> Usage:
        raw = data.get("usage")
        usage: dict[str, Any] = raw if isinstance(raw, dict) else {}
        tokens_in, tokens_out = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
        return Usage(tokens_in, tokens_out, estimate_cost(self.price, tokens_in, tokens_out))


def _claim(text: str, gave_up: bool) -> str:
    text = text.strip()
    if gave_up:
        return f"gave up: {text}" if text else "gave up"
    return text or "done"


def _content(data: dict[str, Any]) -> tuple[str, str]:
    """The assistant's text of a chat completion and the response's id; AgentError for anything else."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AgentError("malformed reply from the model server: no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise AgentError("malformed reply from the model server: the choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise AgentError("malformed reply from the model server: the message's content is not text")
    response_id = data.get("id")
    return content, one_line(response_id, 120) if isinstance(response_id, str) else ""


def _resized(frame: Frame, size: Size) -> bytes:
    """The screenshot at ``size`` (PNG): the size the family's processor keeps, so the server does not
    resize it again and the model's pixels are the pixels sent."""
    if frame.size == size:
        return frame.png
    with Image.open(io.BytesIO(frame.png)) as img:
        resized = img.convert("RGB").resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    resized.save(out, format="PNG", compress_level=1)
    return out.getvalue()


def _report(results: tuple[CallResult, ...], pending: int) -> str:
    """The supervisor's words for each action of the last reply that did not simply run ("" if all did)."""
    lines: list[str] = []
    seen = 0
    for result in results:
        for item in result.results:
            seen += 1
            if item.status is not OutcomeStatus.EXECUTED or item.message != "OK":
                lines.append(f"Action {item.index + 1}: {item.message}")
    if seen < pending:
        lines.append(f"{pending - seen} of your actions had no result recorded: they did not run.")
    return encodable(" ".join(lines))
