"""`artbot serve --workers N`'s front process: one public port, N complete bot processes behind it.

Why a router: one Python process is one core (the GIL), and Bolt acks on uvicorn's event loop,
so a busy bot needs more processes. Every Slack conversation of a channel belongs to one worker,
`bot.process.shards.shard_of(team, channel, N)`: the router reads each request's team and channel
(`route_key`) and hands the request to that worker, byte for byte (Bolt verifies the signature
over the exact body). So a thread's in-memory lock and courier live in one process, still the
only ones, as when a single process served everything. Requests that name no channel
(url_verification, OAuth pages, app-level events) go to worker 0.

Each worker serves the bot's ASGI app with uvicorn on its own Unix socket. The router keeps a
small keep-alive pool per worker, writes HTTP/1.1 by hand and parses answers with httptools:
it shares the workers' cores, so a forwarded request costs a JSON parse and two socket writes,
no HTTP client library and no thread hop. It answers /healthz and /metrics itself, from every
worker's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import httptools
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from bot.process.shards import shard_of
from bot.slack.request_body import (
    MAX_SLACK_BODY_BYTES,
    BodyTooLarge,
    declared_too_large,
    read_capped,
    refuse_too_large,
)

__all__ = [
    "ANSWER_TIMEOUT_S",
    "MAX_CONNECTIONS",
    "MAX_ROUTED_BODY",
    "BotRouter",
    "WorkerAnswer",
    "WorkerPool",
    "WorkerUnavailable",
    "route_key",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

MAX_ROUTED_BODY = MAX_SLACK_BODY_BYTES
"""Larger bodies are not parsed for a channel; the router reads none (`bot.slack.request_body`: 413
before they reach a worker)."""
MAX_CONNECTIONS = 64
"""Open connections per worker; more concurrent requests wait for one."""
ANSWER_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 10.0
"""For /healthz and /metrics: a container's health check gives up sooner than Slack does."""
READ_SIZE = 64 * 1024
HEALTH_LINES_PER_WORKER = 20

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
HOP_BY_HOP = frozenset(
    b"connection keep-alive proxy-connection transfer-encoding te trailer upgrade".split()
)
# Not relayed from a worker's answer: the router's own uvicorn adds its own (no duplicates).
_SERVER_HEADERS = frozenset({b"date", b"server"})
# Not forwarded either: the router sets the length of the body it read whole, and answers no
# `Expect: 100-continue` (the worker's interim answer would read as its answer).
_REPLACED_REQUEST_HEADERS = frozenset({b"content-length", b"expect"})
_VIEW_TYPES = ("view_submission", "view_closed")
# *Try it*'s modal carries "<run's public id> <channel>" (bot.runs.tryit; the id's shape is
# bot.runs.store.PUBLIC_ID, not imported: the router loads no SQL).
_RUN_AND_CHANNEL = re.compile(r"[23456789abcdefghjkmnpqrstuvwxyz]{12} (\S+)")
_MAX_FORM_FIELDS = 100


# --- Which conversation a request belongs to ------------------------------------------------


def route_key(content_type: str, body: bytes) -> tuple[str, str] | None:
    """The (team, channel) a Slack request body is about; None when it names none, or is too
    large or malformed to tell (never raises: anyone can POST anything here)."""
    if len(body) > MAX_ROUTED_BODY:
        return None
    media_type = content_type.partition(";")[0].strip().lower()
    try:
        if media_type == FORM:
            return _form_key(body)
        if media_type == JSON:
            return _event_key(json.loads(body))
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, too many fields, too deep
        return None
    return None


def _form_key(body: bytes) -> tuple[str, str] | None:
    """A slash command's form, or an interaction's `payload=<json>`."""
    fields = parse_qsl(
        body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=_MAX_FORM_FIELDS
    )
    form: dict[str, str] = {}
    for name, value in fields:
        form.setdefault(name, value)
    if "payload" in form:
        return _interaction_key(json.loads(form["payload"]))
    return _pair(form.get("team_id"), form.get("channel_id"))


def _interaction_key(payload: object) -> tuple[str, str] | None:
    """block_actions, view_submission, view_closed, shortcuts: the same team and channel as
    `bot.slack.listeners.actions` keys its sessions by."""
    team = _text(payload, "team", "id") or _text(payload, "user", "team_id")
    channel = _text(payload, "channel", "id") or _text(payload, "container", "channel_id")
    if channel is None and isinstance(payload, dict) and payload.get("type") in _VIEW_TYPES:
        channel = _run_channel(_text(payload, "view", "private_metadata"))
    return _pair(team, channel)


def _event_key(envelope: object) -> tuple[str, str] | None:
    """An Events API `event_callback`. The team is Bolt's `context.team_id`, which the event
    listeners key sessions by: the first authorization's team (they differ from `team_id` only
    in channels shared between workspaces), else `team_id`."""
    if not isinstance(envelope, dict) or envelope.get("type") != "event_callback":
        return None
    team = _authorized_team(envelope.get("authorizations")) or _text(envelope, "team_id")
    event = envelope.get("event")
    channel = _text(event, "channel") or _text(event, "item", "channel")  # item: reactions
    return _pair(team, channel)


def _authorized_team(authorizations: object) -> str | None:
    if isinstance(authorizations, list) and authorizations:
        return _text(authorizations[0], "team_id")
    return None


def _run_channel(metadata: str | None) -> str | None:
    match = _RUN_AND_CHANNEL.fullmatch(metadata or "")
    return match.group(1) if match else None


def _text(value: object, *keys: str) -> str | None:
    """`value[k1][k2]...` when every step is a dict and the end a non-empty str, else None."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, str) and value else None


def _pair(team: str | None, channel: str | None) -> tuple[str, str] | None:
    return (team, channel) if team and channel else None


# --- Talking to one worker --------------------------------------------------------------------


class WorkerUnavailable(Exception):
    """The worker could not be reached, broke off its answer, or took too long."""


class _ClosedBeforeAnswer(WorkerUnavailable):
    """The connection ended before a byte of the answer. On a connection that sat idle, the
    worker closed it meanwhile (uvicorn drops idle keep-alives after 5 s) and never read the
    request: safe to send once more on a new one."""


@dataclass(frozen=True)
class WorkerAnswer:
    """A worker's whole HTTP answer; header names lower-case."""

    status: int
    headers: Headers
    body: bytes


class _AnswerParser:
    """Collects one answer from httptools' callbacks (content-length, chunked, or to EOF)."""

    def __init__(self, head_only: bool) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._head_only = head_only  # an answer to HEAD has headers only, whatever they say
        self._interim = False
        self._keep_alive = False
        self.headers: Headers = []
        self._body: list[bytes] = []
        self.done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self._interim = 100 <= self._parser.get_status_code() < 200
        self._keep_alive = self._parser.should_keep_alive()  # llhttp forgets it once complete
        if self._head_only and not self._interim:
            self.done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._interim:  # e.g. 100 Continue: the answer comes next
            self.headers, self._body = [], []
        else:
            self.done = True

    def feed(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def ends_at_eof(self) -> bool:
        """Whether the answer (its headers in) has neither a length nor chunks: EOF ends it."""
        names = {name for name, _ in self.headers}
        return bool(self.headers) and not names & {b"content-length", b"transfer-encoding"}

    def keep_alive(self) -> bool:
        return self._keep_alive

    def answer(self) -> WorkerAnswer:
        return WorkerAnswer(self._parser.get_status_code(), self.headers, b"".join(self._body))


class _WorkerConnection:
    """One HTTP/1.1 connection over a worker's Unix socket, one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    def looks_open(self) -> bool:
        """False when the worker is already known to have closed it."""
        return (
            not self._reader.at_eof()
            and self._reader.exception() is None
            and not self._writer.is_closing()
        )

    async def exchange(self, request: bytes, head_only: bool) -> tuple[WorkerAnswer, bool]:
        """Send `request`, read its answer; the answer and whether the connection can be reused."""
        try:
            self._writer.write(request)
            await self._writer.drain()
        except OSError as error:
            raise _ClosedBeforeAnswer(f"the connection broke: {error}") from error
        parser = _AnswerParser(head_only)
        received = False
        while not parser.done:
            try:
                data = await self._reader.read(READ_SIZE)
            except OSError as error:
                raise _broken(received, f"the connection broke: {error}") from error
            if not data:
                if parser.ends_at_eof():
                    return parser.answer(), False
                raise _broken(received, "it closed the connection")
            received = True
            try:
                parser.feed(data)
            except (httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
                raise WorkerUnavailable(f"malformed answer: {error}") from error
        return parser.answer(), parser.keep_alive()

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


def _broken(received: bool, reason: str) -> WorkerUnavailable:
    if received:
        return WorkerUnavailable(f"{reason} in the middle of its answer")
    return _ClosedBeforeAnswer(f"{reason} before answering")


class WorkerPool:
    """Keep-alive connections to one worker: idle ones are reused, newest first (the least
    likely to have been dropped), at most `limit` open at once."""

    def __init__(self, index: int, socket: Path, limit: int = MAX_CONNECTIONS) -> None:
        self.index = index
        self.socket = socket
        self.opened = 0
        """Connections opened so far (reuse keeps it low)."""
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_WorkerConnection] = []
        self._open: set[_WorkerConnection] = set()
        self._closed = False

    @property
    def idle_open(self) -> int:
        """Idle connections not yet known to be closed by the worker."""
        return sum(1 for connection in list(self._idle) if connection.looks_open())

    async def exchange(self, request: bytes, *, head_only: bool, timeout_s: float) -> WorkerAnswer:
        """Send one whole request (head and body) and return the whole answer, within
        `timeout_s` (waiting for a free connection included); WorkerUnavailable otherwise."""
        try:
            async with asyncio.timeout(timeout_s), self._slots:
                return await self._exchange(request, head_only)
        except TimeoutError as error:
            raise WorkerUnavailable(f"no answer within {timeout_s:g} s") from error

    async def _exchange(self, request: bytes, head_only: bool) -> WorkerAnswer:
        idle = self._take_idle()
        if idle is not None:
            try:
                return await self._use(idle, request, head_only)
            except _ClosedBeforeAnswer:
                pass  # it was dropped while idle: the worker never read the request
        return await self._use(await self._connect(), request, head_only)

    async def _use(
        self, connection: _WorkerConnection, request: bytes, head_only: bool
    ) -> WorkerAnswer:
        try:
            answer, reusable = await connection.exchange(request, head_only)
        except BaseException:  # failed, timed out or cancelled: its state is unknown
            self._discard(connection)
            raise
        if reusable and not self._closed:
            self._idle.append(connection)
        else:
            self._discard(connection)
        return answer

    def _take_idle(self) -> _WorkerConnection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.looks_open():
                return connection
            self._discard(connection)
        return None

    async def _connect(self) -> _WorkerConnection:
        if self._closed:
            raise WorkerUnavailable("the router is shutting down")
        try:
            reader, writer = await asyncio.open_unix_connection(self.socket, limit=READ_SIZE)
        except OSError as error:
            raise WorkerUnavailable(f"cannot connect to {self.socket}: {error}") from error
        self.opened += 1
        connection = _WorkerConnection(reader, writer)
        self._open.add(connection)
        return connection

    def _discard(self, connection: _WorkerConnection) -> None:
        self._open.discard(connection)
        connection.close()

    async def aclose(self) -> None:
        """Close every connection, idle or busy; later requests fail."""
        self._closed = True
        self._idle.clear()
        connections, self._open = self._open, set()
        for connection in connections:
            connection.close()
        await asyncio.gather(*(connection.wait_closed() for connection in connections))


def _hop_by_hop(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The headers meant for one connection only: the standard ones, and any `Connection`
    names."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name == b"connection"
        for token in value.split(b",")
    }
    return HOP_BY_HOP | named if named else HOP_BY_HOP


def _request_head(method: str, target: bytes, headers: Headers, body_length: int) -> bytes:
    """An HTTP/1.1 request head: the client's headers minus hop-by-hop ones, byte for byte
    (`host` and every `x-slack-*` included), and the body's length."""
    dropped = _hop_by_hop(headers) | _REPLACED_REQUEST_HEADERS
    lines = [b"%s %s HTTP/1.1" % (method.encode("ascii"), target)]
    lines.extend(b"%s: %s" % (name, value) for name, value in headers if name not in dropped)
    if not any(name == b"host" for name, _ in headers):
        lines.append(b"host: artbot-router")
    lines.append(b"content-length: %d" % body_length)
    return b"\r\n".join(lines) + b"\r\n\r\n"


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


# --- The router -------------------------------------------------------------------------------


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
        request = _request_head(scope["method"], _target(scope), headers, len(body)) + body
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
        request = _request_head("GET", path, [(b"host", b"artbot-router")], 0)
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


async def _relay(send: Send, answer: WorkerAnswer, head_only: bool) -> None:
    """The worker's status, headers (minus hop-by-hop ones, date and server) and body. The
    body was read whole, so its length replaces the worker's framing; a HEAD answer keeps the
    worker's length."""
    dropped = _hop_by_hop(answer.headers) | _SERVER_HEADERS
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
