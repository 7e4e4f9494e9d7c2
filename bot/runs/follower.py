"""Following the runs (`artbot serve`): one events long-poll per run's job on the runner, so an
event reaches its thread as soon as the runner records it.

One thread runs an asyncio loop: a sweep (every `sweep_s`) submits the runs waiting for the
runner and starts a task for each run with a job (a run submitted meanwhile gets its task at
once, through RunService.on_job_submitted); each task
long-polls `GET /jobs/{id}/events?after=<the run's stored cursor>&wait=<wait_s>` and hands the
page to RunService.apply in a worker thread (database and Slack calls block). The cursor is the
last event applied, stored with the run: a restarted bot resumes after it and repeats nothing.
An unreachable or failing runner is retried with a growing, jittered delay, never in a loop.
`stop()` cancels the tasks: a long-poll in flight is dropped at once, not waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.process.shards import ALONE, Shard
from bot.runs.reporter import CARD_MIN_INTERVAL
from bot.runs.service import RunService
from bot.runs.store import Run
from bot.workspaces.clients import ClientFor, NotInstalled
from runner.client import AsyncRunnerClient, RunnerClientError, RunnerRejected

log = logging.getLogger(__name__)

WAIT_S = 25.0
"""How long one long-poll may wait at the runner for the next event (the runner allows 30)."""
MIN_EMPTY_POLL_S = 1.0
"""A long-poll that answered nothing this soon is not asked again sooner (a runner that does
not wait must not make a loop)."""


@dataclass(frozen=True)
class Backoff:
    """The delay before asking the runner again after `failures` failures in a row: doubling
    from `first_s` up to `cap_s`, each cut by up to half at random so that followers of many
    runs do not all reconnect at the same instant."""

    first_s: float = 1.0
    cap_s: float = 30.0

    def delay(self, failures: int) -> float:
        ceiling = min(self.cap_s, self.first_s * 2 ** max(0, failures - 1))
        return ceiling * random.uniform(0.5, 1.0)


class RunFollower:
    """Follows every active run's job with its own long-poll, in a daemon thread; each run's
    thread is told through its team's client (`client_for`)."""

    def __init__(
        self,
        service: RunService,
        client_for: ClientFor,
        runner: AsyncRunnerClient,
        *,
        sweep_s: float = 2.0,
        wait_s: float = WAIT_S,
        backoff: Backoff = Backoff(),
        on_error: Callable[[Exception], None] | None = None,
        shard: Shard = ALONE,
    ) -> None:
        """`runner` is used on the follower's own loop only and closed when it stops; only the
        runs in `shard`'s threads are followed (`artbot serve --workers`)."""
        self._shard = shard
        self._service = service
        self._client_for = client_for
        self._runner = runner
        self._sweep_s = sweep_s
        self._wait_s = wait_s
        self._backoff = backoff
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name="artbot-runs", daemon=True)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._main: asyncio.Task[None] | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def start(self) -> RunFollower:
        self._thread.start()
        self._ready.wait(10)
        self._service.on_job_submitted(self.follow)
        return self

    def follow(self, run: Run) -> None:
        """Follow `run` now (it just got its job): its first events are not left for the next
        sweep. From any thread."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: stopped
                self._loop.call_soon_threadsafe(self._start_following, run)

    def following(self) -> set[int]:
        """The ids of the runs with a long-poll task now."""
        return {run_id for run_id, task in list(self._tasks.items()) if not task.done()}

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel every long-poll and stop; an event being told in a thread is finished first."""
        if self._loop is not None and self._main is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed already
                self._loop.call_soon_threadsafe(self._main.cancel)
        self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        """Whether the follower's thread still runs."""
        return self._thread.is_alive()

    # -- on the follower's loop --

    def _run(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # stop() cancels the sweep
            asyncio.run(self._sweep_forever())

    async def _sweep_forever(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self._ready.set()
        try:
            while True:
                await self._sweep()
                await asyncio.sleep(self._sweep_s)
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            await self._runner.aclose()

    async def _sweep(self) -> None:
        """Submit what is due; start following each run that has a job and no task yet."""
        try:
            await asyncio.to_thread(self._service.submit_due, self._client_for, self._shard)
            active = await asyncio.to_thread(self._service.runs.active)
        except Exception as error:  # the database or Slack: try again at the next sweep
            self._failed("run follower sweep failed", error)
            return
        for run_id in [run_id for run_id, task in self._tasks.items() if task.done()]:
            del self._tasks[run_id]
        for run in active:
            self._start_following(run)

    def _start_following(self, run: Run) -> None:
        """A long-poll task for the run, unless it has one or no job yet."""
        if self._main is None or self._main.done():
            return  # stopping
        if not self._shard.owns(run.key):
            return  # another worker's
        if run.job_id is not None and run.id not in self._tasks:
            self._tasks[run.id] = asyncio.create_task(
                self._follow(run), name=f"artbot-run-{run.id}"
            )

    async def _follow(self, run: Run) -> None:
        """Long-poll the run's job and apply each page until the run is no longer active."""
        assert run.job_id is not None
        job_id = run.job_id
        failures = 0
        wait = self._wait_s
        while run.active:
            began = time.monotonic()
            try:
                page = await self._runner.events(job_id, after=run.cursor, wait=wait)
            except RunnerClientError as error:
                await self._apply_failure(run, error)
                if isinstance(error, RunnerRejected):
                    return  # the runner does not know the job: the run ended as lost
                failures += 1
                await asyncio.sleep(self._backoff.delay(failures))
                wait = 0.0  # the first answer after a failure is told at once, not in 25 s
                continue
            except Exception as error:  # not the runner's answer: a bug; never a tight loop
                self._failed(f"long-poll of run {run.id} failed", error)
                failures += 1
                await asyncio.sleep(self._backoff.delay(failures))
                continue
            try:
                applied_since = self._service.runs.now()
                self._client_for(run.key.team)  # NotInstalled when the app left the workspace
                current = await asyncio.to_thread(self._service.apply, run.id, page)
            except NotInstalled:  # the app left the workspace: the run waits for a reinstall
                await asyncio.sleep(self._backoff.cap_s)
                continue
            except Exception as error:  # the database or Slack: the cursor did not move
                self._failed(f"following run {run.id} failed", error)
                failures += 1
                await asyncio.sleep(self._backoff.delay(failures))
                continue
            failures = 0
            if current is None:
                return
            run = current
            # Events the throttled status card does not show yet: the next poll waits only until
            # the card may be refreshed (one try: a card Slack refuses to update makes no loop).
            card_behind = (
                bool(page.events)
                and run.card_ts is not None
                and (run.card_updated_at is None or run.card_updated_at < applied_since)
            )
            wait = self._card_wait(run) if card_behind else self._wait_s
            if not page.events:
                await _at_least(MIN_EMPTY_POLL_S, since=began)

    def _card_wait(self, run: Run) -> float:
        """The long-poll's wait until the status card may be refreshed (it is throttled): an
        empty answer then lets RunService.apply refresh it."""
        if run.card_updated_at is None:
            return MIN_EMPTY_POLL_S
        due = run.card_updated_at + CARD_MIN_INTERVAL - self._service.runs.now()
        return min(self._wait_s, max(MIN_EMPTY_POLL_S, due.total_seconds()))

    async def _apply_failure(self, run: Run, error: RunnerClientError) -> None:
        try:
            self._client_for(run.key.team)  # NotInstalled when the app left the workspace
            await asyncio.to_thread(self._service.following_failed, run.id, error)
        except NotInstalled:
            return  # told once the app is back in the workspace
        except Exception as failure:
            self._failed(f"telling run {run.id}'s thread of {error} failed", failure)

    def _failed(self, what: str, error: Exception) -> None:
        log.exception(what, exc_info=error)
        if self._on_error:
            self._on_error(error)


async def _at_least(seconds: float, *, since: float) -> None:
    left = seconds - (time.monotonic() - since)
    if left > 0:
        await asyncio.sleep(left)
