"""`artbot serve --workers N`'s router (`bot.process.router`): real uvicorn workers on Unix
sockets, the router itself under uvicorn on loopback, real HTTP requests; nothing of the router
mocked."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import uvicorn
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from bot.process.router import BotRouter
from bot.process.routing import MAX_ROUTED_BODY, route_key
from bot.process.shards import shard_of
from bot.runs.store import new_public_id
from bot.slack.request_body import MAX_SLACK_BODY_BYTES
from tests.fakes.slack_requests import (
    FORM,
    JSON,
    SignedRequest,
    block_actions,
    event_callback,
    message_event,
    sign,
    slash_command,
    url_verification,
    view_submission,
)
from tests.fakes.workspace import TEAM_ID, USER_ID, next_ts

GENEROUS_S = 30.0  # a cap on waits (a loaded machine), never a measurement
RUN = new_public_id()

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GENEROUS_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


# --- Workers: a recording app standing in for the bot, served by uvicorn on a Unix socket -----


@dataclass(frozen=True)
class Seen:
    """One request as a worker received it."""

    method: str
    raw_path: bytes
    query: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def header(self, name: str) -> bytes:
        values = [v for n, v in self.headers if n == name.lower().encode()]
        assert len(values) == 1, f"{name}: {values}"
        return values[0]


class RecordingWorker:
    """Records every request and answers it with its own index; /healthz, /metrics (a real
    prometheus_client registry), /slow (until released), /chunked, /broken (dies mid-answer)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.seen: list[Seen] = []
        self.healthy = True
        self.release = threading.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.registry = CollectorRegistry()
        acks = Counter(
            "artbot_slack_acks",
            "Slack requests answered.",
            ["kind", "status"],
            registry=self.registry,
        )
        acks.labels("command", "200").inc(index + 1)
        seconds = Histogram(
            "artbot_slack_ack_seconds", "Time to ack.", ["kind"], registry=self.registry
        )
        seconds.labels("command").observe(0.01 * (index + 1))
        Gauge("artbot_outbox_depth", "Undelivered effects.", registry=self.registry).set(index)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        path = scope["path"]
        if path == "/healthz":
            words = b"database: ok\n" if self.healthy else b"database: unreachable\n"
            await self._answer(send, 200 if self.healthy else 503, words)
            return
        if path == "/metrics":
            await self._answer(send, 200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
            return
        self.seen.append(
            Seen(scope["method"], scope["raw_path"], scope["query_string"], scope["headers"], body)
        )
        if path == "/slow":
            await self._slow(send)
        elif path == "/chunked":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for word in (b"one ", b"two ", b"three"):
                await send({"type": "http.response.body", "body": word, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif path == "/broken":
            headers = [(b"content-length", b"100")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"partial", "more_body": True})
            raise RuntimeError("the worker dies mid-answer (on purpose)")
        else:
            reply = json.dumps({"worker": self.index, "length": len(body)}).encode()
            extra = [
                (b"x-worker", str(self.index).encode()),
                (b"x-multi", b"a"),
                (b"x-multi", b"b"),
            ]
            await self._answer(send, 200, reply, "application/json", extra)

    async def _slow(self, send: Send) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
        finally:
            self.in_flight -= 1
        await self._answer(send, 200, b"slow")

    @staticmethod
    async def _answer(
        send: Send,
        status: int,
        body: bytes,
        content_type: str = "text/plain",
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        headers = [(b"content-type", content_type.encode()), *(extra or [])]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class Served:
    """An ASGI app under uvicorn on a thread (a Unix socket, or a free loopback port)."""

    def __init__(self, config: uvicorn.Config) -> None:
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def start(self) -> Served:
        self._thread.start()
        wait_until(lambda: self.server.started or not self._thread.is_alive(), "uvicorn started")
        assert self.server.started, "uvicorn did not start"
        return self

    @property
    def port(self) -> int:
        servers: list[Any] = list(self.server.servers)
        return int(servers[0].sockets[0].getsockname()[1])

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(GENEROUS_S)
        assert not self._thread.is_alive(), "uvicorn did not stop"


def serve_worker(app: Any, socket: Path, keep_alive_s: int = 60) -> Served:
    config = uvicorn.Config(
        app,
        uds=str(socket),
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_keep_alive=keep_alive_s,
        timeout_graceful_shutdown=1,
    )
    served = Served(config).start()
    assert socket.exists()
    return served


@dataclass
class Cluster:
    """N workers behind a router, the way `artbot serve --workers N` runs them."""

    workers: list[RecordingWorker]
    servers: list[Served]
    router: BotRouter
    url: str

    def owner(self, channel: str, team: str = TEAM_ID) -> int:
        return shard_of(team, channel, len(self.workers))

    def channel_of(self, worker: int, prefix: str = "C0OWN") -> str:
        """A channel that worker `worker` owns."""
        return next(
            f"{prefix}{n:03d}" for n in range(1000) if self.owner(f"{prefix}{n:03d}") == worker
        )


@dataclass
class Sockets:
    """Short paths (a Unix socket's path is at most ~100 bytes: not under pytest's tmp_path)."""

    directory: Path
    made: list[Path] = field(default_factory=list)

    def new(self, name: str) -> Path:
        path = self.directory / f"{name}.sock"
        self.made.append(path)
        return path


@pytest.fixture
def sockets() -> Iterator[Sockets]:
    with tempfile.TemporaryDirectory(prefix="router-", dir="/tmp") as directory:
        yield Sockets(Path(directory))


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as exits:
        yield exits


def serve_router(router: BotRouter, stack: contextlib.ExitStack) -> str:
    """Serve the router on a free loopback port; its lifespan shutdown closes its pools."""
    config = uvicorn.Config(
        router,
        host="127.0.0.1",
        port=0,
        log_config=None,
        access_log=False,
        lifespan="on",
    )
    served = Served(config).start()
    stack.callback(served.stop)
    return f"http://127.0.0.1:{served.port}"


ClusterFactory = Callable[..., Cluster]


@pytest.fixture
def make_cluster(sockets: Sockets, stack: contextlib.ExitStack) -> ClusterFactory:
    def make(count: int = 2, keep_alive_s: int = 60, **router_options: Any) -> Cluster:
        workers = [RecordingWorker(i) for i in range(count)]
        paths = [sockets.new(f"worker-{i}") for i in range(count)]
        servers: list[Served] = []
        for worker, path in zip(workers, paths, strict=True):
            served = serve_worker(worker, path, keep_alive_s)
            servers.append(served)
            stack.callback(served.stop)
            stack.callback(worker.release.set)  # stops before its server does
        router = BotRouter(paths, **router_options)
        return Cluster(workers, servers, router, serve_router(router, stack))

    return make


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def send(url: str, *, method: str = "GET", request: SignedRequest | None = None) -> Reply:
    data = request.body.encode() if request is not None else None
    headers = request.headers if request is not None else {}
    outgoing = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(outgoing, timeout=GENEROUS_S) as response:
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, error.headers, error.read())


def post(url: str, request: SignedRequest) -> Reply:
    return send(url, method="POST", request=request)


# --- route_key ----------------------------------------------------------------------------------


def key_of(request: SignedRequest) -> tuple[str, str] | None:
    return route_key(request.headers["Content-Type"], request.body.encode())


def reaction_added(channel: str) -> dict[str, Any]:
    """A reaction event: its channel is under `item`, not at the top."""
    return {
        "type": "reaction_added",
        "user": USER_ID,
        "reaction": "eyes",
        "item": {"type": "message", "channel": channel, "ts": next_ts()},
        "item_user": USER_ID,
        "event_ts": next_ts(),
    }


def try_it_modal(metadata: str) -> dict[str, Any]:
    return {
        "id": "V0TRYIT",
        "type": "modal",
        "callback_id": "try_it",
        "private_metadata": metadata,
        "blocks": [],
    }


def view_closed(metadata: str) -> SignedRequest:
    payload = {
        "type": "view_closed",
        "team": {"id": TEAM_ID, "domain": "test"},
        "user": {"id": USER_ID, "team_id": TEAM_ID},
        "view": try_it_modal(metadata),
        "is_cleared": False,
    }
    return sign(urlencode({"payload": json.dumps(payload)}), content_type=FORM)


def test_route_key_reads_the_team_and_channel_of_every_kind_of_slack_request() -> None:
    assert key_of(slash_command(channel_id="C0CMD", team_id="T0OTHER")) == ("T0OTHER", "C0CMD")
    assert key_of(event_callback(message_event("hi", channel="C0MSG"))) == (TEAM_ID, "C0MSG")
    assert key_of(event_callback(reaction_added("C0REACT"))) == (TEAM_ID, "C0REACT")
    click = block_actions("approve", "yes", message_ts=next_ts(), channel_id="C0ACT")
    assert key_of(click) == (TEAM_ID, "C0ACT")
    ephemeral = block_actions("go", "1", message_ts=next_ts(), channel_id="C0EPH", ephemeral=True)
    assert key_of(ephemeral) == (TEAM_ID, "C0EPH")
    assert key_of(view_submission(try_it_modal(f"{RUN} C0ABC"), {})) == (TEAM_ID, "C0ABC")
    assert key_of(view_closed(f"{RUN} C0ABC")) == (TEAM_ID, "C0ABC")


def test_route_key_is_none_when_a_request_names_no_channel() -> None:
    assert key_of(url_verification()) is None
    assert key_of(view_submission(try_it_modal(RUN), {})) is None  # a modal opened before
    assert key_of(view_submission(try_it_modal("12 C0ABC"), {})) is None  # an old row id
    assert key_of(view_submission(try_it_modal("run C0ABC"), {})) is None
    assert key_of(view_submission(try_it_modal(""), {})) is None
    channel_object = {"type": "channel_created", "channel": {"id": "C0NEW"}}
    assert key_of(event_callback(channel_object)) is None
    no_team = json.dumps({"type": "event_callback", "event": {"channel": "C0X"}}).encode()
    assert route_key(JSON, no_team) is None


def test_route_key_ignores_the_content_types_parameters_and_case() -> None:
    body = event_callback(message_event("hi", channel="C0MSG")).body.encode()
    assert route_key("Application/JSON; charset=utf-8", body) == (TEAM_ID, "C0MSG")
    form = slash_command(channel_id="C0CMD").body.encode()
    assert route_key(" application/x-www-form-urlencoded ;charset=UTF-8", form)
    assert route_key("text/plain", body) is None
    assert route_key("", form) is None


def test_route_key_gives_up_on_garbage_and_huge_bodies() -> None:
    assert route_key(JSON, b"not json") is None
    assert route_key(JSON, b"[1, 2]") is None
    assert route_key(JSON, b"[" * 200_000) is None  # deeper than json's recursion
    assert route_key(JSON, b"\xff\xfe\x00garbage") is None
    assert route_key(JSON, b'{"type": "event_callback", "team_id": 7, "event": []}') is None
    assert route_key(FORM, b"payload=%7Bnot+json") is None
    assert route_key(FORM, b"payload=%5B%5D") is None
    assert route_key(FORM, b"\xff=\xfe&team_id=T0&channel_id=") is None
    assert route_key(FORM, b"&".join([b"x=1"] * 10_000)) is None  # too many fields
    padded = slash_command(channel_id="C0CMD").body + "&pad=" + "x" * MAX_ROUTED_BODY
    assert route_key(FORM, padded.encode()) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
slack_like = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["event_callback", "view_submission", "block_actions"]),
        "team_id": json_values,
        "team": json_values,
        "user": json_values,
        "channel": json_values,
        "container": json_values,
        "view": json_values,
        "event": json_values,
        "authorizations": json_values,
    },
)


@settings(deadline=None)  # timing is not what these test (a loaded machine runs them slowly)
@given(st.binary(max_size=512), st.sampled_from([JSON, FORM, "text/plain", "APPLICATION/JSON;"]))
def test_route_key_never_raises_on_any_bytes(body: bytes, content_type: str) -> None:
    key = route_key(content_type, body)
    assert key is None or all(isinstance(part, str) and part for part in key)


@settings(deadline=None)
@given(slack_like)
def test_route_key_never_raises_on_any_json_shape(payload: dict[str, Any]) -> None:
    as_event = route_key(JSON, json.dumps(payload).encode())
    as_payload = route_key(FORM, urlencode({"payload": json.dumps(payload)}).encode())
    for key in (as_event, as_payload):
        assert key is None or all(isinstance(part, str) and part for part in key)


# --- Forwarding -----------------------------------------------------------------------------------


def test_every_channel_lands_on_its_worker_byte_for_byte(make_cluster: ClusterFactory) -> None:
    """Commands, messages and clicks for 30 channels: each reaches `shard_of`'s worker with
    the body, the signature headers, the host, the path and the query string unchanged."""
    cluster = make_cluster(3)
    builders: list[Callable[[str], SignedRequest]] = [
        lambda channel: slash_command(text="train a model", channel_id=channel),
        lambda channel: event_callback(message_event("hi ✨ <&>", channel=channel)),
        lambda channel: block_actions("go", "1", message_ts=next_ts(), channel_id=channel),
    ]
    path, query = "/slack/events", "retry=1&q=a%20b"
    host = cluster.url.removeprefix("http://").encode()
    for n in range(30):
        channel = f"C0ROUTE{n:02d}"
        request = builders[n % len(builders)](channel)
        reply = post(f"{cluster.url}{path}?{query}", request)
        owner = cluster.owner(channel)
        assert reply.status == 200, reply.body
        assert reply.json() == {"worker": owner, "length": len(request.body.encode())}
        seen = cluster.workers[owner].seen[-1]
        assert seen.body == request.body.encode()
        assert (seen.method, seen.raw_path, seen.query) == ("POST", path.encode(), query.encode())
        for name in ("X-Slack-Signature", "X-Slack-Request-Timestamp", "Content-Type"):
            assert seen.header(name) == request.headers[name].encode()
        assert seen.header("host") == host
        assert seen.header("content-length") == str(len(seen.body)).encode()
        assert not any(name == b"connection" for name, _ in seen.headers)
    assert all(worker.seen for worker in cluster.workers), "30 channels should reach all three"
    assert sum(len(worker.seen) for worker in cluster.workers) == 30


def test_requests_naming_no_channel_go_to_worker_zero(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(2)
    assert post(cluster.url + "/slack/events", url_verification()).json()["worker"] == 0
    assert send(cluster.url + "/slack/install?state=x").json()["worker"] == 0
    assert cluster.workers[0].seen[-1].query == b"state=x"
    assert cluster.workers[1].seen == []


def test_the_workers_answer_is_relayed_whole(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(1)
    reply = send(cluster.url + "/anything")
    assert reply.headers["x-worker"] == "0"
    assert reply.headers.get_all("x-multi") == ["a", "b"]
    assert reply.headers["content-type"] == "application/json"
    assert len(reply.headers.get_all("date") or []) == 1  # the router's, not both
    assert reply.headers.get_all("server") == ["uvicorn"]

    chunked = send(cluster.url + "/chunked")  # the worker sends it in chunks
    assert (chunked.status, chunked.body) == (200, b"one two three")
    assert chunked.headers["content-length"] == "13"
    assert chunked.headers["transfer-encoding"] is None

    head = send(cluster.url + "/anything", method="HEAD")  # headers only, not a hang
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-length"] == reply.headers["content-length"]
    assert send(cluster.url + "/anything").status == 200  # and the connection still works


def test_a_request_over_the_body_cap_is_refused(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(1)
    connection = http.client.HTTPConnection(cluster.url.removeprefix("http://"), timeout=10)
    try:
        connection.putrequest("POST", "/slack/events")
        connection.putheader("Content-Type", JSON)
        connection.putheader("Content-Length", str(MAX_SLACK_BODY_BYTES + 1))
        connection.endheaders()
        assert connection.getresponse().status == 413
    finally:
        connection.close()
    assert cluster.workers[0].seen == []


# --- Connections ------------------------------------------------------------------------------


def test_sequential_requests_reuse_one_connection(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(2)
    channel = cluster.channel_of(1)
    for _ in range(25):
        assert post(cluster.url + "/slack/events", slash_command(channel_id=channel)).status == 200
    assert len(cluster.workers[1].seen) == 25
    assert cluster.router.connections_opened == (0, 1)


def test_connections_per_worker_are_capped(make_cluster: ClusterFactory) -> None:
    """Six requests at once with room for two: two reach the worker, the rest wait for a free
    connection, and all six are answered."""
    cluster = make_cluster(1, max_connections=2)
    worker = cluster.workers[0]
    with ThreadPoolExecutor(6) as pool:
        replies = [pool.submit(send, cluster.url + "/slow") for _ in range(6)]
        wait_until(lambda: worker.in_flight == 2, "two requests reached the worker")
        worker.release.set()
        assert [reply.result().status for reply in replies] == [200] * 6
    assert worker.most_in_flight == 2
    assert cluster.router.connections_opened == (2,)


def test_a_connection_the_worker_dropped_while_idle_is_replaced(
    make_cluster: ClusterFactory,
) -> None:
    """uvicorn closes a keep-alive connection idle past its timeout (1 s here): the next
    request goes out on a new one."""
    cluster = make_cluster(1, keep_alive_s=1)
    assert send(cluster.url + "/first").status == 200
    deadline = time.monotonic() + GENEROUS_S
    while cluster.router.idle_connections_open != (0,):  # the worker dropped it
        assert time.monotonic() < deadline, "uvicorn never closed the idle connection"
        time.sleep(0.05)
    assert send(cluster.url + "/second").status == 200
    assert [seen.raw_path for seen in cluster.workers[0].seen] == [b"/first", b"/second"]
    assert cluster.router.connections_opened == (2,)


class ScriptedWorker:
    """A bare HTTP/1.1 server on a Unix socket that answers `answers_per_connection` requests
    per connection, then closes the connection when the next request comes, without a byte:
    what the router sees when a worker drops an idle connection just as a request goes out."""

    def __init__(self, socket: Path, answers_per_connection: int) -> None:
        self.socket = socket
        self.answers_per_connection = answers_per_connection
        self.connections = 0
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> ScriptedWorker:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_unix_server(self._serve, path=str(self.socket)), self._loop
        )
        self._server = started.result(GENEROUS_S)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(GENEROUS_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(GENEROUS_S)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.requests += 1
                if answered == self.answers_per_connection:
                    return
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
                answered += 1
        except asyncio.IncompleteReadError:
            return
        finally:
            writer.close()


def test_a_request_on_a_just_dropped_connection_is_sent_once_more(
    sockets: Sockets, stack: contextlib.ExitStack
) -> None:
    path = sockets.new("scripted")
    worker = stack.enter_context(ScriptedWorker(path, answers_per_connection=1))
    router = BotRouter([path])
    url = serve_router(router, stack)
    assert send(url + "/one").body == b"ok"
    assert send(url + "/two").body == b"ok"  # its first connection closed on it: a new one
    assert (worker.connections, worker.requests) == (2, 3)
    assert router.connections_opened == (2,)


def test_a_new_connection_closed_without_an_answer_is_not_retried(
    sockets: Sockets, stack: contextlib.ExitStack
) -> None:
    path = sockets.new("scripted")
    worker = stack.enter_context(ScriptedWorker(path, answers_per_connection=0))
    url = serve_router(BotRouter([path]), stack)
    reply = send(url + "/once", method="POST")
    assert reply.status == 503
    assert b"Worker 0" in reply.body
    assert (worker.connections, worker.requests) == (1, 1)


def test_a_worker_breaking_off_its_answer_gets_503_not_a_retry(
    make_cluster: ClusterFactory,
) -> None:
    cluster = make_cluster(1)
    reply = send(cluster.url + "/broken")
    assert reply.status == 503
    assert b"Worker 0" in reply.body and b"middle of its answer" in reply.body
    assert len(cluster.workers[0].seen) == 1
    assert send(cluster.url + "/after").status == 200


def test_a_worker_that_does_not_answer_in_time_gets_503(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(1, answer_timeout_s=0.5)
    reply = send(cluster.url + "/slow")
    assert reply.status == 503
    assert b"Worker 0" in reply.body and b"no answer within 0.5 s" in reply.body
    cluster.workers[0].release.set()
    assert send(cluster.url + "/after").status == 200
    assert [seen.raw_path for seen in cluster.workers[0].seen] == [b"/slow", b"/after"]


def test_a_worker_that_is_down_gets_503_and_the_others_still_answer(
    make_cluster: ClusterFactory,
) -> None:
    cluster = make_cluster(2)
    mine, theirs = cluster.channel_of(0), cluster.channel_of(1)
    assert post(cluster.url + "/slack/events", slash_command(channel_id=theirs)).status == 200
    cluster.servers[1].stop()
    down = post(cluster.url + "/slack/events", slash_command(channel_id=theirs))
    assert down.status == 503
    assert down.body.startswith(b"Worker 1 is unavailable")
    up = post(cluster.url + "/slack/events", slash_command(channel_id=mine))
    assert (up.status, up.json()["worker"]) == (200, 0)


# --- /healthz and /metrics --------------------------------------------------------------------


def test_healthz_is_ok_only_when_every_worker_is(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(2)
    healthy = send(cluster.url + "/healthz")
    assert healthy.status == 200
    assert healthy.body == b"worker 0: ok\n  database: ok\nworker 1: ok\n  database: ok\n"
    assert send(cluster.url + "/healthz", method="HEAD").status == 200

    cluster.workers[1].healthy = False
    sick = send(cluster.url + "/healthz")
    assert sick.status == 503
    assert b"worker 0: ok\n" in sick.body
    assert b"worker 1: 503\n  database: unreachable\n" in sick.body

    cluster.workers[1].healthy = True
    cluster.servers[1].stop()
    down = send(cluster.url + "/healthz")
    assert down.status == 503
    assert b"worker 1: unavailable: cannot connect" in down.body
    assert all(worker.seen == [] for worker in cluster.workers)  # probes are not forwarded


class Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def rendered(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families(families))
    return generate_latest(registry)


def test_metrics_merges_every_workers_families_labelled_by_worker(
    make_cluster: ClusterFactory,
) -> None:
    cluster = make_cluster(2)
    reply = send(cluster.url + "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == CONTENT_TYPE_LATEST
    text = reply.body.decode()

    declared = Tally(line.split()[2] for line in text.splitlines() if line.startswith("# TYPE"))
    helped = Tally(line.split()[2] for line in text.splitlines() if line.startswith("# HELP"))
    assert set(declared.values()) == {1} and set(helped.values()) == {1}, text
    assert "# TYPE artbot_slack_acks_total counter" in text
    assert "# TYPE artbot_slack_ack_seconds histogram" in text

    families = list(text_string_to_metric_families(text))
    assert rendered(families) == reply.body  # it parses, and renders back the same
    by_name = {family.name: family for family in families}
    acks = by_name["artbot_slack_acks"]
    assert acks.type == "counter"
    assert {(s.name, s.labels["worker"], s.value) for s in acks.samples} == {
        ("artbot_slack_acks_total", "0", 1.0),
        ("artbot_slack_acks_total", "1", 2.0),
    }
    assert all(s.labels["kind"] == "command" for s in acks.samples)
    seconds = by_name["artbot_slack_ack_seconds"]
    assert seconds.type == "histogram"
    counts = {s.labels["worker"]: s.value for s in seconds.samples if s.name.endswith("_count")}
    assert counts == {"0": 1.0, "1": 1.0}
    assert {s.labels["worker"] for s in seconds.samples if s.name.endswith("_bucket")} == {"0", "1"}
    depth = by_name["artbot_outbox_depth"]
    assert {(s.labels["worker"], s.value) for s in depth.samples} == {("0", 0.0), ("1", 1.0)}
    up = by_name["artbot_router_worker_up"]
    assert up.type == "gauge"
    assert {(s.labels["worker"], s.value) for s in up.samples} == {("0", 1.0), ("1", 1.0)}


def test_metrics_skip_a_worker_that_is_down(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(2)
    cluster.servers[1].stop()
    reply = send(cluster.url + "/metrics")
    assert reply.status == 200
    families = {f.name: f for f in text_string_to_metric_families(reply.body.decode())}
    up = families.pop("artbot_router_worker_up")
    assert {(s.labels["worker"], s.value) for s in up.samples} == {("0", 1.0), ("1", 0.0)}
    workers = {s.labels["worker"] for family in families.values() for s in family.samples}
    assert workers == {"0"}
