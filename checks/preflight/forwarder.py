"""The preflight's only way out of the sandbox: a forwarder the parent runs on a Unix socket.

It forwards chat completions to exactly one endpoint (the operator's base URL, whatever the
request says), as the configured model, with the API key that only it holds; it counts the
tokens the endpoint reports in `usage` and refuses every request once the spend cap is reached.
RULER's judge calls come the same way (litellm in the sandbox talks to the relay too): they go to
the same endpoint, as `judge_model` when one is given, and each reply is read as RULER would read
it (checks.preflight.judge), counting the malformed ones. It also receives the groups the child
gathered (checks.preflight.child).
"""

from __future__ import annotations

import contextlib
import json
import os
import socketserver
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from checks.preflight import judge
from checks.preflight.wire import COMPLETIONS_PATH, GROUPS_PATH, SPEND_CAP_CODE

MAX_BODY_BYTES = 16 * 1024 * 1024
# Request options the forwarder decides: it always asks for one whole (not streamed) reply,
# whose `usage` counts against the cap.
DROPPED_OPTIONS = ("stream", "stream_options")


@dataclass
class Spend:
    """What the endpoint was asked, and what it reported spending."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncations: int = 0  # finish_reason == "length"
    refused_by_cap: int = 0
    endpoint_errors: list[str] = field(default_factory=list)
    groups: list[dict[str, Any]] | None = None  # the child's first gather, when it came
    gather: dict[str, Any] = field(default_factory=dict)  # what else the child said of it
    judge_requests: int = 0  # RULER judge calls answered by the endpoint
    judge_scores: list[float] = field(default_factory=list)
    judge_malformed: list[str] = field(default_factory=list)  # why, and an excerpt, each

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


class EndpointForwarder:
    """Serves the child on the Unix socket `socket_path` while open (`with`)."""

    def __init__(
        self,
        socket_path: Path,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        max_tokens_total: int,
        request_timeout_s: float = 300.0,
        judge_model: str | None = None,
    ) -> None:
        self.socket_path = socket_path
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._judge_model = judge_model or model
        self._api_key = api_key
        self._cap = max_tokens_total
        self._lock = threading.Lock()
        self.spend = Spend()
        self._client = httpx.Client(timeout=request_timeout_s)
        self._server = _UnixHTTPServer(str(socket_path), _handler_for(self))
        # The sandbox's uid (as root, another one) must be able to connect.
        os.chmod(socket_path, 0o666)
        self._thread = threading.Thread(
            target=lambda: self._server.serve_forever(poll_interval=0.05),
            name="artbot-preflight-forwarder",
            daemon=True,
        )

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()

    @property
    def cap_reached(self) -> bool:
        with self._lock:
            return self.spend.tokens >= self._cap

    def redact(self, text: str) -> str:
        """`text` without the API key (an endpoint's 401 may quote it)."""
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return text

    def forward(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One chat completion from the endpoint, or the error the child gets instead."""
        with self._lock:
            if self.spend.tokens >= self._cap:
                self.spend.refused_by_cap += 1
                return _error(
                    400,
                    f"artbot preflight: the spend cap of {self._cap} tokens is reached "
                    f"({self.spend.tokens} spent); no more requests are sent",
                    SPEND_CAP_CODE,
                )
            self.spend.requests += 1
        body = {k: v for k, v in request.items() if k not in DROPPED_OPTIONS}
        judged = judge.judged_ids(body)
        body["model"] = self._judge_model if judged else self._model
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = self._client.post(self._url, json=body, headers=headers)
        except httpx.HTTPError as error:
            message = f"the endpoint could not be reached ({type(error).__name__})"
            with self._lock:
                self.spend.endpoint_errors.append(message)
            return _error(502, f"artbot preflight: {message}", "endpoint_unreachable")
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code != 200 or not isinstance(payload, dict):
            text = self.redact(response.text[:300])
            with self._lock:
                self.spend.endpoint_errors.append(f"HTTP {response.status_code}: {text}")
            if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
                return response.status_code, json.loads(self.redact(json.dumps(payload)))
            return _error(response.status_code or 502, f"artbot preflight: endpoint said {text}")
        usage = payload.get("usage") or {}
        with self._lock:
            self.spend.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.spend.completion_tokens += int(usage.get("completion_tokens") or 0)
            self.spend.truncations += sum(
                1
                for choice in payload.get("choices") or []
                if isinstance(choice, dict) and choice.get("finish_reason") == "length"
            )
        if judged:
            self._judge_replied(judged, payload)
        return 200, payload

    def _judge_replied(self, ids: list[str], payload: dict[str, Any]) -> None:
        scores, problem = judge.read_verdict(ids, payload)
        with self._lock:
            self.spend.judge_requests += 1
            self.spend.judge_scores += scores
            if problem is not None:
                said = self.redact(f"{problem}; the reply began: {judge.excerpt(payload)}")
                self.spend.judge_malformed.append(said)

    def groups_gathered(self, payload: Any) -> None:
        groups = payload.get("groups") if isinstance(payload, dict) else None
        with self._lock:
            self.spend.groups = [g for g in groups if isinstance(g, dict)] if groups else []
            if isinstance(payload, dict):
                self.spend.gather = {k: v for k, v in payload.items() if k != "groups"}


def _error(status: int, message: str, code: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }


def _handler_for(forwarder: EndpointForwarder) -> type[BaseHTTPRequestHandler]:
    class ForwarderHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def address_string(self) -> str:  # a Unix socket's peer has no address
            return "sandbox"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(*_error(413, "artbot preflight: request body too large"))
                return
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(*_error(400, "artbot preflight: the body is not JSON"))
                return
            route = self.path.split("?")[0].rstrip("/")
            if route == COMPLETIONS_PATH and isinstance(request, dict):
                self._send(*forwarder.forward(request))
            elif route == GROUPS_PATH:
                forwarder.groups_gathered(request)
                self._send(200, {"ok": True})
            else:
                # Nothing else leaves the sandbox: no other route, host or method.
                self._send(*_error(404, f"artbot preflight forwards only {COMPLETIONS_PATH}"))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return ForwarderHandler
