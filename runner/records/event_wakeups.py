"""Waking long polls: `GET /jobs/{id}/events?wait=S` waits here for the job's next event.

Events are written by the monitor threads and read by the HTTP server's event loop, so the
`EventWakeups` hands a wake-up from any thread to any loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator


class EventWakeups:
    """Wakes async long-polls (on any event loop) when a job gets new events, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def notify(self, job_id: str) -> None:
        """Wake whoever waits for the job's next event."""
        with self._lock:
            waiters = list(self._waiters.get(job_id, ()))
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(event.set)

    def waiting(self) -> int:
        """How many long-polls wait now, all jobs together."""
        with self._lock:
            return sum(len(waiters) for waiters in self._waiters.values())

    @contextlib.contextmanager
    def subscribe(self, job_id: str) -> Iterator[asyncio.Event]:
        """An asyncio.Event set at the job's next event; call from inside the running loop."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._waiters.setdefault(job_id, set()).add(waiter)
        try:
            yield waiter[1]
        finally:
            with self._lock:
                waiters = self._waiters.get(job_id)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[job_id]
