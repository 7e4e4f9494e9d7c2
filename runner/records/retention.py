"""Retention: finished jobs' folders and rows are removed once they are older than the configured
age, and the oldest finished ones go first while the jobs' folders take more than the configured
size. Active jobs are never touched, nor a folder that a job still kept (a resume) works in.

Folders are removed before rows: a sweep cut short leaves rows whose folders are gone (the log
reads empty, a resume of them is refused), never folders nobody knows about.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from runner.records.rows import JobRow
from runner.records.store import JobStore

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 3600.0
MAX_PER_SWEEP = 1000


@dataclass(frozen=True)
class RetentionPolicy:
    max_age: timedelta | None
    max_bytes: int | None

    @property
    def keeps_everything(self) -> bool:
        return self.max_age is None and self.max_bytes is None


@dataclass(frozen=True)
class Swept:
    """What one sweep removed."""

    job_ids: list[str]
    freed_bytes: int


def folder_bytes(path: Path) -> int:
    """The bytes of the files under `path` (not following links); 0 when it is gone."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def sweep(store: JobStore, workdir: Path, policy: RetentionPolicy, now: datetime) -> Swept:
    """Remove what the policy no longer keeps; returns what went."""
    if policy.keeps_everything:
        return Swept([], 0)
    chosen: dict[str, JobRow] = {}
    if policy.max_age is not None:
        chosen.update(
            (job.id, job) for job in store.finished_before(now - policy.max_age, MAX_PER_SWEEP)
        )
    if policy.max_bytes is not None:
        _add_oldest_over_size(store, workdir, policy.max_bytes, chosen)
    removable: list[JobRow] = []
    freed = 0
    for job in chosen.values():
        # Checked just before removal: a resume submitted meanwhile keeps the folder.
        if _removable(store, job, chosen):
            freed += _remove_folders(workdir, job)
            removable.append(job)
    store.delete_finished([job.id for job in removable])
    if removable:
        log.info("retention removed %d finished jobs, %d bytes", len(removable), freed)
    return Swept([job.id for job in removable], freed)


def _add_oldest_over_size(
    store: JobStore, workdir: Path, max_bytes: int, chosen: dict[str, JobRow]
) -> None:
    total = folder_bytes(workdir)
    total -= sum(_own_bytes(workdir, job) for job in chosen.values())
    for job in store.finished_oldest_first():
        if total <= max_bytes or len(chosen) >= MAX_PER_SWEEP:
            return
        if job.id not in chosen:
            chosen[job.id] = job
            total -= _own_bytes(workdir, job)


def _own_bytes(workdir: Path, job: JobRow) -> int:
    return folder_bytes(workdir / job.id)


def _removable(store: JobStore, job: JobRow, chosen: dict[str, JobRow]) -> bool:
    # A folder shared with a resume (or its source) goes only with every job that uses it.
    return all(user.id in chosen for user in store.users_of_run_dir(job.run_dir))


def _remove_folders(workdir: Path, job: JobRow) -> int:
    freed = 0
    for folder in _inside(workdir, {workdir / job.id, Path(job.run_dir)}):
        freed += folder_bytes(folder)
        shutil.rmtree(folder, ignore_errors=True)
    return freed


def _inside(workdir: Path, folders: Iterable[Path]) -> list[Path]:
    """Only folders directly in the workdir: a stored path elsewhere is never removed."""
    root = workdir.resolve()
    return [folder for folder in folders if folder.resolve().parent == root]


class RetentionSweeper:
    """Sweeps once at start and then every SWEEP_INTERVAL_S on a thread of its own."""

    def __init__(
        self, store: JobStore, workdir: Path, policy: RetentionPolicy, interval_s: float
    ) -> None:
        self._store = store
        self._workdir = workdir
        self._policy = policy
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._policy.keeps_everything:
            return
        self._thread = threading.Thread(target=self._loop, name="runner-retention", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                sweep(self._store, self._workdir, self._policy, self._store.now())
            except Exception:
                log.exception("retention sweep failed")
            self._stop.wait(self._interval_s)
