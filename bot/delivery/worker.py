"""Delivers the outbox to Slack: oldest first and one at a time in each thread, threads in
parallel, retrying with backoff until Slack takes each effect or refuses it for good.

The fast path: the listener that saves a turn holds the thread's delivery (`hold`), inserts the
turn's effects already claimed in the save's own transaction (`Outbox.turn`) and delivers them
itself right after the commit (`deliver_held`); other writers' effects are delivered by the
listener that queued them (`deliver_now`), after a claim transaction. The worker's own loop takes
what those could not (a retry's backoff, an earlier process's leftovers, a thread another drain
holds). A drain carries out a thread's claimed effects in order and records what came of them
in one transaction (`Outbox.settle`).

How each effect is carried out in Slack (a post exactly once, even across a crash):
bot.delivery.carrier.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.delivery.carrier import Carrier, Drain, Transient
from bot.delivery.outbox import Claimed, Outbox
from bot.process.shards import ALONE, Shard
from bot.slack.records import QuestionMessage
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

FIRST_BACKOFF = timedelta(seconds=1)
MAX_BACKOFF = timedelta(minutes=5)
BATCH = 20
"""Effects of one thread claimed and settled together."""
LEASE = timedelta(minutes=2)
"""How long a claim keeps other workers off an effect: longer than the client's own retries."""


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
        self._carrier = Carrier(client_for, generate)
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
                    self._attempt_all(Drain(key, questions), claimed)
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
            if not claimed or not self._attempt_all(Drain(key, questions), claimed):
                return
            if len(claimed) < BATCH:
                return

    def _attempt_all(self, drain: Drain, claimed: list[Claimed]) -> bool:
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

    def _attempt(self, claimed: Claimed, drain: Drain) -> bool:
        """One attempt at `claimed`; True if it is done with (delivered or given up)."""
        try:
            ts = self._carrier.deliver(claimed, drain)
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
