"""`artbot serve`'s server: acks before the work, /healthz and /metrics in both modes, and log
lines that carry the Slack ids. Real HTTP on loopback (uvicorn), the real database."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_bolt.adapter.socket_mode import SocketModeHandler

from bot.process.health import HealthCheck
from bot.process.log_fields import KeyValueFormatter, quoted, slack_ids
from bot.process.metrics import BotMetrics
from bot.process.serve import BotServer, web_for
from bot.services import LISTENER_SLOTS
from bot.slack.asgi import BotWeb
from storage.sql_store import SqlStore
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import slash_command
from tests.fakes.workspace import BOT_TOKEN, CHANNEL_ID, SIGNING_SECRET, TEAM_ID, USER_ID

GENEROUS_S = 60.0  # a cap on waits (a loaded machine starts the bot slowly), never a measurement

SANDBOX_LINE = (
    "sandbox: untrusted code runs in bubblewrap namespaces (a pooled uid of its own, no network)\n"
    if os.geteuid() == 0
    else "sandbox: untrusted code runs in bubblewrap namespaces (a user namespace of the bot's "
    "uid, no network)\n"
)
"""What /healthz says of the sandbox on this host (told, not judged)."""


def get(url: str) -> tuple[int, str, str]:
    """Status, content type and body of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=GENEROUS_S) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


@pytest.fixture
def served(make_bot: BotFactory) -> Iterator[tuple[Bot, BotServer]]:
    bot = make_bot()
    with BotServer(web_for(bot.app, bot.service)) as server:
        bot.http_url = f"{server.base_url}/slack/events"
        yield bot, server


def test_every_request_is_acked_while_the_work_before_it_is_stuck(
    served: tuple[Bot, BotServer], fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More commands than the listeners' work slots, each one's work blocked (not on Slack, so
    it keeps its slot): every request still gets its HTTP 200, and the work runs once
    released."""
    bot, _ = served
    release = threading.Event()
    started = threading.Semaphore(0)
    command = bot.service.commands["/train-rl"].answer

    def stuck(*args: Any) -> str | None:
        started.release()
        assert release.wait(GENEROUS_S), "the test never released the work"
        return command(*args)

    monkeypatch.setattr(bot.service.commands["/train-rl"], "answer", stuck)
    channels = [f"C0STUCK{i:02d}" for i in range(LISTENER_SLOTS + 3)]
    try:
        for channel in channels:
            request = slash_command(text="", user_id=f"U{channel}", channel_id=channel)
            assert request.post(bot.http_url or "", timeout=GENEROUS_S).status == 200
        for _ in range(LISTENER_SLOTS):  # every slot is held by stuck work
            assert started.acquire(timeout=GENEROUS_S)
        assert fake.calls("chat.postMessage") == []
    finally:
        release.set()
    fake.wait_for(
        lambda f: all(any(m.is_reply for m in f.messages(c)) for c in channels),
        timeout=GENEROUS_S,
    )


def test_healthz_and_metrics_over_http(served: tuple[Bot, BotServer]) -> None:
    bot, server = served
    user = SlackUser(bot)
    user.command()
    user.click("Only logged or static scenarios")

    status, _, body = get(f"{server.base_url}/healthz")
    assert (status, body) == (200, f"database: ok\n{SANDBOX_LINE}")
    status, content_type, metrics = get(f"{server.base_url}/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert 'artbot_slack_acks_total{kind="command",status="200"} 1.0' in metrics
    assert 'artbot_slack_acks_total{kind="action",status="200"} 1.0' in metrics
    assert 'artbot_slack_ack_seconds_count{kind="action"} 1.0' in metrics
    assert 'artbot_turn_seconds_count{kind="command"} 1.0' in metrics
    assert 'artbot_sessions{state="active"} 1.0' in metrics
    assert "artbot_outbox_depth 0.0" in metrics
    assert "artbot_outbox_retries_total 0.0" in metrics
    assert get(f"{server.base_url}/elsewhere")[0] == 404


def test_a_forged_request_is_counted_as_refused(served: tuple[Bot, BotServer]) -> None:
    bot, server = served
    forged = slash_command(signing_secret="not-the-secret")
    assert forged.post(bot.http_url or "").status == 401
    metrics = get(f"{server.base_url}/metrics")[2]
    assert 'artbot_slack_acks_total{kind="command",status="401"} 1.0' in metrics


def test_sessions_by_state_counts_expired_ones_apart(make_bot: BotFactory) -> None:
    bot = make_bot()
    first, second = SlackUser(bot, channel="C0FIRST"), SlackUser(bot, channel="C0SECOND")
    first.command()
    second.command()
    second.reply("cancel")
    counts = bot.service.store.count_by_status()
    assert counts == {"active": 1, "cancelled": 1}


def test_socket_mode_serves_health_and_metrics_but_no_slack_events(
    make_bot: BotFactory,
) -> None:
    """In Socket Mode the web server is for probes only: /healthz says whether the socket to
    Slack is open (a real, unconnected SocketModeHandler here), and /slack/events is not served."""
    bot = make_bot()
    handler = SocketModeHandler(bot.app, "xapp-1-A0TEST-1-secret")
    try:
        with BotServer(web_for(bot.app, bot.service, handler.client.is_connected)) as server:
            status, _, body = get(f"{server.base_url}/healthz")
            assert (status, body) == (
                503,
                f"database: ok\nsocket: not connected to Slack\n{SANDBOX_LINE}",
            )
            assert get(f"{server.base_url}/metrics")[0] == 200
            assert slash_command().post(f"{server.base_url}/slack/events").status == 404
        connected = web_for(bot.app, bot.service, lambda: True)
        with BotServer(connected) as server:
            assert get(f"{server.base_url}/healthz")[:3:2] == (
                200,
                f"database: ok\nsocket: ok\n{SANDBOX_LINE}",
            )
    finally:
        handler.close()


def test_healthz_fails_when_the_database_does_not_answer() -> None:
    unreachable = SqlStore.open("postgresql+psycopg://artbot@127.0.0.1:9/artbot")
    try:
        with BotServer(BotWeb(HealthCheck(unreachable), BotMetrics())) as server:
            status, _, body = get(f"{server.base_url}/healthz")
        assert status == 503 and body.startswith("database: ") and "127.0.0.1" in body
        assert "database: ok" not in body
    finally:
        unreachable.close()


# ---- structured log lines -------------------------------------------------------------------


def test_a_log_line_carries_the_ids_bound_around_it() -> None:
    record = logging.LogRecord("bot.wizard", logging.INFO, __file__, 1, "saved %s", ("it",), None)
    with slack_ids(team="T1", channel="C1", thread="1700000000.000100", session="T1/C1/17"):
        line = KeyValueFormatter().format(record)
    assert line.endswith(
        'level=INFO logger=bot.wizard msg="saved it" team=T1 channel=C1 '
        "thread=1700000000.000100 session=T1/C1/17"
    )
    assert "team=" not in KeyValueFormatter().format(record)  # unbound outside the block


def test_values_are_quoted_as_logfmt() -> None:
    assert quoted("plain") == "plain"
    assert quoted('say "hi"\nnow') == '"say \\"hi\\"\\nnow"'
    assert quoted("") == '""'


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(KeyValueFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_a_listener_failure_is_logged_with_its_thread_ids(
    make_bot: BotFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = make_bot()
    user = SlackUser(bot)
    user.command()
    lines = _Lines()
    logging.getLogger("bot.slack.listeners.guard").addHandler(lines)

    def broken(*args: object) -> None:
        raise RuntimeError("the database went away")

    try:
        monkeypatch.setattr(bot.service.replies, "handle", broken)
        user.reply("static")
    finally:
        logging.getLogger("bot.slack.listeners.guard").removeHandler(lines)
    [line] = [line for line in lines.lines if 'msg="listener failed"' in line]
    key = f"{TEAM_ID}/{user.channel}/{user.thread}"
    assert f"team={TEAM_ID} channel={user.channel} thread={user.thread} session={key}" in line
    assert "RuntimeError: the database went away" in line


# ---- `artbot serve` itself ------------------------------------------------------------------


def test_artbot_serve_acks_answers_probes_and_stops_on_sigterm(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """The real command in a process of its own (HTTP mode, SQLite): probes, a signed command
    acked and answered, key=value log lines, and a clean exit on SIGTERM."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ARTBOT_"))}
    env |= {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": fake.base_url,
        "ARTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'artbot.db'}",
        "ARTBOT_SCRIPTS_DIR": str(tmp_path / "scripts"),
        "ARTBOT_DRYRUN": "false",
        "NO_PROXY": "127.0.0.1",
    }
    command = [sys.executable, "-m", "artbot.cli", "serve", "--host", "127.0.0.1"]
    base = f"http://127.0.0.1:{port}"
    with subprocess.Popen(
        [*command, "--port", str(port)], env=env, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            deadline = time.monotonic() + GENEROUS_S
            while not _healthy(f"{base}/healthz"):
                assert process.poll() is None, "artbot serve exited"
                assert time.monotonic() < deadline, "no healthy /healthz in time"
                time.sleep(0.05)
            request = slash_command(user_id=USER_ID, channel_id=CHANNEL_ID)
            assert request.post(f"{base}/slack/events").status == 200
            fake.wait_for(lambda f: any(m.is_reply for m in f.messages(CHANNEL_ID)))
            metrics = get(f"{base}/metrics")[2]
            assert 'artbot_slack_acks_total{kind="command",status="200"} 1.0' in metrics
            # The outbox delivered the question: its depth is read at the scrape.
            depth = next(x for x in metrics.splitlines() if x.startswith("artbot_outbox_depth "))
            assert float(depth.split()[1]) >= 0
            assert "artbot_outbox_retries_total 0.0" in metrics
        finally:
            process.send_signal(signal.SIGTERM)
            _, errors = process.communicate(timeout=GENEROUS_S)
    assert process.returncode == 0, errors
    lines = errors.splitlines()
    assert any(
        line.startswith("ts=")
        and "level=INFO logger=bot.process.serve" in line
        and f":{port}" in line
        for line in lines
    ), errors


def _healthy(url: str) -> bool:
    try:
        return get(url)[0] == 200
    except OSError:  # not listening yet
        return False


def test_artbot_serve_in_socket_mode_says_when_slack_refuses_the_socket(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """The fake Slack has no apps.connections.open: Socket Mode cannot open, and serve says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ARTBOT_"))}
    env |= {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_APP_TOKEN": "xapp-1-A0TEST-1-secret",
        "SLACK_API_URL": fake.base_url,
        "ARTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'artbot.db'}",
        "NO_PROXY": "127.0.0.1",
    }
    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "serve", "--host", "127.0.0.1", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=GENEROUS_S * 3,
    )
    assert result.returncode == 2, result.stderr
    assert "Cannot start artbot: Socket Mode refused (unknown_method)." in result.stderr
    assert [c.method for c in fake.calls()][-1] == "apps.connections.open"
