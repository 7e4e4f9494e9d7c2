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
tool calls, a status, or a hang until the server stops (a timeout, with no clock in the test).
A reply longer than the request's `max_tokens` / `max_completion_tokens` is cut there, with
`finish_reason` "length", as OpenAI does; every reply carries `usage`. With `stream: true` the
reply streams as server-sent events (a word a chunk, or the pieces of `Scripted.streamed`), with
the usage in a last chunk when `stream_options.include_usage` asks for it. Conversations with tools
must be shaped as OpenAI requires (an assistant message's `tool_calls`, each answered by a `tool`
message naming its id). `reply_for` picks a reply from the request itself (a judge's request
and an agent's, interleaved), before the script. For a benchmark: `latency_s` before each
reply, and `otherwise` once the script is used up. A slow model without a clock: `gate`, an
event every request waits for once recorded (`in_flight` and `most_in_flight` count the
requests being answered at once).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

JsonObject = dict[str, Any]
API_KEY = "test-key-not-a-secret"
SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ToolCall:
    """One function call in a scripted reply: its name and its arguments as JSON text."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Scripted:
    """One scripted reply of the fake model."""

    content: str | None = None
    status: int = 200
    hang: bool = False
    completion_tokens: int = 20
    tool_calls: tuple[ToolCall, ...] = ()
    pieces: tuple[str, ...] = ()
    """How the content streams (`stream: true`): one chunk a piece; none given, a word a chunk."""

    @classmethod
    def streamed(cls, *pieces: str) -> Scripted:
        """Content that streams in exactly these pieces (a reply otherwise as `text`)."""
        return cls(content="".join(pieces), pieces=pieces)

    @classmethod
    def text(cls, content: str) -> Scripted:
        return cls(content=content)

    @classmethod
    def words(cls, word: str, count: int) -> Scripted:
        """`count` times `word`, a token each: cut at a lower `max_tokens`."""
        return cls(content=" ".join([word] * count), completion_tokens=count)

    @classmethod
    def calls(cls, *calls: tuple[str, dict[str, Any]]) -> Scripted:
        """Function calls, each a (name, arguments) pair, with no text."""
        return cls(tool_calls=tuple(ToolCall(name, json.dumps(args)) for name, args in calls))

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
    reply_for: Callable[[JsonObject], Scripted | None] | None = None
    """Picks the reply from the request (None: the script's next, or `otherwise`)."""
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
            scripted = self.reply_for(body) if self.reply_for is not None else None
            if scripted is None:
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
        content, completion_tokens, finish_reason = _within_limit(body, scripted)
        if body.get("stream") is True:
            pieces = scripted.pieces if content == scripted.content else ()
            return self._stream(
                handler,
                body,
                pieces or _words(content or ""),
                finish_reason,
                (prompt_tokens, completion_tokens),
            )
        message: JsonObject = {"role": "assistant", "content": content, "refusal": None}
        if scripted.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_fake{next(self._ids)}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in scripted.tool_calls
            ]
        reply = {
            "id": f"chatcmpl-fake{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "system_fingerprint": None,
        }
        return _send(handler, 200, reply)

    def _stream(
        self,
        handler: BaseHTTPRequestHandler,
        body: JsonObject,
        pieces: tuple[str, ...],
        finish_reason: str,
        tokens: tuple[int, int],
    ) -> None:
        """Server-sent events as OpenAI streams a completion: `data: {chat.completion.chunk}`
        lines (the role first, then a content delta a piece, then the finish reason), with
        `stream_options.include_usage` a last chunk of no choices and the usage, then
        `data: [DONE]`. The connection closes at the end (HTTP/1.0)."""
        ident = f"chatcmpl-fake{next(self._ids)}"
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(choices: list[JsonObject], usage: JsonObject | None = None) -> bytes:
            data: JsonObject = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": body["model"],
                "system_fingerprint": None,
                "choices": choices,
            }
            if with_usage:
                data["usage"] = usage
            return f"data: {json.dumps(data)}\n\n".encode()

        def delta(delta: JsonObject, finish: str | None = None) -> JsonObject:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("x-request-id", "req_fake")
        handler.end_headers()
        handler.wfile.write(chunk([delta({"role": "assistant", "content": "", "refusal": None})]))
        for piece in pieces:
            handler.wfile.write(chunk([delta({"content": piece})]))
            handler.wfile.flush()
        handler.wfile.write(chunk([delta({}, finish_reason)]))
        if with_usage:
            prompt, completion = tokens
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            handler.wfile.write(chunk([], usage))
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

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


def _within_limit(body: JsonObject, scripted: Scripted) -> tuple[str | None, int, str]:
    """The reply's content, completion tokens and finish reason under the request's token limit.
    The fake counts a word of the content as a token: content of more words than the limit is
    cut to its first `limit` words, `limit` tokens, finish_reason "length"."""
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    finish = "tool_calls" if scripted.tool_calls else "stop"
    words = (scripted.content or "").split(" ")
    if not isinstance(limit, int) or scripted.content is None or len(words) <= limit:
        return scripted.content, scripted.completion_tokens, finish
    return " ".join(words[:limit]), limit, "length"


def _words(content: str) -> tuple[str, ...]:
    """`content` a word a piece, each with the space before it (as a tokenizer splits)."""
    if not content:
        return ()
    return tuple(word if i == 0 else " " + word for i, word in enumerate(content.split(" ")))


def _message_problem(messages: list[Any]) -> str | None:
    """Why OpenAI would refuse these messages: roles, contents, and tool results that answer no
    call of the assistant message before them."""
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            return f"Invalid value for 'messages[{index}].role'."
        content = message.get("content")
        role = message["role"]
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            if not isinstance(calls, list) or not all(_is_tool_call(c) for c in calls):
                return f"Invalid 'messages[{index}].tool_calls'."
            if content is not None and not isinstance(content, str):
                return f"Invalid type for 'messages[{index}].content'."
            open_calls = {c["id"] for c in calls}
            continue
        if not isinstance(content, str) and not _is_text_parts(content):
            return f"Invalid type for 'messages[{index}].content'."
        if role == "tool":
            if message.get("tool_call_id") not in open_calls:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            open_calls.discard(message["tool_call_id"])
        elif open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(sorted(open_calls))}"
            )
    return None


def _is_tool_call(call: Any) -> bool:
    return (
        isinstance(call, dict)
        and isinstance(call.get("id"), str)
        and call.get("type") == "function"
        and isinstance(call.get("function"), dict)
        and isinstance(call["function"].get("name"), str)
        and isinstance(call["function"].get("arguments"), str)
    )


def _is_text_parts(content: Any) -> bool:
    return (
        isinstance(content, list)
        and bool(content)
        and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content
        )
    )


def _tools_problem(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list) or not tools:
        return "Invalid 'tools': empty array. Expected an array with minimum length 1."
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            return f"Invalid value for 'tools[{index}].type'."
        if not SCHEMA_NAME.match(str(function.get("name", ""))):
            return f"Invalid 'tools[{index}].function.name'."
    return None


def _request_problem(body: Any) -> str | None:
    """Why OpenAI would refuse this request body, or None."""
    if not isinstance(body, dict):
        return "The body must be a JSON object."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    problem = _message_problem(messages) or _tools_problem(body.get("tools"))
    if problem:
        return problem
    for name in ("max_tokens", "max_completion_tokens"):
        limit = body.get(name)
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            return f"Invalid '{name}': integer below minimum value. Expected a value >= 1."
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return "Invalid type for 'stream': expected a boolean."
    if body.get("stream_options") is not None and stream is not True:
        return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
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
