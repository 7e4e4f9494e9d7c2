"""A listener's work after its ack: timed, its log lines carrying the Slack ids, kept from raising.

Every listener is split in two (Bolt's lazy listeners): `acknowledge` answers Slack in the
request's own path, and the work runs afterwards on Bolt's listener executor, wrapped here.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

from slack_bolt import Ack, BoltContext
from slack_sdk import WebClient

from bot.log_fields import slack_ids
from bot.metrics import BotMetrics
from bot.wizard import WizardService
from storage.sessions import SessionKey

log = logging.getLogger(__name__)
RECEIVED_AT = "artbot_received_at"
"""The context key under which `ArtbotApp.dispatch` notes when a request arrived (monotonic)."""


def acknowledge(ack: Ack) -> None:
    """Every listener's ack function: answer Slack now, before any of the work."""
    ack()


@contextlib.contextmanager
def turn(
    metrics: BotMetrics,
    context: BoltContext,
    kind: str,
    key: SessionKey | None = None,
    *,
    team: str | None = None,
    channel: str | None = None,
) -> Iterator[None]:
    """The work of one request: its log lines carry `key`'s ids (the session's is the key
    itself), else `team` and `channel`; the time from the request's arrival to the end of the
    work goes to `artbot_turn_seconds{kind}`."""
    if key is not None:
        ids = {"team": key.team, "channel": key.channel, "thread": key.thread, "session": str(key)}
    else:
        ids = {"team": team, "channel": channel}
    try:
        with slack_ids(**ids):
            yield
    finally:
        received = context.get(RECEIVED_AT)
        if isinstance(received, float):
            metrics.turn_seconds.labels(kind).observe(time.monotonic() - received)


def guarded(
    work: Callable[[], object],
    client: WebClient | None = None,
    key: SessionKey | None = None,
    service: WizardService | None = None,
) -> None:
    """Run `work`; on an error log it and, given a thread (`key`), say so there."""
    try:
        work()
    except Exception:
        log.exception("listener failed")
        if client is not None and key is not None and service is not None:
            service.notify_error(client, key)
