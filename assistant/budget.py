"""Per-user limits on the assistant: calls per minute and tokens per day."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

SECONDS_PER_DAY = 86_400


@dataclass
class Budget:
    """How much of the model each user may use. Thread-safe (the Slack bot serves many users).

    `clock` returns seconds since the epoch (a day is a UTC day); tests pass their own.
    """

    requests_per_minute: int
    tokens_per_day: int
    clock: Callable[[], float] = time.time
    _calls: dict[str, deque[float]] = field(default_factory=dict, init=False)
    _tokens: dict[str, tuple[int, int]] = field(default_factory=dict, init=False)
    """user -> (day number, tokens used that day)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def take(self, user: str) -> str | None:
        """Count one call for `user`, or say (briefly) why they may not make one now."""
        with self._lock:
            now = self.clock()
            if self._used_today(user, now) >= self.tokens_per_day:
                return "you have used today's budget"
            calls = self._calls.setdefault(user, deque())
            while calls and now - calls[0] >= 60:
                calls.popleft()
            if len(calls) >= self.requests_per_minute:
                return "you are asking faster than it allows; wait a minute"
            calls.append(now)
            return None

    def charge(self, user: str, tokens: int) -> None:
        """Record the tokens a call of `user` cost."""
        with self._lock:
            now = self.clock()
            self._tokens[user] = (_day(now), self._used_today(user, now) + max(0, tokens))

    def _used_today(self, user: str, now: float) -> int:
        day, used = self._tokens.get(user, (_day(now), 0))
        return used if day == _day(now) else 0


def _day(now: float) -> int:
    return int(now // SECONDS_PER_DAY)
