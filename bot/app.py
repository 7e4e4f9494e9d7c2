"""The Bolt app: every Slack listener, thin, registered in one place.

Sync Bolt, on purpose: the work behind a reply is blocking anyway (SQL, rendering, ruff and
pyright subprocesses, the dry run), Bolt's sync App acks on `ack()` and runs the rest of a
listener in its thread pool, and the same App serves Socket Mode and a threaded WSGI server.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from bot.blocks import ANSWER_ACTION, RESULT_ACTIONS, clip, escape, parse_answer_value, sections
from bot.records import BotRecords
from bot.results import Dryrun, ScriptResults, parse_session_ref
from bot.settings import BotSettings
from bot.threads import ThreadPoster
from bot.wizard import Incoming, WizardService, attachment_from_file, notify_error
from flows import Attachment, Reply
from storage.database import create_database_engine, data_dir
from storage.sessions import SessionKey, SessionStore

log = logging.getLogger(__name__)

LISTENER_WORKERS = 32
IGNORED_SUBTYPES = frozenset(
    {"message_deleted", "bot_message", "channel_join", "channel_leave", "message_replied"}
)


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
    """The wizard service on the configured database (SQLite by default)."""
    engine = create_database_engine(settings.artbot_database_url)
    store = SessionStore(engine, schema=schema)
    records = BotRecords(engine, schema=schema)
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
        from bot.run_records import RunStore
        from bot.runs import RunService
        from runner.client import RunnerClient

        runs = RunService(
            RunStore(engine, schema=schema),
            records,
            poster,
            RunnerClient(
                settings.artbot_runner_url, settings.artbot_runner_token.get_secret_value()
            ),
            results.load_script,
            approvers=settings.approvers,
            channels=settings.runner_channels,
        )
    return WizardService(store, records, poster, results, runs=runs)


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
    register_listeners(app, service, settings)
    return app


def register_listeners(app: App, service: WizardService, settings: BotSettings) -> None:
    """Every listener of the bot, thin: parse what Slack sent, hand it to the service."""

    @app.command("/train-rl")
    def on_train_rl(
        ack: Ack, command: dict[str, Any], client: WebClient, context: BoltContext, respond: Respond
    ) -> None:
        ack()
        text = (command.get("text") or "").strip()
        team = command.get("team_id") or context.team_id or ""
        user = command["user_id"]
        guarded(
            lambda: _start_or_list(
                service, client, respond, team, command["channel_id"], user, text
            )
        )

    @app.event("message")
    def on_message(
        event: dict[str, Any], body: dict[str, Any], client: WebClient, context: BoltContext
    ) -> None:
        incoming = message_incoming(event, body, client, context, settings)
        if incoming is None:
            return
        if isinstance(incoming, Refusal):  # an edit, or a file we could not take: owner only
            refusal = incoming
            stored = service.store.get(refusal.key)
            if stored is not None and stored.owner == refusal.user:
                service.poster.ephemeral(client, refusal.key, refusal.user, refusal.text)
            return
        guarded(lambda: service.handle(client, incoming), client, incoming.key, service)

    @app.action(re.compile(rf"^{ANSWER_ACTION}:\d+$"))
    def on_answer_click(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient
    ) -> None:
        ack()
        parsed = parse_answer_value(action.get("value") or "")
        key = action_key(body)
        if parsed is None or key is None:
            return
        step_id, value = parsed
        user = body["user"]["id"]
        delivery = f"action:{user}:{action.get('action_ts') or body.get('trigger_id')}"
        incoming = Incoming(key, user, Reply.button(step_id, value), delivery)
        guarded(lambda: service.handle(client, incoming), client, key, service)

    @app.action(re.compile(rf"^({'|'.join(RESULT_ACTIONS)})$"))
    def on_result_click(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient
    ) -> None:
        ack()
        key = parse_session_ref(action.get("value") or "")
        if key is None:
            return
        user = body["user"]["id"]
        delivery = f"action:{user}:{action.get('action_ts') or body.get('trigger_id')}"
        guarded(
            lambda: service.result_action(client, key, user, action["action_id"], delivery),
            client,
            key,
            service,
        )

    @app.action("run_cancel")
    def on_run_cancel(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient
    ) -> None:
        ack()
        runs = service.runs
        if runs is None or not (action.get("value") or "").isdigit():
            return
        user = body["user"]["id"]
        guarded(lambda: runs.cancel(client, int(action["value"]), user))

    @app.action(re.compile(r"^run_fix:(retry_lower_gpu_memory|resume)$"))
    def on_run_fix(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient
    ) -> None:
        ack()
        runs = service.runs
        if runs is None or not (action.get("value") or "").isdigit():
            return
        from runner.schemas import FixAction

        fix = FixAction(action["action_id"].split(":", 1)[1])
        user = body["user"]["id"]
        delivery = f"action:{user}:{action.get('action_ts') or body.get('trigger_id')}"
        if not service.records.first_delivery(delivery):
            return
        guarded(lambda: runs.retry(client, int(action["value"]), fix, user))

    @app.event("app_home_opened")
    def on_home(event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        if event.get("tab", "home") != "home":
            return
        user = event["user"]
        guarded(
            lambda: client.views_publish(
                user_id=user, view=home_view(service, user, context.team_id or "")
            )
        )


def guarded(
    work: Callable[[], object],
    client: WebClient | None = None,
    key: SessionKey | None = None,
    service: WizardService | None = None,
) -> None:
    """Run a listener's work after its ack; never let it raise (Bolt can lose a fast ack)."""
    try:
        work()
    except Exception:
        log.exception("listener failed")
        if client is not None and key is not None and service is not None:
            notify_error(client, key, service.poster)


def _start_or_list(
    service: WizardService,
    client: WebClient,
    respond: Respond,
    team: str,
    channel: str,
    user: str,
    text: str,
) -> None:
    # Answers to the command go through its response_url: they work even where the bot is not a member.
    if text.lower() == "list":
        respond(text=sessions_text(service, user, team), response_type="ephemeral")
        return
    if text.lower() == "runs":
        runs = (
            service.runs.runs_text(user, team)
            if service.runs
            else "No GPU runner is configured for this bot."
        )
        respond(text=runs, response_type="ephemeral")
        return
    if text.lower() in ("help", "-h", "--help"):
        respond(
            text="`/train-rl [what the agent should get better at]` starts the wizard in a thread. "
            "`/train-rl list` lists your wizards, `/train-rl runs` your training runs.",
            response_type="ephemeral",
        )
        return
    try:
        service.start(client, team, channel, user, text)
    except SlackApiError as error:
        if error.response.get("error") not in ("not_in_channel", "channel_not_found"):
            raise
        respond(
            text="I can't post in this channel yet: invite me with `/invite @artbot`, then run `/train-rl` again.",
            response_type="ephemeral",
        )


def sessions_text(service: WizardService, user: str, team: str) -> str:
    sessions = service.sessions_of(user, team)
    if not sessions:
        return "You have no wizards yet. Start one with `/train-rl`."
    lines = [f"Your wizards ({len(sessions)}):"]
    for stored in sessions[:20]:
        state = "expired" if stored.expired else stored.session.status
        task = stored.session.answers.get("task") or "(task not given yet)"
        lines.append(
            f"• <#{stored.key.channel}> {escape(clip(str(task), 80))}: {state}, updated {stored.updated_at:%Y-%m-%d %H:%M} UTC"
        )
    return "\n".join(lines)


def home_view(service: WizardService, user: str, team: str) -> dict[str, Any]:
    """The App Home tab: the user's wizards (100 blocks at most)."""
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Your RL training wizards"}},
        *sections("Start one in any channel with `/train-rl what the agent should get better at`."),
        {"type": "divider"},
        *sections(sessions_text(service, user, team)),
    ]
    return {"type": "home", "blocks": blocks[:100]}


def action_key(body: Mapping[str, Any]) -> SessionKey | None:
    """The wizard a clicked button belongs to: the thread of the message it sits on."""
    message = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
        "channel_id"
    )
    thread = message.get("thread_ts") or (body.get("container") or {}).get("thread_ts")
    team = (body.get("team") or {}).get("id") or body.get("user", {}).get("team_id")
    if not (channel and thread and team):
        return None
    return SessionKey(team, channel, str(thread))


@dataclass(frozen=True)
class Refusal:
    """Something in a thread that is not an answer, and what to tell its author."""

    key: SessionKey
    user: str
    text: str


def message_incoming(
    event: Mapping[str, Any],
    body: Mapping[str, Any],
    client: WebClient,
    context: BoltContext,
    settings: BotSettings,
) -> Incoming | Refusal | None:
    """A thread reply as an Incoming; a Refusal for edits and files we cannot take; None if not ours."""
    subtype = event.get("subtype")
    if subtype in IGNORED_SUBTYPES or event.get("bot_id"):
        return None
    channel = event.get("channel")
    team = context.team_id or body.get("team_id") or event.get("team") or ""
    if subtype == "message_changed":
        edited = event.get("message") or {}
        thread, user = edited.get("thread_ts"), edited.get("user")
        if channel and thread and user and thread != edited.get("ts") and not edited.get("bot_id"):
            text = "I only read new replies, not edits: send the corrected answer as a new reply."
            return Refusal(SessionKey(team, channel, str(thread)), user, text)
        return None
    thread = event.get("thread_ts")
    user = event.get("user")
    if not (channel and thread and user) or thread == event.get("ts"):
        return None  # not a reply in a thread
    key = SessionKey(team, channel, str(thread))
    attachments: list[Attachment] = []
    for file in event.get("files") or []:
        taken = attachment_from_file(client, file, settings.artbot_max_upload_bytes)
        if isinstance(taken, str):
            return Refusal(key, user, taken)
        attachments.append(taken)
    delivery = body.get("event_id") or event.get("client_msg_id")
    return Incoming(
        key, user, Reply(text=event.get("text") or "", attachments=tuple(attachments)), delivery
    )
