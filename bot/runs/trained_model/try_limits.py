"""What `try <prompt>` may cost: a rate limit per person and per workspace, and a pool of its own.

Each `try` is a call to a model (billed, and seconds long; a local run's may wait many minutes
for the runner to start serving it). Without limits, 30 tries made 30 model calls in 5 s, and 70
tries against a slow model held all 64 of the listeners' threads: another workspace's
`/train-rl` waited 18.5 s for its first question. So:

- `TryLimits`: at most `per_user` tries per person and `per_workspace` per workspace in any
  `window_s`; a refused one is said in the thread with when to try again (once per person until
  then: a flood of refused tries must not become a flood of posts).
- `TryPool`: the model calls run on `threads` threads of their own (never the listeners', which
  only check and hand over), at most `per_workspace` of one workspace's tries waiting or running
  at once; more are refused, so one workspace cannot queue the others' tries behind its own.

Both count in this process: with `artbot serve --workers N`, each worker counts the tries of its
own channels.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bot.process.work_slots import behind_the_acks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TryRefusal:
    """Why a `try` is not sent to the model now; `say` once per spell of refusals."""

    text: str
    say: bool


class TryLimits:
    """Sliding-window counts of tries per (team, user) and per team. Thread-safe."""

    def __init__(
        self,
        per_user: int,
        per_workspace: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_user = per_user
        self.per_workspace = per_workspace
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._sent: dict[tuple[str, str], deque[float]] = {}
        """When each person's (team, user) and each workspace's (team, "") tries were taken."""
        self._told_until: dict[tuple[str, str], float] = {}
        """Whom a refusal was said to, until when it holds (said again only after)."""
        self._next_sweep = 0.0

    def take(self, team: str, user: str) -> TryRefusal | None:
        """Count one try of `user` in `team`, or say why not (and until when) without counting."""
        with self._lock:
            now = self._clock()
            mine, theirs = self._recent((team, user), now), self._recent((team, ""), now)
            if len(mine) >= self.per_user:
                wait = mine[0] + self.window_s - now
                text = (
                    f":no_entry_sign: <@{user}>, that is more than {self.per_user} "
                    f"`try` prompts in {_span(self.window_s)}, the most one person may send. "
                    f"Try again in {_span(wait)}."
                )
                return self._refusal((team, user), now + wait, text)
            if len(theirs) >= self.per_workspace:
                wait = theirs[0] + self.window_s - now
                text = (
                    f":no_entry_sign: This workspace has sent {self.per_workspace} `try` prompts "
                    f"in {_span(self.window_s)}, the most it may. Try again in {_span(wait)}."
                )
                return self._refusal((team, user), now + wait, text)
            mine.append(now)
            theirs.append(now)
            self._told_until.pop((team, user), None)
            return None

    def _recent(self, who: tuple[str, str], now: float) -> deque[float]:
        if now >= self._next_sweep:  # forget who has not tried for a window: no endless growth
            self._next_sweep = now + self.window_s
            for key, times in list(self._sent.items()):
                if not times or now - times[-1] >= self.window_s:
                    del self._sent[key]
                    self._told_until.pop(key, None)
        sent = self._sent.setdefault(who, deque())
        while sent and now - sent[0] >= self.window_s:
            sent.popleft()
        return sent

    def _refusal(self, who: tuple[str, str], until: float, text: str) -> TryRefusal:
        told = self._told_until.get(who)
        say = told is None or self._clock() >= told
        if say:
            self._told_until[who] = until
        return TryRefusal(text, say)


class TryPool:
    """Runs tries' model calls on `threads` daemon threads of its own, at most `per_workspace`
    of one team's waiting or running at once. Daemon threads: a try waiting many minutes for a
    local model never holds up the process's exit."""

    def __init__(self, threads: int, per_workspace: int) -> None:
        self.threads = threads
        self.per_workspace = per_workspace
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[str, Callable[[], object]]] = queue.SimpleQueue()
        self._in_flight: dict[str, int] = {}
        self._started = False

    def in_flight(self, team: str | None = None) -> int:
        """Tries waiting or running now (of `team`, or of all)."""
        with self._lock:
            if team is not None:
                return self._in_flight.get(team, 0)
            return sum(self._in_flight.values())

    def submit(self, team: str, work: Callable[[], object]) -> str | None:
        """Run `work` on the pool; or, when `team` has `per_workspace` tries in flight, run
        nothing and say why."""
        with self._lock:
            busy = self._in_flight.get(team, 0)
            if busy >= self.per_workspace:
                return (
                    f":no_entry_sign: {busy} `try` prompts of this workspace are already waiting "
                    "for a model, the most it may have at once. Try again when one has answered."
                )
            self._in_flight[team] = busy + 1
            start, self._started = not self._started, True
        if start:  # all at once, on the first try: a bot nobody tries with has none
            for _ in range(self.threads):
                threading.Thread(target=self._serve, name="try", daemon=True).start()
        self._queue.put((team, work))
        return None

    def _serve(self) -> None:
        behind_the_acks()
        while True:
            team, work = self._queue.get()
            try:
                work()
            except Exception:
                log.exception("a try failed")
            finally:
                with self._lock:
                    left = self._in_flight.get(team, 1) - 1
                    if left:
                        self._in_flight[team] = left
                    else:
                        self._in_flight.pop(team, None)


def _span(seconds: float) -> str:
    """A wait as people say it: whole seconds up to two minutes, else minutes (rounded up)."""
    whole = max(1, math.ceil(seconds))
    if whole < 120:
        return f"{whole} second{'s' if whole != 1 else ''}"
    return f"{math.ceil(whole / 60)} minutes"
