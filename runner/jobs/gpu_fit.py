"""Whether a queued LocalBackend job fits a GPU slot before it starts, instead of dying in vLLM's
start-up: what the script asks for, the arithmetic, and the gate the scheduler asks.

vLLM (V1) refuses to start when a GPU's free memory is below `gpu_memory_utilization` x its total
memory, and the base model's weights (about params x 2 bytes in bf16) plus room for the KV cache
must fit within that share. A job that cannot fit even an empty slot is refused; one that would
fit but finds the memory held by other processes waits, saying who holds it, for up to
ARTBOT_RUNNER_GPU_WAIT_S, then fails.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from runner.jobs.failures import make_failure
from runner.jobs.gpu import GpuInfo, GpuProbe
from runner.jobs.gpu_needs import KV_CACHE_MIN_MIB, GpuNeeds, bytes_per_param, script_needs
from runner.jobs.local.processes import JOB_MARKER_ENV, PROC, read_stat
from runner.jobs.outcome import Outcome
from runner.records.recorder import JobRecorder
from runner.records.rows import STARTED_STATES, JobRow
from runner.schemas import EventType, Failure, FailureKind, JobState

log = logging.getLogger(__name__)

MOSTLY_HELD = 0.5
"""Without a known gpu_memory_utilization, a GPU others hold more of than this share waits."""
UNLISTED_MIB = 512
"""Used memory no listed process accounts for, above this, is named as held by unseen processes."""
MAX_UTILIZATION = 0.95
"""The highest --gpu-memory-utilization suggested: vLLM and training share the GPU."""


# ---- the arithmetic -------------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """A process holding memory on a GPU, with the runner job it belongs to when known."""

    gpu: int
    pid: int
    name: str
    used_mib: int
    job_id: str | None = None

    def describe(self) -> str:
        used = f"{self.used_mib:,} MiB" if self.used_mib else "memory not reported"
        owner = f", runner job {self.job_id}" if self.job_id else ""
        return f"pid {self.pid} ({self.name or '?'}, {used}{owner})"

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "pid": self.pid,
            "name": self.name,
            "used_mib": self.used_mib,
            "job_id": self.job_id,
        }


@dataclass(frozen=True)
class SlotFit:
    """How a job fits one slot now: `fits`, or `too_small` (never, even empty: why), or waits
    (`reason`, naming the `holders`)."""

    fits: bool
    too_small: str | None = None
    reason: str = ""
    holders: tuple[Holder, ...] = ()
    notes: tuple[str, ...] = ()


Owners = Callable[[int], str | None]


def _no_owner(pid: int) -> str | None:
    return None


def assess_slot(
    needs: GpuNeeds, slot: Sequence[int], gpus: Sequence[GpuInfo], owner: Owners = _no_owner
) -> SlotFit:
    """Whether a job with `needs` fits the slot's GPUs as `gpus` shows them now."""
    by_index = {gpu.index: gpu for gpu in gpus}
    if not slot or any(index not in by_index for index in slot):
        return SlotFit(fits=True, notes=("the slot's GPUs are not listed: nothing checked",))
    mine = [by_index[index] for index in slot]
    notes = _skipped(needs)
    share, model_mib = needs.utilization, needs.model_mib
    if share is not None and model_mib is not None:
        budget = share * sum(gpu.memory_total_mib for gpu in mine)
        if model_mib > budget:
            return SlotFit(fits=False, too_small=_too_small(needs, mine, budget), notes=notes)
    blocked = [gpu for gpu in mine if not _room(gpu, share)]
    if not blocked:
        return SlotFit(fits=True, notes=notes)
    holders = tuple(
        Holder(gpu.index, process.pid, process.name, process.used_mib, owner(process.pid))
        for gpu in blocked
        for process in gpu.processes
    )
    reason = "; ".join(_held(gpu, share, holders) for gpu in blocked)
    return SlotFit(fits=False, reason=reason, holders=holders, notes=notes)


def _room(gpu: GpuInfo, share: float | None) -> bool:
    if share is None:  # only that others do not hold most of it
        return gpu.memory_used_mib <= MOSTLY_HELD * gpu.memory_total_mib
    return gpu.memory_free_mib >= share * gpu.memory_total_mib


def _skipped(needs: GpuNeeds) -> tuple[str, ...]:
    if needs.utilization is None:
        return (
            "the script sets no GPU_MEMORY_UTILIZATION (nor --gpu-memory-utilization): the "
            "model's size was not checked, only that others do not hold most of the GPU",
        )
    if needs.base_model is None:
        return ("the script sets no BASE_MODEL: the model's size was not checked",)
    if needs.params_billion is None:
        return (f"the size of {needs.base_model} is not in its name: it was not checked",)
    return ()


def _too_small(needs: GpuNeeds, gpus: Sequence[GpuInfo], budget: float) -> str:
    assert needs.utilization is not None and needs.base_model is not None
    total = sum(gpu.memory_total_mib for gpu in gpus)
    where = "GPU " + "+".join(str(gpu.index) for gpu in gpus)
    return (
        f"{needs.base_model} needs about {needs.model_mib:,} MiB: {needs.weights_mib:,} MiB of "
        f"weights ({needs.params_billion:g}B parameters x {bytes_per_param(needs.base_model):g} "
        f"bytes) and {KV_CACHE_MIN_MIB:,} MiB for vLLM's KV cache. vLLM may take "
        f"{needs.utilization:g} x {total:,} MiB = {budget:,.0f} MiB of {where}"
    )


def _held(gpu: GpuInfo, share: float | None, holders: Sequence[Holder]) -> str:
    mine = [holder for holder in holders if holder.gpu == gpu.index]
    if share is None:
        said = (
            f"GPU {gpu.index} has {gpu.memory_used_mib:,} of {gpu.memory_total_mib:,} MiB in use "
            "by other processes"
        )
    else:
        said = (
            f"GPU {gpu.index} has {gpu.memory_free_mib:,} MiB free of {gpu.memory_total_mib:,} "
            f"MiB; vLLM needs {share:g} x {gpu.memory_total_mib:,} = "
            f"{share * gpu.memory_total_mib:,.0f} MiB free to start"
        )
    parts = [holder.describe() for holder in mine[:8]]
    unlisted = gpu.memory_used_mib - sum(holder.used_mib for holder in mine)
    if unlisted > UNLISTED_MIB and len(mine) <= 8:
        parts.append(f"{unlisted:,} MiB by processes not listed (another container?)")
    return said + (": held by " + ", ".join(parts) if parts else "")


# ---- the gate the scheduler asks ------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """The scheduler's answer for a queued local job: start on `slot`, wait (no slot), or
    `ended` (the gate failed it)."""

    slot: int | None = None
    ended: bool = False


@dataclass
class _Waiting:
    since: float
    reason: str
    told: frozenset[tuple[int, int]] | None = None
    """Which (gpu, pid) holders the last `waiting` event named."""
    gpu: bool = False
    """Waiting for GPU memory (timed), not for a slot."""


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _marker_of(pid: int) -> str | None:
    prefix = f"{JOB_MARKER_ENV}=".encode()
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


class GpuGate:
    """Decides where a queued local job starts, or why it waits; fails one that can never fit or
    waited `wait_s` for memory others hold. Remembers each waiting job's reason for the API."""

    def __init__(
        self,
        probe: GpuProbe,
        recorder: JobRecorder,
        wait_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._recorder = recorder
        self._wait_s = wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[str, _Waiting] = {}

    def waiting_for(self, job_id: str) -> str | None:
        """Why a queued job has not started, when the gate knows."""
        with self._lock:
            waiting = self._waiting.get(job_id)
        return waiting.reason if waiting is not None else None

    def keep(self, job_ids: set[str]) -> None:
        """Forget the jobs that left the queue."""
        with self._lock:
            for job_id in set(self._waiting) - job_ids:
                del self._waiting[job_id]

    def no_free_slot(self, job_id: str, slots: int) -> None:
        """The job waits for a slot (not timed: a slot frees when a job ends)."""
        with self._lock:
            self._waiting[job_id] = _Waiting(
                self._clock(), f"a free GPU slot: all {slots} are taken by running jobs"
            )

    def place(
        self, job: JobRow, free: Sequence[int], slots: Sequence[tuple[int, ...]]
    ) -> Placement:
        """The first free slot the job fits now; else wait (or end the job: never fits, or
        waited too long)."""
        gpus = self._probe.snapshot()
        if not gpus:  # no NVML, no nvidia-smi: nothing to check (the launcher says so)
            return self._start(job.id, free[0])
        needs = script_needs(job.script, job.args)
        owners = self._owners()
        fits = {
            index: assess_slot(needs, slots[index], gpus, owners) for index in range(len(slots))
        }
        never = [fit.too_small for fit in fits.values() if fit.too_small is not None]
        if len(never) == len(slots):
            self._refuse(job, needs, never[0])
            return Placement(ended=True)
        fresh: list[GpuInfo] | None = None
        for index in free:
            if fits[index].fits:
                # Confirmed on a fresh reading: the cached one may be a few seconds old.
                fresh = fresh if fresh is not None else self._probe.snapshot(fresh=True)
                fit = assess_slot(needs, slots[index], fresh, owners)
                if fit.fits:
                    return self._start(job.id, index)
                fits[index] = fit
        waits = [fits[index] for index in free if fits[index].too_small is None]
        if not waits:  # the free slots are too small; a taken one is not
            self.no_free_slot(job.id, len(slots) - len(free))
            return Placement()
        return self._wait(job, waits)

    # -- helpers --

    def _start(self, job_id: str, slot: int) -> Placement:
        with self._lock:
            self._waiting.pop(job_id, None)
        return Placement(slot=slot)

    def _owners(self) -> Owners:
        """pid -> runner job: a started job's process group, or its marker variable."""
        groups = {
            job.pid: job.id for job in self._recorder.store.in_states(STARTED_STATES) if job.pid
        }

        def owner(pid: int) -> str | None:
            stat = read_stat(pid)
            if stat is not None and stat.pgid in groups:
                return groups[stat.pgid]
            return _marker_of(pid)

        return owner

    def _wait(self, job: JobRow, waits: Sequence[SlotFit]) -> Placement:
        reason = " | ".join(fit.reason for fit in waits)
        holders = [holder for fit in waits for holder in fit.holders]
        told = frozenset((holder.gpu, holder.pid) for holder in holders)
        now = self._clock()
        with self._lock:
            waiting = self._waiting.get(job.id)
            if waiting is None or not waiting.gpu:
                waiting = self._waiting[job.id] = _Waiting(now, reason, gpu=True)
            waiting.reason = reason
            tell = waiting.told != told
            waiting.told = told
            waited = now - waiting.since
        if waited >= self._wait_s:
            self._give_up(job, reason, holders, waited)
            return Placement(ended=True)
        if tell:
            log.info("job %s waits for GPU memory: %s", job.id, reason)
            self._recorder.emit(
                job.id,
                EventType.waiting,
                {
                    "reason": reason,
                    "holders": [holder.to_json() for holder in holders],
                    "wait_s": self._wait_s,
                },
            )
        return Placement()

    def _refuse(self, job: JobRow, needs: GpuNeeds, why: str) -> None:
        assert needs.model_mib is not None
        # The least share that would hold the model on the biggest slot's total.
        fix = [f"Choose a smaller base model than {needs.base_model}"]
        totals = [gpu.memory_total_mib for gpu in self._probe.snapshot()]
        if totals and needs.model_mib / max(totals) <= MAX_UTILIZATION:
            fix.append(
                f"raise --gpu-memory-utilization to {needs.model_mib / max(totals) + 0.01:.2f} "
                "or more (leaving less to training)"
            )
        fix.append(
            "or give the runner a bigger GPU slot (ARTBOT_RUNNER_GPU_SLOTS, e.g. 0+1 for two "
            "GPUs a job)"
        )
        failure = make_failure(
            kind=FailureKind.gpu_too_small,
            summary=f"The job cannot fit any GPU slot of this runner, even empty: {why}.",
            fix=", ".join(fix) + ", then run the job again.",
        )
        log.info("job %s refused: %s", job.id, failure.summary)
        self._fail(job.id, failure)

    def _give_up(self, job: JobRow, reason: str, holders: Sequence[Holder], waited: float) -> None:
        pids = " ".join(str(holder.pid) for holder in holders[:8] if holder.job_id is None)
        jobs = ", ".join(sorted({holder.job_id for holder in holders if holder.job_id}))
        fix = ["Those are usually leftovers of an earlier run (a vLLM server that did not exit)."]
        if pids:
            fix.append(
                f"On the runner host, check them with `nvidia-smi` and stop them (`kill {pids}`)."
            )
        if jobs:
            fix.append(f"Runner job {jobs} holds some: wait for it to end, or cancel it.")
        fix.append(
            "Or lower --gpu-memory-utilization, then run the job again "
            "(ARTBOT_RUNNER_GPU_WAIT_S sets how long a job waits)."
        )
        failure = make_failure(
            kind=FailureKind.stale_gpu_memory,
            summary=(
                f"The job waited {_duration(waited)} for GPU memory and did not start: {reason}."
            ),
            fix=" ".join(fix),
        )
        log.info("job %s gave up waiting for GPU memory", job.id)
        self._fail(job.id, failure)

    def _fail(self, job_id: str, failure: Failure) -> None:
        with self._lock:
            self._waiting.pop(job_id, None)
        store = self._recorder.store
        # The recorder finishes started jobs: a queued one passes through `starting` (no slot).
        if store.transition(job_id, [JobState.queued], JobState.starting, gpus=[]) is None:
            return  # cancelled meanwhile
        self._recorder.finish(job_id, Outcome.failed(failure))
