"""Delivers the outbox to Slack: oldest first and one at a time in each thread, threads in
parallel, retrying with backoff until Slack takes each effect or refuses it for good.

Exactly once: a post carries its outbox id in Slack's message metadata. An attempt that died
mid-call (the process was killed while Slack was answering) leaves its row in doubt, and the
next attempt first looks for that id in the thread (conversations.replies) instead of posting
again. Updates (a question losing its buttons) are idempotent and are simply done again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.blocks import RESULT_STEP, SlackMessage, answered_message, superseded_message
from bot.outbox import Claimed, Outbox
from bot.slack_records import SlackRecords
from bot.thread_effects import Ask, Generate, Offer, Post, Retire, Update
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

METADATA_EVENT = "artbot_outbox"
"""The event_type of the metadata a delivered post carries: its outbox id."""
FIRST_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(minutes=5)
LEASE = timedelta(minutes=2)
"""How long a claim keeps other workers off an effect: longer than the client's own retries."""
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


class OutboxWorker:
    """Delivers what `outbox` holds through `client`, from a thread of its own; `generate`
    starts a complete session's script.

    `delivered`, `retried` and `given_up` count effects since the start (for metrics, with
    `outbox.depth()`).
    """

    def __init__(
        self,
        outbox: Outbox,
        records: SlackRecords,
        client: WebClient,
        *,
        generate: Callable[[WebClient, SessionKey], None],
        workers: int = 8,
        lease: timedelta = LEASE,
        poll_s: float = 5.0,
        on_retry: Callable[[], None] | None = None,
    ) -> None:
        self.outbox = outbox
        self._on_retry = on_retry
        self._records = records
        self._client = client
        self._generate = generate
        self._lease = lease
        self._poll_s = poll_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="outbox")
        self._busy: set[SessionKey] = set()
        self._guard = threading.Lock()
        self._woken = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self.retried = 0
        self.given_up = 0

    # -- lifecycle --

    def start(self) -> OutboxWorker:
        """Deliver from a daemon thread until `stop`; what is already queued goes first, and
        what an earlier process was delivering when it died is due at once."""
        if self._thread is None:
            released = self.outbox.release_claims()
            if released:
                log.info("taking over %d outbox effects from an earlier process", released)
            self.outbox.subscribe(self.wake)
            self._thread = threading.Thread(target=self._run, name="artbot-outbox", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop taking effects and wait for the attempts under way."""
        self._stop.set()
        self._woken.set()
        self.outbox.unsubscribe(self.wake)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True)

    def wake(self) -> None:
        """Something was queued: look now rather than at the next poll."""
        self._woken.set()

    # -- the loop --

    def _run(self) -> None:
        while not self._stop.is_set():
            self._woken.clear()
            wait = self._poll_s
            try:
                wait = min(wait, self._dispatch())
            except Exception:
                log.exception("reading the outbox failed")
            self._woken.wait(max(wait, 0.0))

    def _dispatch(self) -> float:
        """Start a drain for every thread whose oldest effect is due; seconds until the next."""
        now = self.outbox.now()
        wait = self._poll_s
        for key, due in self.outbox.due_threads(limit=500):
            if due > now:
                wait = min(wait, (due - now).total_seconds())
                continue
            with self._guard:
                if key in self._busy:
                    continue
                self._busy.add(key)
            self._pool.submit(self._drain, key)
        return wait

    def _drain(self, key: SessionKey) -> None:
        """Deliver the thread's effects in order until none is due or one must wait."""
        try:
            while not self._stop.is_set():
                claimed = self.outbox.claim(key, self._lease)
                if claimed is None or not self._attempt(claimed):
                    return
        except Exception:
            log.exception("delivering the outbox of %s failed", key)
        finally:
            with self._guard:
                self._busy.discard(key)
            self.wake()  # effects queued for this thread meanwhile

    def _attempt(self, claimed: Claimed) -> bool:
        """One attempt at `claimed`; True if it is done with (delivered or given up)."""
        try:
            ts = self._deliver(claimed)
        except Transient as failure:
            backoff = min(FIRST_BACKOFF * 2 ** (claimed.attempts - 1), MAX_BACKOFF)
            delay = max(backoff, timedelta(seconds=failure.retry_after))
            log.warning(
                "outbox %d for %s: %s, retrying in %.1f s",
                claimed.id,
                claimed.key,
                failure.error,
                delay.total_seconds(),
            )
            self.outbox.retry_later(claimed, delay, failure.error, in_doubt=failure.unsure)
            with self._guard:
                self.retried += 1
            if self._on_retry is not None:
                self._on_retry()
            return False
        except SlackApiError as error:
            refused = str(error.response.get("error") or "refused")
            log.error("outbox %d for %s: Slack refused it: %s", claimed.id, claimed.key, refused)
            self.outbox.give_up(claimed, refused)
            with self._guard:
                self.given_up += 1
            return True
        self.outbox.delivered(claimed, ts)
        with self._guard:
            self.delivered += 1
        return True

    # -- Slack --

    def _deliver(self, claimed: Claimed) -> str | None:
        """Carry out one effect; the ts of the message posted, if one was. Transient when it
        must be tried again, `unsure` when Slack may have posted its message meanwhile."""
        try:
            return self._carry_out(claimed)
        except Transient as failure:
            if failure.unsure or not claimed.in_doubt:
                raise
            raise Transient(failure.error, failure.retry_after, unsure=True) from None

    def _carry_out(self, claimed: Claimed) -> str | None:
        key, effect = claimed.key, claimed.effect
        if isinstance(effect, Generate):
            self._generate(self._client, key)  # hands the slow work to the results' executor
            return None
        if isinstance(effect, Retire):
            for question in self._records.live_questions(key, effect.step_id):
                answered = answered_message(question.text, effect.shown, effect.note)
                self._update(key, question.ts, answered)
            return None
        if isinstance(effect, Update):
            live = [
                question
                for question in self._records.live_questions(key, effect.step_id)
                if not effect.remembered or question.text == effect.remembered
            ]
            if live:  # updated in place, and still live: its buttons are the new message's
                self._update(key, live[-1].ts, effect.message, retire=False)
            return None
        if isinstance(effect, Ask):
            # One live question per thread: any other still offering buttons is superseded.
            for question in self._records.live_questions(key, keep=RESULT_STEP):
                self._update(key, question.ts, superseded_message(question.text))
        assert isinstance(effect, Ask | Offer | Post)
        if claimed.in_doubt:
            posted = self._posted_before(claimed)
            if posted is not None:
                log.info("outbox %d for %s was posted before a restart", claimed.id, key)
                return posted
        return self._post(claimed, effect.message)

    def _post(self, claimed: Claimed, message: SlackMessage) -> str | None:
        key = claimed.key
        response = _call(
            lambda: self._client.chat_postMessage(
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

    def _update(
        self, key: SessionKey, ts: str, message: SlackMessage, *, retire: bool = True
    ) -> None:
        """`ts` becomes `message` and (`retire`) is remembered as having lost its buttons; a
        message deleted meanwhile has none to lose."""
        try:
            _call(
                lambda: self._client.chat_update(
                    channel=key.channel, ts=ts, text=message.text, blocks=message.blocks
                ),
                posting=False,
            )
        except SlackApiError as error:
            if error.response.get("error") not in ("message_not_found", "cant_update_message"):
                raise
            log.warning("question %s in %s is gone: %s", ts, key, error.response.get("error"))
        if retire:
            self._records.retired(key, ts)

    def _posted_before(self, claimed: Claimed) -> str | None:
        """The ts of the message an earlier attempt at `claimed` posted, if Slack has it."""
        key = claimed.key
        cursor: str | None = None
        while True:
            page = _call(
                lambda cursor=cursor: self._client.conversations_replies(
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
