"""What the OpenAI and Anthropic agents do alike: the SDK imported when the agent is built, the key checked
and kept out of every message, one client with the run's timeout and retries, requests the kill switch
cancels, replies decoded strictly, failures told in one line, usage priced. Each vendor's module keeps its
wire format: the request it builds, how it reads a reply, what it sends back.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol, Self, TypedDict

from ..core.ports import AgentError, CallResult, Usage
from ..core.text import one_line
from .cancel import Cancellable, overall_deadline
from .errors import describe_sdk_error
from .images import image_limits
from .prices import count, estimate_cost, price_for
from .redaction import Redactor
from .replies import decode_json
from .vendors import DEFAULT_RETRIES, DEFAULT_TIMEOUT, INSTRUCTIONS, VENDORS, AgentRequest

NO_RESULT = "Not executed: no result was recorded for this call."


class SdkClient(Protocol):
    """What is shared of a vendor SDK's client (``openai.OpenAI``, ``anthropic.Anthropic``)."""

    @property
    def base_url(self) -> object: ...
    def close(self) -> None: ...


class _Body(Protocol):
    @property
    def content(self) -> bytes: ...


class RawReply(Protocol):
    """A ``with_raw_response`` reply: its body is read here, not through the SDK's lenient models."""

    @property
    def http_response(self) -> _Body: ...


class VendorOptions(TypedDict, total=False):
    """What every vendor's agent takes beside its key and model (the settings file's and the flags')."""

    base_url: str | None
    timeout: float
    max_retries: int
    instructions: str
    prices: dict[str, tuple[float, float]] | None


class VendorAgent[C: SdkClient]:
    """One run's conversation with a vendor's model. Not reusable across runs. A subclass names its vendor
    (``name``: its SDK and its record in agents/vendors.py, with its key variable, image limits and prices)
    and its SDK's client class (``client_class``)."""

    name: ClassVar[str]
    # the class in the SDK module (``sdk``, else ``name``) that makes a client ("OpenAI": ``openai.OpenAI``)
    client_class: ClassVar[str]
    sdk: ClassVar[str] = ""
    # a server that wants no key (a model on the user's own GPU) is sent none
    key_required: ClassVar[bool] = True

    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        instructions: str = INSTRUCTIONS,
        prices: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        # The SDK is imported only when its agent is built.
        sdk = importlib.import_module(self.sdk or self.name)
        if not api_key and self.key_required:
            raise ValueError(f"the {self.name} agent needs an API key ({VENDORS[self.name].key_variable})")
        self._sdk = sdk
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.instructions = instructions
        self.limits = image_limits(self.name, model)
        self.price = price_for(model, prices, VENDORS[self.name].prices)
        self._redact = Redactor([api_key])
        connect: Callable[..., C] = getattr(sdk, self.client_class)
        self._client = connect(
            api_key=api_key or "unused", base_url=base_url, timeout=timeout, max_retries=max_retries,
            **self._client_options(sdk, api_key),
        )  # fmt: skip
        # The effective base URL: the argument, the vendor's BASE_URL variable or the SDK's default.
        self.base_url = str(self._client.base_url)
        self._calls = Cancellable(overall_deadline(timeout, max_retries), on_cancel=self._client.close)
        self.turns = 0
        # What was ignored in replies (items or blocks of unknown type), for the curious.
        self.notes: list[str] = []

    def _client_options(self, sdk: Any, api_key: str) -> dict[str, Any]:
        """More of the client's options (the headers it sends), for a vendor that needs them."""
        return {}

    @property
    def run_facts(self) -> dict[str, Any]:
        """What run.json records of this agent beyond its vendor and model (a grammar, ...)."""
        return {}

    @classmethod
    def from_request(cls, request: AgentRequest) -> Self:
        """The agent the builder asks for (its vendor's record names this class)."""
        return cls(request.key or "", request.model or "", **cls.request_options(request))

    @staticmethod
    def request_options(request: AgentRequest) -> VendorOptions:
        return {
            "base_url": request.base_url,
            "timeout": request.timeout,
            "max_retries": request.retries,
            "prices": dict(request.prices),
        }

    def cancel(self) -> None:
        self._calls.cancel()

    def _send[T](self, create: Callable[[], RawReply], read: Callable[[dict[str, Any]], T]) -> T:
        """One request, cancelled by the kill switch and bounded by the overall deadline; its body decoded
        strictly and handed to ``read``. Every failure is one key-free AgentError."""
        try:
            raw = self._calls.run(create)
            return read(decode_json(raw.http_response.content))
        except AgentError as exc:
            raise AgentError(self._redact(str(exc))) from None
        except Exception as exc:
            message = describe_sdk_error(
                exc, self._sdk, timeout=self.timeout, retries=self.max_retries, base_url=self.base_url
            )
            raise AgentError(self._redact(message)) from None

    def _count_turn(self, unknown: list[str], what: str) -> None:
        """One more turn read; what it held of unknown type (``what``: "output item(s)") goes to the notes."""
        self.turns += 1
        if unknown:
            names = ", ".join(sorted({one_line(u, 40) for u in unknown}))
            self.notes.append(f"turn {self.turns}: ignored {len(unknown)} {what} of unknown type: {names}")

    def _usage(self, data: dict[str, Any], inputs: tuple[str, ...]) -> Usage:
        """The reply's token counts (the ``inputs`` fields summed as input) and their estimated cost."""
        raw = data.get("usage")
        usage: dict[str, Any] = raw if isinstance(raw, dict) else {}
        tokens_in = sum(count(usage.get(name)) for name in inputs)
        tokens_out = count(usage.get("output_tokens"))
        return Usage(tokens_in, tokens_out, estimate_cost(self.price, tokens_in, tokens_out))

    def _text(self, texts: Iterable[str]) -> str:
        """The model's words of a turn, as shown and recorded: the key never among them."""
        return self._redact("\n".join(t for t in texts if t))


def by_call(results: Iterable[CallResult]) -> dict[str, CallResult]:
    """The supervisor's results by call id (the first one of an id counts)."""
    found: dict[str, CallResult] = {}
    for result in results:
        found.setdefault(result.call_id, result)
    return found
