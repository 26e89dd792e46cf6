"""A scripted model API on 127.0.0.1 for tests: ``POST /v1/responses`` (OpenAI) and ``POST /v1/messages``
(Anthropic), so that the REAL vendor SDKs talk HTTP to something whose replies a test controls.

Each path has its own queue of ``Reply`` objects, served in order; every request is recorded (path,
headers, raw body, decoded JSON) so a test can assert on what the adapter actually SENT. A reply can be
delayed (a hung request), carry any status and headers (429 with Retry-After, 500), or be raw bytes
(malformed JSON). Helpers build the vendors' reply shapes.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/responses"
ANTHROPIC_PATH = "/v1/messages"


@dataclass
class Reply:
    body: Any = None  # JSON-ready object, or bytes sent as they are
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to sleep before answering (a hung request); cut short by ``close``


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    raw: bytes
    json: Any


class ModelServer:
    """Threaded HTTP server on an ephemeral loopback port. Use as a context manager."""

    def __init__(self) -> None:
        self.replies: dict[str, deque[Reply | Callable[[Received], Reply]]] = defaultdict(deque)
        self.received: list[Received] = []
        self.closing = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    decoded = json.loads(raw)
                except ValueError:
                    decoded = None
                path = self.path.split("?", 1)[0]
                record = Received(path, {k.lower(): v for k, v in self.headers.items()}, raw, decoded)
                with server._lock:
                    server.received.append(record)
                    queue = server.replies.get(path)
                    item = queue.popleft() if queue else None
                if item is None:
                    reply = Reply({"error": {"message": f"no scripted reply for {path}"}}, status=404)
                else:
                    reply = item(record) if callable(item) else item
                if reply.delay:
                    deadline = time.monotonic() + reply.delay
                    while time.monotonic() < deadline and not server.closing.is_set():
                        time.sleep(0.02)
                    if server.closing.is_set():
                        return
                body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="model-server", daemon=True
        )

    # ----------------------------------------------------------------------------------------------
    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"  # the OpenAI SDK appends /responses

    @property
    def anthropic_base_url(self) -> str:
        return self.url  # the Anthropic SDK appends /v1/messages

    def script(self, path: str, *replies: Reply | Callable[[Received], Reply] | dict[str, Any]) -> None:
        with self._lock:
            for reply in replies:
                self.replies[path].append(Reply(reply) if isinstance(reply, dict) else reply)

    def bodies(self, path: str) -> list[Any]:
        return [r.json for r in self.received if r.path == path]


# ---------------------------------------------------------------------------------------------------
# OpenAI Responses shapes
# ---------------------------------------------------------------------------------------------------
_ids = itertools.count(1)


def openai_response(
    *output: dict[str, Any], rid: str | None = None, usage: tuple[int, int] = (1000, 50)
) -> dict[str, Any]:
    return {
        "id": rid or f"resp_{next(_ids)}",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": "gpt-5.6-sol",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [{"type": "computer"}],
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def computer_call(
    call_id: str, *actions: dict[str, Any], checks: list[dict[str, str]] | None = None, single: bool = False
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "computer_call",
        "id": f"cu_{call_id}",
        "call_id": call_id,
        "status": "completed",
        "pending_safety_checks": checks or [],
    }
    if single:
        item["action"] = actions[0]
    else:
        item["actions"] = list(actions)
    return item


def message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def reasoning() -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{next(_ids)}", "summary": []}


# ---------------------------------------------------------------------------------------------------
# Anthropic Messages shapes
# ---------------------------------------------------------------------------------------------------
def anthropic_message(
    *content: dict[str, Any], stop_reason: str = "tool_use", usage: tuple[int, int] = (1000, 50)
) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def tool_use(tid: str, name: str, toolset_name: str | None = "computer", **inputs: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "id": tid, "name": name, "input": inputs}
    if toolset_name is not None:
        block["toolset_name"] = toolset_name
    return block


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
