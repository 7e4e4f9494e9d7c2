"""How much host memory a job's processes hold, for the per-job limit
(ARTBOT_RUNNER_JOB_MEMORY_MAX).

A watchdog rather than a kernel limit: RLIMIT_AS counts address space, which CUDA reserves by
the terabyte without using it (a job with any sensible RLIMIT_AS cannot initialise CUDA);
RLIMIT_DATA has the same problem with CUDA's and vLLM's big anonymous mappings, and limits each
process, not the job. A cgroup v2 memory limit (`systemd-run --scope -p MemoryMax=`) is the
exact tool, but it needs systemd and a delegated cgroup, which containers and plain hosts often
lack. So the monitor sums what the job's processes hold and stops the job past the limit.

Each process counts its proportional set size (Pss, /proc/PID/smaps_rollup): shared pages are
split between the processes sharing them, so a job of many workers is not counted many times
over. Where smaps_rollup is unreadable, the resident set (statm) counts instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def process_memory_bytes(pid: int) -> int:
    """The process's Pss (or RSS) in bytes; 0 when it is gone."""
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int((PROC / str(pid) / "statm").read_text().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


def memory_bytes(pids: Iterable[int]) -> int:
    """What these processes hold together."""
    return sum(process_memory_bytes(pid) for pid in pids)
