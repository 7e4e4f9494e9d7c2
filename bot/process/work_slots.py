"""Many listener threads may wait on Slack at once; only a few compute at once.

A turn spends most of its time waiting on Slack's Web API (about 100 ms a call against real
Slack, a question posted and the answered one updated per turn), so the threads that run turns
after their acks must be many, or turns queue behind those waits: with 8 threads and 100 ms
calls, 200 users got 35 turns/s. But threads that all compute at once fight over the GIL, and
uvicorn's event loop, which acks every request, waits behind them: 64 threads with nothing to
hold them back put the acks on PostgreSQL at p50 1.9 s.

So each listener thread takes one of a few `WorkSlots` before it starts, and gives it back while it
waits on Slack (`YieldingWebClient`) or on a language model (`Turns` enters `waiting()` around the
assistant; `try` calls its models on a pool of its own, bot.runs.trained_model.try_limits): the
waits overlap, the computing stays few. A thread coming back from Slack takes its slot back at once,
over the bound if need be: it may hold its conversation's lock, which threads in slots wait for, so
making it wait for a slot could deadlock them all. Only a thread that holds nothing yet waits for a
slot, and waiting threads get theirs in the order they asked: with whichever woke first taking a
freed slot, some turns waited behind all those that came after them (a turn p99 at 200 users of 3.5
s, at p50 1.1 s).

And the threads that compute run `behind_the_acks`: at a lower CPU priority than the process's
others, the event loop that acks among them, so that on a busy machine the kernel runs the acks
first (the GIL aside, the threads that compute also wait for a core with the database server and
every other process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

from slack_sdk.web import SlackResponse

from bot.slack.web_api import KeepAliveWebClient

log = logging.getLogger(__name__)

BEHIND_THE_ACKS_NICENESS = 5
"""How much nicer (lower in CPU priority) than the rest of the process the threads that compute
turns are. On PostgreSQL with one process (benchmarks/bot_turns.py, three runs each, the same
hour): 20 users' ack p50 5.2-5.7 -> 3.3-3.7 ms (p99 27-32 -> 18-35: within the noise), 200
users' ack p99 147-161 -> 98-127 ms; turns per second unchanged. More (10) did no better."""


class WorkSlots:
    """About `slots` threads compute at once: those `holding` a slot and not `waiting`. New
    work waits for a free slot, first come first served; a thread back from `waiting` does not
    wait (see the module)."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError("WorkSlots needs at least one slot")
        self._free = slots
        self._lock = threading.Lock()
        self._queue: deque[threading.Event] = deque()
        self._mine = threading.local()

    @property
    def free(self) -> int:
        """Slots no thread holds now (below 0 while threads back from Slack overrun)."""
        with self._lock:
            return self._free

    @property
    def queued(self) -> int:
        """Threads waiting for a slot now."""
        with self._lock:
            return len(self._queue)

    def held_here(self) -> bool:
        """Does this thread hold a slot now?"""
        return bool(getattr(self._mine, "held", False))

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Run the block in a slot of this thread's own, once one is free and every thread that
        asked before has had its own: a slot freed goes to the oldest waiter, never to a
        newcomer, so under a backlog no turn waits behind those that came after it."""
        with self._lock:
            if self._free > 0 and not self._queue:
                self._free -= 1
                handed = None
            else:
                handed = threading.Event()
                self._queue.append(handed)
        if handed is not None:
            handed.wait()
        self._mine.held = True
        try:
            yield
        finally:
            self._give()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """Around a wait on the network: this thread's slot, if it holds one, is another
        thread's meanwhile, and is taken back at once afterwards (free or not)."""
        if not self.held_here():
            yield
            return
        self._give()
        try:
            yield
        finally:
            with self._lock:
                self._free -= 1
            self._mine.held = True

    def _give(self) -> None:
        """Give this thread's slot back: to the oldest waiter, if the slots are not overrun."""
        self._mine.held = False
        with self._lock:
            self._free += 1
            while self._free > 0 and self._queue:
                self._free -= 1
                self._queue.popleft().set()


def behind_the_acks() -> None:
    """Lower the calling thread's CPU priority by BEHIND_THE_ACKS_NICENESS (Linux, where a
    thread has a nice value of its own; elsewhere nothing). Lowering one's own priority needs no
    privilege; if it fails all the same, the thread carries on at the process's priority."""
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    try:
        niceness = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, niceness + BEHIND_THE_ACKS_NICENESS))
    except OSError as error:
        log.warning("could not lower a worker thread's priority (%s): it runs as the rest", error)


class YieldingWebClient(KeepAliveWebClient):
    """A WebClient whose calls give the calling thread's work slot back while Slack answers
    (over kept-alive connections)."""

    def __init__(self, slots: WorkSlots, **options: Any) -> None:
        super().__init__(**options)
        self.slots = slots

    def api_call(
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        auth: dict[str, Any] | None = None,
    ) -> SlackResponse:
        with self.slots.waiting():
            return super().api_call(
                api_method,
                http_verb=http_verb,
                files=files,
                data=data,
                params=params,
                json=json,
                headers=headers,
                auth=auth,
            )
