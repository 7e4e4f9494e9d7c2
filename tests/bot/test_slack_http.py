"""Slack's Web API over kept-alive connections: the same answers and errors as slack_sdk's own
urllib calls, one connection for many calls, and a connection Slack closed while idle costs
nothing (the call goes out once, on a new one)."""

from __future__ import annotations

import socket
from urllib.error import URLError
from urllib.parse import urlsplit

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.web_api import KeepAliveWebClient, KeptAliveConnections
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import BOT_TOKEN, CHANNEL_ID


def kept_alive(fake: FakeSlack, connections: KeptAliveConnections) -> KeepAliveWebClient:
    return KeepAliveWebClient(token=BOT_TOKEN, base_url=fake.base_url, connections=connections)


def post(client: WebClient, text: str) -> str:
    return str(client.chat_postMessage(channel=CHANNEL_ID, text=text)["ts"])


def test_calls_share_one_connection_where_urllib_opens_one_each(fake: FakeSlack) -> None:
    client = kept_alive(fake, KeptAliveConnections())
    for n in range(3):
        post(client, f"kept {n}")
    assert fake.connections_opened == 1

    plain = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    for n in range(3):
        post(plain, f"plain {n}")
    assert fake.connections_opened == 4
    assert [m.text for m in fake.messages(CHANNEL_ID)] == [
        *(f"kept {n}" for n in range(3)),
        *(f"plain {n}" for n in range(3)),
    ]


def test_a_connection_slack_closed_while_idle_is_replaced_and_the_call_made_once(
    fake: FakeSlack,
) -> None:
    connections = KeptAliveConnections()
    client = kept_alive(fake, connections)
    first = post(client, "before")
    assert fake.drop_connections() == 1  # the idle kept-alive one

    second = post(client, "after")

    assert [m.text for m in fake.messages(CHANNEL_ID)] == ["before", "after"]
    assert len(fake.calls("chat.postMessage")) == 2
    assert first != second
    assert fake.connections_opened == 2


def test_a_connection_idle_too_long_is_not_used(fake: FakeSlack) -> None:
    client = kept_alive(fake, KeptAliveConnections(idle_kept_s=0.0))
    post(client, "one")
    post(client, "two")
    assert fake.connections_opened == 2


def test_idle_connections_beyond_the_bound_are_closed(fake: FakeSlack) -> None:
    connections = KeptAliveConnections(per_host=1)
    port = urlsplit(fake.base_url).port
    assert port is not None
    origin = ("http", "127.0.0.1", port)
    client = kept_alive(fake, connections)
    opened = [client._open(origin) for _ in range(2)]
    for connection in opened:
        connection.connect()
        connections.give_back(origin, connection)
    assert connections.idle(origin) == 1
    assert opened[1].sock is None  # the second was closed, not kept


def test_a_429_reaches_the_caller_as_it_does_through_urllib(fake: FakeSlack) -> None:
    errors: list[SlackApiError] = []
    for client in (
        kept_alive(fake, KeptAliveConnections()),
        WebClient(token=BOT_TOKEN, base_url=fake.base_url),
    ):
        fake.rate_limit("chat.postMessage", retry_after=7)
        with pytest.raises(SlackApiError) as raised:
            post(client, "limited")
        errors.append(raised.value)
    kept, plain = (error.response for error in errors)
    assert kept.status_code == plain.status_code == 429
    assert kept.headers["Retry-After"] == plain.headers["Retry-After"] == "7"
    assert kept.data == plain.data == {"ok": False, "error": "ratelimited"}
    # The connection stays usable after an error answer.
    post(kept_alive(fake, KeptAliveConnections()), "fine")
    assert fake.messages(CHANNEL_ID)[-1].text == "fine"


def test_a_refused_connection_is_a_urlerror_as_with_urllib() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/api/"
    for client in (
        KeepAliveWebClient(token=BOT_TOKEN, base_url=base_url, connections=KeptAliveConnections()),
        WebClient(token=BOT_TOKEN, base_url=base_url),
    ):
        with pytest.raises(URLError) as raised:
            post(client, "nobody there")
        assert isinstance(raised.value.reason, ConnectionRefusedError)


def test_a_stopped_slack_closes_kept_connections(fake: FakeSlack) -> None:
    client = kept_alive(fake, KeptAliveConnections())
    post(client, "before")
    fake.stop()
    with pytest.raises(URLError):
        post(client, "after the stop")
    assert [m.text for m in fake.messages(CHANNEL_ID)] == ["before"]
