"""The queue: queued jobs start in submission order on a thread of their own, local jobs on a
free GPU slot each, serverless jobs at once.

FIFO for local jobs: once one must wait for a slot, the local jobs behind it wait too. With a
GpuGate, a local job takes the first free slot it fits (runner.jobs.gpu_fit): one that fits
none waits the same way, saying why, and one that can never fit is failed. The scheduler wakes
when a job is queued or ends, and once a second in any case.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from runner.jobs.gpu_fit import GpuGate, Placement
from runner.records.rows import STARTED_STATES, JobRow
from runner.records.store import JobStore
from runner.schemas import JobState

log = logging.getLogger(__name__)

IDLE_WAKE_S = 1.0


class SlotPool:
    """The GPU slots jobs may take (one slot: one or more GPUs) and which job holds each."""

    def __init__(self, slots: Sequence[tuple[int, ...]]) -> None:
        self.slots = list(slots)
        self._lock = threading.Lock()
        self._owner: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def free(self) -> int:
        with self._lock:
            return len(self.slots) - len(self._owner)

    def free_indexes(self) -> list[int]:
        """The slots no job holds, in order."""
        with self._lock:
            return [index for index in range(len(self.slots)) if index not in self._owner]

    def take(self, job_id: str, index: int) -> bool:
        """Take this slot for the job; False when another took it meanwhile."""
        with self._lock:
            if index in self._owner:
                return False
            self._owner[index] = job_id
            return True

    def reserve(self, job_id: str) -> int | None:
        """Take the first free slot for the job; None when all are taken."""
        with self._lock:
            for index in range(len(self.slots)):
                if index not in self._owner:
                    self._owner[index] = job_id
                    return index
        return None

    def claim(self, job_id: str, gpus: list[int]) -> bool:
        """Take the free slot of exactly these GPUs (a job found running after a restart)."""
        with self._lock:
            for index, slot in enumerate(self.slots):
                if list(slot) == gpus and index not in self._owner:
                    self._owner[index] = job_id
                    return True
        return False

    def release(self, job_id: str) -> None:
        with self._lock:
            for index, owner in list(self._owner.items()):
                if owner == job_id:
                    del self._owner[index]


class Scheduler:
    """Moves queued jobs to `starting` and hands each to `start(job_id)`."""

    def __init__(
        self,
        store: JobStore,
        slots: SlotPool,
        start: Callable[[str], None],
        gate: GpuGate | None = None,
    ) -> None:
        self._store = store
        self._slots = slots
        self._start = start
        self._gate = gate
        self._wake = threading.Condition()
        self._closing = threading.Event()  # no more starts
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="runner-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Start nothing more; wait up to `timeout_s` for the thread."""
        self._closing.set()
        self.kick()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def kick(self) -> None:
        """Look at the queue now (a job was queued)."""
        with self._wake:
            self._wake.notify_all()

    def job_ended(self, job_id: str) -> None:
        """Free the job's slot for the next one."""
        self._slots.release(job_id)
        self.kick()

    def _loop(self) -> None:
        while not self._closing.is_set():
            try:
                self._schedule_once()
            except Exception:
                log.exception("scheduling failed")
            with self._wake:
                # Checked under the lock: a stop() that notified just before is not missed.
                if not self._closing.is_set():
                    self._wake.wait(timeout=IDLE_WAKE_S)

    def _schedule_once(self) -> None:
        """Start queued jobs in order: serverless ones at once, local ones while slots are free."""
        local_blocked = False
        busy_dirs = {job.run_dir for job in self._store.in_states(STARTED_STATES)}
        queued = self._store.in_states([JobState.queued])
        if self._gate is not None:
            self._gate.keep({job.id for job in queued})
        for job in queued:
            if self._closing.is_set():
                return
            if job.run_dir in busy_dirs:
                continue  # two resumes of one job raced past submit's check: one at a time
            slot: int | None = None
            if job.backend == "local" and self._slots.slots:
                if local_blocked:
                    continue
                placement = self._place(job)
                if placement.ended:
                    continue  # failed by the gate: it can never fit, or waited too long
                if placement.slot is None:
                    local_blocked = True
                    continue
                slot = placement.slot
            self._begin(job, slot)
            busy_dirs.add(job.run_dir)

    def _place(self, job: JobRow) -> Placement:
        """A free slot for the local job (taken for it), or why not."""
        free = self._slots.free_indexes()
        if self._gate is None:
            slot = self._slots.reserve(job.id)
            return Placement(slot=slot)
        if not free:
            self._gate.no_free_slot(job.id, len(self._slots))
            return Placement()
        placement = self._gate.place(job, free, self._slots.slots)
        if placement.slot is not None and not self._slots.take(job.id, placement.slot):
            return Placement()  # a serving job took it meanwhile: next pass
        return placement

    def _begin(self, job: JobRow, slot: int | None) -> None:
        gpus = list(self._slots.slots[slot]) if slot is not None else []
        started = self._store.transition(job.id, [JobState.queued], JobState.starting, gpus=gpus)
        if started is None:  # cancelled meanwhile
            self.job_ended(job.id)
            return
        self._start(job.id)
