"""Talking to one worker of `artbot serve --workers N`: HTTP/1.1 written by hand over its Unix
socket, answers parsed with httptools, a small keep-alive pool of connections per worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import httptools

Headers = list[tuple[bytes, bytes]]

MAX_CONNECTIONS = 64
"""Open connections per worker; more concurrent requests wait for one."""
READ_SIZE = 64 * 1024
HOP_BY_HOP = frozenset(
    b"connection keep-alive proxy-connection transfer-encoding te trailer upgrade".split()
)
# Not forwarded either: the router sets the length of the body it read whole, and answers no
# `Expect: 100-continue` (the worker's interim answer would read as its answer).
_REPLACED_REQUEST_HEADERS = frozenset({b"content-length", b"expect"})


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


def hop_by_hop(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The headers meant for one connection only: the standard ones, and any `Connection`
    names."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name == b"connection"
        for token in value.split(b",")
    }
    return HOP_BY_HOP | named if named else HOP_BY_HOP


def request_head(method: str, target: bytes, headers: Headers, body_length: int) -> bytes:
    """An HTTP/1.1 request head: the client's headers minus hop-by-hop ones, byte for byte
    (`host` and every `x-slack-*` included), and the body's length."""
    dropped = hop_by_hop(headers) | _REPLACED_REQUEST_HEADERS
    lines = [b"%s %s HTTP/1.1" % (method.encode("ascii"), target)]
    lines.extend(b"%s: %s" % (name, value) for name, value in headers if name not in dropped)
    if not any(name == b"host" for name, _ in headers):
        lines.append(b"host: artbot-router")
    lines.append(b"content-length: %d" % body_length)
    return b"\r\n".join(lines) + b"\r\n\r\n"
