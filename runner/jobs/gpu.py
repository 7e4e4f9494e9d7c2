"""What the GPUs are doing, through NVML (nvidia-ml-py) where its library loads, else from
nvidia-smi; GPU slots from the configuration.

Without either (a CPU machine, tests) every query returns nothing: slots then come only from
ARTBOT_RUNNER_GPU_SLOTS, and memory checks are skipped.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

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
    """One GPU as NVML or nvidia-smi sees it, with the compute processes that hold its memory."""

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


MIB = 1024 * 1024


class NvmlLibrary(Protocol):
    """The part of `pynvml` (nvidia-ml-py) the probe calls; tests pass a fake of this shape."""

    @property
    def NVMLError(self) -> type[Exception]: ...  # pynvml's base error class

    def nvmlInit(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetName(self, handle: Any) -> str: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]: ...
    def nvmlSystemGetProcessName(self, pid: int) -> str: ...


def system_nvml() -> NvmlLibrary | None:
    """nvidia-ml-py's `pynvml`, or None where it is not installed (its library loads later)."""
    try:
        import pynvml
    except ImportError:
        return None
    return cast("NvmlLibrary", pynvml)


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _process_name(pid: int) -> str:
    """What /proc says the process runs, for when NVML cannot name it."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return cmdline.split(b"\0", 1)[0].decode(errors="replace")


class NvmlReader:
    """GPUs through NVML. Initialised once; a host without the library (no driver, a CPU
    machine) is remembered as such, and the probe asks nvidia-smi instead."""

    def __init__(self, library: NvmlLibrary) -> None:
        self.library = library
        self._ready: bool | None = None

    def ready(self) -> bool:
        """Whether NVML loaded (tried once)."""
        if self._ready is None:
            try:
                self.library.nvmlInit()
                self._ready = True
            except self.library.NVMLError as error:
                # NVMLError_LibraryNotFound, _DriverNotLoaded, _NoPermission...: no NVML here.
                log.info("NVML is not usable (%s): GPUs are read with nvidia-smi", error)
                self._ready = False
        return self._ready

    def read(self) -> list[GpuInfo]:
        """Every GPU with its compute processes; raises the library's NVMLError."""
        nvml = self.library
        gpus: list[GpuInfo] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                utilization: int | None = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except nvml.NVMLError:
                utilization = None  # NVMLError_NotSupported on some boards
            gpus.append(
                GpuInfo(
                    index=index,
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    memory_total_mib=int(memory.total) // MIB,
                    memory_used_mib=int(memory.used) // MIB,
                    memory_free_mib=int(memory.free) // MIB,
                    utilization_pct=utilization,
                    processes=tuple(
                        self._process(info)
                        for info in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                    ),
                )
            )
        return gpus

    def _process(self, info: Any) -> GpuProcess:
        pid = int(info.pid)
        try:
            name = _text(self.library.nvmlSystemGetProcessName(pid))
        except self.library.NVMLError:
            name = _process_name(pid)  # NVMLError_NotFound: gone, or in another namespace
        # usedGpuMemory is None where the driver does not say (WDDM, some containers).
        used = info.usedGpuMemory
        return GpuProcess(pid, name, int(used) // MIB if used is not None else 0)


class GpuProbe:
    """Reads the GPUs through NVML, else nvidia-smi (cached for `ttl_s`); an empty list when
    neither is there or both fail."""

    def __init__(
        self, command: str = "nvidia-smi", ttl_s: float = 5.0, nvml: NvmlLibrary | None = None
    ) -> None:
        self._command = command
        self._ttl_s = ttl_s
        self._nvml = NvmlReader(nvml) if nvml is not None else None
        self._lock = threading.Lock()
        self._cached: tuple[float, list[GpuInfo]] | None = None

    @property
    def available(self) -> bool:
        """Whether the GPUs can be read at all (NVML loads, or nvidia-smi is installed)."""
        with self._lock:
            if self._nvml is not None and self._nvml.ready():
                return True
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
        if self._nvml is not None and self._nvml.ready():
            try:
                return self._nvml.read()
            except self._nvml.library.NVMLError as error:
                log.warning("NVML failed (%s): asking nvidia-smi", error)
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
    """One slot per GPU the probe lists."""
    return [(gpu.index,) for gpu in sorted(gpus, key=lambda gpu: gpu.index)]
