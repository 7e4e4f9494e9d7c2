"""Every request body is capped before it is read (`bot.slack.request_body`): a declared length
over the cap is refused unread, a chunked body is cut off at the cap, in one process and through
the router, on Slack's path and the install pages alike.

An attacker's view: real `artbot serve` processes on loopback, 300 MB bodies streamed from a
generator (never built in memory), and the serving processes' peak memory read from /proc."""

from __future__ import annotations

import http.client
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.process.serve import BotServer, web_for
from bot.slack.request_body import MAX_SLACK_BODY_BYTES
from tests.bot.bot_process import BotProcess, process_database_url
from tests.bot.conftest import BotFactory, Database, SlackUser
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import FORM

GENEROUS_S = 60.0  # a cap on waits (a loaded machine), never a measurement
HUGE = 300 * 1000 * 1000
PIECE = b"x" * (1 << 20)
FEW_MB = 6 * 1024 * 1024
"""How much more memory a serving process may have held at its peak, while refusing a huge
body, than before it: the cap (2 MiB, for a chunked body read up to it) and some slack for
whatever else a bot does meanwhile. Reading a 300 MB body grows it by hundreds of MB."""
on_linux = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads peak memory from /proc"
)


def pieces(total: int) -> Iterator[bytes]:
    """`total` bytes in pieces of at most 1 MiB, made as they are sent (one piece in memory)."""
    left = total
    while left > 0:
        piece = PIECE[: min(left, len(PIECE))]
        left -= len(piece)
        yield piece


@dataclass(frozen=True)
class Answer:
    status: int
    sent: int
    """Body bytes the client got onto the connection before the server closed it (or all)."""
    closed: bool
    """The server closed the connection after its answer."""


def stream_post(
    base_url: str, path: str, body: Iterator[bytes], *, length: int | None = None
) -> Answer:
    """POST `body` as it is generated: with Content-Length `length`, else chunked. The answer
    is read while the body is still being sent (a server may answer before reading it all)."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=GENEROUS_S)
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {FORM}\r\n"
        f"X-Slack-Request-Timestamp: 1\r\nX-Slack-Signature: v0=forged\r\n{framing}\r\n\r\n"
    )
    sent = 0

    def pump() -> None:
        nonlocal sent
        try:
            for piece in body:
                if length is None:
                    connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                else:
                    connection.sendall(piece)
                sent += len(piece)
            if length is None:
                connection.sendall(b"0\r\n\r\n")
        except OSError:  # the server closed the connection: the rest goes nowhere
            pass

    try:
        connection.sendall(head.encode())
        sender = threading.Thread(target=pump, daemon=True)
        sender.start()
        response = http.client.HTTPResponse(connection)
        response.begin()
        response.read()
        closed = response.will_close
        sender.join(GENEROUS_S)
        assert not sender.is_alive(), "the body was still being sent a minute later"
        return Answer(response.status, sent, closed)
    finally:
        connection.close()


# ---- peak memory of the serving processes ---------------------------------------------------


def family(pid: int) -> list[int]:
    """`pid` and its child processes (the router's workers)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                children.append(int(entry.name))
    return [pid, *children]


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


def reset_peaks(pids: list[int]) -> dict[int, int]:
    """Start each process's peak resident memory over from now (clear_refs 5); its resident
    memory now, in bytes."""
    now = {}
    for pid in pids:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        now[pid] = _status_kib(pid, "VmRSS") * 1024
    return now


def peak_growth(before: dict[int, int]) -> dict[int, int]:
    """Per process, how far its peak resident memory since `reset_peaks` rose above it."""
    return {pid: _status_kib(pid, "VmHWM") * 1024 - rss for pid, rss in before.items()}


def refuses_huge_bodies_in_little_memory(bot: BotProcess) -> None:
    """A 300 MB body with its length, then one chunked: both 413, the connection closed long
    before the body's end, and no serving process's peak memory up by more than a few MB."""
    path = "/slack/events"
    assert stream_post(bot.base_url, path, pieces(10), length=10).status == 401  # warm, unsigned
    pids = family(bot.process.pid)
    before = reset_peaks(pids)

    declared = stream_post(bot.base_url, path, pieces(HUGE), length=HUGE)
    chunked = stream_post(bot.base_url, path, pieces(HUGE))

    grown = peak_growth(before)
    assert all(growth < FEW_MB for growth in grown.values()), grown
    assert (declared.status, declared.closed) == (413, True)
    assert (chunked.status, chunked.closed) == (413, True)
    # What got onto the connection at all: the kernel's buffers, never the body's end.
    assert declared.sent < HUGE // 4 and chunked.sent < HUGE // 4


@on_linux
def test_one_process_refuses_a_300_mb_body_without_reading_it(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    url = process_database_url(database.url, database.schema)
    with BotProcess(fake, url, tmp_path) as bot:
        refuses_huge_bodies_in_little_memory(bot)


@on_linux
def test_the_router_refuses_a_300_mb_body_without_reading_it(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    url = process_database_url(database.url, database.schema)
    with BotProcess(fake, url, tmp_path, workers=2) as bot:
        assert len(family(bot.process.pid)) == 3  # the router and its two workers
        refuses_huge_bodies_in_little_memory(bot)


# ---- where the cap falls ---------------------------------------------------------------------


def test_a_chunked_body_is_read_up_to_the_cap_and_cut_off_past_it(make_bot: BotFactory) -> None:
    """Without Content-Length the body is counted as it arrives: exactly the cap reaches Bolt
    (which refuses the forged signature, 401); one byte more is 413 and the connection closed."""
    bot = make_bot()
    with BotServer(web_for(bot.app, bot.service)) as server:
        at_cap = stream_post(server.base_url, "/slack/events", pieces(MAX_SLACK_BODY_BYTES))
        over = stream_post(server.base_url, "/slack/events", pieces(MAX_SLACK_BODY_BYTES + 1))
        declared = stream_post(
            server.base_url,
            "/slack/events",
            pieces(MAX_SLACK_BODY_BYTES + 1),
            length=MAX_SLACK_BODY_BYTES + 1,
        )
        user = SlackUser(bot)
        bot.http_url = f"{server.base_url}/slack/events"
        user.command()  # and the bot goes on serving Slack
    assert at_cap.status == 401
    assert (over.status, over.closed) == (413, True)
    assert (declared.status, declared.closed) == (413, True)


def test_the_install_pages_and_every_other_path_are_capped_too(make_bot: BotFactory) -> None:
    """With OAuth, Bolt also serves /slack/install and /slack/oauth_redirect: their bodies are
    capped the same way, and so is any other path (never read, whatever it is)."""
    bot = make_bot(SLACK_CLIENT_ID="111.222", SLACK_CLIENT_SECRET="client-secret")
    with BotServer(web_for(bot.app, bot.service)) as server:
        for path in ("/slack/oauth_redirect", "/slack/install", "/healthz", "/elsewhere"):
            declared = stream_post(server.base_url, path, pieces(HUGE), length=HUGE)
            assert (declared.status, declared.closed) == (413, True), path
            assert declared.sent < HUGE // 4, path
        for path in ("/slack/oauth_redirect", "/slack/install"):
            chunked = stream_post(server.base_url, path, pieces(MAX_SLACK_BODY_BYTES + 1))
            assert (chunked.status, chunked.closed) == (413, True), path
