"""The bot's ASGI application: Bolt at /slack/events (HTTP mode), Bolt's install pages at
/slack/install and /slack/oauth_redirect (OAuth, both modes), /healthz and /metrics (both
modes). uvicorn serves it (`bot.process.serve`). Every body is capped before it is read
(`bot.slack.request_body`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.asgi import SlackRequestHandler

from bot.process.health import Health
from bot.process.metrics import CONTENT_TYPE, BotMetrics
from bot.slack.request_body import (
    BodyTooLarge,
    declared_too_large,
    read_capped,
    refuse_too_large,
    replaying,
)

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BotWeb:
    """Routes by path. Bolt's handler acks on the event loop: with `process_before_response` a
    dispatch runs only the listener, which acks and hands its work (all the I/O) to AfterAck's
    pool. The probes query the database, so they run on a worker thread and never stall an
    ack."""

    def __init__(
        self,
        health: Callable[[], Health],
        metrics: BotMetrics,
        app: App | None = None,
        *,
        events: bool = True,
    ) -> None:
        """Bolt serves `app`'s events at EVENTS_PATH when `events` (HTTP mode), and its OAuth
        flow's install and redirect paths when it has one."""
        self._health = health
        self._metrics = metrics
        self._slack = SlackRequestHandler(app, path=EVENTS_PATH) if app is not None else None
        flow = app.oauth_flow if app is not None else None
        self._paths = {EVENTS_PATH} if events else set()
        if flow is not None:
            self._paths |= {flow.install_path, flow.redirect_uri_path}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise TypeError(f"unsupported ASGI scope type {scope['type']!r}")
        path, method = scope["path"], scope["method"]
        if declared_too_large(scope.get("headers") or []):  # whatever the path: never read
            await refuse_too_large(send)
        elif path == "/healthz" and method in ("GET", "HEAD"):
            health = await asyncio.to_thread(self._health)
            await _respond(send, 200 if health.ok else 503, "text/plain", health.text().encode())
        elif path == "/metrics" and method == "GET":
            body = await asyncio.to_thread(self._metrics.exposition)
            await _respond(send, 200, CONTENT_TYPE, body)
        elif self._slack is not None and path in self._paths:
            await self._to_bolt(scope, receive, send)
        else:
            await _respond(send, 404, "text/plain", b"Not Found")

    async def _to_bolt(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The body read under the cap (Bolt would read any body whole before checking its
        signature), then handed to Bolt as if it had just arrived."""
        assert self._slack is not None
        try:
            body = await read_capped(scope.get("headers") or [], receive)
        except BodyTooLarge:
            await refuse_too_large(send)
            return
        if body is None:
            return  # the client left
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self._slack(dict(scope), replaying(body, receive), sending)
        except Exception as error:
            # Bolt reads the body before anything else (its signature too), and raises on one
            # that is not an object (a JSON list, a number): nothing Slack sends.
            if started:
                raise
            log.warning("refused a body that is not an object: %s", type(error).__name__)
            await _respond(send, 400, "text/plain", b"Not a Slack request body.\n")


async def _respond(send: Send, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
