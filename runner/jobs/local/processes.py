"""Finding, checking and stopping a job's processes through /proc (Linux), without psutil.

A job is its supervisor's process group, plus anything carrying the job's marker variable
(ARTBOT_RUNNER_JOB_ID) in its environment: a child that starts a session of its own leaves the
group but keeps the variable, so it is still found and stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
JOB_MARKER_ENV = "ARTBOT_RUNNER_JOB_ID"
LEFTOVER_GRACE_S = 5.0
"""What a finished job left behind (a vLLM server the script did not close) gets this long."""


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    pgid: int
    start_ticks: int

    @property
    def gone(self) -> bool:
        """A zombie (or dead) process runs nothing: it only waits for its parent to reap it."""
        return self.state in ("Z", "X", "x")


def read_stat(pid: int) -> ProcStat | None:
    """The process's state, group and start time from /proc/PID/stat, or None if it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (2nd field) may hold spaces and parentheses: split after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return ProcStat(pid, fields[0], int(fields[2]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def _boot_id() -> str:
    try:
        return (PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def process_start_id(pid: int) -> str | None:
    """A stamp that tells this process from a later one given the same pid: boot id + start time."""
    stat = read_stat(pid)
    return None if stat is None else f"{_boot_id()}:{stat.start_ticks}"


def is_alive(pid: int, start_id: str | None) -> bool:
    """Whether `pid` still runs and is the process that was stamped `start_id`."""
    stat = read_stat(pid)
    if stat is None or stat.gone:
        return False
    return start_id is None or f"{_boot_id()}:{stat.start_ticks}" == start_id


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return marker in environ.split(b"\0")


def job_processes(pgid: int | None, job_id: str) -> list[int]:
    """Live processes of a job: in its process group, or carrying its marker variable."""
    marker = f"{JOB_MARKER_ENV}={job_id}".encode()
    own = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir(PROC)
    except OSError:
        return found
    for name in entries:
        if not name.isdigit() or int(name) == own:
            continue
        stat = read_stat(int(name))
        if stat is None or stat.gone:
            continue
        if (pgid is not None and stat.pgid == pgid) or _has_marker(stat.pid, marker):
            found.append(stat.pid)
    return found


def _signal_all(pgid: int | None, pids: list[int], signum: int) -> None:
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def terminate_job(
    pgid: int | None,
    job_id: str,
    grace_s: float,
    *,
    poll_s: float = 0.1,
    reap: Callable[[], object] | None = None,
) -> bool:
    """SIGTERM every process of the job, wait up to `grace_s`, then SIGKILL what is left.

    `reap` is called while waiting, so that the runner's own child does not linger as a zombie.
    Returns True when SIGKILL was needed.
    """
    pids = job_processes(pgid, job_id)
    if not pids:
        return False
    _signal_all(pgid, pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while True:
        if reap is not None:
            reap()
        pids = job_processes(pgid, job_id)
        if not pids:
            return False
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    # Repeat: a process may fork while we signal; stop when nothing of the job is left.
    for _ in range(50):
        _signal_all(pgid, pids, signal.SIGKILL)
        time.sleep(poll_s)
        if reap is not None:
            reap()
        pids = job_processes(pgid, job_id)
        if not pids:
            break
    return True
