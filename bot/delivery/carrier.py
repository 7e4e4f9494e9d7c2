"""One thread effect carried out in Slack: a post (exactly once), a question asked (the older
ones superseded), questions retired, a message updated, a file uploaded, the thread's status
line set (best effort), a script generated.

Exactly once: a post carries its outbox id in Slack's message metadata. An attempt that died
mid-call (the process was killed while Slack was answering) leaves its row in doubt, and the
next attempt first looks for that id in the thread (conversations.replies) instead of posting
again. Updates (a question losing its buttons, a run's status card) are idempotent and are simply
done again. An upload (a long draft's file, a run's plot) carries no metadata: one in doubt is
uploaded again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.delivery.effects import Ask, Edit, Generate, Offer, Post, Retire, Status, Update, Upload
from bot.delivery.outbox import Claimed, Settlement, question_asked
from bot.slack.blocks import RESULT_STEP, SlackMessage, answered_message, superseded_message
from bot.slack.records import QuestionMessage
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

METADATA_EVENT = "artbot_outbox"
"""The event_type of the metadata a delivered post carries: its outbox id."""
TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class Transient(Exception):
    """Slack did not take the effect this time; it has nothing of it. Try again later."""

    def __init__(self, error: str, retry_after: float = 0.0, *, unsure: bool = False) -> None:
        super().__init__(error)
        self.error = error
        self.retry_after = retry_after
        self.unsure = unsure
        """Slack may have done it all the same (a dropped connection, a 5xx)."""


class Carrier:
    """Carries out claimed effects, each thread through its team's client (`client_for`);
    `generate` starts a complete session's script."""

    def __init__(
        self,
        client_for: Callable[[str], WebClient],
        generate: Callable[[WebClient, SessionKey], None],
    ) -> None:
        self._client_for = client_for
        self._generate = generate

    def deliver(self, claimed: Claimed, drain: Drain) -> str | None:
        """Carry out one effect; the ts of the message posted, if one was. Transient when it
        must be tried again, `unsure` when Slack may have posted its message meanwhile."""
        try:
            return self._carry_out(claimed, drain)
        except Transient as failure:
            if failure.unsure or not claimed.in_doubt:
                raise
            raise Transient(failure.error, failure.retry_after, unsure=True) from None

    def _carry_out(self, claimed: Claimed, drain: Drain) -> str | None:
        key, effect = claimed.key, claimed.effect
        # The team's client; NotInstalled (a SlackApiError) when the app left the team: given up.
        client = self._client_for(key.team)
        if isinstance(effect, Generate):
            self._generate(client, key)  # hands the slow work to the results' executor
            return None
        if isinstance(effect, Retire):
            for question in drain.live(effect.step_id):
                answered = answered_message(question.text, effect.shown, effect.note)
                self._update(client, key, question.ts, answered)
                drain.settlement.retired.append(question.ts)
            return None
        if isinstance(effect, Update):
            live = [
                question
                for question in drain.live(effect.step_id)
                if not effect.remembered or question.text == effect.remembered
            ]
            if live:  # updated in place, and still live: its buttons are the new message's
                self._update(client, key, live[-1].ts, effect.message)
            return None
        if isinstance(effect, Edit):
            self._update(client, key, effect.ts, effect.message)
            return None
        if isinstance(effect, Upload):
            self._upload(client, key, effect)
            return None
        if isinstance(effect, Status):
            self._status(client, key, effect.text)
            return None
        if isinstance(effect, Ask):
            # One live question per thread: any other still offering buttons is superseded.
            for question in drain.live(keep=RESULT_STEP):
                self._update(client, key, question.ts, superseded_message(question.text))
                drain.settlement.retired.append(question.ts)
        assert isinstance(effect, Ask | Offer | Post)
        if claimed.in_doubt:
            posted = self._posted_before(client, claimed)
            if posted is not None:
                log.info("outbox %d for %s was posted before a restart", claimed.id, key)
                return posted
        return self._post(client, claimed, effect.message)

    def _post(self, client: WebClient, claimed: Claimed, message: SlackMessage) -> str | None:
        key = claimed.key
        response = _call(
            lambda: client.chat_postMessage(
                channel=key.channel,
                thread_ts=key.thread,
                text=message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
                metadata={"event_type": METADATA_EVENT, "event_payload": {"id": claimed.id}},
            ),
            posting=True,
        )
        return str(response.get("ts") or "") or None

    def _upload(self, client: WebClient, key: SessionKey, upload: Upload) -> None:
        """The file into the thread. No message metadata to find it by: an attempt in doubt
        uploads it again (a rare second copy of the file in the thread, never none)."""
        _call(
            lambda: client.files_upload_v2(
                channel=key.channel,
                thread_ts=key.thread,
                content=upload.content,
                filename=upload.filename,
                title=upload.title,
                initial_comment=upload.comment or None,
            ),
            posting=True,
        )

    def _status(self, client: WebClient, key: SessionKey, status: str) -> None:
        """The thread's status line; best effort: one Slack refuses (an install from before
        the scope, a thread gone) is logged and dropped, never holding up the thread."""
        try:
            _call(
                lambda: client.assistant_threads_setStatus(
                    channel_id=key.channel, thread_ts=key.thread, status=status
                ),
                posting=False,
            )
        except SlackApiError as error:
            log.info("no status in %s: %s", key, error.response.get("error"))

    def _update(self, client: WebClient, key: SessionKey, ts: str, message: SlackMessage) -> None:
        """`ts` becomes `message`; a message deleted meanwhile has none to lose. (The caller
        records it retired where it lost its buttons.)"""
        try:
            _call(
                lambda: client.chat_update(
                    channel=key.channel, ts=ts, text=message.text, blocks=message.blocks
                ),
                posting=False,
            )
        except SlackApiError as error:
            if error.response.get("error") not in ("message_not_found", "cant_update_message"):
                raise
            log.warning("question %s in %s is gone: %s", ts, key, error.response.get("error"))

    def _posted_before(self, client: WebClient, claimed: Claimed) -> str | None:
        """The ts of the message an earlier attempt at `claimed` posted, if Slack has it."""
        key = claimed.key
        cursor: str | None = None
        while True:
            page = _call(
                lambda cursor=cursor: client.conversations_replies(
                    channel=key.channel,
                    ts=key.thread,
                    include_all_metadata=True,
                    limit=200,
                    cursor=cursor,
                ),
                posting=False,
            )
            for message in page.get("messages") or []:
                metadata = message.get("metadata") or {}
                payload = metadata.get("event_payload") or {}
                if metadata.get("event_type") == METADATA_EVENT and payload.get("id") == claimed.id:
                    return str(message["ts"])
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                return None


class Drain:
    """One drain of a thread: what it settles, and the thread's question messages as they stand
    in it (read with the claim; the database learns what it asked and retired when it is
    settled). One drain per thread at a time, and only drains retire questions."""

    def __init__(self, key: SessionKey, questions: list[QuestionMessage]) -> None:
        self.settlement = Settlement(key)
        self._questions = list(questions)

    def delivered(self, claimed: Claimed, ts: str | None) -> None:
        self.settlement.delivered.append((claimed, ts))
        question = question_asked(claimed, ts)
        if question is not None:
            self._questions.append(question)

    def live(self, step_id: str | None = None, *, keep: str | None = None) -> list[QuestionMessage]:
        """The thread's questions still showing their buttons that asked `step_id` (None: any
        but `keep`), oldest first."""
        retired = set(self.settlement.retired)
        return [
            question
            for question in self._questions
            if question.ts not in retired
            and (question.step_id == step_id if step_id is not None else question.step_id != keep)
        ]


def _call(request: Any, *, posting: bool) -> Any:
    """Run a Web API request; Transient when Slack (or the way to it) failed this time, unsure
    when `posting` and Slack may have taken the message all the same."""
    try:
        return request()
    except SlackApiError as error:
        status = int(getattr(error.response, "status_code", 200) or 200)
        code = str(error.response.get("error") or f"HTTP {status}")
        if status == 429 or status >= 500 or code in TRANSIENT_ERRORS:
            unsure = posting and status >= 500
            raise Transient(code, _retry_after(error), unsure=unsure) from None
        raise
    except OSError as error:  # URLError, a refused or dropped connection, a timeout
        raise Transient(f"unreachable: {error}", unsure=posting) from None


def _retry_after(error: SlackApiError) -> float:
    headers = getattr(error.response, "headers", None) or {}
    for name, value in dict(headers).items():
        if name.lower() == "retry-after":
            first = value[0] if isinstance(value, list) else value
            try:
                return float(first)
            except (TypeError, ValueError):
                return 0.0
    return 0.0
