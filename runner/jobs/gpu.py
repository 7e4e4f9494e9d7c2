"""What the GPUs are doing, from nvidia-smi when it is there; GPU slots from the configuration.

Without nvidia-smi (a CPU machine, tests) every query returns nothing: slots then come only
from ARTBOT_RUNNER_GPU_SLOTS, and memory checks are skipped.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT_S = 10.0
_GPU_QUERY = "index,uuid,name,memory.total,memory.used,memory.free,utilization.gpu"
_APPS_QUERY = "gpu_uuid,pid,process_name,used_memory"


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_mib: int


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as nvidia-smi sees it, with the compute processes that hold its memory."""

    index: int
    uuid: str
    name: str
    memory_total_mib: int
    memory_used_mib: int
    memory_free_mib: int
    utilization_pct: int | None = None
    processes: tuple[GpuProcess, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _int(text: str) -> int | None:
    try:
        return int(float(text.strip()))
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_gpus(gpu_csv: str, apps_csv: str = "") -> list[GpuInfo]:
    """GPUs from nvidia-smi's `--query-gpu` and `--query-compute-apps` CSV (noheader, nounits)."""
    processes: dict[str, list[GpuProcess]] = {}
    for line in apps_csv.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < 4:
            continue
        pid = _int(parts[1])
        if pid is None:
            continue
        used = _int(parts[-1]) or 0
        name = ",".join(parts[2:-1])  # a process name may contain commas
        processes.setdefault(parts[0], []).append(GpuProcess(pid, name, used))
    gpus: list[GpuInfo] = []
    for line in gpu_csv.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < 7:
            continue
        index, total, used, free = _int(parts[0]), _int(parts[3]), _int(parts[4]), _int(parts[5])
        if index is None or total is None:
            continue
        gpus.append(
            GpuInfo(
                index=index,
                uuid=parts[1],
                name=parts[2],
                memory_total_mib=total,
                memory_used_mib=used or 0,
                memory_free_mib=free if free is not None else total - (used or 0),
                utilization_pct=_int(parts[6]),
                processes=tuple(processes.get(parts[1], ())),
            )
        )
    return gpus


class GpuProbe:
    """Runs nvidia-smi (cached for `ttl_s`); an empty list when it is missing or fails."""

    def __init__(self, command: str = "nvidia-smi", ttl_s: float = 5.0) -> None:
        self._command = command
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._cached: tuple[float, list[GpuInfo]] | None = None

    @property
    def available(self) -> bool:
        return shutil.which(self._command) is not None

    def snapshot(self, *, fresh: bool = False) -> list[GpuInfo]:
        """The GPUs now (`fresh`), or as seen at most `ttl_s` ago."""
        with self._lock:
            now = time.monotonic()
            if not fresh and self._cached is not None and now - self._cached[0] < self._ttl_s:
                return self._cached[1]
            gpus = self._query()
            self._cached = (now, gpus)
            return gpus

    def _query(self) -> list[GpuInfo]:
        executable = shutil.which(self._command)
        if executable is None:
            return []
        try:
            gpus = self._run(executable, f"--query-gpu={_GPU_QUERY}")
            apps = self._run(executable, f"--query-compute-apps={_APPS_QUERY}")
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("nvidia-smi failed: %s", error)
            return []
        return parse_gpus(gpus, apps)

    @staticmethod
    def _run(executable: str, query: str) -> str:
        return subprocess.run(
            [executable, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=True,
        ).stdout


def parse_slots(text: str) -> list[tuple[int, ...]]:
    """GPU slots from "0,1" (one GPU each) or "0+1,2+3" (two GPUs each); "" or "none": none.

    ValueError names what is wrong.
    """
    text = text.strip()
    if text.lower() in ("", "none"):
        return []
    slots: list[tuple[int, ...]] = []
    used: set[int] = set()
    for part in text.split(","):
        try:
            gpus = tuple(int(item) for item in part.strip().split("+"))
        except ValueError:
            raise ValueError(
                f"{part.strip()!r} is not a GPU index (use e.g. 0,1 or 0+1,2+3)"
            ) from None
        if any(gpu < 0 for gpu in gpus):
            raise ValueError(f"{part.strip()!r}: GPU indexes are 0 or more")
        if used.intersection(gpus):
            raise ValueError(f"GPU {sorted(used.intersection(gpus))[0]} is in two slots")
        used.update(gpus)
        slots.append(gpus)
    return slots


def default_slots(gpus: Sequence[GpuInfo]) -> list[tuple[int, ...]]:
    """One slot per GPU nvidia-smi lists."""
    return [(gpu.index,) for gpu in sorted(gpus, key=lambda gpu: gpu.index)]
