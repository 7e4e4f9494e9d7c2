"""The stand-in policy: an OpenAI-compatible HTTP server on loopback, in a thread.

It answers `POST /v1/chat/completions` (plain and streamed) and `GET /v1/models` with
replies from `policy_replies`, for the trained model and, through litellm's
`OPENAI_API_BASE`, for the RULER judge. It rejects the one naming mistake a real
LocalBackend would reject too: asking for `model.name` instead of `name@step`.

Its wire contract is OpenAI's and nothing more. What it knows beyond the request comes from
inside the script's process: the moves a game accepts at a position (`know_moves`, from
`checks.dryrun.standins.move_search`), looked up by the text of the request's last user message.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from checks.dryrun.standins.move_candidates import message_text
from checks.dryrun.standins.policy_replies import (
    JsonObject,
    completion_chunks,
    judge_trajectory_ids,
    synthesize_completion,
    tool_names,
)

STEP_SUFFIX = re.compile(r"^(?P<name>.+)@(?P<step>\d+)$")
KNOWN_POSITIONS = 4096  # the newest positions whose moves are kept; older ones were played


def last_user_text(request: JsonObject) -> str | None:
    """The text of the request's last user message: the position a game shows."""
    messages = request.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return message_text(users[-1]) if users else None


class PolicyRefusal(Exception):
    """A request the policy answers with an error of its own status (a preflight's endpoint's)."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass
class PolicyStats:
    """What the server was asked, for the dry-run report."""

    requests: int = 0
    judge_requests: int = 0
    tool_call_replies: int = 0
    # Requests naming an older checkpoint than the newest trained one.
    stale_model_requests: int = 0
    stale_example: str | None = None
    rejected: list[str] = field(default_factory=list)
    models_asked: Counter[str] = field(default_factory=Counter)
    tools_offered: set[str] = field(default_factory=set)
    tools_called: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> JsonObject:
        """A JSON-ready copy."""
        return {
            "requests": self.requests,
            "judge_requests": self.judge_requests,
            "tool_call_replies": self.tool_call_replies,
            "stale_model_requests": self.stale_model_requests,
            "stale_example": self.stale_example,
            "rejected": self.rejected[:20],
            "models_asked": dict(self.models_asked),
            "tools_offered": sorted(self.tools_offered),
            "tools_called": dict(self.tools_called),
        }


class PolicyServer:
    """An OpenAI-compatible stand-in policy and judge on `127.0.0.1:<free port>`."""

    def __init__(self, *, seed: int = 0, host: str = "127.0.0.1", port: int = 0) -> None:
        self._seed = seed
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._trainable: dict[str, int] = {}
        self._moves: OrderedDict[str, list[str]] = OrderedDict()
        self.stats = PolicyStats()
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            # A short poll interval keeps stop() from waiting half a second.
            target=lambda: self._httpd.serve_forever(poll_interval=0.05),
            name="artbot-dryrun-policy",
            daemon=True,
        )

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, `http://127.0.0.1:PORT/v1`."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def serve_model(self, name: str, step: int) -> None:
        """Serve trainable model `name` as `name@N`; `step` is its newest checkpoint."""
        with self._lock:
            self._trainable[name] = step

    def know_moves(self, position: str, moves: list[str]) -> None:
        """Play one of `moves` when a request's last user message is `position` (an empty
        list: none is known, so guess)."""
        with self._lock:
            self._moves[position] = list(moves)
            self._moves.move_to_end(position)
            while len(self._moves) > KNOWN_POSITIONS:
                self._moves.popitem(last=False)

    def stats_json(self) -> JsonObject:
        """A consistent snapshot of the stats."""
        with self._lock:
            return self.stats.to_json()

    def complete(self, request: JsonObject) -> JsonObject:
        """Answer one chat completion request (raises `LookupError` for an unserved name)."""
        model = str(request.get("model", ""))
        with self._lock:
            self._check_model_name(model)
            key = json.dumps(request, sort_keys=True, default=str)
            occurrence = self._seen[key]
            self._seen[key] += 1
            self.stats.requests += 1
            self.stats.models_asked[model] += 1
            if judge_trajectory_ids(request):
                self.stats.judge_requests += 1
            self.stats.tools_offered.update(tool_names(request.get("tools") or []))
            position = last_user_text(request)
            moves = self._moves.get(position) if position is not None else None
        # Seeded by the request and how often it was seen: identical prompts of one group
        # get different answers, and the whole run is reproducible whatever the arrival order.
        digest = hashlib.sha256(f"{self._seed}:{occurrence}:{key}".encode()).digest()
        completion = synthesize_completion(
            request, random.Random(digest), created=int(time.time()), moves=moves
        )
        calls = [
            call for c in completion["choices"] for call in c["message"].get("tool_calls") or []
        ]
        if calls:
            with self._lock:
                self.stats.tool_call_replies += 1
                self.stats.tools_called.update(call["function"]["name"] for call in calls)
        return completion

    def _check_model_name(self, model: str) -> None:
        if model in self._trainable:
            message = (
                f"The model `{model}` does not exist. LocalBackend serves trained models as "
                f"`{model}@<step>`: call the policy with model=model.get_inference_name()."
            )
            self.stats.rejected.append(message)
            raise LookupError(message)
        match = STEP_SUFFIX.match(model)
        if match and match["name"] in self._trainable:
            newest = self._trainable[match["name"]]
            if int(match["step"]) < newest:
                self.stats.stale_model_requests += 1
                self.stats.stale_example = self.stats.stale_example or (
                    f"{model} while {match['name']}@{newest} was the newest checkpoint"
                )


def _handler_for(server: PolicyServer) -> type[BaseHTTPRequestHandler]:
    class PolicyHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes: with Nagle's algorithm the body would wait for
        # the client's delayed ACK, 40 ms a reply (a 20-turn game's dry run spent most of its
        # time there).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            # The script's own output is what the dry run shows; access logs would drown it.
            return

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                with server._lock:
                    names = ["dryrun-policy", *(f"{n}@{s}" for n, s in server._trainable.items())]
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": n, "object": "model", "created": 0, "owned_by": "artbot-dryrun"}
                            for n in names
                        ],
                    },
                )
            elif self.path.rstrip("/") in ("/health", "/v1/health"):
                self._send_json(200, {"status": "ok"})
            else:
                self._send_error(404, f"No route GET {self.path} on the dry-run policy server.")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path.split("?")[0].rstrip("/") not in (
                "/v1/chat/completions",
                "/chat/completions",
            ):
                self._send_error(404, f"No route POST {self.path} on the dry-run policy server.")
                return
            try:
                request = json.loads(body or b"{}")
                if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                    raise ValueError("a chat completion request needs a `messages` list")
            except ValueError as error:
                self._send_error(400, f"Bad request: {error}")
                return
            try:
                completion = server.complete(request)
            except PolicyRefusal as error:
                self._send_error(error.status, str(error), code=error.code)
                return
            except LookupError as error:
                self._send_error(404, str(error), code="model_not_found")
                return
            if request.get("stream"):
                options = request.get("stream_options") or {}
                self._send_stream(
                    completion_chunks(completion, include_usage=bool(options.get("include_usage")))
                )
            else:
                self._send_json(200, completion)

        def _send_json(self, status: int, payload: JsonObject) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _send_error(self, status: int, message: str, code: str | None = None) -> None:
            self._send_json(
                status,
                {
                    "error": {
                        "message": message,
                        "type": "invalid_request_error",
                        "param": None,
                        "code": code,
                    }
                },
            )

        def _send_stream(self, chunks: list[JsonObject]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            # No length is known up front; closing the connection ends the body.
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return PolicyHandler
