"""The runner's use cases: submit, follow, cancel; a FIFO queue over GPU slots; one monitor
thread per active job; recovery after a restart.

Domain errors are plain exceptions (JobRequestError and subclasses); the web layer maps them to
status codes. Nothing here knows about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any

from runner import executor
from runner.errors import (
    IdempotencyConflict,
    InvalidSubmission,
    JobNotFound,
    JobRequestError,
    ResumeConflict,
    SubmissionTooLarge,
)
from runner.executor import JobProcess, PreflightInput
from runner.failures import FailureContext, classify_failure, make_failure
from runner.gpu import GpuInfo, GpuProbe, GpuProcess, default_slots
from runner.logfile import OutputFollower, read_excerpt, read_tail
from runner.processes import terminate_job
from runner.progress import (
    ArtProgress,
    Baseline,
    OutputScanner,
    Seen,
    has_checkpoints,
    read_completion,
)
from runner.schemas import (
    ENV_NAME_PATTERN,
    MAX_SCRIPT_BYTES,
    EventsPage,
    EventType,
    Failure,
    FailureKind,
    Health,
    Job,
    JobEvent,
    JobState,
    JobSubmission,
    LogTail,
)
from runner.settings import RunnerSettings
from runner.store import JobRow, JobStore

log = logging.getLogger(__name__)

MAX_ARG_CHARS = 4_096
MAX_METADATA_ITEMS = 32
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 1_000
EVENTS_PAGE_LIMIT = 500
MAX_LOG_TAIL_BYTES = 1024 * 1024
EXCERPT_HEAD_BYTES = 64 * 1024
EXCERPT_TAIL_BYTES = 192 * 1024
RESCAN_EVERY_S = 1.0
# A finished job's leftovers (a vLLM server the script did not close) get a short grace.
LEFTOVER_GRACE_S = 5.0
ACTIVE_STATES = (JobState.queued, JobState.starting, JobState.running)

__all__ = [
    "IdempotencyConflict",
    "InvalidSubmission",
    "JobNotFound",
    "JobRequestError",
    "JobService",
    "ResumeConflict",
    "SubmissionTooLarge",
]


# ---- waking long polls --------------------------------------------------------------------------


class EventNotifier:
    """Wakes async long-polls (on any event loop) when a job gets new events, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def notify(self, job_id: str) -> None:
        with self._lock:
            waiters = list(self._waiters.get(job_id, ()))
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(event.set)

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


# ---- the service --------------------------------------------------------------------------------


@dataclass
class _Active:
    """An active job's in-memory part: its slot and the way to interrupt its monitor."""

    slot: int | None
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    process: JobProcess | None = None


class JobService:
    """Jobs on this host. `start()` recovers jobs from the store and starts the scheduler."""

    def __init__(
        self,
        settings: RunnerSettings,
        store: JobStore,
        *,
        gpu_probe: GpuProbe | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.notifier = EventNotifier()
        self._probe = gpu_probe or GpuProbe(settings.nvidia_smi)
        self._environ = dict(os.environ if environ is None else environ)
        configured = settings.slots
        self.slots: list[tuple[int, ...]] = (
            configured if configured is not None else default_slots(self._probe.snapshot())
        )
        self.workdir = settings.resolved_workdir
        self._lock = threading.Lock()
        self._slot_owner: dict[int, str] = {}
        self._active: dict[str, _Active] = {}
        self._wake = threading.Condition()
        self._closing = threading.Event()  # no more starts
        self._stopping = threading.Event()  # monitors stop following (jobs go on)
        self._scheduler: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> None:
        """Re-attach or settle the jobs a previous runner left, then start scheduling."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._recover()
        self._scheduler = threading.Thread(
            target=self._schedule_loop, name="runner-scheduler", daemon=True
        )
        self._scheduler.start()

    def stop(self, *, cancel_jobs: bool = False, timeout_s: float = 10.0) -> None:
        """Stop scheduling and following. Jobs keep running (the next runner re-attaches them)
        unless `cancel_jobs`, which stops them as a cancel does. Queued jobs stay queued."""
        # The scheduler first: a slot freed by a cancel below must not start the next job.
        self._closing.set()
        with self._wake:
            self._wake.notify_all()
        if self._scheduler is not None:
            self._scheduler.join(timeout_s)
        if cancel_jobs:
            with self._lock:
                active = list(self._active)
            for job_id in active:
                with contextlib.suppress(JobRequestError):
                    self.cancel(job_id)
            deadline = time.monotonic() + timeout_s + self.settings.cancel_grace_s
            for thread in self._threads():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._stopping.set()  # monitors still following a job leave it running
        for thread in self._threads():
            thread.join(timeout_s)

    def _threads(self) -> list[threading.Thread]:
        with self._lock:
            return [a.thread for a in self._active.values() if a.thread is not None]

    # -- use cases --

    def submit(self, submission: JobSubmission) -> tuple[Job, bool]:
        """Queue a job, or return the one this idempotency key already made: (job, created)."""
        self._validate(submission)
        job_id = uuid.uuid4().hex
        run_dir = str(self.workdir / job_id)
        # A retry of a resume must find its job, not trip over it as the folder's user.
        retry = self.store.get_by_key(submission.idempotency_key)
        if submission.resume_from_job is not None:
            run_dir = (
                retry.run_dir if retry is not None else self._resume_dir(submission.resume_from_job)
            )
        record, created = self.store.create(job_id, submission, run_dir)
        if created:
            log.info(
                "job %s queued backend=%s script=%s", record.id, record.backend, record.script_name
            )
            self.notifier.notify(record.id)
            self._kick()
        return self._job(record), created

    def job(self, job_id: str) -> Job:
        return self._job(self._get(job_id))

    def events(self, job_id: str, after: int = 0, limit: int = EVENTS_PAGE_LIMIT) -> EventsPage:
        """Events after `after`, and whether the job is finished with nothing more to read."""
        record = self._get(job_id)  # read first: a finished job's last event is already stored
        events = self.store.events(job_id, after, max(1, min(limit, EVENTS_PAGE_LIMIT)))
        next_after = events[-1].seq if events else after
        finished = record.state.finished and next_after >= record.last_event_seq
        return EventsPage(job_id=job_id, events=events, next_after=next_after, finished=finished)

    def cancel(self, job_id: str) -> Job:
        """Cancel: a queued job at once; a running one is signalled (SIGTERM, grace, SIGKILL)."""
        record = self._get(job_id)
        if record.state.finished:
            return self._job(record)
        done = self.store.transition(
            job_id,
            [JobState.queued],
            JobState.cancelled,
            finished_at=self.store.now(),
            cancel_requested_at=self.store.now(),
            event=(EventType.cancelled, {"reason": "cancelled before it started", "forced": False}),
        )
        if done is not None:
            self.notifier.notify(job_id)
            log.info("job %s cancelled while queued", job_id)
            return self._job(done)
        record = self.store.request_cancel(job_id) or record
        with self._lock:
            active = self._active.get(job_id)
        if active is not None:
            active.cancel.set()
        log.info("job %s cancel requested", job_id)
        return self._job(record)

    def log_tail(self, job_id: str, tail_bytes: int) -> LogTail:
        self._get(job_id)
        tail = read_tail(self._runner_dir(job_id), max(0, min(tail_bytes, MAX_LOG_TAIL_BYTES)))
        return LogTail(job_id=job_id, text=tail.text, truncated=tail.truncated)

    def health(self) -> Health:
        counts = self.store.counts()
        with self._lock:
            busy = len(self._slot_owner)
        return Health(
            version=_version(),
            gpus=[gpu.to_json() for gpu in self._probe.snapshot()],
            gpu_slots=len(self.slots),
            free_slots=len(self.slots) - busy,
            queued=counts.get(JobState.queued, 0),
            running=counts.get(JobState.running, 0) + counts.get(JobState.starting, 0),
        )

    # -- validation --

    def _validate(self, submission: JobSubmission) -> None:
        size = len(submission.script.encode())
        if size > MAX_SCRIPT_BYTES:
            raise SubmissionTooLarge(f"script is {size:,} bytes; the limit is {MAX_SCRIPT_BYTES:,}")
        if "\x00" in submission.script:
            raise InvalidSubmission("script contains a NUL character")
        bad = [name for name in submission.required_env if not re.fullmatch(ENV_NAME_PATTERN, name)]
        if bad:
            raise InvalidSubmission(
                f"required_env: not environment variable names: {', '.join(repr(b) for b in bad[:5])} "
                "(upper-case letters, digits and _, not starting with a digit)"
            )
        for arg in submission.args:
            if "\x00" in arg or len(arg) > MAX_ARG_CHARS:
                raise InvalidSubmission(
                    f"args: each argument must be under {MAX_ARG_CHARS} characters, without NUL"
                )
        if len(submission.metadata) > MAX_METADATA_ITEMS:
            raise InvalidSubmission(f"metadata: at most {MAX_METADATA_ITEMS} entries")
        for key, value in submission.metadata.items():
            if (
                not key
                or len(key) > MAX_METADATA_KEY
                or len(value) > MAX_METADATA_VALUE
                or "\x00" in key + value
            ):
                raise InvalidSubmission(
                    f"metadata: keys of 1 to {MAX_METADATA_KEY} characters, values up to {MAX_METADATA_VALUE}, no NUL"
                )

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

    # -- reading --

    def _get(self, job_id: str) -> JobRow:
        return self.store.require(job_id)

    def _job(self, record: JobRow) -> Job:
        position = None
        if record.state is JobState.queued:
            position = self._queue_position(record)
        return record.to_job(position)

    def _queue_position(self, record: JobRow) -> int:
        """1 + the queued local jobs ahead of it (serverless jobs wait for nothing: 1)."""
        if record.backend != "local":
            return 1
        queued = self.store.in_states([JobState.queued])
        ahead = [
            job
            for job in queued
            if job.backend == "local" and (job.created_at, job.id) < (record.created_at, record.id)
        ]
        return len(ahead) + 1

    def _runner_dir(self, job_id: str) -> Path:
        return self.workdir / job_id / executor.RUNNER_DIR_NAME

    # -- events --

    def _emit(self, job_id: str, type: EventType, data: dict[str, Any]) -> JobEvent:
        event = self.store.append_event(job_id, type, data)
        self.notifier.notify(job_id)
        return event

    def _finish(
        self,
        job_id: str,
        state: JobState,
        event: tuple[EventType, dict[str, Any]],
        *,
        exit_code: int | None = None,
        failure: Failure | None = None,
    ) -> None:
        done = self.store.transition(
            job_id,
            [JobState.starting, JobState.running],
            state,
            event=event,
            finished_at=self.store.now(),
            exit_code=exit_code,
            failure=failure,
        )
        if done is not None:
            self.notifier.notify(job_id)
            log.info(
                "job %s %s exit_code=%s failure=%s",
                job_id,
                state.value,
                exit_code,
                failure.kind.value if failure else None,
            )

    # -- scheduling --

    def _kick(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _schedule_loop(self) -> None:
        while not self._closing.is_set():
            try:
                self._schedule_once()
            except Exception:
                log.exception("scheduling failed")
            with self._wake:
                # Checked under the lock: a stop() that notified just before is not missed.
                if not self._closing.is_set():
                    self._wake.wait(timeout=1.0)

    def _schedule_once(self) -> None:
        """Start queued jobs in order: serverless ones at once, local ones while slots are free.

        FIFO for local jobs: once one must wait for a slot, the local jobs behind it wait too.
        """
        local_blocked = False
        busy_dirs = {
            job.run_dir for job in self.store.in_states([JobState.starting, JobState.running])
        }
        for record in self.store.in_states([JobState.queued]):
            if self._closing.is_set():
                return
            if record.run_dir in busy_dirs:
                continue  # two resumes of one job raced past submit's check: one at a time
            slot: int | None = None
            if record.backend == "local" and self.slots:
                if local_blocked:
                    continue
                slot = self._reserve_slot(record.id)
                if slot is None:
                    local_blocked = True
                    continue
            self._begin(record, slot)
            busy_dirs.add(record.run_dir)

    def _reserve_slot(self, job_id: str) -> int | None:
        with self._lock:
            for index in range(len(self.slots)):
                if index not in self._slot_owner:
                    self._slot_owner[index] = job_id
                    return index
        return None

    def _release(self, job_id: str) -> None:
        with self._lock:
            for index, owner in list(self._slot_owner.items()):
                if owner == job_id:
                    del self._slot_owner[index]
            self._active.pop(job_id, None)
        self._kick()

    def _begin(self, record: JobRow, slot: int | None) -> None:
        gpus = list(self.slots[slot]) if slot is not None else []
        started = self.store.transition(record.id, [JobState.queued], JobState.starting, gpus=gpus)
        if started is None:  # cancelled meanwhile
            self._release(record.id)
            return
        self._spawn_monitor(started.id, _Active(slot))

    def _spawn_monitor(self, job_id: str, active: _Active) -> None:
        thread = threading.Thread(
            target=self._monitor, args=(job_id, active), name=f"job-{job_id[:8]}", daemon=True
        )
        active.thread = thread
        with self._lock:
            self._active[job_id] = active
        thread.start()

    # -- one job, start to end --

    def _monitor(self, job_id: str, active: _Active) -> None:
        snapshot: list[GpuInfo] = []
        left_running = False
        try:
            if active.process is None:
                started = self._start(job_id, active)
                if started is None:
                    return
                active.process, snapshot = started
            else:
                snapshot = self._load_snapshot(job_id)
            left_running = self._follow(job_id, active, active.process, snapshot)
        except Exception as error:
            log.exception("job %s: the runner failed while running it", job_id)
            self._fail_after_runner_error(job_id, active, error)
        finally:
            if not left_running:
                self._release(job_id)

    def _fail_after_runner_error(self, job_id: str, active: _Active, error: Exception) -> None:
        """Stop and fail a job whose monitor broke; never raises (the job must not stay running)."""
        try:
            if active.process is not None:
                terminate_job(
                    active.process.pid, job_id, LEFTOVER_GRACE_S, reap=active.process.reap
                )
            failure = Failure(
                kind=FailureKind.unknown,
                summary=f"The runner failed while running the job: {type(error).__name__}: {error}"[
                    :2000
                ],
                fix="Tell the runner's operator (the runner's log has the details), then run the job again.",
            )
            self._finish(
                job_id,
                JobState.failed,
                (EventType.failed, failure.model_dump(mode="json")),
                failure=failure,
            )
        except Exception:
            log.exception("job %s: could not record the runner's failure either", job_id)

    def _start(self, job_id: str, active: _Active) -> tuple[JobProcess, list[GpuInfo]] | None:
        """Prepare the folder, check, and launch; None when the job ended before it ran."""
        record = self._get(job_id)
        if record.cancel_requested_at is not None or active.cancel.is_set():
            self._finish(
                job_id,
                JobState.cancelled,
                (EventType.cancelled, {"reason": "cancelled before it started", "forced": False}),
            )
            return None
        run_dir = Path(record.run_dir)
        runner_dir = self._runner_dir(job_id)
        runner_dir.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        script = run_dir / record.script_name
        script.write_text(record.script, encoding="utf-8")
        (runner_dir / executor.BASELINE_FILE).write_text(
            Baseline.capture(run_dir).to_json(), encoding="utf-8"
        )

        gpus = record.gpus if record.backend == "local" else None
        env = executor.build_env(self._environ, self.settings.secret_names, job_id, gpus, run_dir)
        command = [
            *self.settings.command_argv(script, run_dir),
            *executor.script_args(record.script, run_dir, record.args),
        ]
        nvidia_smi = self._probe.available and record.backend == "local"
        snapshot = self._probe.snapshot(fresh=True) if nvidia_smi else []
        (runner_dir / executor.GPU_SNAPSHOT_FILE).write_text(
            json.dumps([g.to_json() for g in snapshot]), encoding="utf-8"
        )
        failure = executor.preflight(
            PreflightInput(
                backend=record.backend,
                env=env,
                required_env=record.required_env,
                command=command,
                gpus=gpus,
                snapshot=snapshot,
                nvidia_smi_present=nvidia_smi,
                memory_fraction=executor.gpu_memory_fraction(record.script, record.args),
            )
        )
        if failure is not None:
            self._finish(
                job_id,
                JobState.failed,
                (EventType.failed, failure.model_dump(mode="json")),
                failure=failure,
            )
            return None
        if active.cancel.is_set():  # cancelled during preflight: do not start it at all
            self._finish(
                job_id,
                JobState.cancelled,
                (EventType.cancelled, {"reason": "cancelled before it started", "forced": False}),
            )
            return None
        argv = executor.supervisor_argv(runner_dir, run_dir, self.settings.log_max_bytes, command)
        process = executor.launch(argv, env, run_dir, runner_dir)
        running = self.store.transition(
            job_id,
            [JobState.starting],
            JobState.running,
            event=(EventType.started, {"gpus": record.gpus, "pid": process.pid}),
            pid=process.pid,
            process_start=process.start_id,
            started_at=self.store.now(),
        )
        self.notifier.notify(job_id)
        if running is None:  # pragma: no cover - only this thread moves a starting job
            raise RuntimeError(f"job {job_id} left the starting state while it was launched")
        log.info("job %s started pid=%d gpus=%s", job_id, process.pid, record.gpus)
        return process, snapshot

    def _load_snapshot(self, job_id: str) -> list[GpuInfo]:
        try:
            raw = json.loads(
                (self._runner_dir(job_id) / executor.GPU_SNAPSHOT_FILE).read_text(encoding="utf-8")
            )
            return [
                GpuInfo(
                    **{**g, "processes": tuple(GpuProcess(**p) for p in g.get("processes", ()))}
                )
                for g in raw
            ]
        except (OSError, ValueError, TypeError):
            return []

    def _follow(
        self, job_id: str, active: _Active, process: JobProcess, snapshot: list[GpuInfo]
    ) -> bool:
        """Report progress until the job ends (or is stopped), then settle it.

        Returns True when the runner is stopping and leaves the job running for the next one.
        """
        record = self._get(job_id)
        run_dir = Path(record.run_dir)
        runner_dir = self._runner_dir(job_id)
        progress = ArtProgress(run_dir, self._baseline(runner_dir), self._seen(job_id))
        output = OutputFollower(runner_dir)
        scanner = OutputScanner()
        for warning in self.store.events_of_types(job_id, [EventType.warning]):
            scanner.already_reported(str(warning.data.get("message", "")))
        if record.cancel_requested_at is not None:
            active.cancel.set()
        deadline = None
        if self.settings.max_runtime_s is not None and record.started_at is not None:
            deadline = record.started_at + timedelta(seconds=self.settings.max_runtime_s)
        outcome = "exited"
        forced = False
        last_rescan = 0.0
        try:
            while True:
                rescan = time.monotonic() - last_rescan >= RESCAN_EVERY_S
                if rescan:
                    last_rescan = time.monotonic()
                self._report(job_id, progress.poll(rescan=rescan), scanner.feed(output.poll()))
                if not process.running():
                    break
                if active.cancel.is_set():
                    outcome = "cancelled"
                    break
                if deadline is not None and self.store.now() >= deadline:
                    outcome = "timeout"
                    break
                if self._stopping.is_set():
                    log.info("job %s left running for the next runner", job_id)
                    return True
                active.cancel.wait(self.settings.poll_interval_s)

            if outcome == "exited":
                # The script is done; what it left behind (a vLLM server) must not hold the GPU.
                terminate_job(
                    process.pid,
                    job_id,
                    min(LEFTOVER_GRACE_S, self.settings.cancel_grace_s),
                    reap=process.reap,
                )
            else:
                log.info("job %s stopping (%s)", job_id, outcome)
                forced = terminate_job(
                    process.pid, job_id, self.settings.cancel_grace_s, reap=process.reap
                )
                if forced:
                    log.info(
                        "job %s ignored SIGTERM for %ss: killed",
                        job_id,
                        self.settings.cancel_grace_s,
                    )
            process.reap()
            while chunk := output.poll():
                self._report(job_id, [], scanner.feed(chunk))
            self._report(job_id, progress.poll(rescan=True), [])
        finally:
            output.close()
        self._settle(job_id, record, process, snapshot, outcome, progress.last_step, forced)
        return False

    def _report(
        self,
        job_id: str,
        progress: list[tuple[EventType, dict[str, Any]]],
        warnings: list[dict[str, Any]],
    ) -> None:
        for kind, data in progress:
            self._emit(job_id, kind, data)
        for data in warnings:
            self._emit(job_id, EventType.warning, data)

    def _settle(
        self,
        job_id: str,
        record: JobRow,
        process: JobProcess,
        snapshot: list[GpuInfo],
        outcome: str,
        last_step: int | None,
        forced: bool = False,
    ) -> None:
        runner_dir = self._runner_dir(job_id)
        status = process.exit_status()
        exit_code = status.exit_code if status is not None else None
        if outcome == "cancelled":
            self._finish(
                job_id,
                JobState.cancelled,
                # forced: it ignored SIGTERM for the grace period and was killed
                (EventType.cancelled, {"reason": "cancel requested", "forced": forced}),
                exit_code=exit_code,
            )
            return
        run_dir = Path(record.run_dir)
        context = FailureContext(
            script_name=record.script_name,
            job_gpus=record.gpus,
            has_checkpoints=has_checkpoints(run_dir),
            timed_out=outcome == "timeout",
            max_runtime_s=self.settings.max_runtime_s,
        )
        completion = read_completion(read_tail(runner_dir, 64 * 1024).text)
        if outcome == "exited" and status is None and not completion.complete:
            # The supervisor was killed before it could record the exit status (killed from
            # outside, or while no runner watched): without the script's end banner, a failure.
            failure = make_failure(
                kind=FailureKind.unknown,
                summary=(
                    "The job's processes ended without recording an exit status (killed from outside the runner?)"
                    + (
                        f"; the last step reported was {last_step}."
                        if last_step is not None
                        else "."
                    )
                ),
                fix="Check the runner host (`dmesg` shows the kernel's OOM killer), then run the job again.",
                log_excerpt=read_tail(runner_dir, 4_000).text,
            )
            self._finish(
                job_id,
                JobState.failed,
                (EventType.failed, failure.model_dump(mode="json")),
                failure=failure,
            )
            return
        if outcome == "exited" and (exit_code == 0 or status is None):
            # exit 0; or no recorded status but the script printed its end-of-training banner
            data = {
                "model": completion.model,
                "inference_url": completion.inference_url,
                "step": completion.step if completion.step is not None else last_step,
            }
            self._finish(
                job_id, JobState.succeeded, (EventType.succeeded, data), exit_code=exit_code
            )
            return
        excerpt = read_excerpt(runner_dir, EXCERPT_HEAD_BYTES, EXCERPT_TAIL_BYTES)
        failure = classify_failure(exit_code, excerpt, snapshot, context)
        self._finish(
            job_id,
            JobState.failed,
            (EventType.failed, failure.model_dump(mode="json")),
            exit_code=exit_code,
            failure=failure,
        )

    @staticmethod
    def _baseline(runner_dir: Path) -> Baseline:
        try:
            return Baseline.from_json(
                (runner_dir / executor.BASELINE_FILE).read_text(encoding="utf-8")
            )
        except (OSError, ValueError):
            return Baseline()

    def _seen(self, job_id: str) -> Seen:
        seen = Seen()
        for event in self.store.events_of_types(
            job_id, [EventType.step, EventType.validation, EventType.checkpoint]
        ):
            step = event.data.get("step")
            if not isinstance(step, int):
                continue
            {
                EventType.step: seen.steps,
                EventType.validation: seen.validations,
                EventType.checkpoint: seen.checkpoints,
            }[event.type].add(step)
        return seen

    # -- after a restart --

    def _recover(self) -> None:
        """Jobs a previous runner left: queued ones wait for the scheduler; started ones whose
        supervisor still runs are followed again; the others are settled or marked lost."""
        for record in self.store.in_states([JobState.starting, JobState.running]):
            if record.pid is None:
                # The previous runner stopped between taking the job and launching it.
                self.store.transition(record.id, [JobState.starting], JobState.queued, gpus=[])
                log.info("job %s queued again: the previous runner never launched it", record.id)
                continue
            process = JobProcess(record.pid, record.process_start, self._runner_dir(record.id))
            if process.running() or process.exit_status() is not None:
                # Still running: follow it. Ended while the runner was down, with its exit status
                # recorded: the monitor settles it at once, as if it had watched the end.
                active = _Active(self._claim_slot(record), process=process)
                log.info(
                    "job %s re-attached pid=%d running=%s", record.id, record.pid, process.running()
                )
                self._spawn_monitor(record.id, active)
                continue
            # By marker only: the pid (and so the group id) may be another program's by now.
            terminate_job(None, record.id, LEFTOVER_GRACE_S)
            reason = f"the runner restarted and the job's process (pid {record.pid}) was gone, with no exit status recorded"
            if self.store.transition(
                record.id,
                [JobState.starting, JobState.running],
                JobState.lost,
                event=(EventType.lost, {"reason": reason}),
                finished_at=self.store.now(),
            ):
                self.notifier.notify(record.id)
                log.info("job %s lost: pid %d is gone", record.id, record.pid)

    def _claim_slot(self, record: JobRow) -> int | None:
        if record.backend != "local":
            return None
        with self._lock:
            for index, gpus in enumerate(self.slots):
                if list(gpus) == record.gpus and index not in self._slot_owner:
                    self._slot_owner[index] = record.id
                    return index
        log.warning("job %s runs on GPUs %s, which are no configured slot", record.id, record.gpus)
        return None


def _version() -> str:
    try:
        return package_metadata.version("artbot")
    except package_metadata.PackageNotFoundError:
        return "0+unknown"
