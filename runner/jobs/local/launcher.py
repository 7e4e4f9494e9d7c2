"""Starting a job that left the queue: its folder, its preflight checks, and the launch of its
supervisor. A job cancelled on the way, or failing preflight, is finished here and never runs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.jobs.gpu import GpuInfo, GpuProbe
from runner.jobs.job_folder import JobFolder
from runner.jobs.local import job_process as executor
from runner.jobs.local.job_process import JobProcess, PreflightInput, runs_as_root
from runner.jobs.outcome import Outcome, cancelled_before_start
from runner.records.recorder import JobRecorder
from runner.records.rows import JobRow
from runner.settings import RunnerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Launched:
    """A job's supervisor, started, and its GPUs as they were just before."""

    process: JobProcess
    snapshot: list[GpuInfo]


@dataclass(frozen=True)
class _Plan:
    """How the job will run: its folder, environment and command line."""

    folder: JobFolder
    env: dict[str, str]
    command: list[str]


class JobLauncher:
    """Takes a `starting` job to `running`, or to its end when it cannot run."""

    def __init__(
        self,
        settings: RunnerSettings,
        workdir: Path,
        recorder: JobRecorder,
        probe: GpuProbe,
        environ: Mapping[str, str],
        after_launch: Callable[[JobProcess], None] | None = None,
    ) -> None:
        """`after_launch(process)` runs between the launch and its record (a fault to inject in
        tests: a runner that dies there)."""
        self._after_launch = after_launch or (lambda process: None)
        self._settings = settings
        self._job_user = settings.job_account
        self._workdir = workdir
        self._recorder = recorder
        self._probe = probe
        self._environ = environ

    def launch(self, job_id: str, cancel: threading.Event) -> Launched | None:
        """Prepare the folder, check, and launch; None when the job ended before it ran."""
        job = self._recorder.store.require(job_id)
        if job.cancel_requested_at is not None or cancel.is_set():
            self._recorder.finish(job_id, cancelled_before_start())
            return None
        refusal = self._settings.root_jobs_refusal()
        if refusal is not None:  # queued before this runner started: it never runs as root
            self._recorder.finish(job_id, Outcome.failed(runs_as_root(refusal)))
            return None
        plan = self._plan(job)
        snapshot = self._gpu_snapshot(job, plan.folder)
        failure = executor.preflight(self._preflight_input(job, plan, snapshot))
        if failure is not None:
            self._recorder.finish(job_id, Outcome.failed(failure))
            return None
        if cancel.is_set():  # cancelled during preflight: do not start it at all
            self._recorder.finish(job_id, cancelled_before_start())
            return None
        return Launched(self._start_supervisor(job, plan), snapshot)

    def _plan(self, job: JobRow) -> _Plan:
        folder = JobFolder.of(self._workdir, job.id, job.run_dir)
        script = folder.prepare(job.script_name, job.script)
        env = executor.build_env(
            self._environ, self._settings.secret_names, job.id, self._gpus(job), folder.run_dir
        )
        if self._job_user is not None:
            self._job_user.give(folder.run_dir)
            env.update(self._job_user.env())
        command = [
            *self._settings.command_argv(script, folder.run_dir),
            *executor.script_args(job.script, folder.run_dir, job.args),
        ]
        return _Plan(folder, env, command)

    @staticmethod
    def _gpus(job: JobRow) -> list[int] | None:
        # None for a serverless job: no GPU at all, not "any GPU".
        return job.gpus if job.backend == "local" else None

    def _uses_nvidia_smi(self, job: JobRow) -> bool:
        return self._probe.available and job.backend == "local"

    def _gpu_snapshot(self, job: JobRow, folder: JobFolder) -> list[GpuInfo]:
        """The GPUs now (NVML or nvidia-smi), kept in the folder: the failure classifier compares
        with it later."""
        snapshot = self._probe.snapshot(fresh=True) if self._uses_nvidia_smi(job) else []
        folder.save_gpu_snapshot(snapshot)
        return snapshot

    def _preflight_input(self, job: JobRow, plan: _Plan, snapshot: list[GpuInfo]) -> PreflightInput:
        return PreflightInput(
            backend=job.backend,
            env=plan.env,
            required_env=job.required_env,
            command=plan.command,
            gpus=self._gpus(job),
            snapshot=snapshot,
            nvidia_smi_present=self._uses_nvidia_smi(job),
        )

    def _start_supervisor(self, job: JobRow, plan: _Plan) -> JobProcess:
        folder = plan.folder
        argv = executor.supervisor_argv(
            folder.runner_dir,
            folder.run_dir,
            self._settings.log_max_bytes,
            plan.command,
            self._job_user,
        )
        process = executor.launch(argv, plan.env, folder.run_dir, folder.runner_dir)
        # The supervisor waits for release(): until the pid is stored, nothing of the job runs,
        # and if this runner dies first the supervisor exits (its stdin ends) having run nothing.
        try:
            self._after_launch(process)
            if self._recorder.running(job, process) is None:  # pragma: no cover
                raise RuntimeError(f"job {job.id} left the starting state while it was launched")
        except BaseException:
            process.abandon()
            raise
        process.release()
        log.info("job %s started pid=%d gpus=%s", job.id, process.pid, job.gpus)
        return process
