"""The assistant's answer streamed into its thread as the model writes it (chat.startStream,
appendStream, stopStream), or, where that cannot be done, left to the turn's one message.

What is sent is redacted and escaped as the one-message answer is (isolation.redaction, then
mrkdwn's three entities), a piece at a time. A secret the model writes in several pieces must
not leave in halves that each look harmless: the whole answer so far is redacted each time and
only its text up to the last whitespace is sent; the word being written waits for the next piece
or the end.

Streaming is best effort and the outbox stays the record of what the thread is told. When the
stream carried the whole answer, the turn's message no longer repeats it (`settle`); when Slack
refused or dropped a call on the way (no streaming for this app or thread, a rate limit, a
dropped connection), the answer is posted once, whole, by the outbox as before. A stream cut
short is finished with a note saying so rather than left as it is: Slack would otherwise show
it still writing for minutes, and the whole answer right under it reads as a duplicate without
it.

A crash while the answer streams leaves the reply's delivery unrecorded (the turn is saved
after the model answered, bot.wizard.turns): Slack's retry asks the model again and the answer is
given again, whole; the cut stream stays as the dead process left it until Slack ends it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError

from bot.slack.blocks import feedback_buttons
from bot.slack.text import escape
from flows import Notice, Turn
from isolation.redaction import redact
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

FLUSH_CHARS = 200
"""Text gathered before an append: fewer calls than one per token (appendStream is Tier 4)."""
CUT_SHORT = "\n\n_(Cut short here: the whole answer follows.)_"
MODEL_STOPPED = "\n\n_(The assistant stopped here.)_"


class AnswerStream:
    """One answer streamed into a thread: called with each piece the model writes (a TextSink),
    then `settle` with the turn it became."""

    def __init__(
        self, client: WebClient, key: SessionKey, user: str, *, flush_chars: int = FLUSH_CHARS
    ) -> None:
        self._client = client
        self._key = key
        self._user = user
        self._flush_chars = flush_chars
        self._written = ""
        """What the model wrote so far, as it wrote it."""
        self._sent = ""
        """The redacted text sent so far (before escaping)."""
        self._waiting = ""
        """Escaped text ready to send, gathered for the next append."""
        self._ts: str | None = None
        self._failed = False

    def __call__(self, piece: str) -> None:
        if self._failed:
            return
        self._written += piece
        self._gather(final=False)
        if self._ts is None and self._waiting:  # the first words show at once
            self._call(lambda: self._start(self._waiting))
        elif len(self._waiting) >= self._flush_chars:
            self._call(lambda: self._append(self._waiting))

    def settle(self, turn: Turn, answered: Notice | None) -> Turn:
        """The turn to save: without `answered` when the stream carried all of it; as it is
        when nothing was streamed or not all of it (the outbox posts the answer whole)."""
        if answered is None:
            self._cut_short(MODEL_STOPPED)  # the model failed part-way: the turn says why
            return turn
        if self._failed:
            return turn
        self._gather(final=True)
        if self._ts is None:
            self._call(lambda: self._start(self._waiting))
        if not self._failed:
            self._call(self._stop)
        if self._failed:
            return turn
        kept = tuple(message for message in turn.messages if message is not answered)
        return Turn(turn.session, kept, turn.effects)

    def _gather(self, *, final: bool) -> None:
        """Move what may be sent now from the model's text to `_waiting`: redacted as a whole,
        up to its last whitespace (all of it at the end)."""
        redacted = redact(self._written)
        end = len(redacted)
        if not final:
            end = max(redacted.rfind(space) for space in " \n\t") + 1
        # A redaction can reach back into text already sent ("Bearer " before its token):
        # what follows the part still alike is sent, never the secret.
        start = _alike(redacted, self._sent)
        if end > start:
            self._waiting += escape(redacted[start:end])
            self._sent = redacted[:end]

    def _start(self, text: str) -> None:
        key = self._key
        response = self._client.chat_startStream(
            channel=key.channel,
            thread_ts=key.thread,
            recipient_user_id=self._user,
            recipient_team_id=key.team,
            markdown_text=text or None,
        )
        self._ts = str(response.get("ts") or "") or None
        if self._ts is None:
            raise SlackRequestError("chat.startStream gave no ts")
        self._waiting = self._waiting[len(text) :]

    def _append(self, text: str) -> None:
        assert self._ts is not None
        self._client.chat_appendStream(channel=self._key.channel, ts=self._ts, markdown_text=text)
        self._waiting = self._waiting[len(text) :]

    def _stop(self) -> None:
        assert self._ts is not None
        self._client.chat_stopStream(
            channel=self._key.channel,
            ts=self._ts,
            markdown_text=self._waiting or None,
            blocks=[feedback_buttons()],  # helpful or not: bot.slack.answer_feedback
        )
        self._waiting = ""

    def _call(self, request: Callable[[], None]) -> None:
        """Make a stream call; a refusal or a lost connection ends streaming for this answer."""
        try:
            request()
        except (SlackApiError, SlackRequestError, OSError) as error:
            reason = error.response.get("error") if isinstance(error, SlackApiError) else error
            log.info("answer not streamed in %s: %s", self._key, reason)
            self._failed = True
            self._cut_short(CUT_SHORT)

    def _cut_short(self, note: str) -> None:
        """Finish a stream that will not carry the whole answer, with `note`; best effort."""
        if self._ts is None:
            return
        ts, self._ts = self._ts, None
        try:
            self._client.chat_stopStream(channel=self._key.channel, ts=ts, markdown_text=note)
        except (SlackApiError, SlackRequestError, OSError) as error:
            log.info("a cut stream in %s stays as it is: %s", self._key, error)


def _alike(one: str, other: str) -> int:
    """How many characters `one` and `other` begin with alike."""
    if one.startswith(other):
        return len(other)
    return next(
        (i for i, (a, b) in enumerate(zip(one, other, strict=False)) if a != b),
        min(len(one), len(other)),
    )
