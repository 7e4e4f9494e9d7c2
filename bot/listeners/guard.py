"""A listener's work after its ack, kept from raising: Bolt can lose a fast ack to an error."""

from __future__ import annotations

import logging
from collections.abc import Callable

from slack_sdk import WebClient

from bot.wizard import WizardService
from storage.sessions import SessionKey

log = logging.getLogger(__name__)


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
