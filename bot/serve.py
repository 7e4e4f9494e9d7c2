"""`artbot serve`: the Slack bot over HTTP (a threaded WSGI server) or Socket Mode."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.error import BoltError
from sqlalchemy.exc import SQLAlchemyError

from bot.app import build_service, create_app, start_outbox
from bot.settings import SettingsError, load_settings
from bot.wizard import WizardService
from storage import migrations
from storage.database import database_problem

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
EXPIRY_INTERVAL_S = 600.0

StartResponse = Callable[..., Any]


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """One thread per request: Slack must get its ack within 3 seconds while others work."""

    daemon_threads = True
    # Python's default backlog of 5 resets connections when Slack sends a burst.
    request_queue_size = 128


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


def wsgi_application(app: App) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """Bolt's WSGI handler at /slack/events, plus a health probe at /healthz."""
    slack = SlackRequestHandler(app, path=EVENTS_PATH)

    def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        return slack(environ, start_response)

    return application


def make_http_server(app: App, host: str, port: int) -> WSGIServer:
    """A server for `app` bound to host:port (port 0 picks a free one); call serve_forever()."""
    return make_server(
        host,
        port,
        wsgi_application(app),
        server_class=ThreadingWSGIServer,
        handler_class=_QuietHandler,
    )


def keep_tidy(
    service: WizardService, app: App, idle: timedelta, stop: threading.Event
) -> threading.Thread:
    """Every EXPIRY_INTERVAL_S: expire idle sessions (a note in each thread), forget deliveries."""

    def loop() -> None:
        while not stop.wait(EXPIRY_INTERVAL_S):
            try:
                service.tidy(app.client, idle)
            except Exception:
                log.exception("periodic expiry failed")

    thread = threading.Thread(target=loop, name="artbot-expiry", daemon=True)
    thread.start()
    return thread


def run_serve_command(args: argparse.Namespace) -> int:
    """Serve until interrupted; exit 2 with a clear message when the settings cannot work."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_settings()
    except SettingsError as error:
        print(error, file=sys.stderr)
        return 2
    try:
        service = build_service(settings)
    except migrations.SchemaMismatch as error:
        print(f"Cannot start artbot: {error}", file=sys.stderr)
        return 2
    except SQLAlchemyError as error:
        print(f"Cannot start artbot: the database: {database_problem(error)}", file=sys.stderr)
        return 2
    try:
        app = create_app(settings, service)
    except BoltError as error:
        print(f"Cannot start artbot: Slack refused the bot token ({error}).", file=sys.stderr)
        return 2
    except OSError as error:  # URLError included: Slack (or SLACK_API_URL) is unreachable
        where = settings.slack_api_url or "https://slack.com/api/"
        print(f"Cannot start artbot: cannot reach Slack at {where} ({error}).", file=sys.stderr)
        return 2
    stop = threading.Event()
    outbox = start_outbox(service, app.client)
    keep_tidy(service, app, timedelta(hours=settings.artbot_session_idle_hours), stop)
    if service.runs is not None:
        from bot.runs.follower import RunFollower

        RunFollower(service.runs, app.client, settings.artbot_runner_poll_s).start()
        log.info("following training runs on %s", settings.artbot_runner_url)
    try:
        if settings.slack_app_token is not None:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            log.info("artbot serving over Socket Mode")
            SocketModeHandler(app, settings.slack_app_token.get_secret_value()).start()
        else:
            port = args.port or settings.port
            server = make_http_server(app, args.host, port)
            log.info("artbot serving HTTP on %s:%d%s", args.host, server.server_port, EVENTS_PATH)
            server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        outbox.stop()
    return 0
