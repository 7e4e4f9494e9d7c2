"""Events: replies in a wizard's thread and new messages in the app's DM, which begin a
conversation in the agent view (`message`), and the App Home tab (`app_home_opened`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt import App, BoltContext
from slack_sdk import WebClient

from bot.delivery.effects import WORKING_STATUSES, Status
from bot.services import Services
from bot.slack.attachments import attachment_from_file
from bot.slack.listeners.guard import AfterAck, guarded
from bot.slack.listeners.payloads import (
    Malformed,
    mapping_at,
    optional_list,
    optional_text,
    required_text,
    text_at,
    value_at,
)
from bot.slack.text import as_typed, without_mention_of
from bot.wizard.replies import Incoming
from flows import Attachment, Reply
from storage.sessions import SessionKey

IGNORED_SUBTYPES = frozenset(
    {"message_deleted", "bot_message", "channel_join", "channel_leave", "message_replied"}
)


def register(app: App, services: Services, after_ack: AfterAck) -> None:
    """The thread replies that answer wizards, and the Home tab that lists them. Bolt acks
    events itself once the listener returns: each one only hands its work to `after_ack`."""

    @app.event("message")
    def on_message(
        event: dict[str, Any], body: dict[str, Any], client: WebClient, context: BoltContext
    ) -> None:
        def answer(incoming: Incoming | Refusal | None) -> None:
            if isinstance(incoming, Refusal):  # an edit, or a file we could not take: owner only
                services.replies.refuse(client, incoming.key, incoming.user, incoming.text)
            elif incoming is not None:
                handle = services.replies.handle
                guarded(lambda: handle(client, incoming), incoming.key, services.turns.notify_error)

        opened = agent_view_message(event, body, context)
        if opened is not None:  # a new conversation in the app's DM (the agent view)
            key, user, text = opened
            delivery = text_at(body, "event_id") or text_at(event, "client_msg_id")

            def open_conversation() -> None:
                if services.records.first_delivery(delivery):  # Slack retries: opened once
                    services.agent_view.open(client, key, user, text)

            after_ack.submit(context, "event", open_conversation, key=key)
            return
        limit = services.max_upload_bytes
        if event_files(event):  # downloading them is I/O: after the ack, with the rest
            checked = message_incoming(event, body, client, context, limit, download=False)
            key = checked.key if isinstance(checked, Incoming) else None

            def read_and_answer() -> None:
                # A wizard's thread says it is reading the file while it is downloaded and read.
                reading = key is not None and services.store.get(key) is not None
                if reading and key is not None:
                    services.outbox.enqueue(key, [Status(WORKING_STATUSES["reading"])])
                try:
                    answer(message_incoming(event, body, client, context, limit))
                finally:
                    if reading and key is not None:
                        services.outbox.enqueue(key, [Status("")])

            after_ack.submit(
                context,
                "event",
                read_and_answer,
                team=context.team_id,
                channel=text_at(event, "channel"),
            )
            return
        incoming = message_incoming(event, body, client, context, limit)  # no I/O: no files
        if incoming is not None:
            after_ack.submit(context, "event", lambda: answer(incoming), key=incoming.key)

    @app.event("app_home_opened")
    def on_home(event: dict[str, Any], client: WebClient, context: BoltContext) -> None:
        if (optional_text(event, "tab") or "home") != "home":
            return
        user, team = required_text(event, "user"), context.team_id or ""
        after_ack.submit(
            context, "event", lambda: services.home.publish(client, user, team), team=team
        )


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
    max_upload_bytes: int,
    *,
    download: bool = True,
) -> Incoming | Refusal | None:
    """A thread reply as an Incoming (its text as typed: `as_typed`); a Refusal for edits and
    files we cannot take; None if not ours. An edit's text is never read. Malformed when a field
    it reads is of another type than Slack's; without `download`, only that is checked (the
    files are not fetched)."""
    subtype = optional_text(event, "subtype")
    if subtype in IGNORED_SUBTYPES or value_at(event, "bot_id"):
        return None
    channel = optional_text(event, "channel")
    team = context.team_id or text_at(body, "team_id") or text_at(event, "team") or ""
    if subtype == "message_changed":
        edited = value_at(event, "message")
        if not isinstance(edited, dict):
            raise Malformed("message_changed without its message")
        thread, user = optional_text(edited, "thread_ts"), optional_text(edited, "user")
        if channel and thread and user and thread != edited.get("ts") and not edited.get("bot_id"):
            text = "I only read new replies, not edits: send the corrected answer as a new reply."
            return Refusal(SessionKey(team, channel, thread), user, text)
        return None
    thread = optional_text(event, "thread_ts")
    user = optional_text(event, "user")
    files = event_files(event)
    # The text as the user typed it (a leading mention of the bot dropped); the attached files
    # are raw bytes, never unescaped.
    text = without_mention_of(context.bot_user_id, optional_text(event, "text"))
    if not (channel and thread and user) or thread == event.get("ts"):
        return None  # not a reply in a thread
    key = SessionKey(team, channel, thread)
    attachments: list[Attachment] = []
    for file in files if download else []:
        taken = attachment_from_file(client, file, max_upload_bytes)
        if isinstance(taken, str):
            return Refusal(key, user, taken)
        attachments.append(taken)
    delivery = text_at(body, "event_id") or text_at(event, "client_msg_id")
    reply = Reply(text=as_typed(text), attachments=tuple(attachments))
    return Incoming(key, user, reply, delivery)


def agent_view_message(
    event: Mapping[str, Any], body: Mapping[str, Any], context: BoltContext
) -> tuple[SessionKey, str, str] | None:
    """A person's new message in the app's DM, not in a thread (the agent view's way to begin a
    conversation): the thread it heads, its author and its text as typed; None for anything
    else (a thread reply, an edit, the bot's own message, a file without words)."""
    if optional_text(event, "channel_type") != "im" or optional_text(event, "thread_ts"):
        return None
    if optional_text(event, "subtype") or value_at(event, "bot_id"):
        return None
    channel, user, ts = (optional_text(event, name) for name in ("channel", "user", "ts"))
    text = as_typed(without_mention_of(context.bot_user_id, optional_text(event, "text")))
    if not (channel and user and ts and text.strip()):
        return None
    team = context.team_id or text_at(body, "team_id") or text_at(event, "team") or ""
    return SessionKey(team, channel, ts), user, text


def event_files(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The files of a message event; Malformed unless a list of objects."""
    files = optional_list(event, "files")
    if not all(isinstance(file, dict) for file in files):
        raise Malformed("files that are not objects")
    return [mapping_at(file) for file in files]
