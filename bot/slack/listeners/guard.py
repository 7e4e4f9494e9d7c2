"""A listener's work after its ack: on a thread pool, timed, its log lines carrying the Slack ids,
kept from raising, done once however often Slack delivers it.

Each listener acks and parses in the request's own path (the app runs with
`process_before_response=True`, so Bolt calls it on the thread that received the request), then
hands its work here and returns. Not Bolt's lazy listeners: they deep-copy every request for the
lazy function (re-parsing its body), about 1 ms on the ack path, two thirds of it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor

from slack_bolt import BoltContext

from bot.process.log_fields import slack_ids
from bot.process.metrics import BotMetrics
from bot.process.work_slots import WorkSlots
from bot.slack.records import SlackRecords
from storage.sessions import SessionKey

log = logging.getLogger(__name__)
RECEIVED_AT = "artbot_received_at"
"""The context key under which `ArtbotApp.dispatch` notes when a request arrived (monotonic)."""


class AfterAck:
    """Runs listeners' work on `executor` once they have acked, each in one of `slots` (given
    back while it waits on Slack); times it into `metrics`. A delivery Slack repeats is done
    once (`records`); an error in a wizard's thread is said there (`notify_error`)."""

    def __init__(
        self,
        metrics: BotMetrics,
        executor: Executor,
        slots: WorkSlots,
        records: SlackRecords,
        notify_error: Callable[[SessionKey], None],
    ) -> None:
        self.metrics = metrics
        self._executor = executor
        self._slots = slots
        self._records = records
        self._notify_error = notify_error

    def submit(
        self,
        context: BoltContext,
        kind: str,
        work: Callable[[], object],
        *,
        key: SessionKey | None = None,
        team: str | None = None,
        channel: str | None = None,
        once: str | None = None,
        errors_in_thread: bool = False,
    ) -> None:
        """Run `work` on the pool: its log lines carry `key`'s ids (else `team`, `channel`).
        Given `once` (a delivery id), only the first time Slack delivers it. An error is
        logged and, with `errors_in_thread`, said in `key`'s thread."""
        received = context.get(RECEIVED_AT)
        in_flight = self.metrics.works_in_flight
        notify = self._notify_error if errors_in_thread else None
        records = self._records

        def first_time_work() -> None:
            if records.first_delivery(once):
                work()

        def run() -> None:
            try:
                slot = self._slots.holding()
                with self._timed(kind, received), ids_of(key, team, channel), slot:
                    guarded(first_time_work if once is not None else work, key, notify)
            finally:
                in_flight.dec()

        in_flight.inc()
        try:
            self._executor.submit(run)
        except BaseException:  # not handed on (the pool shut down): not in flight either
            in_flight.dec()
            raise

    @contextlib.contextmanager
    def _timed(self, kind: str, received: object) -> Iterator[None]:
        try:
            yield
        finally:
            if isinstance(received, float):
                self.metrics.turn_seconds.labels(kind).observe(time.monotonic() - received)


def ids_of(
    key: SessionKey | None, team: str | None = None, channel: str | None = None
) -> contextlib.AbstractContextManager[None]:
    """Bind the Slack ids for log lines: `key`'s (the session's id is the key itself), else
    `team` and `channel`."""
    if key is None:
        return slack_ids(team=team, channel=channel)
    return slack_ids(team=key.team, channel=key.channel, thread=key.thread, session=str(key))


def guarded(
    work: Callable[[], object],
    key: SessionKey | None = None,
    notify_error: Callable[[SessionKey], None] | None = None,
) -> None:
    """Run `work`; on an error log it and, given a thread (`key`) and `notify_error`, say so
    there."""
    try:
        work()
    except Exception:
        log.exception("listener failed")
        if key is not None and notify_error is not None:
            notify_error(key)
