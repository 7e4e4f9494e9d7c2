"""The Bolt app, with every listener (bot/slack/listeners) registered on it, calling the bot's
services (built by bot.services).

Ack first, in the request's own path: the app runs with `process_before_response=True`, so Bolt
calls each listener on the thread that received the request (uvicorn's event loop, or Socket
Mode's); the listener acks, parses, and hands the work to `AfterAck`'s pool of LISTENER_WORKERS
threads, of which LISTENER_SLOTS at most compute at once while the others wait on Slack
(bot/process/work_slots.py). A saturated pool delays turns, never acks. (Without
`process_before_response` Bolt runs every listener in its executor and polls for the ack, so
acks queued behind slow work: the collapse issue 9 saw at 200 users.)

Sync Bolt, on purpose: the work behind a reply is blocking anyway (SQL, rendering, ruff and
pyright subprocesses, the dry run); the async app would need every one of them in a thread.
docs/benchmarks.md (Acking styles) has the two measured side by side.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from bot.process.metrics import BotMetrics
from bot.process.work_slots import WorkSlots, behind_the_acks
from bot.services import Services
from bot.settings import BotSettings
from bot.slack.listeners import register_listeners
from bot.slack.listeners.guard import RECEIVED_AT, AfterAck
from bot.slack.listeners.payloads import answered_unless_forged
from bot.workspaces.clients import ClientFor, SlackClients, web_client_maker
from bot.workspaces.installations import BOT_SCOPES, STATE_EXPIRY_S, InstallationStore, StateStore

log = logging.getLogger(__name__)

LISTENER_WORKERS = 64
"""Threads for the listeners' work after their acks (SQL, rendering, Slack calls): enough for
turns that wait on Slack (about 100 ms a call, two calls a turn) to overlap. Of those,
bot.services.LISTENER_SLOTS compute at once."""
REQUEST_KINDS = {"event_callback": "event", "block_actions": "action", "url_verification": "event"}
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"


class ArtbotApp(App):
    """Bolt's App that counts and times its acks into `metrics` (HTTP and Socket Mode alike)."""

    def __init__(self, *, metrics: BotMetrics, clients: SlackClients, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.metrics = metrics
        self.clients = clients
        """`client_for(team)`: the client that acts in a team outside requests."""

    @property
    def client_for(self) -> ClientFor:
        return self.clients.client_for

    def dispatch(self, req: BoltRequest) -> BoltResponse:
        received = time.monotonic()
        req.context[RECEIVED_AT] = received  # turn latency counts from here
        try:
            response = super().dispatch(req)
        except Exception as error:  # Bolt's own error handlers raised on the payload's shape
            response = answered_unless_forged(req, error, self._signing_secret)
        kind = request_kind(req.body)
        self.metrics.acks.labels(kind, str(response.status)).inc()
        self.metrics.ack_seconds.labels(kind).observe(time.monotonic() - received)
        return response


def request_kind(body: dict[str, Any]) -> str:
    """command, action, event or other: a fixed set (the body is not yet verified here)."""
    if "command" in body:
        return "command"
    return REQUEST_KINDS.get(str(body.get("type")), "other")


def web_client(
    settings: BotSettings, token: str | None = None, *, slots: WorkSlots | None = None
) -> WebClient:
    """A Web API client with `token` (default: SLACK_BOT_TOKEN, if set): SLACK_API_URL if set;
    429s and dropped connections retried; its calls give `slots` back while Slack answers."""
    bot_token = settings.slack_bot_token
    if token is None and bot_token is not None:
        token = bot_token.get_secret_value()
    return web_client_maker(slots, **_client_options(settings))(token)


def _client_options(settings: BotSettings) -> dict[str, Any]:
    options: dict[str, Any] = {
        "retry_handlers": [
            ConnectionErrorRetryHandler(max_retry_count=2),
            RateLimitErrorRetryHandler(max_retry_count=3),
        ]
    }
    if settings.slack_api_url:
        options["base_url"] = settings.slack_api_url
    return options


def create_app(
    settings: BotSettings,
    services: Services,
    *,
    client: WebClient | None = None,
    metrics: BotMetrics | None = None,
) -> ArtbotApp:
    """A Bolt App wired to `services`, talking to Slack (or SLACK_API_URL) with retries on 429;
    its metrics (acks, turns, sessions by state) in `app.metrics`.

    One workspace (SLACK_BOT_TOKEN): every request and `app.client_for` use that token. OAuth
    (SLACK_CLIENT_ID): Bolt serves INSTALL_PATH and REDIRECT_PATH, keeps each installation in
    the bot's database, and finds each request's token there; so does `app.client_for`.
    """
    secret = settings.slack_signing_secret
    metrics = metrics or BotMetrics()
    metrics.watch_sessions(services.store.count_by_status)
    metrics.watch_answer_feedback(services.answer_feedback.counts)
    slots = services.slots
    make_client = web_client_maker(slots, **_client_options(settings))
    oauth: dict[str, Any] = {}
    if settings.multi_workspace:
        assert settings.slack_client_id and settings.slack_client_secret  # settings check both
        workspaces = services.workspaces
        if workspaces.token_cipher is None:
            raise ValueError("OAuth needs the tokens' cipher (build_services makes it)")
        installations = InstallationStore(
            settings.slack_client_id, workspaces.engine, workspaces, workspaces.token_cipher
        )
        clients = SlackClients(make_client, installations=installations, workspaces=workspaces)
        client = client or make_client(None)
        oauth["oauth_settings"] = OAuthSettings(
            client_id=settings.slack_client_id,
            client_secret=settings.slack_client_secret.get_secret_value(),
            scopes=list(BOT_SCOPES),
            installation_store=installations,
            state_store=StateStore(STATE_EXPIRY_S, workspaces.engine),
            install_path=INSTALL_PATH,
            redirect_uri_path=REDIRECT_PATH,
            redirect_uri=settings.slack_redirect_uri,
        )
    else:
        client = client or web_client(settings, slots=slots)
        clients = SlackClients(make_client, single=client)
    app = ArtbotApp(
        metrics=metrics,
        clients=clients,
        client=client,
        **oauth,
        signing_secret=secret.get_secret_value() if secret else None,
        # Socket Mode connections are authenticated by the app token; HTTP requests by signature.
        request_verification_enabled=secret is not None,
        # Listeners run where the request arrived; they ack and hand their work to AfterAck.
        process_before_response=True,
    )
    work = ThreadPoolExecutor(
        max_workers=LISTENER_WORKERS, thread_name_prefix="after-ack", initializer=behind_the_acks
    )
    after_ack = AfterAck(metrics, work, slots, services.records, services.turns.notify_error)
    register_listeners(app, services, after_ack, clients)
    return app
