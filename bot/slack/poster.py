"""Posting into a wizard's thread now, from the caller's thread, for the two things the outbox
(bot.delivery.outbox) cannot carry: ephemeral notes and a run's status card.

Ephemerals (chat.postEphemeral) are not durable by nature: Slack shows them once, to one user,
in the client they have open, and drops them when that client reloads; a copy delivered
minutes later by a retrying worker would land out of context or be lost all the same. They
answer a click or a reply at once or not at all, so they go directly. A run's status card is
posted directly because its ts must go on the run's row at once (bot.runs.service).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.blocks import SlackMessage
from bot.slack.records import SlackRecords
from storage.sessions import SessionKey

log = logging.getLogger(__name__)


class ThreadPoster:
    """Says things in one kind of place: a wizard's thread. Knows nothing of the engine's rules."""

    def __init__(self, records: SlackRecords) -> None:
        self._records = records

    def post(self, client: WebClient, key: SessionKey, message: SlackMessage) -> str | None:
        """Post into the thread; the new message's ts (None if Slack refused it)."""
        try:
            response = client.chat_postMessage(
                channel=key.channel,
                thread_ts=str(key.thread),  # a float "succeeds" but never shows in the thread
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as error:
            log.warning("chat.postMessage failed in %s: %s", key, error.response.get("error"))
            return None
        return str(response.get("ts") or "") or None

    def ephemeral(self, client: WebClient, key: SessionKey, user: str, text: str) -> None:
        """Show `text` to `user` alone, now (see the module's note on why not the outbox)."""
        try:
            client.chat_postEphemeral(
                channel=key.channel, user=user, thread_ts=key.thread, text=text
            )
        except SlackApiError as error:
            log.warning("chat.postEphemeral failed in %s: %s", key, error.response.get("error"))

    def open_modal(
        self,
        client: WebClient,
        key: SessionKey,
        user: str,
        trigger_id: str,
        view: dict[str, Any],
        *,
        again: str,
    ) -> None:
        """Open `view` with the click's trigger, now (it lasts 3 seconds, once); when Slack
        refuses (the trigger ran out or was used), tell `user` alone `again`."""
        try:
            client.views_open(trigger_id=trigger_id, view=view)
        except SlackApiError as error:
            log.warning(
                "views.open of %s failed in %s: %s",
                view.get("callback_id"),
                key,
                error.response.get("error"),
            )
            self.ephemeral(client, key, user, again)
