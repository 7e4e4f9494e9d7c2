"""After a restart: the jobs a previous runner took from the queue and did not finish.

- never launched, or launched but never released (its supervisor waits for the runner's `go`
  after the pid is recorded, and exits without running anything when the runner dies first):
  whatever carries the job's marker is stopped, then the job is queued again. No second copy:
  an unreleased supervisor has started nothing;
- its supervisor still runs, or ended and recorded its exit status: followed again (the monitor
  settles an ended one at once, as if it had watched the end);
- gone without an exit status: `lost`, and whatever still carries the job's marker is stopped.
Queued jobs need nothing: the scheduler finds them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from runner.jobs.job_folder import JobFolder
from runner.jobs.local.job_process import JobProcess
from runner.jobs.local.launcher import Launched
from runner.jobs.local.processes import LEFTOVER_GRACE_S, terminate_job
from runner.jobs.scheduler import SlotPool
from runner.records.recorder import JobRecorder
from runner.records.rows import STARTED_STATES, JobRow
from runner.schemas import JobState

if TYPE_CHECKING:
    from runner.jobs.local.executor import LocalExecutor

log = logging.getLogger(__name__)


def recover_jobs(
    recorder: JobRecorder, slots: SlotPool, monitors: LocalExecutor, workdir: Path
) -> None:
    """Queue again, follow again, or mark lost each job the previous runner left started."""
    for job in recorder.store.in_states(STARTED_STATES):
        folder = JobFolder.of(workdir, job.id, job.run_dir)
        if job.pid is None:
            _queue_again(recorder, job, "the previous runner never recorded its launch")
            continue
        process = JobProcess(job.pid, job.process_start, folder.runner_dir)
        if not process.released():
            _queue_again(recorder, job, "the previous runner stopped before releasing it")
        elif process.running() or process.exit_status() is not None:
            _claim_slot(slots, job)
            log.info("job %s re-attached pid=%d running=%s", job.id, job.pid, process.running())
            monitors.spawn(job.id, Launched(process, folder.gpu_snapshot()))
        else:
            _mark_lost(recorder, job, job.pid)


def _queue_again(recorder: JobRecorder, job: JobRow, why: str) -> None:
    # Nothing of the job ran: at most a supervisor waiting for a `go` that will never come
    # (its runner is gone). Stopped by marker (SIGKILL after the grace: it ignores SIGTERM),
    # so that it cannot be mistaken for the job's next launch.
    terminate_job(None, job.id, LEFTOVER_GRACE_S)
    recorder.store.transition(
        job.id,
        STARTED_STATES,
        JobState.queued,
        gpus=[],
        pid=None,
        process_start=None,
        started_at=None,
    )
    log.info("job %s queued again: %s", job.id, why)


def _claim_slot(slots: SlotPool, job: JobRow) -> None:
    if job.backend == "local" and not slots.claim(job.id, job.gpus):
        log.warning("job %s runs on GPUs %s, which are no configured slot", job.id, job.gpus)


def _mark_lost(recorder: JobRecorder, job: JobRow, pid: int) -> None:
    # By marker only: the pid (and so the group id) may be another program's by now.
    terminate_job(None, job.id, LEFTOVER_GRACE_S)
    reason = (
        f"the runner restarted and the job's process (pid {pid}) was gone, "
        "with no exit status recorded"
    )
    if recorder.lost(job.id, reason) is not None:
        log.info("job %s lost: pid %d is gone", job.id, pid)
