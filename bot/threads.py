"""Posting into a wizard's thread: engine messages become Slack messages, answers update their
questions."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import SlackMessage, answered_message, engine_message, text_message
from bot.slack_records import SlackRecords
from flows import Answered, Cancelled, Message, Question, Turn
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

    def deliver(self, client: WebClient, key: SessionKey, turn: Turn) -> None:
        """Carry out a turn: show answers on their questions, then post what the engine said."""
        for effect in turn.effects:
            if isinstance(effect, Answered):
                self.show_answer(client, key, effect)
            elif isinstance(effect, Cancelled):
                self.retire(client, key, None, "Cancelled")
        self.say(client, key, turn.messages)

    def say(self, client: WebClient, key: SessionKey, messages: Iterable[Message]) -> None:
        for message in messages:
            slack = engine_message(message)
            if isinstance(message, Question):
                self.offer(client, key, message.step_id, message.text, slack)
            else:
                self.post(client, key, slack)

    def show_answer(self, client: WebClient, key: SessionKey, answered: Answered) -> None:
        """Every message that asked this question loses its buttons and shows the answer."""
        self.retire(client, key, answered.step_id, answered.shown)

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
