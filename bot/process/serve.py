"""`artbot serve`: the Slack bot over HTTP or Socket Mode, under uvicorn either way.

HTTP mode: uvicorn serves `bot.slack.asgi.BotWeb` (Bolt at /slack/events, /healthz, /metrics) on
$PORT. Socket Mode: Bolt's Socket Mode client talks to Slack, and uvicorn serves /healthz
(database and socket) and /metrics on $PORT all the same, for the container's HEALTHCHECK.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import SQLAlchemyError

from assistant import assistant_for
from bot.app import ArtbotApp, create_app
from bot.process.hardening import seal_secrets, users_code_sandbox
from bot.process.health import HealthCheck
from bot.process.log_fields import configure_logging
from bot.process.router import BotRouter
from bot.process.shards import ALONE, Shard
from bot.process.workers import WorkerFailed, WorkerProcesses
from bot.runs.approval import ApprovalPolicy
from bot.services import Services, build_services, start_outbox
from bot.settings import MAX_WORKERS, BotSettings, SettingsError, load_serve_settings
from bot.slack.asgi import EVENTS_PATH, BotWeb
from bot.workspaces.token_keys import TokenKeyError
from runner.uvicorn_server import GracefulServer
from storage import migrations
from storage.database import database_problem

if TYPE_CHECKING:
    from bot.runs.follower import RunFollower
    from bot.runs.service import RunService

__all__ = ["EVENTS_PATH", "BotServer", "run_serve_command", "web_for"]

log = logging.getLogger(__name__)
EXPIRY_INTERVAL_S = 600.0


def web_for(
    app: ArtbotApp, services: Services, socket_connected: Callable[[], bool] | None = None
) -> BotWeb:
    """The ASGI app: Bolt at /slack/events unless in Socket Mode (`socket_connected` given),
    and at the install pages with OAuth."""
    health = HealthCheck(services.store, socket_connected, sandbox=services.results.sandbox)
    return BotWeb(health, app.metrics, app, events=socket_connected is None)


def _config(
    web: BotWeb | BotRouter, host: str, port: int, uds: str | None = None
) -> uvicorn.Config:
    return uvicorn.Config(
        web,
        host=host,
        port=port,
        uds=uds,
        # Our own key=value lines (bot.process.log_fields), and no line per request: acks are
        # counted in /metrics instead.
        log_config=None,
        access_log=False,
        lifespan="off",
        # Slack sends bursts; the default backlog (2048) and no concurrency cap keep them.
        timeout_graceful_shutdown=5,
    )


class BotServer:
    """The bot's web app under uvicorn on a thread (port 0: a free one); `with` starts and
    stops it. Tests and benchmarks use it; `artbot serve` runs the same server in its main
    thread."""

    def __init__(self, web: BotWeb, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = GracefulServer(_config(web, host, port))
        self._thread = threading.Thread(target=self._server.run, name="bot-http", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> BotServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the bot's HTTP server did not start")
            time.sleep(0.01)
        servers: list[Any] = list(self._server.servers)
        self.port = int(servers[0].sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def __enter__(self) -> BotServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def keep_tidy(
    services: Services, idle: timedelta, stop: threading.Event, shard: Shard = ALONE
) -> threading.Thread:
    """Every EXPIRY_INTERVAL_S: expire idle sessions of `shard` (a note in each thread), forget
    deliveries."""

    def loop() -> None:
        while not stop.wait(EXPIRY_INTERVAL_S):
            try:
                services.expiry.tidy(idle, shard)
            except Exception:
                log.exception("periodic expiry failed")

    thread = threading.Thread(target=loop, name="artbot-expiry", daemon=True)
    thread.start()
    return thread


def leave_with_the_router(stop: threading.Event) -> threading.Thread:
    """A worker (`--uds`) stops itself (SIGTERM: as the router would) once the process that
    started it is gone, killed without a chance to stop its workers: no orphan keeps serving."""
    router = os.getppid()

    def watch() -> None:
        while not stop.wait(1.0):
            if os.getppid() != router:
                log.error("the router (pid %d) is gone; this worker stops", router)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    thread = threading.Thread(target=watch, name="artbot-router-watch", daemon=True)
    thread.start()
    return thread


def _follow_runs(
    runs: RunService, app: ArtbotApp, settings: BotSettings, shard: Shard
) -> RunFollower:
    """Start following the runs: one events long-poll per run's job (bot.runs.follower)."""
    from bot.runs.follower import RunFollower
    from runner.client import AsyncRunnerClient

    assert settings.artbot_runner_url is not None and settings.artbot_runner_token is not None
    runner = AsyncRunnerClient(
        settings.artbot_runner_url, settings.artbot_runner_token.get_secret_value()
    )
    follower = RunFollower(
        runs, app.client_for, runner, sweep_s=settings.artbot_runner_poll_s, shard=shard
    )
    log.info("following training runs on %s", settings.artbot_runner_url)
    return follower.start()


def freeze_start_up_objects() -> None:
    """Leave what start-up made (modules, the flows, templates, the app) out of every later
    garbage collection: without it a full collection walked all of them, and stopped the whole
    process for 80-95 ms, every few seconds under load (the 20-user benchmark's turn p99 was
    those pauses: all 20 turns in flight at once waited ~100 ms). They live as long as the
    process anyway."""
    gc.collect()
    gc.freeze()


def run_serve_command(args: argparse.Namespace) -> int:
    """Serve until interrupted; exit 2 with a clear message when the settings cannot work."""
    configure_logging()
    seal_secrets(os.environ)
    try:
        serve_settings = load_serve_settings()
        shard = Shard.parse(args.shard) if args.shard else ALONE
    except (SettingsError, ValueError) as error:
        print(error, file=sys.stderr)
        return 2
    settings = serve_settings.bot
    workers = args.workers if args.workers is not None else settings.artbot_workers
    if not 1 <= workers <= MAX_WORKERS:
        print(f"Cannot start artbot: --workers must be 1 to {MAX_WORKERS}.", file=sys.stderr)
        return 2
    if args.shard is None and settings.runner_configured:  # said once, not by every worker
        log.log(*ApprovalPolicy.from_settings(settings).start_up_line())
    if args.shard is None and workers != 1:
        return _serve_through_workers(args, settings, workers)
    sandbox = users_code_sandbox(allow_unconfined=settings.artbot_allow_unsandboxed_code)
    assistant = (  # None: no ARTBOT_LLM_MODEL
        assistant_for(serve_settings.assistant, sandbox)
        if serve_settings.assistant is not None
        else None
    )
    try:
        services = build_services(settings, assistant=assistant, shard=shard, sandbox=sandbox)
    except (migrations.MigrationRefused, TokenKeyError) as error:
        print(f"Cannot start artbot: {error}", file=sys.stderr)
        return 2
    except SQLAlchemyError as error:
        print(f"Cannot start artbot: the database: {database_problem(error)}", file=sys.stderr)
        return 2
    try:
        app = create_app(settings, services)
    except BoltError as error:
        print(f"Cannot start artbot: Slack refused the bot token ({error}).", file=sys.stderr)
        return 2
    except OSError as error:  # URLError included: Slack (or SLACK_API_URL) is unreachable
        where = settings.slack_api_url or "https://slack.com/api/"
        print(f"Cannot start artbot: cannot reach Slack at {where} ({error}).", file=sys.stderr)
        return 2
    stop = threading.Event()
    if args.uds:
        leave_with_the_router(stop)
    outbox = start_outbox(services, app.client_for, app.metrics, shard)
    keep_tidy(services, timedelta(hours=settings.artbot_session_idle_hours), stop, shard)
    follower = None
    if services.runs is not None:
        follower = _follow_runs(services.runs, app, settings, shard)
    port = args.port or settings.port
    socket_mode = None
    try:
        if settings.slack_app_token is not None:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            socket_mode = SocketModeHandler(app, settings.slack_app_token.get_secret_value())
            try:
                socket_mode.connect()
            except SlackApiError as error:
                reason = error.response.get("error") if error.response else error
                print(f"Cannot start artbot: Socket Mode refused ({reason}).", file=sys.stderr)
                return 2
            web = web_for(app, services, socket_mode.client.is_connected)
            log.info("artbot serving over Socket Mode; /healthz and /metrics on port %d", port)
        else:
            web = web_for(app, services)
            if args.uds:
                log.info("artbot worker %s serving on %s", shard, args.uds)
            else:
                log.info("artbot serving HTTP on %s:%d%s", args.host, port, EVENTS_PATH)
        if app.oauth_flow is not None and not args.uds:
            log.info("installs: https://YOUR-HOST%s (port %d)", app.oauth_flow.install_path, port)
        freeze_start_up_objects()
        GracefulServer(_config(web, args.host, port, args.uds)).run()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        if follower is not None:
            follower.stop()  # its long-polls are dropped, not waited for
        outbox.stop()
        if socket_mode is not None:
            socket_mode.close()
        services.store.close()
    return 0


def _serve_through_workers(args: argparse.Namespace, settings: BotSettings, count: int) -> int:
    """`--workers N`: N bot processes, each a shard of the channels on a Unix socket, behind the
    router (`bot.process.router`) on the port; the workers are watched and restarted
    (`bot.process.workers`)."""
    if settings.slack_app_token is not None:
        print(
            "Cannot start artbot: Socket Mode runs one process; unset ARTBOT_WORKERS or pass "
            "--workers 1 (several workers need HTTP mode, with no SLACK_APP_TOKEN).",
            file=sys.stderr,
        )
        return 2
    port = args.port or settings.port
    with tempfile.TemporaryDirectory(prefix="artbot-workers-") as folder:
        workers = WorkerProcesses(count, Path(folder))
        try:
            workers.start()
        except WorkerFailed as failure:
            print(f"Cannot start artbot: {failure} (its own message is above).", file=sys.stderr)
            return 2
        router = BotRouter(workers.sockets)
        log.info(
            "artbot serving HTTP on %s:%d%s through %d workers", args.host, port, EVENTS_PATH, count
        )
        try:
            freeze_start_up_objects()
            GracefulServer(_config(router, args.host, port)).run()
        except KeyboardInterrupt:
            pass
        finally:
            workers.stop()
    return 0
