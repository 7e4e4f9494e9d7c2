"""The Ray executor: each started job runs as a Ray job through the dashboard's job API, and one
thread per job follows it (its state, its output, a cancel, the max runtime) to its end.

- **Submit** with the runner's job id as Ray's `submission_id`; a job Ray already has is not
  submitted again (Ray refuses a duplicate id, and RayJobs asks first), so a restart, a retry or
  a second follower never starts a second copy.
- **Output** comes through `tail_job_logs` into the job's `.runner/` log on the runner's disk
  (the same capped log the local supervisor writes), so that log tails, failure excerpts and the
  end-of-training banner are read as for a local job. Progress comes from the script's
  `ARTBOT_PROGRESS` lines in it (ART's files are on the Ray node, not here), warnings from the
  same scanner as a local job's.
- **States**: PENDING keeps the job `starting`, RUNNING makes it `running`, SUCCEEDED
  `succeeded`, FAILED `failed` (classified from the output and the exit code, by
  runner/jobs/failures.py), STOPPED `cancelled`.
- **Stalls**: a running job quiet past its threshold is reported `stalled`, as a local one
  (runner/progress/stall.py).
- **Restart**: a started job is followed again; its output is read again from the start, and
  only what the event log lacks is reported. A job Ray does not know any more (its head
  restarted) is `lost`, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from runner.jobs.failures import make_failure
from runner.jobs.job_folder import runner_dir
from runner.jobs.job_threads import JobThread, JobThreads
from runner.jobs.local.job_process import ExitStatus
from runner.jobs.local.supervisor import RUN_FILES, CappedLog
from runner.jobs.outcome import Ended, Ending, Outcome, settle
from runner.jobs.ray.entry import FORCED_LINE
from runner.jobs.ray.job_api import RayJobInfo, RayJobs, RayJobSpec, RayRefused, RayStatus
from runner.progress.art_records import Seen
from runner.progress.logfile import read_tail
from runner.progress.output_lines import OutputScanner, ProgressLines
from runner.progress.stall import STALL_TAIL_BYTES, StallWatch, stall_rule
from runner.progress.watch import REPORTED_TYPES
from runner.records.recorder import JobRecorder
from runner.records.rows import STARTED_STATES, JobRow, NewEvent
from runner.schemas import EventType, Failure, FailureKind, JobState
from runner.settings import RunnerSettings

log = logging.getLogger(__name__)

RETRY_S = 2.0
"""How long to wait before asking Ray again when its job API did not answer."""
LOG_DRAIN_S = 10.0
"""How long the end of the output may take to arrive once Ray says the job ended."""


@dataclass
class _Follower(JobThread):
    """A Ray job's follower thread and the way to interrupt it."""


class _OutputSink:
    """The job's output as it arrives: into the capped log, and through the scanners."""

    def __init__(self, folder: Path, max_bytes: int, reported: list[NewEvent]) -> None:
        for name in RUN_FILES:  # read again from the start after a restart
            (folder / name).unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        self._log = CappedLog(folder, max_bytes)
        self.seen = Seen.of(reported)
        self._lines = ProgressLines()
        self._scanner = OutputScanner()
        for kind, data in reported:
            if kind is EventType.warning:
                self._scanner.already_reported(str(data.get("message", "")))
        self.forced = False
        self.received = 0
        """Characters of output received (Ray's log as text)."""
        self.broken = False
        """The log stream broke before the end."""
        self._unwatched: list[NewEvent] = []
        self._watched_chars = 0

    def feed(self, text: str) -> list[NewEvent]:
        self.received += len(text)
        chunk = text.encode("utf-8", errors="replace")
        self._log.write(chunk)
        if FORCED_LINE.encode() in chunk:
            self.forced = True
        progress = self.seen.fresh(self._lines.feed(chunk))
        self._unwatched.extend(progress)
        return progress + [(EventType.warning, data) for data in self._scanner.feed(chunk)]

    def since_last_look(self) -> tuple[list[NewEvent], int]:
        """The progress events and characters of output that arrived since the last call: what
        the stall watch sees at each poll (the output is read on another task)."""
        events, self._unwatched = self._unwatched, []
        chars, self._watched_chars = self.received - self._watched_chars, self.received
        return events, chars

    def close(self) -> list[NewEvent]:
        """The last line, when the output did not end with a newline."""
        events = self.feed("\n")
        self._log.close()
        return events


class RayExecutor(JobThreads[_Follower]):
    """Runs started jobs on Ray, one follower thread per job; the same interface as the local
    executor (JobExecutor). Stopping it leaves the Ray jobs running: the next runner follows them
    again."""

    def __init__(
        self,
        settings: RunnerSettings,
        workdir: Path,
        recorder: JobRecorder,
        environ: Mapping[str, str],
        on_end: Callable[[str], None],
        jobs: RayJobs | None = None,
    ) -> None:
        super().__init__("ray")
        assert settings.ray_address is not None
        self._jobs = jobs or RayJobs(settings.ray_address)
        self._settings = settings
        self._workdir = workdir
        self._recorder = recorder
        self._environ = environ
        self._on_end = on_end

    @property
    def jobs(self) -> RayJobs:
        return self._jobs

    # -- JobExecutor --

    def recover(self) -> None:
        """Follow again every job a previous runner started (Ray keeps them while its head
        lives); each follower finds out whether Ray still knows its job."""
        for job in self._recorder.store.in_states(STARTED_STATES):
            log.info("job %s: following its Ray job again", job.id)
            self.spawn(job.id)

    def spawn(self, job_id: str) -> None:
        follower = _Follower()
        self.start(job_id, follower, lambda: self._run(job_id, follower))

    # -- one job --

    def _run(self, job_id: str, follower: _Follower) -> None:
        left_running = False
        try:
            left_running = asyncio.run(self._follow(job_id, follower))
        except Exception as error:
            log.exception("job %s: the runner failed while following it on Ray", job_id)
            self._fail_after_runner_error(job_id, error)
        finally:
            if not left_running:
                self.forget(job_id)
                self._on_end(job_id)

    async def _follow(self, job_id: str, follower: _Follower) -> bool:
        """Submit (unless Ray has it), report, stop on cancel or timeout, settle; True when the
        runner stops first and leaves the job to the next one."""
        store = self._recorder.store
        job = store.require(job_id)
        if job.cancel_requested_at is not None:
            follower.cancel.set()
        info = await self._ask(self._jobs.info, job_id, follower)
        if info is _STOPPING:
            return True
        if info is None:
            if job.state is JobState.running:
                self._mark_lost(job_id)
                return False
            if follower.cancel.is_set():
                self._recorder.finish(job_id, _cancelled("cancelled before it started", False))
                return False
            failure = await self._ask(self._submit, job_id, follower)
            if failure is _STOPPING:
                return True  # not submitted yet: the next runner's recovery submits it
            if failure is not None:
                self._recorder.finish(job_id, Outcome.failed(failure))
                return False
        sink = _OutputSink(
            runner_dir(self._workdir, job_id),
            self._settings.log_max_bytes,
            [(event.type, event.data) for event in store.events_of_types(job_id, REPORTED_TYPES)],
        )
        tail = asyncio.create_task(self._tail(job_id, sink))
        result: tuple[Ending, RayJobInfo] | object | None = None
        try:
            result = await self._watch(job, follower, sink)
        finally:
            if isinstance(result, tuple) and not tail.done():
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(tail), LOG_DRAIN_S)
            tail_finished = tail.done() and not tail.cancelled()
            tail.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await tail
            if isinstance(result, tuple) and (sink.broken or not tail_finished):
                await self._catch_up(job_id, sink)
            self._report(job_id, sink.close())
        if result is None:
            log.info("job %s left running on Ray for the next runner", job_id)
            return True
        if result is _LOST:
            self._mark_lost(job_id)
            return False
        assert isinstance(result, tuple)
        ending, final = result
        self._recorder.finish(job_id, self._outcome(job_id, ending, final, sink))
        return False

    def _submit(self, job_id: str) -> Failure | None:
        """Submit the job to Ray (unless Ray has it); a Failure when it cannot run at all."""
        job = self._recorder.store.require(job_id)
        secrets = {n: self._environ[n] for n in self._settings.secret_names if n in self._environ}
        missing = [
            n for n in job.required_env if n in self._settings.secret_names and not secrets.get(n)
        ]
        if missing:
            listed = ", ".join(missing)
            return make_failure(
                kind=FailureKind.missing_env,
                summary=f"The job needs {listed}, which the runner does not pass to jobs.",
                fix=(
                    f"On the runner host, set {listed} in the runner's environment and add the "
                    "name(s) to ARTBOT_RUNNER_JOB_SECRETS, restart the runner, "
                    "then run the job again."
                ),
            )
        script = Path(job.script_name)
        command = [
            *self._settings.command_argv(script, Path("."), python=self._settings.ray_python),
            *job.args,
        ]
        spec = RayJobSpec(
            job_id=job.id,
            script_name=job.script_name,
            script=job.script,
            command=command,
            num_gpus=float(self._settings.ray_gpus_per_job if job.backend == "local" else 0),
            secrets=secrets,
            grace_s=self._settings.cancel_grace_s,
            python=self._settings.ray_python,
        )
        try:
            submitted = self._jobs.submit(spec)
        except RayRefused as error:
            return make_failure(
                kind=FailureKind.preflight,
                summary=f"Ray refused the job: {error}"[:2000],
                fix="Check the Ray cluster and the runner's Ray settings, then run the job again.",
            )
        log.info(
            "job %s %s to Ray at %s",
            job.id,
            "submitted" if submitted else "already on Ray",
            self._jobs.address,
        )
        return None

    async def _watch(
        self, job: JobRow, follower: _Follower, sink: _OutputSink
    ) -> tuple[Ending, RayJobInfo] | object | None:
        """Ask Ray for the job's state until it ends (how, and Ray's last word); stop it on cancel
        or at the max runtime. _LOST when Ray forgets it, None when the runner stops first."""
        ending = Ending.exited
        stop_sent = False
        stall: StallWatch | None = None  # from when Ray runs it: waiting for a GPU is no stall
        while True:
            info = await self._ask(self._jobs.info, job.id, follower)
            if info is _STOPPING:
                return None
            if info is None:  # its head was replaced while the job ran
                return _LOST
            assert isinstance(info, RayJobInfo)
            if info.status is RayStatus.RUNNING:
                self._mark_running(job.id)
                stall = stall or StallWatch(stall_rule(self._settings))
                if not stop_sent:
                    self._watch_for_stall(job.id, stall, sink)
            if info.status.terminal:
                return ending, info
            if not stop_sent:
                if follower.cancel.is_set():
                    ending = Ending.cancelled
                elif self._past_deadline(job.id):
                    ending = Ending.timeout
                if ending is not Ending.exited:
                    log.info("job %s stopping on Ray (%s)", job.id, ending.value)
                    await asyncio.to_thread(self._jobs.stop, job.id)
                    stop_sent = True
            if self.stopping.is_set() and not stop_sent:
                return None
            if stop_sent:  # waiting for Ray to say STOPPED
                await asyncio.sleep(self._settings.poll_interval_s)
            else:  # a cancel wakes the wait
                await asyncio.to_thread(follower.cancel.wait, self._settings.poll_interval_s)

    def _watch_for_stall(self, job_id: str, stall: StallWatch, sink: _OutputSink) -> None:
        """Tell `stalled` once the running job has been quiet past its threshold (as the local
        executor does: runner/progress/stall.py)."""
        events, chars = sink.since_last_look()
        stall.saw(events, chars)
        folder = runner_dir(self._workdir, job_id)
        stalled = stall.check(lambda: read_tail(folder, STALL_TAIL_BYTES).text)
        if stalled is not None:
            log.info("job %s stalled on Ray: %ss without output", job_id, stalled["idle_s"])
            # Its checkpoints stay on the Ray node: a new job cannot resume it (the bot offers
            # to cancel it instead of restarting it from its last checkpoint).
            self._recorder.emit(job_id, EventType.stalled, {**stalled, "resumable": False})

    async def _ask(self, call: Callable[[str], Any], job_id: str, follower: _Follower) -> Any:
        """Ray's answer; asked again while Ray's job API does not answer (_STOPPING when the
        runner stops meanwhile)."""
        while True:
            try:
                return await asyncio.to_thread(call, job_id)
            except (RuntimeError, OSError) as error:  # Ray's errors, requests' errors
                if self.stopping.is_set():
                    return _STOPPING
                log.warning("job %s: Ray's job API did not answer: %s", job_id, error)
                if await asyncio.to_thread(self.stopping.wait, RETRY_S):
                    return _STOPPING

    async def _tail(self, job_id: str, sink: _OutputSink) -> None:
        try:
            async for text in self._jobs.tail(job_id):
                self._report(job_id, sink.feed(text))
        except Exception as error:  # the stream broke: the rest is read once the job ended
            log.warning("job %s: following Ray's log stopped: %s", job_id, error)
            sink.broken = True

    async def _catch_up(self, job_id: str, sink: _OutputSink) -> None:
        """What the log stream missed (it broke, or the job ended before it started)."""
        try:
            text = await asyncio.to_thread(self._jobs.logs, job_id)
        except Exception as error:
            log.warning("job %s: cannot read the job's log from Ray: %s", job_id, error)
            return
        if len(text) > sink.received:
            self._report(job_id, sink.feed(text[sink.received :]))

    def _mark_lost(self, job_id: str) -> None:
        reason = (
            "Ray no longer knows the job (its head restarted, or the job was deleted from Ray "
            f"at {self._jobs.address}): its outcome is unknown"
        )
        if self._recorder.lost(job_id, reason) is not None:
            log.info("job %s lost: Ray does not know it", job_id)

    def _mark_running(self, job_id: str) -> None:
        job = self._recorder.store.get(job_id)
        if job is None or job.state is not JobState.starting:
            return
        running = self._recorder.store.transition(
            job_id,
            [JobState.starting],
            JobState.running,
            event=(EventType.started, {"gpus": [], "pid": None, "ray_job": job_id}),
            started_at=self._recorder.store.now(),
        )
        if running is not None:
            self._recorder.wakeups.notify(job_id)
            log.info("job %s running on Ray", job_id)

    def _past_deadline(self, job_id: str) -> bool:
        job = self._recorder.store.get(job_id)
        if self._settings.max_runtime_s is None or job is None or job.started_at is None:
            return False
        deadline = job.started_at + timedelta(seconds=self._settings.max_runtime_s)
        return self._recorder.store.now() >= deadline

    def _outcome(self, job_id: str, ending: Ending, info: RayJobInfo, sink: _OutputSink) -> Outcome:
        job = self._recorder.store.require(job_id)
        if info.status is RayStatus.STOPPED and ending is Ending.exited:
            return _cancelled("stopped through Ray's job API, not the runner", sink.forced)
        if info.status is RayStatus.FAILED and info.exit_code is None and ending is Ending.exited:
            return Outcome.failed(_ray_failure(info))
        exit_code = info.exit_code
        if exit_code is None:
            exit_code = 0 if info.status is RayStatus.SUCCEEDED else 1
        ended = Ended(
            job=job,
            runner_dir=runner_dir(self._workdir, job_id),
            ending=ending,
            status=ExitStatus(exit_code, started=True),
            forced=sink.forced,
            last_step=sink.seen.last_step,
            snapshot=[],
        )
        return settle(ended, self._settings.max_runtime_s)

    def _report(self, job_id: str, events: list[NewEvent]) -> None:
        for kind, data in events:
            self._recorder.emit(job_id, kind, data)

    def _fail_after_runner_error(self, job_id: str, error: Exception) -> None:
        try:
            with contextlib.suppress(Exception):
                self._jobs.stop(job_id)
            failure = Failure(
                kind=FailureKind.unknown,
                summary=(
                    f"The runner failed while running the job on Ray: {type(error).__name__}: "
                    f"{error}"
                )[:2000],
                fix="Tell the runner's operator (the runner's log has the details), "
                "then run the job again.",
            )
            self._recorder.finish(job_id, Outcome.failed(failure))
        except Exception:
            log.exception("job %s: could not record the runner's failure either", job_id)


_STOPPING = object()
"""The runner stops: leave the job to the next one."""
_LOST = object()
"""Ray does not know the job any more."""


def _cancelled(reason: str, forced: bool) -> Outcome:
    return Outcome(JobState.cancelled, (EventType.cancelled, {"reason": reason, "forced": forced}))


def _ray_failure(info: RayJobInfo) -> Failure:
    """A job Ray failed before its entrypoint ran (runtime env, resources, the head)."""
    waited = "pending" in info.message.lower() or "timeout" in info.message.lower()
    return make_failure(
        kind=FailureKind.preflight,
        summary=(
            f"Ray could not run the job: {info.message or info.error_type or 'no reason given'}"
        )[:2000],
        fix=(
            "The Ray cluster has no node with the GPUs the job asks for: add one, or lower "
            "ARTBOT_RUNNER_RAY_GPUS_PER_JOB, then run the job again."
            if waited
            else "Check the Ray cluster (its dashboard shows the job), then run the job again."
        ),
    )
