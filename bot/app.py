"""The composition root: the services built on the configured database, and the Bolt app with
every listener (bot/slack/listeners) registered on it.

Ack first, in the request's own path: the app runs with `process_before_response=True`, so Bolt
calls each listener on the thread that received the request (uvicorn's event loop, or Socket
Mode's); the listener acks, parses, and hands the work to `AfterAck`'s pool of LISTENER_WORKERS
threads, of which LISTENER_SLOTS at most compute at once while the others wait on Slack
(bot/process/work_slots.py). A saturated pool delays turns, never acks. (Without
`process_before_response` Bolt runs every listener in its executor and polls for the ack, so
acks queued behind slow work: the collapse issue 9 saw at 200 users.)

Sync Bolt, on purpose: the work behind a reply is blocking anyway (SQL, rendering, ruff and
pyright subprocesses, the dry run); the async app would need every one of them in a thread.
See the README's "Serving" section for the two measured side by side.
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from assistant import Assistant
from bot.delivery.outbox import Outbox
from bot.delivery.worker import OutboxWorker
from bot.migrations import BOT_DATABASE
from bot.process.metrics import BotMetrics
from bot.process.shards import ALONE, Shard
from bot.process.work_slots import WorkSlots, behind_the_acks
from bot.runs.approval import ApprovalPolicy
from bot.settings import BotSettings
from bot.slack.listeners import register_listeners
from bot.slack.listeners.guard import RECEIVED_AT, AfterAck
from bot.slack.listeners.payloads import answered_unless_forged
from bot.slack.poster import ThreadPoster
from bot.slack.records import SlackRecords
from bot.wizard.script_results import Dryrun, ScriptResults
from bot.wizard.service import FLOWS, WizardService
from bot.workspaces.installations import (
    BOT_SCOPES,
    STATE_EXPIRY_S,
    ClientFor,
    InstallationStore,
    SlackClients,
    StateStore,
    Workspaces,
    check_stored_tokens,
    schema_engine,
    stored_token_cipher,
    web_client_maker,
)
from bot.workspaces.token_keys import TokenCipher
from checks.dryrun import dryrun_script
from isolation.sandbox import Sandbox
from storage import migrations
from storage.database import create_database_engine, data_dir
from storage.sessions import SessionStore

log = logging.getLogger(__name__)

LISTENER_WORKERS = 64
"""Threads for the listeners' work after their acks (SQL, rendering, Slack calls): enough for
turns that wait on Slack (about 100 ms a call, two calls a turn) to overlap."""
LISTENER_SLOTS = 8
"""Of those, how many compute at once (the rest wait on Slack, or for a slot): more would
fight over the GIL with the event loop that acks. With several worker processes (`artbot serve
--workers N`) they share these: LISTENER_SLOTS // N each (at least MIN_SLOTS). At 200 users on 2
cores, 2 workers of 8 slots acked at p99 600 ms on PostgreSQL, 2 of 4 at 250-270 ms, with more
turns per second (benchmarks/bot_turns.py, two paired runs): more threads computing than cores
keep the event loops that ack waiting for a core."""
MIN_SLOTS = 2
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


def build_service(
    settings: BotSettings,
    *,
    executor: ThreadPoolExecutor | None = None,
    dryrun: Dryrun | str | None = "default",
    schema: str | None = None,
    assistant: Assistant | None = None,
    shard: Shard = ALONE,
    sandbox: Sandbox | None = None,
) -> WizardService:
    """The wizard service on the configured database (SQLite by default), migrated first;
    `assistant` (assistant_from_environment) reads typed replies first when given; its share of
    the work slots is `shard`'s (one worker of several computes on fewer threads).

    The stored Slack tokens' cipher comes first (OAuth: ARTBOT_TOKEN_KEYS, or the key file,
    generated if need be), for the migrations to encrypt any plaintext token with.

    MigrationRefused (SchemaMismatch among them) or SQLAlchemyError when the database cannot be
    brought to the newest schema; TokenKeyError when the keys do not read the stored tokens.
    """
    engine = create_database_engine(settings.artbot_database_url)
    oauth = settings.multi_workspace
    cipher = stored_token_cipher(settings.artbot_token_keys, engine, schema, oauth=oauth)
    migrations.upgrade(
        BOT_DATABASE,
        settings.artbot_database_url,
        schema=schema,
        attributes={"token_cipher": cipher},
    )
    if oauth and cipher is not None:
        tokens = check_stored_tokens(schema_engine(engine, schema), cipher)
        _log_token_keys(cipher, tokens)
    store = SessionStore(engine, schema=schema)
    records = SlackRecords(engine, schema=schema)
    poster = ThreadPoster(records)
    scripts_dir = (
        Path(settings.artbot_scripts_dir) if settings.artbot_scripts_dir else data_dir() / "scripts"
    )
    sandbox = sandbox or Sandbox.for_host(allow_unconfined=settings.artbot_allow_unsandboxed_code)
    kwargs: dict[str, Any] = {"sandbox": sandbox}
    if not settings.artbot_dryrun:
        kwargs["dryrun"] = None
    elif dryrun != "default":
        kwargs["dryrun"] = dryrun
    elif not sandbox.may_run:
        kwargs["dryrun"] = None  # fail closed: the card says why
    else:
        kwargs["dryrun"] = functools.partial(dryrun_script, sandbox=sandbox)
    outbox = Outbox(engine, schema=schema)
    results = ScriptResults(
        outbox, scripts_dir, executor or ThreadPoolExecutor(max_workers=2), **kwargs
    )
    runs = comparer = trier = None
    if settings.artbot_runner_url and settings.artbot_runner_token:
        # Imported only with a runner: the plots need matplotlib, the client httpx.
        from bot.runs.compare import RunComparer
        from bot.runs.service import RunService
        from bot.runs.store import RunStore
        from bot.runs.try_limits import TryLimits, TryPool
        from bot.runs.tryit import ModelTrier
        from runner.client import RunnerClient

        runner_token = settings.artbot_runner_token.get_secret_value()
        runner = RunnerClient(settings.artbot_runner_url, runner_token)
        runs = RunService(
            RunStore(engine, schema=schema),
            records,
            poster,
            outbox,
            runner,
            results.load_script,
            store,
            policy=ApprovalPolicy.from_settings(settings),
        )
        comparer = RunComparer(runs.runs, store, FLOWS)
        wandb_key = settings.wandb_api_key.get_secret_value() if settings.wandb_api_key else None
        trier = ModelTrier(
            runs.runs,
            store,
            poster,
            outbox,
            limits=TryLimits(
                settings.artbot_try_per_user,
                settings.artbot_try_per_workspace,
                settings.artbot_try_window_s,
            ),
            pool=TryPool(settings.artbot_try_threads, settings.artbot_try_in_flight_per_workspace),
            serverless_api_key=wandb_key,
            runner=runner,
            runner_token=runner_token,
            timeout_s=settings.artbot_try_timeout_s,
            start_timeout_s=settings.artbot_try_start_timeout_s,
        )
    return WizardService(
        store,
        records,
        poster,
        results,
        outbox,
        slots=WorkSlots(max(MIN_SLOTS, LISTENER_SLOTS // shard.count)),
        runs=runs,
        max_upload_bytes=settings.artbot_max_upload_bytes,
        assistant=assistant,
        workspaces=Workspaces(engine, schema=schema, token_cipher=cipher),
        comparer=comparer,
        trier=trier,
    )


def _log_token_keys(cipher: TokenCipher, tokens: int) -> None:
    if cipher.generated:
        log.warning(
            "generated the key for the Slack tokens at rest: %s (mode 0600). Back it up: without "
            "it the stored tokens cannot be read and every workspace must install the app again. "
            "Or set ARTBOT_TOKEN_KEYS (README: Tokens at rest)",
            cipher.source,
        )
    else:
        log.info(
            "Slack tokens at rest: %d stored, encrypted with %d key(s) from %s",
            tokens,
            cipher.key_count,
            cipher.source,
        )


def start_outbox(
    service: WizardService,
    client_for: ClientFor,
    metrics: BotMetrics | None = None,
    shard: Shard = ALONE,
) -> OutboxWorker:
    """Deliver the service's outbox, each thread through its team's client (`client_for`), from
    now on (what an earlier process left undelivered first), its depth and retries counted in
    `metrics`. One per database, or per shard of it: the serve process's."""
    worker = OutboxWorker(
        service.outbox,
        client_for,
        generate=service.generate,
        on_retry=metrics.outbox_retries.inc if metrics is not None else None,
        shard=shard,
    )
    if metrics is not None:
        metrics.watch_outbox(service.outbox.depth)
    return worker.start()


def create_app(
    settings: BotSettings,
    service: WizardService,
    *,
    client: WebClient | None = None,
    metrics: BotMetrics | None = None,
) -> ArtbotApp:
    """A Bolt App wired to `service`, talking to Slack (or SLACK_API_URL) with retries on 429;
    its metrics (acks, turns, sessions by state) in `app.metrics`.

    One workspace (SLACK_BOT_TOKEN): every request and `app.client_for` use that token. OAuth
    (SLACK_CLIENT_ID): Bolt serves INSTALL_PATH and REDIRECT_PATH, keeps each installation in
    the bot's database, and finds each request's token there; so does `app.client_for`.
    """
    secret = settings.slack_signing_secret
    metrics = metrics or BotMetrics()
    metrics.watch_sessions(service.store.count_by_status)
    slots = service.slots
    make_client = web_client_maker(slots, **_client_options(settings))
    oauth: dict[str, Any] = {}
    if settings.multi_workspace:
        assert settings.slack_client_id and settings.slack_client_secret  # settings check both
        workspaces = service.workspaces
        if workspaces is None:
            raise ValueError("OAuth needs the service's workspaces (build_service makes them)")
        if workspaces.token_cipher is None:
            raise ValueError("OAuth needs the tokens' cipher (build_service makes it)")
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
    register_listeners(app, service, AfterAck(metrics, work, slots), clients)
    return app
