"""Delivers the outbox to Slack: oldest first and one at a time in each thread, threads in
parallel, retrying with backoff until Slack takes each effect or refuses it for good.

The fast path: the listener that saves a turn holds the thread's delivery (`hold`), inserts the
turn's effects already claimed in the save's own transaction (`Outbox.turn`) and delivers them
itself right after the commit (`deliver_held`); other writers' effects are delivered by the
listener that queued them (`deliver_now`), after a claim transaction. The worker's own loop takes
what those could not (a retry's backoff, an earlier process's leftovers, a thread another drain
holds). A drain carries out a thread's claimed effects in order and records what came of them
in one transaction (`Outbox.settle`).

Exactly once: a post carries its outbox id in Slack's message metadata. An attempt that died
mid-call (the process was killed while Slack was answering) leaves its row in doubt, and the
next attempt first looks for that id in the thread (conversations.replies) instead of posting
again. Updates (a question losing its buttons) are idempotent and are simply done again. An
upload (a long draft's file) carries no metadata: one in doubt is uploaded again.
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

from bot.delivery.effects import Ask, Generate, Offer, Post, Retire, Update, Upload
from bot.delivery.outbox import Claimed, Outbox, Settlement, question_asked
from bot.process.shards import ALONE, Shard
from bot.slack.blocks import RESULT_STEP, SlackMessage, answered_message, superseded_message
from bot.slack.records import QuestionMessage
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

METADATA_EVENT = "artbot_outbox"
"""The event_type of the metadata a delivered post carries: its outbox id."""
FIRST_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(minutes=5)
BATCH = 20
"""Effects of one thread claimed and settled together."""
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
    """Delivers what `outbox` holds, each thread through its team's client (`client_for`), from
    a thread of its own; `generate` starts a complete session's script.

    `delivered`, `retried` and `given_up` count effects since the start (for metrics, with
    `outbox.depth()`).
    """

    def __init__(
        self,
        outbox: Outbox,
        client_for: Callable[[str], WebClient],
        *,
        generate: Callable[[WebClient, SessionKey], None],
        workers: int = 8,
        lease: timedelta = LEASE,
        poll_s: float = 5.0,
        on_retry: Callable[[], None] | None = None,
        shard: Shard = ALONE,
    ) -> None:
        self.outbox = outbox
        self.shard = shard
        """The threads this process delivers (`artbot serve --workers`: its channels' ones);
        another shard's effects queued here wait for their own worker's loop."""
        self._on_retry = on_retry
        self._client_for = client_for
        self._generate = generate
        self.lease = lease
        self._poll_s = poll_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="outbox")
        self._busy: set[SessionKey] = set()
        """Threads a drain is delivering (one drain per thread)."""
        self._again: set[SessionKey] = set()
        """Busy threads that got effects queued since their drain's last look."""
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
            released = self.outbox.release_claims(self.shard)
            if released:
                log.info("taking over %d outbox effects from an earlier process", released)
            self.outbox.subscribe(self.deliver_now)
            self.outbox.attach(self)
            self._thread = threading.Thread(target=self._run, name="artbot-outbox", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop taking effects and wait for the attempts under way."""
        self._stop.set()
        self._woken.set()
        self.outbox.unsubscribe(self.deliver_now)
        self.outbox.attach(None)
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
        for key, due in self.outbox.due_threads(limit=500 * self.shard.count):
            if not self.shard.owns(key):
                continue
            if due > now:
                wait = min(wait, (due - now).total_seconds())
                continue
            with self._guard:
                if key in self._busy:
                    continue
                self._busy.add(key)
            self._pool.submit(self._drain, key)
        return wait

    def deliver_now(self, key: SessionKey) -> None:
        """Deliver the thread's effects from the calling thread (the listener that just saved a
        turn); if another drain has the thread, it takes these too before it ends. Another
        shard's thread is left to its worker's loop."""
        if self._stop.is_set() or not self.shard.owns(key):
            return
        with self._guard:
            if key in self._busy:
                self._again.add(key)
                return
            self._busy.add(key)
        self._drain(key)

    # -- the fast path (bot.delivery.outbox.Courier) --

    def hold(self, key: SessionKey) -> bool:
        """Take the thread's delivery for a turn being saved; False if a drain has it (that
        drain takes the turn's effects too), or it is another shard's."""
        if self._stop.is_set() or not self.shard.owns(key):
            return False
        with self._guard:
            if key in self._busy:
                return False
            self._busy.add(key)
            return True

    def deliver_held(
        self, key: SessionKey, claimed: list[Claimed], questions: list[QuestionMessage]
    ) -> None:
        """Deliver what the turn saved already claimed, then what else is due, from the calling
        thread; the thread is let go at the end."""
        self._drain(key, first=(claimed, questions))

    def let_go(self, key: SessionKey) -> None:
        """Give back a thread held for a turn that claimed nothing; what was queued meanwhile
        is drained now."""
        with self._guard:
            if key not in self._again or self._stop.is_set():
                self._busy.discard(key)
                return
            self._again.discard(key)
        self._drain(key)

    def _drain(
        self,
        key: SessionKey,
        first: tuple[list[Claimed], list[QuestionMessage]] | None = None,
    ) -> None:
        """Deliver the thread's effects (`first`: claimed already) until none is due or one must
        wait, and again while more were queued meanwhile. The caller has put `key` in `_busy`;
        this takes it out."""
        while True:
            try:
                if first is None:
                    self._deliver_due(key)
                else:
                    claimed, questions = first
                    first = None
                    self._attempt_all(_Drain(key, questions), claimed)
            except Exception:
                log.exception("delivering the outbox of %s failed", key)
                self.wake()  # the loop looks again later
            with self._guard:
                again = key in self._again and not self._stop.is_set()
                self._again.discard(key)
                if not again:
                    self._busy.discard(key)
                    return

    def _deliver_due(self, key: SessionKey) -> None:
        while not self._stop.is_set():
            claimed, questions = self.outbox.claim_for_drain(key, self.lease, BATCH)
            if not claimed or not self._attempt_all(_Drain(key, questions), claimed):
                return
            if len(claimed) < BATCH:
                return

    def _attempt_all(self, drain: _Drain, claimed: list[Claimed]) -> bool:
        """Carry out `claimed` in order and settle the lot; True if every one is done with
        (delivered or given up), False if one must wait (the rest wait behind it)."""
        try:
            for index, effect in enumerate(claimed):
                if self._stop.is_set() or not self._attempt(effect, drain):
                    drain.settlement.untried.extend(claimed[index + 1 :])
                    if self._stop.is_set() and drain.settlement.retry is None:
                        drain.settlement.untried.insert(0, effect)
                    return False
            return True
        finally:
            self.outbox.settle(drain.settlement)

    def _attempt(self, claimed: Claimed, drain: _Drain) -> bool:
        """One attempt at `claimed`; True if it is done with (delivered or given up)."""
        try:
            ts = self._deliver(claimed, drain)
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
            drain.settlement.retry = (claimed, delay, failure.error, failure.unsure)
            with self._guard:
                self.retried += 1
            if self._on_retry is not None:
                self._on_retry()
            self.wake()  # the loop tries it again once due
            return False
        except SlackApiError as error:
            refused = str(error.response.get("error") or "refused")
            log.error("outbox %d for %s: Slack refused it: %s", claimed.id, claimed.key, refused)
            drain.settlement.given_up.append((claimed, refused))
            with self._guard:
                self.given_up += 1
            return True
        drain.delivered(claimed, ts)
        with self._guard:
            self.delivered += 1
        return True

    # -- Slack --

    def _deliver(self, claimed: Claimed, drain: _Drain) -> str | None:
        """Carry out one effect; the ts of the message posted, if one was. Transient when it
        must be tried again, `unsure` when Slack may have posted its message meanwhile."""
        try:
            return self._carry_out(claimed, drain)
        except Transient as failure:
            if failure.unsure or not claimed.in_doubt:
                raise
            raise Transient(failure.error, failure.retry_after, unsure=True) from None

    def _carry_out(self, claimed: Claimed, drain: _Drain) -> str | None:
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
        if isinstance(effect, Upload):
            self._upload(client, key, effect)
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
            ),
            posting=True,
        )

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


class _Drain:
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
