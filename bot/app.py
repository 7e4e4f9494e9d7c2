"""The composition root: the services built on the configured database, and the Bolt app with
every listener (bot/listeners) registered on it.

Sync Bolt, on purpose: the work behind a reply is blocking anyway (SQL, rendering, ruff and
pyright subprocesses, the dry run), Bolt's sync App acks on `ack()` and runs the rest of a
listener in its thread pool, and the same App serves Socket Mode and a threaded WSGI server.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from bot.listeners import register_listeners
from bot.migrations import BOT_DATABASE
from bot.outbox import Outbox
from bot.outbox_worker import OutboxWorker
from bot.script_results import Dryrun, ScriptResults
from bot.settings import BotSettings
from bot.slack_records import SlackRecords
from bot.threads import ThreadPoster
from bot.wizard import WizardService
from storage import migrations
from storage.database import create_database_engine, data_dir
from storage.sessions import SessionStore

LISTENER_WORKERS = 32


def web_client(settings: BotSettings) -> WebClient:
    """The Web API client: SLACK_API_URL if set; 429s and dropped connections retried."""
    kwargs: dict[str, Any] = {}
    if settings.slack_api_url:
        kwargs["base_url"] = settings.slack_api_url
    return WebClient(
        token=settings.slack_bot_token.get_secret_value(),
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=2),
            RateLimitErrorRetryHandler(max_retry_count=3),
        ],
        **kwargs,
    )


def build_service(
    settings: BotSettings,
    *,
    executor: ThreadPoolExecutor | None = None,
    dryrun: Dryrun | str | None = "default",
    schema: str | None = None,
) -> WizardService:
    """The wizard service on the configured database (SQLite by default), migrated first.

    SchemaMismatch or SQLAlchemyError when the database cannot be brought to the newest schema.
    """
    migrations.upgrade(BOT_DATABASE, settings.artbot_database_url, schema=schema)
    engine = create_database_engine(settings.artbot_database_url)
    store = SessionStore(engine, schema=schema)
    records = SlackRecords(engine, schema=schema)
    poster = ThreadPoster(records)
    scripts_dir = (
        Path(settings.artbot_scripts_dir) if settings.artbot_scripts_dir else data_dir() / "scripts"
    )
    kwargs: dict[str, Any] = {}
    if not settings.artbot_dryrun:
        kwargs["dryrun"] = None
    elif dryrun != "default":
        kwargs["dryrun"] = dryrun
    results = ScriptResults(
        poster, scripts_dir, executor or ThreadPoolExecutor(max_workers=2), **kwargs
    )
    runs = None
    if settings.artbot_runner_url and settings.artbot_runner_token:
        # Imported only with a runner: the plots need matplotlib, the client httpx.
        from bot.runs.service import RunService
        from bot.runs.store import RunStore
        from runner.client import RunnerClient

        runs = RunService(
            RunStore(engine, schema=schema),
            records,
            poster,
            RunnerClient(
                settings.artbot_runner_url, settings.artbot_runner_token.get_secret_value()
            ),
            results.load_script,
            store,
            approvers=settings.approvers,
            channels=settings.runner_channels,
        )
    return WizardService(
        store,
        records,
        poster,
        results,
        Outbox(engine, schema=schema),
        runs=runs,
        max_upload_bytes=settings.artbot_max_upload_bytes,
    )


def start_outbox(service: WizardService, client: WebClient) -> OutboxWorker:
    """Deliver the service's outbox through `client` from now on (what an earlier process left
    undelivered first). One per database: the serve process's."""
    return OutboxWorker(service.outbox, service.records, client, generate=service.generate).start()


def create_app(
    settings: BotSettings, service: WizardService, *, client: WebClient | None = None
) -> App:
    """A Bolt App wired to `service`, talking to Slack (or SLACK_API_URL) with retries on 429."""
    secret = settings.slack_signing_secret
    app = App(
        client=client or web_client(settings),
        signing_secret=secret.get_secret_value() if secret else None,
        # Socket Mode connections are authenticated by the app token; HTTP requests by signature.
        request_verification_enabled=secret is not None,
        # Acks wait for a free worker: Bolt's default 5 is too few for a busy workspace.
        listener_executor=ThreadPoolExecutor(
            max_workers=LISTENER_WORKERS, thread_name_prefix="bolt"
        ),
    )
    register_listeners(app, service)
    return app
