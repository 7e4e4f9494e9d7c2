"""A file dropped in a thread is downloaded with the bot token only from Slack's own file host: a
file object that names another host (a forged or remote file) never gets the token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.bot.conftest import BotFactory, SlackUser
from tests.fakes.slack_requests import event_callback, file_share_event
from tests.fakes.workspace import BOT_TOKEN


class Elsewhere(ThreadingHTTPServer):
    """A server on loopback that is not Slack: it keeps the Authorization headers it is sent."""

    def __init__(self) -> None:
        self.authorizations: list[str | None] = []
        elsewhere = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                elsewhere.authorizations.append(self.headers.get("Authorization"))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def elsewhere() -> Iterator[Elsewhere]:
    server = Elsewhere()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_file_naming_another_host_is_refused_and_never_gets_the_token(
    make_bot: BotFactory, elsewhere: Elsewhere
) -> None:
    user = SlackUser(make_bot())
    user.command()
    shared = dict(user.fake.add_user_file("scenarios.jsonl", b'{"q": 1}\n'))
    shared["url_private"] = f"{elsewhere.url}/files-pri/T1-F1/scenarios.jsonl"
    shared["url_private_download"] = f"{elsewhere.url}/files-pri/T1-F1/download/scenarios.jsonl"

    event = file_share_event([shared], channel=user.channel, user=user.user, thread_ts=user.thread)
    assert user.bot.dispatch(event_callback(event)) == 200
    user.fake.wait_for(lambda f: bool(f.ephemerals(user.channel)))
    user.settle()

    assert "I cannot download “scenarios.jsonl”" in user.fake.ephemerals(user.channel)[-1].text
    assert elsewhere.authorizations == []
    assert all(BOT_TOKEN not in str(a) for a in elsewhere.authorizations)


def test_a_file_on_slacks_own_host_is_downloaded_with_the_token(make_bot: BotFactory) -> None:
    user = SlackUser(make_bot())
    user.command()
    shared = user.fake.add_user_file("notes.txt", b"hello")

    event = file_share_event([shared], channel=user.channel, user=user.user, thread_ts=user.thread)
    assert user.bot.dispatch(event_callback(event)) == 200
    user.settle()

    said = [m.text for m in [*user.bot_messages(), *user.fake.ephemerals(user.channel)]]
    assert not any("cannot download" in text or "failed" in text for text in said), said
    downloads = user.fake.calls("files-pri")
    assert downloads and downloads[0].headers.get("Authorization") == f"Bearer {BOT_TOKEN}"
    # The thread said it was reading the file while it was, and no longer once it was read.
    user.fake.wait_for(lambda f: f.status(user.channel, user.thread) == "")
    assert "is reading your file…" in user.fake.statuses(user.channel, user.thread)
