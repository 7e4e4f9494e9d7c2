"""The local executor: jobs on this host, one monitor thread per started job. A monitor launches
the job (or takes over one a previous runner launched), reports what the job's files say, stops it
on cancel or at the max runtime, and records how it ended. When the runner stops, monitors leave
their jobs running; at start-up `recover` takes over what a previous runner left."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from runner.jobs.job_folder import JobFolder
from runner.jobs.job_threads import JobThread, JobThreads
from runner.jobs.local.job_process import JobProcess
from runner.jobs.local.launcher import JobLauncher, Launched
from runner.jobs.local.memory import memory_bytes
from runner.jobs.local.processes import LEFTOVER_GRACE_S, job_processes, terminate_job
from runner.jobs.local.recovery import recover_jobs
from runner.jobs.outcome import Ended, Ending, Outcome, settle
from runner.jobs.scheduler import SlotPool
from runner.progress.logfile import read_tail
from runner.progress.stall import STALL_TAIL_BYTES, StallWatch, stall_rule
from runner.progress.watch import REPORTED_TYPES, JobWatch
from runner.records.recorder import JobRecorder
from runner.records.rows import JobRow, NewEvent
from runner.schemas import EventType, Failure, FailureKind
from runner.settings import RunnerSettings

log = logging.getLogger(__name__)

MEMORY_CHECK_S = 2.0
"""How often a job's memory is summed (a /proc scan) when there is a per-job limit."""


@dataclass
class _Active(JobThread):
    """A started job's in-memory part: its monitor thread, the way to interrupt it, its
    processes."""

    process: JobProcess | None = None
    memory_bytes: int | None = None
    """What the job's processes held when they went over the memory limit."""


class LocalExecutor(JobThreads[_Active]):
    """The monitor threads of the jobs started on this host; `on_end(job_id)` runs when one is
    done with its job (not when it leaves the job running for the next runner)."""

    def __init__(
        self,
        settings: RunnerSettings,
        workdir: Path,
        recorder: JobRecorder,
        launcher: JobLauncher,
        slots: SlotPool,
        on_end: Callable[[str], None],
    ) -> None:
        super().__init__("job")
        self._settings = settings
        self._workdir = workdir
        self._recorder = recorder
        self._launcher = launcher
        self._slots = slots
        self._on_end = on_end

    def recover(self) -> None:
        """At start-up: take over, re-queue or settle the jobs a previous runner started."""
        recover_jobs(self._recorder, self._slots, self, self._workdir)

    def spawn(self, job_id: str, launched: Launched | None = None) -> None:
        """Follow a starting job from its launch, or one a previous runner `launched`."""
        active = _Active(process=launched.process if launched is not None else None)
        self.start(job_id, active, lambda: self._run(job_id, active, launched))

    # -- one job, start to end --

    def _run(self, job_id: str, active: _Active, launched: Launched | None) -> None:
        left_running = False
        try:
            if launched is None:
                launched = self._launcher.launch(job_id, active.cancel)
                if launched is None:
                    return  # it ended before it ran
                active.process = launched.process
            left_running = self._follow(job_id, active, launched)
        except Exception as error:
            log.exception("job %s: the runner failed while running it", job_id)
            self._fail_after_runner_error(job_id, active, error)
        finally:
            if not left_running:
                self.forget(job_id)
                self._on_end(job_id)

    def _follow(self, job_id: str, active: _Active, launched: Launched) -> bool:
        """Report progress until the job ends (or is stopped), then settle it.

        Returns True when the runner is stopping and leaves the job running for the next one.
        """
        store = self._recorder.store
        job = store.require(job_id)
        folder = JobFolder.of(self._workdir, job.id, job.run_dir)
        if job.cancel_requested_at is not None:
            active.cancel.set()
        process = launched.process
        with JobWatch(folder, store.events_of_types(job_id, REPORTED_TYPES)) as watch:
            ending = self._watch_until_end(job, active, process, watch, folder)
            if ending is None:
                log.info("job %s left running for the next runner", job_id)
                return True
            forced = self._stop_processes(job_id, process, ending)
            self._report(job_id, watch.drain())
        ended = Ended(
            job=job,
            runner_dir=folder.runner_dir,
            ending=ending,
            status=process.exit_status(),
            forced=forced,
            last_step=watch.last_step,
            snapshot=launched.snapshot,
            memory_bytes=active.memory_bytes,
        )
        outcome = settle(ended, self._settings.max_runtime_s, self._settings.job_memory_max)
        self._recorder.finish(job_id, outcome)
        return False

    def _watch_until_end(
        self,
        job: JobRow,
        active: _Active,
        process: JobProcess,
        watch: JobWatch,
        folder: JobFolder,
    ) -> Ending | None:
        """Poll the job's files until it exits, is cancelled, runs out of time or over the memory
        limit, saying when it stalls; None when the runner stops first."""
        deadline = self._deadline(job)
        limit = self._settings.job_memory_max
        next_memory_check = time.monotonic()
        stall = StallWatch(stall_rule(self._settings))
        while True:
            events = watch.poll()
            self._report(job.id, events)
            stall.saw(events, watch.output_bytes)
            stalled = stall.check(lambda: read_tail(folder.runner_dir, STALL_TAIL_BYTES).text)
            if stalled is not None:
                log.info("job %s stalled: %ss without output", job.id, stalled["idle_s"])
                self._recorder.emit(job.id, EventType.stalled, stalled)
            if not process.running():
                return Ending.exited
            if active.cancel.is_set():
                return Ending.cancelled
            if deadline is not None and self._recorder.store.now() >= deadline:
                return Ending.timeout
            if limit is not None and time.monotonic() >= next_memory_check:
                next_memory_check = time.monotonic() + MEMORY_CHECK_S
                used = memory_bytes(job_processes(process.pid, job.id))
                if used > limit:
                    log.info("job %s holds %d bytes, over the limit of %d", job.id, used, limit)
                    active.memory_bytes = used
                    return Ending.memory
            if self.stopping.is_set():
                return None
            active.cancel.wait(self._settings.poll_interval_s)

    def _deadline(self, job: JobRow) -> datetime | None:
        # From the original start: a job re-attached after a restart gets no extra time.
        if self._settings.max_runtime_s is None or job.started_at is None:
            return None
        return job.started_at + timedelta(seconds=self._settings.max_runtime_s)

    def _stop_processes(self, job_id: str, process: JobProcess, ending: Ending) -> bool:
        """Stop what is left of the job; True when it ignored SIGTERM and was killed."""
        grace_s = self._settings.cancel_grace_s
        forced = False
        if ending is Ending.exited:
            # The script is done; what it left behind (a vLLM server) must not hold the GPU.
            terminate_job(process.pid, job_id, min(LEFTOVER_GRACE_S, grace_s), reap=process.reap)
        else:
            log.info("job %s stopping (%s)", job_id, ending.value)
            forced = terminate_job(process.pid, job_id, grace_s, reap=process.reap)
            if forced:
                log.info("job %s ignored SIGTERM for %ss: killed", job_id, grace_s)
        process.reap()
        return forced

    def _report(self, job_id: str, events: list[NewEvent]) -> None:
        for kind, data in events:
            self._recorder.emit(job_id, kind, data)

    def _fail_after_runner_error(self, job_id: str, active: _Active, error: Exception) -> None:
        """Stop and fail a job whose monitor broke; never raises (the job must not stay running)."""
        try:
            if active.process is not None:
                terminate_job(
                    active.process.pid, job_id, LEFTOVER_GRACE_S, reap=active.process.reap
                )
            failure = Failure(
                kind=FailureKind.unknown,
                summary=(
                    f"The runner failed while running the job: {type(error).__name__}: {error}"
                )[:2000],
                fix=(
                    "Tell the runner's operator (the runner's log has the details), "
                    "then run the job again."
                ),
            )
            self._recorder.finish(job_id, Outcome.failed(failure))
        except Exception:
            log.exception("job %s: could not record the runner's failure either", job_id)
