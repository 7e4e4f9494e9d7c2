"""A cap on request bodies, checked before they are read: the ASGI layer under the app."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

# A 2 MB script, JSON-escaped (a newline is two bytes, a quote two), plus the other fields.
MAX_BODY_BYTES = 10 * 1024 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """Refuses request bodies over `limit` bytes (413) before they are read into memory.

    The declared Content-Length is checked (the server holds the body to it); a body without
    one (chunked) is refused with 411, so nothing unbounded is ever read.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            headers = dict(scope.get("headers") or [])
            declared = headers.get(b"content-length")
            if declared is None and b"transfer-encoding" in headers:
                await _refuse(send, 411, "send the body with a Content-Length")
                return
            if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
                await _refuse(send, 413, f"request body over {self.limit} bytes")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
