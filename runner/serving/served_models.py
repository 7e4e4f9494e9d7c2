"""Serving jobs: a succeeded LocalBackend job's model served for a while, so that the bot's
`try <prompt>` can call it (`POST /jobs/{id}/serve`). The model is the checkpoint its owner chose,
else the best by val/reward (runner.checkpoints.listing).

A serving job is a process (vLLM in production, `ARTBOT_RUNNER_SERVE_COMMAND`) that serves an
OpenAI-compatible API on 127.0.0.1 only: the LoRA at `<art_path>/<project>/models/<name>/
checkpoints/<step:04d>` under the name ART gave it (`name@step`), on the base model of the
model's `model.json`. Nobody reaches that port but the runner, which passes requests on behind
its own token (runner.api.serving_proxy).

At most one per job, and at most `serve_max_jobs` on the runner (more are refused). It takes a
GPU slot like a job (it waits while none is free, and while a training job waits for one: training
goes first), and stops after `serve_idle_s` without a request, `serve_max_lifetime_s` after its
process started however busy it is (a prompt every few minutes must not keep a GPU slot from
training for ever), when asked (DELETE, or a cancel of its job), and when the runner stops. A
runner that died without stopping it stops it at its next start (a marker file in the job's
runner folder names it). Its `serving` and `stopped` events go into its job's events.

Nothing of it is in the database: it lives as long as this runner process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from runner.checkpoints.listing import Checkpoint, model_checkpoint
from runner.errors import CheckpointRefused, NotServing, ServeRefused, ServingNotReady
from runner.jobs.job_folder import runner_dir
from runner.jobs.local import job_process as executor
from runner.jobs.local.processes import LEFTOVER_GRACE_S, terminate_job
from runner.jobs.local.supervisor import write_whole_json
from runner.jobs.scheduler import SlotPool
from runner.records.recorder import JobRecorder
from runner.records.rows import JobRow
from runner.schemas import EventType, JobState, Serving, ServingState
from runner.settings import RunnerSettings

log = logging.getLogger(__name__)

MARKER_FILE = "serving.json"
LOG_FILE = "serving.log"
WAKE_S = 0.25
"""How often a waiting or serving job looks at its slot, its process and its idle time."""
LOG_EXCERPT_CHARS = 1_500


def served_checkpoint(job: JobRow) -> Checkpoint:
    """The job's model to serve: its chosen checkpoint, else its best (runner.checkpoints.listing);
    ServeRefused without one."""
    try:
        return model_checkpoint(job)
    except CheckpointRefused as refused:
        raise ServeRefused(f"{refused}: nothing to serve") from None


@dataclass
class _ServingJob:
    """One serving job and what its thread shares with the requests."""

    job_id: str
    checkpoint: Checkpoint
    after_seq: int
    state: ServingState = ServingState.queued
    gpus: list[int] = field(default_factory=list)
    port: int = 0
    last_used: float = field(default_factory=time.monotonic)
    launched_at: float | None = None
    """When its process started (monotonic): its lifetime counts from there."""
    stop_reason: str | None = None
    stopped_reason: str | None = None
    wake: threading.Event = field(default_factory=threading.Event)

    @property
    def slot_owner(self) -> str:
        return f"serve:{self.job_id}"

    @property
    def marker(self) -> str:
        """The marker variable's value in its processes' environment (processes.terminate_job)."""
        return f"serve-{self.job_id}"

    def view(self, idle_timeout_s: float, max_lifetime_s: float) -> Serving:
        return Serving(
            job_id=self.job_id,
            state=self.state,
            model=self.checkpoint.model,
            step=self.checkpoint.step,
            gpus=self.gpus,
            after_seq=self.after_seq,
            idle_timeout_s=idle_timeout_s,
            max_lifetime_s=max_lifetime_s,
            stopped_reason=self.stopped_reason,
        )


class ServingJobs:
    """The serving jobs of this runner: start, read, use and stop them."""

    def __init__(
        self,
        settings: RunnerSettings,
        workdir: Path,
        recorder: JobRecorder,
        slots: SlotPool,
        environ: Mapping[str, str],
        slot_freed: Callable[[str], None],
    ) -> None:
        """`slot_freed(owner)` gives a slot back to the training queue."""
        self._settings = settings
        self._workdir = workdir
        self._recorder = recorder
        self._slots = slots
        self._environ = environ
        self._slot_freed = slot_freed
        self._lock = threading.Lock()
        self._jobs: dict[str, _ServingJob] = {}
        self._threads: list[threading.Thread] = []
        self._closing = False

    @property
    def idle_timeout_s(self) -> float:
        return self._settings.serve_idle_s

    @property
    def max_lifetime_s(self) -> float:
        return self._settings.serve_max_lifetime_s

    def _view(self, serving: _ServingJob) -> Serving:
        return serving.view(self.idle_timeout_s, self.max_lifetime_s)

    # -- use cases --

    def start(self, job_id: str) -> tuple[Serving, bool]:
        """The job's serving job: the running one, or a new one (queued for a GPU slot):
        (serving, created). ServeRefused for a job whose model cannot be served here, and
        while `serve_max_jobs` serving jobs run already."""
        job = self._recorder.store.require(job_id)
        self._check_servable(job)
        with self._lock:
            current = self._jobs.get(job_id)
            if current is not None and current.state is not ServingState.stopped:
                return self._view(current), False
            if self._closing:
                raise ServeRefused("the runner is stopping")
            running = sum(s.state is not ServingState.stopped for s in self._jobs.values())
            if running >= self._settings.serve_max_jobs:
                raise ServeRefused(
                    f"{running} serving job{'s' if running != 1 else ''} already "
                    f"run{'s' if running == 1 else ''} on this runner, the most it allows "
                    "(ARTBOT_RUNNER_SERVE_MAX_JOBS); try again when one stops (after "
                    f"{self.idle_timeout_s:g} s without a prompt, or "
                    f"{self.max_lifetime_s:g} s after it started)"
                )
            checkpoint = served_checkpoint(job)
            serving = _ServingJob(job_id, checkpoint, after_seq=job.last_event_seq)
            self._jobs[job_id] = serving
            thread = threading.Thread(
                target=self._run, args=(serving,), name=f"serve-{job_id}", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        log.info("job %s: serving %s queued", job_id, checkpoint.model)
        thread.start()
        return self._view(serving), True

    def status(self, job_id: str) -> Serving:
        """The job's serving job (its last, when stopped); NotServing when it never had one."""
        self._recorder.store.require(job_id)
        with self._lock:
            serving = self._jobs.get(job_id)
        if serving is None:
            raise NotServing(f"job {job_id} has no serving job: POST /jobs/{job_id}/serve first")
        return self._view(serving)

    def stop(self, job_id: str, reason: str = "stopped on request") -> Serving:
        """Stop the job's serving job (the `stopped` event follows); NotServing without one."""
        self._recorder.store.require(job_id)
        with self._lock:
            serving = self._jobs.get(job_id)
        if serving is None:
            raise NotServing(f"job {job_id} has no serving job")
        if serving.state is not ServingState.stopped:
            self._request_stop(serving, reason)
        return self._view(serving)

    def active(self, job_id: str) -> bool:
        """Whether the job has a serving job that has not stopped (its events may still come)."""
        with self._lock:
            serving = self._jobs.get(job_id)
        return serving is not None and serving.state is not ServingState.stopped

    def use(self, job_id: str) -> tuple[str, str]:
        """A request is about to reach the job's model: its base URL and served name. It counts
        as activity for the idle timeout. NotServing or ServingNotReady when it cannot answer."""
        with self._lock:
            serving = self._jobs.get(job_id)
        if serving is None or serving.state is ServingState.stopped:
            raise NotServing(f"job {job_id} is not being served: POST /jobs/{job_id}/serve first")
        if serving.state is not ServingState.serving:
            raise ServingNotReady(f"job {job_id}'s model is {serving.state.value}; try again soon")
        serving.last_used = time.monotonic()
        return f"http://127.0.0.1:{serving.port}", serving.checkpoint.model

    def used(self, job_id: str) -> None:
        """A request to the job's model ended: the idle time counts from now."""
        with self._lock:
            serving = self._jobs.get(job_id)
        if serving is not None:
            serving.last_used = time.monotonic()

    def kick(self) -> None:
        """A GPU slot may have been freed: serving jobs waiting for one look now."""
        with self._lock:
            waiting = [s for s in self._jobs.values() if s.state is ServingState.queued]
        for serving in waiting:
            serving.wake.set()

    # -- lifecycle --

    def recover(self) -> None:
        """At start-up: stop what serving jobs a previous runner left running, and say so."""
        for marker in sorted(self._workdir.glob(f"*/.runner/{MARKER_FILE}")):
            job_id = marker.parent.parent.name
            with contextlib.suppress(OSError, ValueError):
                left = json.loads(marker.read_text(encoding="utf-8"))
                terminate_job(left.get("pgid"), f"serve-{job_id}", LEFTOVER_GRACE_S)
            if self._recorder.store.get(job_id) is not None:
                self._recorder.emit(job_id, EventType.stopped, {"reason": "the runner restarted"})
            marker.unlink(missing_ok=True)
            log.info("job %s: a serving job the previous runner left was stopped", job_id)

    def stop_all(self, timeout_s: float) -> None:
        """The runner stops: every serving job stops, and this waits for them."""
        with self._lock:
            self._closing = True
            serving = list(self._jobs.values())
            threads = list(self._threads)
        for each in serving:
            if each.state is not ServingState.stopped:
                self._request_stop(each, "the runner stopped")
        deadline = time.monotonic() + timeout_s + self._settings.cancel_grace_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- the serving job's thread --

    def _check_servable(self, job: JobRow) -> None:
        refusal = self._settings.root_jobs_refusal()
        if refusal is not None:  # a serving process runs in the job's folder, which it wrote
            raise ServeRefused(refusal)
        if self._settings.executor == "ray":
            raise ServeRefused(
                "serving is not available on the Ray executor: a job's checkpoints stay on the "
                "Ray node that ran it"
            )
        if job.backend != "local":
            raise ServeRefused(
                f"job {job.id} trained with ServerlessBackend: its model stays served by W&B; "
                "call it there"
            )
        if job.state is not JobState.succeeded:
            raise ServeRefused(
                f"job {job.id} is {job.state.value}: only a succeeded job's model is served"
            )

    def _request_stop(self, serving: _ServingJob, reason: str) -> None:
        serving.stop_reason = serving.stop_reason or reason
        serving.wake.set()

    def _run(self, serving: _ServingJob) -> None:
        process: subprocess.Popen[bytes] | None = None
        reason = "the serving job failed"
        try:
            if not self._take_slot(serving):
                reason = serving.stop_reason or reason
                return
            serving.state = ServingState.starting
            process = self._launch(serving)
            reason = self._until_ready(serving, process)
            if not reason:
                reason = self._serve(serving, process)
        except Exception as error:  # never leave a slot or a process behind
            log.exception("job %s: serving failed", serving.job_id)
            reason = f"the serving job failed: {type(error).__name__}"
        finally:
            self._end(serving, process, reason)

    def _take_slot(self, serving: _ServingJob) -> bool:
        """Wait for a GPU slot (none needed without slots); False when stopped meanwhile."""
        if not self._slots.slots:
            return serving.stop_reason is None
        while serving.stop_reason is None:
            if self._slots.free and not self._training_waits():
                index = self._slots.reserve(serving.slot_owner)
                if index is not None:
                    serving.gpus = list(self._slots.slots[index])
                    return True
            serving.wake.wait(WAKE_S)
            serving.wake.clear()
        return False

    def _training_waits(self) -> bool:
        """Whether a LocalBackend training job is queued: it takes the next free slot."""
        queued = self._recorder.store.in_states([JobState.queued])
        return any(job.backend == "local" for job in queued)

    def _past_lifetime(self, serving: _ServingJob) -> str:
        """Why the serving job must stop now that its lifetime is over; '' while it is not."""
        started = serving.launched_at
        if started is None or time.monotonic() - started < self.max_lifetime_s:
            return ""
        return f"served for its maximum lifetime of {self.max_lifetime_s:g} s"

    def _launch(self, serving: _ServingJob) -> subprocess.Popen[bytes]:
        job = self._recorder.store.require(serving.job_id)
        folder = runner_dir(self._workdir, job.id)
        folder.mkdir(parents=True, exist_ok=True)
        serving.port = _free_port()
        checkpoint = serving.checkpoint
        argv = self._settings.serve_argv(
            {
                "workdir": job.run_dir,
                "base_model": checkpoint.base_model,
                "lora_path": str(checkpoint.lora_path),
                "model": checkpoint.model,
                "port": str(serving.port),
            }
        )
        env = executor.build_env(
            self._environ,
            self._settings.secret_names,
            serving.marker,
            serving.gpus if self._slots.slots else None,
            Path(job.run_dir),
        )
        account = self._settings.job_account
        if account is not None:
            env.update(account.env())
        with (folder / LOG_FILE).open("wb") as output:
            process = subprocess.Popen(
                argv,
                cwd=job.run_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: stopped as a whole
                user=account.uid if account is not None else None,
                group=account.gid if account is not None else None,
            )
        serving.launched_at = time.monotonic()
        write_whole_json(folder / MARKER_FILE, {"pgid": process.pid})
        log.info("job %s: serving process pid=%d port=%d", job.id, process.pid, serving.port)
        return process

    def _until_ready(self, serving: _ServingJob, process: subprocess.Popen[bytes]) -> str:
        """Wait until the server lists the model; '' when it does, else why it stopped."""
        deadline = time.monotonic() + self._settings.serve_start_timeout_s
        url = f"http://127.0.0.1:{serving.port}/v1/models"
        with httpx.Client(timeout=5.0) as http:
            while serving.stop_reason is None:
                status = process.poll()
                if status is not None:
                    return (
                        f"the serving process exited with status {status} before it answered"
                        f"{self._log_excerpt(serving.job_id)}"
                    )
                lifetime = self._past_lifetime(serving)
                if lifetime:
                    return lifetime
                if time.monotonic() > deadline:
                    return (
                        "the serving process did not answer within "
                        f"{self._settings.serve_start_timeout_s:g} s"
                        f"{self._log_excerpt(serving.job_id)}"
                    )
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    response = http.get(url)
                    if response.status_code == 200:
                        served = [m.get("id") for m in response.json().get("data", [])]
                        if serving.checkpoint.model in served:
                            break
                        return f"the serving process does not serve {serving.checkpoint.model}"
                serving.wake.wait(WAKE_S)
                serving.wake.clear()
            else:
                return serving.stop_reason or ""
        serving.last_used = time.monotonic()
        serving.state = ServingState.serving
        self._recorder.emit(
            serving.job_id,
            EventType.serving,
            {
                "model": serving.checkpoint.model,
                "step": serving.checkpoint.step,
                "gpus": serving.gpus,
                "idle_timeout_s": self.idle_timeout_s,
                "max_lifetime_s": self.max_lifetime_s,
            },
        )
        log.info("job %s: serving %s", serving.job_id, serving.checkpoint.model)
        return ""

    def _serve(self, serving: _ServingJob, process: subprocess.Popen[bytes]) -> str:
        """Serve until stopped, idle, past its lifetime or the process ends; why it stopped."""
        while serving.stop_reason is None:
            status = process.poll()
            if status is not None:
                return (
                    f"the serving process exited with status {status}"
                    f"{self._log_excerpt(serving.job_id)}"
                )
            lifetime = self._past_lifetime(serving)
            if lifetime:  # however many prompts keep coming
                return lifetime
            if time.monotonic() - serving.last_used > self.idle_timeout_s:
                return f"idle for {self.idle_timeout_s:g} s"
            serving.wake.wait(WAKE_S)
            serving.wake.clear()
        return serving.stop_reason

    def _end(
        self, serving: _ServingJob, process: subprocess.Popen[bytes] | None, reason: str
    ) -> None:
        if process is not None:
            terminate_job(
                process.pid, serving.marker, self._settings.cancel_grace_s, reap=process.poll
            )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1)
            (runner_dir(self._workdir, serving.job_id) / MARKER_FILE).unlink(missing_ok=True)
        serving.stopped_reason = reason
        # The event before the state: a long-poll that sees the job finished has read it.
        self._recorder.emit(serving.job_id, EventType.stopped, {"reason": reason})
        serving.state = ServingState.stopped
        log.info("job %s: serving stopped: %s", serving.job_id, reason)
        self._slot_freed(serving.slot_owner)

    def _log_excerpt(self, job_id: str) -> str:
        path = runner_dir(self._workdir, job_id) / LOG_FILE
        try:
            with path.open("rb") as output:
                output.seek(max(0, path.stat().st_size - LOG_EXCERPT_CHARS))
                text = output.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""
        return f":\n{text}" if text else ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
