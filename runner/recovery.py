"""After a restart: the jobs a previous runner took from the queue and did not finish.

- never launched (no pid): queued again;
- its supervisor still runs, or ended and recorded its exit status: followed again (the monitor
  settles an ended one at once, as if it had watched the end);
- gone without an exit status: `lost`, and whatever still carries the job's marker is stopped.
Queued jobs need nothing: the scheduler finds them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from runner.executor import JobProcess
from runner.job_folder import JobFolder
from runner.launcher import Launched
from runner.monitor import JobMonitors
from runner.processes import LEFTOVER_GRACE_S, terminate_job
from runner.recorder import JobRecorder
from runner.scheduler import SlotPool
from runner.schemas import JobState
from runner.store import STARTED_STATES, JobRow

log = logging.getLogger(__name__)


def recover_jobs(
    recorder: JobRecorder, slots: SlotPool, monitors: JobMonitors, workdir: Path
) -> None:
    """Queue again, follow again, or mark lost each job the previous runner left started."""
    for job in recorder.store.in_states(STARTED_STATES):
        if job.pid is None:
            _queue_again(recorder, job)
            continue
        folder = JobFolder.of(workdir, job.id, job.run_dir)
        process = JobProcess(job.pid, job.process_start, folder.runner_dir)
        if process.running() or process.exit_status() is not None:
            _claim_slot(slots, job)
            log.info("job %s re-attached pid=%d running=%s", job.id, job.pid, process.running())
            monitors.spawn(job.id, Launched(process, folder.gpu_snapshot()))
        else:
            _mark_lost(recorder, job, job.pid)


def _queue_again(recorder: JobRecorder, job: JobRow) -> None:
    # The previous runner stopped between taking the job and launching it.
    recorder.store.transition(job.id, [JobState.starting], JobState.queued, gpus=[])
    log.info("job %s queued again: the previous runner never launched it", job.id)


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
