"""The runner's use cases: submit a job, read it and its events, cancel it, read its output, and
the host's health. `JobService` composes the parts that run the jobs: the scheduler (the
queue over GPU slots), one monitor thread per started job, and recovery after a restart; and
those that take a finished job's model further: `serving` (runner.serving.served_models) and
`checkpoints` (runner.checkpoints.service: listing, choice, export, download).

Domain errors are plain exceptions (JobRequestError and subclasses); the web layer maps them to
status codes. Nothing here knows about HTTP.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from importlib import metadata as package_metadata
from pathlib import Path

from runner.checkpoints.service import CheckpointService
from runner.errors import (
    InvalidQuery,
    InvalidSubmission,
    JobRequestError,
    ResumeConflict,
    RunsAsRoot,
)
from runner.jobs.executors import JobExecutor, ray_executor
from runner.jobs.gpu import GpuProbe, default_slots, system_nvml
from runner.jobs.gpu_fit import GpuGate
from runner.jobs.job_folder import runner_dir
from runner.jobs.local.executor import LocalExecutor
from runner.jobs.local.job_process import JobProcess, passed_env_names
from runner.jobs.local.launcher import JobLauncher
from runner.jobs.scheduler import Scheduler, SlotPool
from runner.jobs.validation import check_submission
from runner.progress.logfile import read_tail
from runner.records.event_wakeups import EventWakeups
from runner.records.recorder import JobRecorder
from runner.records.redact import Redactor
from runner.records.retention import SWEEP_INTERVAL_S, RetentionPolicy, RetentionSweeper
from runner.records.rows import JobRow
from runner.records.store import JobStore
from runner.schemas import (
    EventsPage,
    EventType,
    Health,
    Job,
    JobsPage,
    JobState,
    JobSubmission,
    LogTail,
    RolloutsPage,
    Serving,
    ValidationRollouts,
)
from runner.serving.served_models import ServingJobs
from runner.settings import RunnerSettings

log = logging.getLogger(__name__)

EVENTS_PAGE_LIMIT = 500
JOBS_PAGE_LIMIT = 200
MAX_LOG_TAIL_BYTES = 1024 * 1024
REDACTION_MARGIN_BYTES = 1024


class JobService:
    """Jobs on this host. `start()` recovers jobs from the store and starts the scheduler."""

    def __init__(
        self,
        settings: RunnerSettings,
        store: JobStore,
        *,
        gpu_probe: GpuProbe | None = None,
        environ: Mapping[str, str] | None = None,
        after_launch: Callable[[JobProcess], None] | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        """`after_launch` runs between a job's launch and its record (tests inject faults);
        `on_stop` once the service has stopped (the database's runner lock is released)."""
        self._on_stop = on_stop or (lambda: None)
        self.settings = settings
        self.refusal = settings.root_jobs_refusal()
        """Why this runner runs no job (root with no job user); None when it runs them."""
        self.store = store
        self.wakeups = EventWakeups()
        self.workdir = settings.resolved_workdir
        self._passed_env = passed_env_names(settings.secret_names)
        self._probe = gpu_probe or GpuProbe(
            settings.nvidia_smi, nvml=system_nvml() if settings.nvml else None
        )
        configured = settings.slots
        self.slots = SlotPool(
            configured if configured is not None else default_slots(self._probe.snapshot())
        )
        source_env = dict(os.environ if environ is None else environ)
        self.redactor = Redactor(
            {
                **{name: source_env.get(name, "") for name in settings.secret_names},
                "HF_TOKEN": source_env.get("HF_TOKEN", ""),  # exports' (runner.checkpoints)
                "ARTBOT_RUNNER_TOKEN": settings.token.get_secret_value(),
            }
        )
        self._recorder = JobRecorder(store, self.wakeups, self.redactor)
        launcher = JobLauncher(
            settings,
            self.workdir,
            self._recorder,
            self._probe,
            source_env,
            after_launch,
        )
        self.executor: JobExecutor
        self.gpu_gate: GpuGate | None = None
        if settings.executor == "ray":
            # Ray places jobs on its nodes' GPUs: the queue here holds no GPU slots.
            self.slots = SlotPool([])
            self.executor = ray_executor(
                settings, self.workdir, self._recorder, source_env, self._job_ended
            )
        else:
            self.executor = LocalExecutor(
                settings, self.workdir, self._recorder, launcher, self.slots, self._job_ended
            )
            self.gpu_gate = GpuGate(self._probe, self._recorder, settings.gpu_wait_s)
        self._scheduler = Scheduler(
            store, self.slots, start=self.executor.spawn, gate=self.gpu_gate
        )
        self.serving = ServingJobs(
            settings, self.workdir, self._recorder, self.slots, source_env, self._job_ended
        )
        self.checkpoints = CheckpointService(settings, self.workdir, self._recorder, source_env)
        self.retention = RetentionPolicy(
            max_age=timedelta(days=settings.retention_days) if settings.retention_days else None,
            max_bytes=settings.retention_max_bytes,
        )
        self._sweeper = RetentionSweeper(store, self.workdir, self.retention, SWEEP_INTERVAL_S)

    # -- lifecycle --

    def start(self) -> None:
        """Re-attach or settle the jobs a previous runner left, then start scheduling."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.executor.recover()
        self.serving.recover()
        self.checkpoints.recover()
        self._scheduler.start()
        self._sweeper.start()

    def stop(self, *, cancel_jobs: bool = False, timeout_s: float = 10.0) -> None:
        """Stop scheduling and following. Jobs keep running (the next runner re-attaches them)
        unless `cancel_jobs`, which stops them as a cancel does. Queued jobs stay queued."""
        # The scheduler first: a slot freed by a cancel below must not start the next job.
        self._scheduler.stop(timeout_s)
        self._sweeper.stop(timeout_s)
        self.serving.stop_all(timeout_s)  # a serving job never outlives its runner
        self.checkpoints.stop_all(timeout_s)
        if cancel_jobs:
            for job_id in self.executor.job_ids():
                with contextlib.suppress(JobRequestError):
                    self.cancel(job_id)
            self.executor.join(timeout_s + self.settings.cancel_grace_s)
        self.executor.stop(timeout_s)
        self._on_stop()

    def _job_ended(self, job_id: str) -> None:
        self._scheduler.job_ended(job_id)
        self.serving.kick()

    # -- use cases --

    def submit(self, submission: JobSubmission) -> tuple[Job, bool]:
        """Queue a job, or return the one this idempotency key already made: (job, created)."""
        if self.refusal is not None:
            raise RunsAsRoot(self.refusal)
        check_submission(submission, self._passed_env)
        job_id = uuid.uuid4().hex
        run_dir = str(self.workdir / job_id)
        # A retry of a resume must find its job, not trip over it as the folder's user.
        retry = self.store.get_by_key(submission.idempotency_key)
        if submission.resume_from_job is not None:
            if self.settings.executor == "ray":
                raise InvalidSubmission(
                    "resume_from_job: not on the Ray executor (a job's checkpoints stay on the "
                    "Ray node that ran it)"
                )
            run_dir = (
                retry.run_dir if retry is not None else self._resume_dir(submission.resume_from_job)
            )
        job, created = self._recorder.queue(job_id, submission, run_dir)
        if created:
            log.info("job %s queued backend=%s script=%s", job.id, job.backend, job.script_name)
            self._scheduler.kick()
        return self._view(job), created

    def job(self, job_id: str) -> Job:
        """The job as the API shows it."""
        return self._view(self.store.require(job_id))

    def jobs(self, states: Sequence[JobState], before: str | None, limit: int) -> JobsPage:
        """Jobs newest first, filtered by state; `before` (a job id) pages on from that job."""
        cursor = None
        if before is not None:
            cursor = self.store.get(before) if len(before) <= 64 else None
            if cursor is None:
                raise InvalidQuery(f"before: there is no job {before!r}")
        limit = max(1, min(limit, JOBS_PAGE_LIMIT))
        rows = self.store.page(states, cursor, limit + 1)
        shown = rows[:limit]
        queued = (
            self.store.in_states([JobState.queued])
            if any(job.state is JobState.queued for job in shown)
            else []
        )
        return JobsPage(
            jobs=[self._waiting(job.to_job(_position(job, queued))) for job in shown],
            next_before=shown[-1].id if len(rows) > limit else None,
        )

    def events(self, job_id: str, after: int = 0, limit: int = EVENTS_PAGE_LIMIT) -> EventsPage:
        """Events after `after`, and whether the job is finished with nothing more to read."""
        job = self.store.require(job_id)  # read first: a finished job's last event is stored
        events = self.store.events(job_id, after, max(1, min(limit, EVENTS_PAGE_LIMIT)))
        next_after = events[-1].seq if events else after
        # A serving job or an export of a finished job has more to tell (`serving`, `stopped`,
        # `exported`, `export_failed`).
        finished = (
            job.state.finished
            and next_after >= job.last_event_seq
            and not self.serving.active(job_id)
            and not self.checkpoints.exports.active(job_id)
        )
        return EventsPage(job_id=job_id, events=events, next_after=next_after, finished=finished)

    def rollouts(self, job_id: str, step: int | None = None) -> RolloutsPage:
        """The validation steps with rollouts, and the rollouts of `step` (the latest when None;
        null when the job has none of that step)."""
        self.store.require(job_id)
        found = {
            int(event.data["step"]): event.data
            for event in self.store.events_of_types(job_id, [EventType.rollouts])
            if isinstance(event.data.get("step"), int)
        }
        wanted = max(found, default=None) if step is None else step
        data = found.get(wanted) if wanted is not None else None
        return RolloutsPage(
            job_id=job_id,
            steps=sorted(found),
            rollouts=ValidationRollouts.model_validate(data) if data is not None else None,
        )

    def cancel(self, job_id: str) -> Job:
        """Cancel: a queued job at once; a running one is signalled (SIGTERM, grace, SIGKILL)."""
        job = self.store.require(job_id)
        if job.state.finished:
            if self.serving.active(job_id):  # what still runs of it: its serving job
                self.serving.stop(job_id, "its job was cancelled")
            return self._view(job)
        done = self._recorder.cancel_queued(job_id)
        if done is not None:
            log.info("job %s cancelled while queued", job_id)
            return self._view(done)
        job = self.store.request_cancel(job_id) or job
        self.executor.cancel(job_id)
        log.info("job %s cancel requested", job_id)
        return self._view(job)

    def serve(self, job_id: str) -> tuple[Serving, bool]:
        """Serve a succeeded LocalBackend job's model (its chosen checkpoint, else its best):
        (serving job, created)."""
        return self.serving.start(job_id)

    def log_tail(self, job_id: str, tail_bytes: int) -> LogTail:
        """The end of the job's output, at most MAX_LOG_TAIL_BYTES, secrets redacted.

        Read with a margin before the cut and redacted whole, so that a secret the cut would
        split is replaced before the cut, not shown in part."""
        self.store.require(job_id)
        tail_bytes = max(0, min(tail_bytes, MAX_LOG_TAIL_BYTES))
        margin = max(REDACTION_MARGIN_BYTES, 4 * self.redactor.longest)
        tail = read_tail(runner_dir(self.workdir, job_id), tail_bytes + margin)
        text = self.redactor.text(tail.text).encode()
        truncated = tail.truncated or len(text) > tail_bytes
        kept = text[max(0, len(text) - tail_bytes) :] if tail_bytes else b""
        return LogTail(
            job_id=job_id, text=kept.decode("utf-8", errors="ignore"), truncated=truncated
        )

    def health(self) -> Health:
        """Version, GPUs, slots and the queue, for /health."""
        counts = self.store.counts()
        return Health(
            version=_version(),
            gpus=[gpu.to_json() for gpu in self._probe.snapshot()],
            gpu_slots=len(self.slots),
            free_slots=self.slots.free,
            queued=counts.get(JobState.queued, 0),
            running=counts.get(JobState.running, 0) + counts.get(JobState.starting, 0),
        )

    # -- helpers of the use cases --

    def _resume_dir(self, source_id: str) -> str:
        source = self.store.get(source_id)
        if source is None:
            raise InvalidSubmission(f"resume_from_job: there is no job {source_id}")
        if not source.state.finished:
            raise ResumeConflict(f"resume_from_job: job {source_id} is still {source.state.value}")
        busy = self.store.active_in_run_dir(source.run_dir)
        if busy is not None:
            raise ResumeConflict(
                f"resume_from_job: job {busy.id} is already working in job {source_id}'s folder"
            )
        if not Path(source.run_dir).is_dir():
            raise InvalidSubmission(
                f"resume_from_job: job {source_id}'s folder is gone from the runner"
            )
        return source.run_dir

    def _view(self, job: JobRow) -> Job:
        """The stored job as the API shows it (with its place in the queue)."""
        return self._waiting(
            job.to_job(self._queue_position(job) if job.state is JobState.queued else None)
        )

    def _waiting(self, job: Job) -> Job:
        """With what a queued job waits for, when the GPU gate knows."""
        if job.state is not JobState.queued or self.gpu_gate is None:
            return job
        return job.model_copy(update={"waiting_for": self.gpu_gate.waiting_for(job.id)})

    def _queue_position(self, job: JobRow) -> int:
        position = _position(job, self.store.in_states([JobState.queued]))
        assert position is not None
        return position


def _position(job: JobRow, queued: list[JobRow]) -> int | None:
    """A queued job's place: 1 + the queued local jobs ahead of it (serverless jobs wait for
    nothing: 1); None for a job that is not queued."""
    if job.state is not JobState.queued:
        return None
    if job.backend != "local":
        return 1
    ahead = [
        other
        for other in queued
        if other.backend == "local" and (other.created_at, other.id) < (job.created_at, job.id)
    ]
    return len(ahead) + 1


def _version() -> str:
    try:
        return package_metadata.version("artbot")
    except package_metadata.PackageNotFoundError:
        return "0+unknown"
