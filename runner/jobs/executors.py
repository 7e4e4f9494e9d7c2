"""Where started jobs run: the interface the service and the scheduler use, whatever runs them.

`runner.jobs.local.executor.LocalExecutor` runs them on this host (a supervisor process per job,
one monitor thread per job, recovery from the job folders after a restart);
`runner.jobs.ray.executor.RayExecutor` submits them to a Ray cluster's job API. Both take a
`starting` job to its end, report the same events, and leave running jobs running when the
runner stops; both are `runner.jobs.job_threads.JobThreads` (one thread per job).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from runner.records.recorder import JobRecorder
from runner.settings import RunnerSettings


class JobExecutor(Protocol):
    """Runs the jobs the scheduler starts."""

    def recover(self) -> None:
        """At start-up: take over, re-queue or settle the jobs a previous runner started."""
        ...

    def spawn(self, job_id: str) -> None:
        """Run a `starting` job to its end (on a thread of its own)."""
        ...

    def cancel(self, job_id: str) -> None:
        """Stop the job (no-op when it is not this executor's)."""
        ...

    def job_ids(self) -> list[str]:
        """The jobs being followed."""
        ...

    def join(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for every followed job to end."""
        ...

    def stop(self, timeout_s: float) -> None:
        """Stop following; jobs still running go on for the next runner."""
        ...


def ray_executor(
    settings: RunnerSettings,
    workdir: Path,
    recorder: JobRecorder,
    environ: Mapping[str, str],
    on_end: Callable[[str], None],
) -> JobExecutor:
    """The Ray executor (Ray imported only now: it is an optional extra)."""
    from runner.jobs.ray.executor import RayExecutor

    return RayExecutor(settings, workdir, recorder, environ, on_end)
