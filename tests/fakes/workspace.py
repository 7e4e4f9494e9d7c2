"""Identifiers of the fake workspace, shared by the fake Web API server and the request builders."""

from __future__ import annotations

import threading
import time

TEAM_ID = "T0TEST"
TEAM_DOMAIN = "fake-workspace"
API_APP_ID = "A0APP"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
BOT_TOKEN = "xoxb-test-token"
SIGNING_SECRET = "test-signing-secret"
# Deprecated by Slack in favour of signatures, but still sent in every payload.
VERIFICATION_TOKEN = "test-verification-token"
USER_ID = "U0USER"
USER_NAME = "alice"
CHANNEL_ID = "C0CHAN"
CHANNEL_NAME = "ml-team"


class _TimestampClock:
    """Message timestamps as Slack writes them: unique, increasing, microseconds since the epoch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_us = 0

    def next(self) -> str:
        with self._lock:
            self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
            seconds, micros = divmod(self._last_us, 1_000_000)
        return f"{seconds}.{micros:06d}"


_clock = _TimestampClock()


def next_ts() -> str:
    """A fresh message timestamp such as "1700000000.000100", later than every earlier one.

    The fake server and the request builders share this clock, so a thread sorted by `ts`
    is in the order things happened, whoever posted them.
    """
    return _clock.next()


def ts_key(ts: str) -> tuple[int, int]:
    """Sort key for a Slack timestamp (string comparison breaks when the seconds grow a digit)."""
    seconds, _, micros = ts.partition(".")
    return int(seconds), int(micros or 0)
