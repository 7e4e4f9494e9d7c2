"""An OpenAI-compatible chat completions server on loopback, with scripted replies, for the
assistant's tests.

    with FakeOpenAI() as fake:
        fake.script(Scripted.json({"understood": True, "value": "0.2", "reason": "a fifth"}))
        model = OpenAIChatModel.connect("gpt-test", base_url=fake.base_url, api_key=fake.key, ...)

It answers POST /v1/chat/completions as OpenAI does (the response and error bodies of the API
reference, `x-request-id`, `retry-after` on 429), refuses requests OpenAI refuses (no bearer key,
a malformed body, `max_tokens` below 1, a strict json_schema whose objects, at any depth, do not
require every property or allow others, or whose arrays give no `items`) with OpenAI's 400/401
bodies, records every request, and replies from a script: content,
a status, or a hang until the server stops (a timeout, with no clock in the test). For a
benchmark: `latency_s` before each reply, and `otherwise` once the script is used up. A slow
model without a clock: `gate`, an event every request waits for once recorded (`in_flight` and
`most_in_flight` count the requests being answered at once).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

JsonObject = dict[str, Any]
API_KEY = "test-key-not-a-secret"
SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Scripted:
    """One scripted reply of the fake model."""

    content: str | None = None
    status: int = 200
    hang: bool = False
    completion_tokens: int = 20

    @classmethod
    def text(cls, content: str) -> Scripted:
        return cls(content=content)

    @classmethod
    def json(cls, value: Any) -> Scripted:
        return cls(content=json.dumps(value))

    @classmethod
    def error(cls, status: int) -> Scripted:
        return cls(status=status)

    @classmethod
    def timeout(cls) -> Scripted:
        return cls(hang=True)


@dataclass
class FakeOpenAI:
    """The server, started on 127.0.0.1:0 by `with`; `requests` holds every request body."""

    key: str = API_KEY
    requests: list[JsonObject] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Why requests were refused (a test expecting none asserts this is empty)."""
    latency_s: float = 0.0
    """How long the model thinks before each reply (a real one: seconds)."""
    otherwise: Scripted | None = None
    """The reply once the script is used up (None: a 500, counted as refused)."""
    gate: threading.Event | None = None
    """When set to an event, every request waits for it (or the server's stop) before its reply."""
    in_flight: int = 0
    """Requests received and not yet answered."""
    most_in_flight: int = 0
    _script: deque[Scripted] = field(default_factory=deque)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def script(self, *replies: Scripted) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def unused(self) -> int:
        """Scripted replies not asked for yet."""
        return len(self._script)

    def __enter__(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                fake._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stopping.set()  # hung replies end (their clients have long given up)
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- the API --

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        if handler.path.split("?")[0] != "/v1/chat/completions":
            return self._error(handler, 404, "invalid_request_error", "Unknown request URL.")
        if handler.headers.get("Authorization") != f"Bearer {self.key}":
            return self._error(
                handler,
                401,
                "invalid_request_error",
                "Incorrect API key provided.",
                "invalid_api_key",
            )
        length = int(handler.headers.get("Content-Length") or 0)
        try:
            body = json.loads(handler.rfile.read(length))
        except json.JSONDecodeError:
            return self._error(
                handler,
                400,
                "invalid_request_error",
                "We could not parse the JSON body of your request.",
            )
        problem = _request_problem(body)
        if problem:
            self.refused.append(problem)
            return self._error(handler, 400, "invalid_request_error", problem)
        with self._lock:
            self.requests.append(body)
            scripted = self._script.popleft() if self._script else self.otherwise
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self._reply(handler, body, scripted)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(
        self, handler: BaseHTTPRequestHandler, body: JsonObject, scripted: Scripted | None
    ) -> None:
        gate = self.gate
        while gate is not None and not gate.wait(0.05) and not self._stopping.is_set():
            pass
        if self.latency_s:
            self._stopping.wait(self.latency_s)
        if scripted is None:
            self.refused.append("no scripted reply left")
            return self._error(handler, 500, "server_error", "No scripted reply left.")
        if scripted.hang:
            self._stopping.wait()
            return None
        if scripted.status == 429:
            return self._error(
                handler,
                429,
                "requests",
                "Rate limit reached for requests. Please try again in 20s.",
                "rate_limit_exceeded",
                {"retry-after": "20"},
            )
        if scripted.status != 200:
            return self._error(handler, scripted.status, "server_error", "The server had an error.")
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4
        reply = {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": scripted.content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": scripted.completion_tokens,
                "total_tokens": prompt_tokens + scripted.completion_tokens,
            },
            "system_fingerprint": None,
        }
        return _send(handler, 200, reply)

    def _error(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        kind: str,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        _send(handler, status, body, headers or {})


def _send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: JsonObject,
    headers: dict[str, str] | None = None,
) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.send_header("x-request-id", "req_fake")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def _request_problem(body: Any) -> str | None:
    """Why OpenAI would refuse this request body, or None."""
    if not isinstance(body, dict):
        return "The body must be a JSON object."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
        ):
            return f"Invalid value for 'messages[{index}].role'."
        if not isinstance(message.get("content"), str):
            return f"Invalid type for 'messages[{index}].content'."
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        return "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1."
    response_format = body.get("response_format")
    if response_format is not None:
        if response_format.get("type") != "json_schema":
            return "Invalid value for 'response_format.type'."
        spec = response_format.get("json_schema")
        if not isinstance(spec, dict) or not SCHEMA_NAME.match(str(spec.get("name", ""))):
            return "Invalid 'response_format.json_schema.name'."
        if not isinstance(spec.get("schema"), dict):
            return "Invalid 'response_format.json_schema.schema'."
        if spec.get("strict"):
            return _strict_problem(spec["schema"], "schema")
    return None


def _strict_problem(schema: Any, where: str) -> str | None:
    """OpenAI's rules for strict structured output: every object lists all its properties as
    required and sets additionalProperties to false, every array says what its items are, all
    the way down (through arrays' items and anyOf)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return f"Invalid schema: 'additionalProperties' is required to be false ({where})."
        if sorted(schema.get("required", [])) != sorted(properties):
            return f"Invalid schema: 'required' must list every property ({where})."
        for name, sub in properties.items():
            found = _strict_problem(sub, f"{where}.{name}")
            if found:
                return found
    if schema.get("type") == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            return f"Invalid schema: an array must define 'items' ({where})."
        found = _strict_problem(items, f"{where}.items")
        if found:
            return found
    for sub in schema.get("anyOf", []):
        found = _strict_problem(sub, f"{where}.anyOf")
        if found:
            return found
    return None
