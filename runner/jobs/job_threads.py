"""One thread per started job: what both executors are made of (runner.jobs.local.executor's
monitors, runner.jobs.ray.executor's followers), so that cancelling, listing, joining and stopping
the jobs' threads is written once. Each job's thread has a cancel event; stopping the runner
stops the threads, not the jobs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar


@dataclass
class JobThread:
    """A started job's in-memory part: its thread and the way to interrupt it."""

    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


State = TypeVar("State", bound=JobThread)


class JobThreads(Generic[State]):
    """The threads of the jobs being followed, by job id: the base of both executors, which add
    how to follow one job (`spawn`) and how to take over after a restart (`recover`)."""

    def __init__(self, prefix: str) -> None:
        self._thread_prefix = prefix
        self._threads_lock = threading.Lock()
        self._followed: dict[str, State] = {}
        self.stopping = threading.Event()
        """Set when the runner stops: the threads stop following (the jobs go on)."""

    def start(self, job_id: str, state: State, follow: Callable[[], None]) -> None:
        """Run `follow` on a thread of its own for `job_id`, with `state` as its part."""
        state.thread = threading.Thread(
            target=follow, name=f"{self._thread_prefix}-{job_id[:8]}", daemon=True
        )
        with self._threads_lock:
            self._followed[job_id] = state
        state.thread.start()

    def forget(self, job_id: str) -> None:
        """The job's thread is done with it."""
        with self._threads_lock:
            self._followed.pop(job_id, None)

    def cancel(self, job_id: str) -> None:
        """Tell the job's thread to stop the job (no-op when it has none)."""
        with self._threads_lock:
            state = self._followed.get(job_id)
        if state is not None:
            state.cancel.set()

    def job_ids(self) -> list[str]:
        with self._threads_lock:
            return list(self._followed)

    def join(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` in all for the threads to finish."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads():
            thread.join(max(0.0, deadline - time.monotonic()))

    def stop(self, timeout_s: float) -> None:
        """Stop following: threads still following a job leave it running for the next runner."""
        self.stopping.set()
        for thread in self._threads():
            thread.join(timeout_s)

    def _threads(self) -> list[threading.Thread]:
        with self._threads_lock:
            return [s.thread for s in self._followed.values() if s.thread is not None]
