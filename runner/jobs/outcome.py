"""How a job ended: its final state and the event that says so, decided from what it left.

The monitor knows why it stopped following the job (`Ending`); the supervisor recorded the exit
status (or was killed before it could); the output's end holds the script's end-of-training
banner or its traceback; the GPU snapshot taken before the start tells a stale process's memory
from the job's own. `settle` turns that into an `Outcome` for the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from runner.jobs.failures import FailureContext, classify_failure, make_failure
from runner.jobs.gpu import GpuInfo
from runner.jobs.local.job_process import ExitStatus
from runner.progress.art_records import has_checkpoints
from runner.progress.logfile import read_excerpt, read_tail
from runner.progress.output_lines import Completion, read_completion
from runner.records.rows import JobRow, NewEvent
from runner.schemas import EventType, Failure, FailureKind, JobState

EXCERPT_HEAD_BYTES = 64 * 1024
EXCERPT_TAIL_BYTES = 192 * 1024
BANNER_SEARCH_BYTES = 64 * 1024
UNRECORDED_EXCERPT_BYTES = 4_000


class Ending(StrEnum):
    """Why the monitor stopped following a job."""

    exited = "exited"  # its processes ended by themselves
    cancelled = "cancelled"
    timeout = "timeout"  # it ran past the max runtime
    memory = "memory"  # its processes held more host memory than the per-job limit


@dataclass(frozen=True)
class Outcome:
    """A finished job as the store records it: final state, last event, exit code, failure."""

    state: JobState
    event: NewEvent
    exit_code: int | None = None
    failure: Failure | None = None

    @classmethod
    def failed(cls, failure: Failure, exit_code: int | None = None) -> Outcome:
        event = (EventType.failed, failure.model_dump(mode="json"))
        return cls(JobState.failed, event, exit_code=exit_code, failure=failure)


def cancelled_before_start() -> Outcome:
    """A job cancelled before anything of it ran."""
    event = (EventType.cancelled, {"reason": "cancelled before it started", "forced": False})
    return Outcome(JobState.cancelled, event)


@dataclass(frozen=True)
class Ended:
    """A job whose processes are gone, as its monitor saw it end."""

    job: JobRow
    runner_dir: Path
    ending: Ending
    status: ExitStatus | None
    """What the supervisor recorded; None when it was killed before it could."""
    forced: bool
    """It ignored SIGTERM for the grace period and was killed."""
    last_step: int | None
    snapshot: list[GpuInfo]
    """nvidia-smi before the start."""
    memory_bytes: int | None = None
    """What its processes held when it was stopped for the memory limit."""

    @property
    def exit_code(self) -> int | None:
        return self.status.exit_code if self.status is not None else None


def settle(
    ended: Ended, max_runtime_s: float | None, memory_limit_bytes: int | None = None
) -> Outcome:
    """The outcome of a job that ended: cancelled, succeeded, or failed and why."""
    if ended.ending is Ending.cancelled:
        event = (EventType.cancelled, {"reason": "cancel requested", "forced": ended.forced})
        return Outcome(JobState.cancelled, event, exit_code=ended.exit_code)
    completion = read_completion(read_tail(ended.runner_dir, BANNER_SEARCH_BYTES).text)
    if ended.ending is Ending.exited and ended.status is None and not completion.complete:
        # The supervisor was killed before it could record the exit status (killed from
        # outside, or while no runner watched): without the script's end banner, a failure.
        return Outcome.failed(_unrecorded_exit(ended))
    if ended.ending is Ending.exited and (ended.exit_code == 0 or ended.status is None):
        # exit 0; or no recorded status but the script printed its end-of-training banner
        return _succeeded(ended, completion)
    return Outcome.failed(
        _classified(ended, max_runtime_s, memory_limit_bytes), exit_code=ended.exit_code
    )


def _succeeded(ended: Ended, completion: Completion) -> Outcome:
    data = {
        "model": completion.model,
        "inference_url": completion.inference_url,
        "step": completion.step if completion.step is not None else ended.last_step,
    }
    return Outcome(JobState.succeeded, (EventType.succeeded, data), exit_code=ended.exit_code)


def _unrecorded_exit(ended: Ended) -> Failure:
    last = (
        f"; the last step reported was {ended.last_step}." if ended.last_step is not None else "."
    )
    return make_failure(
        kind=FailureKind.unknown,
        summary=(
            "The job's processes ended without recording an exit status "
            "(killed from outside the runner?)" + last
        ),
        fix=(
            "Check the runner host (`dmesg` shows the kernel's OOM killer), then run the job again."
        ),
        log_excerpt=read_tail(ended.runner_dir, UNRECORDED_EXCERPT_BYTES).text,
    )


def _classified(
    ended: Ended, max_runtime_s: float | None, memory_limit_bytes: int | None
) -> Failure:
    context = FailureContext(
        script_name=ended.job.script_name,
        job_gpus=ended.job.gpus,
        has_checkpoints=has_checkpoints(Path(ended.job.run_dir)),
        timed_out=ended.ending is Ending.timeout,
        max_runtime_s=max_runtime_s,
        memory_used_bytes=ended.memory_bytes if ended.ending is Ending.memory else None,
        memory_limit_bytes=memory_limit_bytes,
    )
    excerpt = read_excerpt(ended.runner_dir, EXCERPT_HEAD_BYTES, EXCERPT_TAIL_BYTES)
    return classify_failure(ended.exit_code, excerpt, ended.snapshot, context)
