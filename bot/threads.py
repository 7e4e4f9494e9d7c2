"""Posting into a wizard's thread now, from the caller's thread: the script's results, run
notes, ephemeral notes. What a wizard turn says goes through the outbox instead (bot.outbox),
saved with the turn."""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import SlackMessage, answered_message, text_message
from bot.slack_records import SlackRecords
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

    def offer(
        self, client: WebClient, key: SessionKey, step_id: str, text: str, message: SlackMessage
    ) -> None:
        """Post `message`, which asks `step_id` (as `text`), and remember it, so that `retire`
        can take its buttons away and show what became of it."""
        ts = self.post(client, key, message)
        if ts:
            self._records.remember_question(key, ts, step_id, text)

    def post_text(self, client: WebClient, key: SessionKey, text: str) -> str | None:
        """Post mrkdwn `text` into the thread (see `post`)."""
        return self.post(client, key, text_message(text))

    def ephemeral(self, client: WebClient, key: SessionKey, user: str, text: str) -> None:
        try:
            client.chat_postEphemeral(
                channel=key.channel, user=user, thread_ts=key.thread, text=text
            )
        except SlackApiError as error:
            log.warning("chat.postEphemeral failed in %s: %s", key, error.response.get("error"))

    def retire(self, client: WebClient, key: SessionKey, step_id: str | None, shown: str) -> None:
        """Messages still offering buttons for `step_id` (None: any) lose them and show `shown`:
        the question was answered, or what the buttons offered is gone."""
        for question in self._records.open_questions(key, step_id):
            updated = answered_message(question.text, shown)
            try:
                client.chat_update(
                    channel=key.channel, ts=question.ts, text=updated.text, blocks=updated.blocks
                )
            except SlackApiError as error:
                log.warning("chat.update failed in %s: %s", key, error.response.get("error"))
