"""`artbot serve --workers N`'s front process: one public port, N complete bot processes behind it.

Why a router: one Python process is one core (the GIL), and Bolt acks on uvicorn's event loop,
so a busy bot needs more processes. Every Slack conversation of a channel belongs to one worker,
`bot.process.shards.shard_of(team, channel, N)`: the router reads each request's team and channel
(bot.process.routing) and hands the request to that worker, byte for byte (Bolt verifies the
signature over the exact body). So a thread's in-memory lock and courier live in one process,
still the only ones, as when a single process served everything. Requests that name no channel
(url_verification, OAuth pages, app-level events) go to worker 0.

Each worker serves the bot's ASGI app with uvicorn on its own Unix socket. The router keeps a
small keep-alive pool per worker (bot.process.worker_pool), writes HTTP/1.1 by hand and parses
answers with httptools:
it shares the workers' cores, so a forwarded request costs a JSON parse and two socket writes,
no HTTP client library and no thread hop. It answers /healthz and /metrics itself, from every
worker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from bot.process.routing import route_key
from bot.process.shards import shard_of
from bot.process.worker_pool import (
    MAX_CONNECTIONS,
    Headers,
    WorkerAnswer,
    WorkerPool,
    WorkerUnavailable,
    hop_by_hop,
    request_head,
)
from bot.slack.request_body import (
    BodyTooLarge,
    declared_too_large,
    read_capped,
    refuse_too_large,
)

__all__ = ["ANSWER_TIMEOUT_S", "BotRouter"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

ANSWER_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 10.0
"""For /healthz and /metrics: a container's health check gives up sooner than Slack does."""
HEALTH_LINES_PER_WORKER = 20
# Not relayed from a worker's answer: the router's own uvicorn adds its own (no duplicates).
_SERVER_HEADERS = frozenset({b"date", b"server"})


class BotRouter:
    """The router's ASGI app: worker i serves the bot on `sockets[i]` (uvicorn, HTTP/1.1).

    With uvicorn's `lifespan="on"`, its lifespan shutdown closes the connections (`aclose`)."""

    def __init__(
        self,
        sockets: Sequence[Path],
        *,
        max_connections: int = MAX_CONNECTIONS,
        answer_timeout_s: float = ANSWER_TIMEOUT_S,
        probe_timeout_s: float = PROBE_TIMEOUT_S,
    ) -> None:
        if not sockets:
            raise ValueError("a router needs at least one worker")
        self._pools = [
            WorkerPool(index, Path(socket), max_connections) for index, socket in enumerate(sockets)
        ]
        self._answer_timeout_s = answer_timeout_s
        self._probe_timeout_s = probe_timeout_s

    @property
    def connections_opened(self) -> tuple[int, ...]:
        """Per worker, the connections opened so far."""
        return tuple(pool.opened for pool in self._pools)

    @property
    def idle_connections_open(self) -> tuple[int, ...]:
        """Per worker, the idle connections not yet known to be closed by the worker."""
        return tuple(pool.idle_open for pool in self._pools)

    def worker_for(self, content_type: str, body: bytes) -> int:
        """The worker that owns the request's channel; worker 0 when it names none."""
        key = route_key(content_type, body)
        return 0 if key is None else shard_of(key[0], key[1], len(self._pools))

    async def aclose(self) -> None:
        await asyncio.gather(*(pool.aclose() for pool in self._pools))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise TypeError(f"unsupported ASGI scope type {scope['type']!r}")
        path, method = scope["path"], scope["method"]
        if declared_too_large(scope.get("headers") or []):  # whatever the path: never read
            await refuse_too_large(send)
        elif path == "/healthz" and method in ("GET", "HEAD"):
            status, text = await self._health()
            await _respond(send, status, "text/plain; charset=utf-8", text.encode())
        elif path == "/metrics" and method == "GET":
            await _respond(send, 200, CONTENT_TYPE_LATEST, await self._metrics())
        else:
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The request, whole, to the worker owning its channel; its answer, whole, back."""
        headers: Headers = scope["headers"]
        try:
            body = await read_capped(headers, receive)
        except BodyTooLarge:
            await refuse_too_large(send)
            return
        if body is None:
            return  # the client left
        content_type = (_header(headers, b"content-type") or b"").decode("latin-1")
        pool = self._pools[self.worker_for(content_type, body)]
        head_only = scope["method"] == "HEAD"
        request = request_head(scope["method"], _target(scope), headers, len(body)) + body
        try:
            answer = await pool.exchange(
                request, head_only=head_only, timeout_s=self._answer_timeout_s
            )
        except WorkerUnavailable as error:
            text = f"Worker {pool.index} is unavailable: {error}\n"
            await _respond(send, 503, "text/plain; charset=utf-8", text.encode())
            return
        await _relay(send, answer, head_only)

    async def _probe(self, pool: WorkerPool, path: bytes) -> WorkerAnswer | str:
        """GET `path` from a worker: its answer, or why there is none."""
        request = request_head("GET", path, [(b"host", b"artbot-router")], 0)
        try:
            return await pool.exchange(request, head_only=False, timeout_s=self._probe_timeout_s)
        except WorkerUnavailable as error:
            return f"unavailable: {error}"

    async def _health(self) -> tuple[int, str]:
        """200 when every worker's /healthz is; a line per worker, then its own lines."""
        answers = await asyncio.gather(*(self._probe(pool, b"/healthz") for pool in self._pools))
        lines: list[str] = []
        for index, answer in enumerate(answers):
            if isinstance(answer, str):
                lines.append(f"worker {index}: {answer}")
                continue
            lines.append(f"worker {index}: {'ok' if answer.status == 200 else answer.status}")
            own = answer.body.decode("utf-8", "replace").splitlines()
            lines.extend(f"  {line}" for line in own[:HEALTH_LINES_PER_WORKER])
        healthy = all(not isinstance(a, str) and a.status == 200 for a in answers)
        return (200 if healthy else 503), "\n".join(lines) + "\n"

    async def _metrics(self) -> bytes:
        """Every worker's metrics, each sample labelled `worker="i"`, one family per name, and
        `artbot_router_worker_up` for each worker."""
        answers = await asyncio.gather(*(self._probe(pool, b"/metrics") for pool in self._pools))
        up = GaugeMetricFamily(
            "artbot_router_worker_up",
            "1 when the worker answered the router's scrape of its /metrics, else 0.",
            labels=["worker"],
        )
        merged: dict[str, Metric] = {}
        for index, answer in enumerate(answers):
            families = _parsed_metrics(answer)
            up.add_metric([str(index)], 0.0 if families is None else 1.0)
            _merge_families(merged, families or [], str(index))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families([*merged.values(), up]))
        return generate_latest(registry)


def _target(scope: Scope) -> bytes:
    """The request's path as the client sent it, and its query string."""
    path: bytes = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
    query: bytes = scope.get("query_string", b"")
    return path + b"?" + query if query else path


def _header(headers: Headers, wanted: bytes) -> bytes | None:
    for name, value in headers:
        if name == wanted:
            return value
    return None


async def _relay(send: Send, answer: WorkerAnswer, head_only: bool) -> None:
    """The worker's status, headers (minus hop-by-hop ones, date and server) and body. The
    body was read whole, so its length replaces the worker's framing; a HEAD answer keeps the
    worker's length."""
    dropped = hop_by_hop(answer.headers) | _SERVER_HEADERS
    if not head_only:
        dropped |= {b"content-length"}
    headers = [(name, value) for name, value in answer.headers if name not in dropped]
    if not head_only and answer.status >= 200 and answer.status not in (204, 304):
        headers.append((b"content-length", b"%d" % len(answer.body)))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


async def _respond(send: Send, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# --- Metrics ----------------------------------------------------------------------------------


class _Families(Collector):
    """Already collected families, for `generate_latest`."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def _parsed_metrics(answer: WorkerAnswer | str) -> list[Metric] | None:
    """A worker's /metrics families; None when it gave none (down, failing, or garbled)."""
    if isinstance(answer, str) or answer.status != 200:
        return None
    try:
        return list(text_string_to_metric_families(answer.body.decode("utf-8")))
    except ValueError:  # bad UTF-8 or not Prometheus text
        return None


def _merge_families(merged: dict[str, Metric], families: Iterable[Metric], worker: str) -> None:
    """Add `families`' samples, labelled `worker`, to the family of the same name in `merged`.

    The parser names a counter family without `_total` (and `generate_latest` adds it back),
    so families keep the name and type they were parsed with and the output parses the same.
    """
    for family in families:
        target = merged.get(family.name)
        if target is None:
            target = Metric(family.name, family.documentation, family.type)
            merged[family.name] = target
        target.samples.extend(
            sample._replace(labels={**sample.labels, "worker": worker}) for sample in family.samples
        )
