"""The GPU preflight: a LocalBackend job that can never fit its GPU is refused with the numbers,
one that finds the memory held waits (naming who holds it) and starts once it frees, or fails
after ARTBOT_RUNNER_GPU_WAIT_S. Fake GPUs only: a stand-in nvidia-smi and a strict fake NVML.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from runner.jobs.gpu import GpuInfo, GpuProbe, GpuProcess, NvmlLibrary
from runner.jobs.gpu_fit import assess_slot
from runner.jobs.gpu_needs import KV_CACHE_MIN_MIB, GpuNeeds, model_params_billion, script_needs
from runner.schemas import EventType, Failure, FailureKind, JobState
from tests.runner.conftest import SCRIPTS, Runner, RunnerFactory, script_text

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
H100_MIB = 81559
L4_MIB = 24564  # a 24 GB card as NVML reports it (22,911 MiB on some; the figure is the test's)


# ---- the script's needs and the arithmetic ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "billions"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", 7),
        ("Qwen/Qwen2.5-14B-Instruct", 14),
        ("Qwen/Qwen2.5-0.5B-Instruct", 0.5),
        ("meta-llama/Llama-3.2-3B-Instruct", 3),
        ("OpenPipe/Qwen3-14B-Instruct", 14),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", 30),  # a MoE needs all its weights
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", 56),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", 0.135),
        ("google/gemma-3-1b-it", 1),
        ("my-org/house-model", None),
        ("microsoft/Phi-3-mini-4k-instruct", None),
    ],
)
def test_the_parameter_count_comes_from_the_model_name(name: str, billions: float | None) -> None:
    assert model_params_billion(name) == billions


def test_the_needs_come_from_the_generated_scripts_constants_and_the_args_override_them() -> None:
    rl = (GOLDEN / "single_ruler_dataset_local_val.py").read_text(encoding="utf-8")
    sft = (GOLDEN / "sft_file_local_paste.py").read_text(encoding="utf-8")
    assert script_needs(rl, []) == GpuNeeds("OpenPipe/Qwen3-14B-Instruct", 0.7)
    assert script_needs(sft, []) == GpuNeeds("OpenPipe/Qwen3-14B-Instruct", 0.7)
    assert script_needs(rl, ["--gpu-memory-utilization", "0.5"]).utilization == 0.5
    assert script_needs(rl, ["--gpu-memory-utilization=0.6"]).utilization == 0.6
    assert script_needs(rl, ["--base-model", "Qwen/Qwen2.5-3B"]).base_model == "Qwen/Qwen2.5-3B"
    # Literals only, never executed; anything else is unknown.
    computed = 'import os\nBASE_MODEL = os.environ["M"]\nGPU_MEMORY_UTILIZATION = 1 / 0\n'
    assert script_needs(computed, []) == GpuNeeds(None, None)
    assert script_needs("this is not python(", []) == GpuNeeds(None, None)
    assert script_needs("GPU_MEMORY_UTILIZATION = 1.5\n", []).utilization is None


def gpu(index: int, total: int, used: int = 0, *processes: GpuProcess) -> GpuInfo:
    return GpuInfo(index, f"GPU-{index}", "NVIDIA", total, used, total - used, 0, processes)


def test_the_weights_and_the_kv_cache_against_the_share_vllm_may_take() -> None:
    seven = GpuNeeds("Qwen/Qwen2.5-7B-Instruct", 0.9)
    # 7e9 x 2 bytes = 13,351.4 MiB of weights, + 2,048 = 15,399 <= 0.9 x 24,564 = 22,107.6
    assert (seven.weights_mib, seven.model_mib) == (13351, 13351 + KV_CACHE_MIN_MIB)
    assert assess_slot(seven, (0,), [gpu(0, L4_MIB)]).fits
    fourteen = GpuNeeds("Qwen/Qwen2.5-14B-Instruct", 0.9)
    # 14e9 x 2 bytes = 26,702.9 MiB, + 2,048 = 28,751 > 22,107.6: never, even empty
    fit = assess_slot(fourteen, (0,), [gpu(0, L4_MIB)])
    assert not fit.fits and fit.too_small is not None
    for figure in ("28,751 MiB", "26,703 MiB", "14B parameters x 2 bytes", "0.9 x 24,564 MiB"):
        assert figure in fit.too_small
    assert "22,108 MiB" in fit.too_small
    # The same on two such GPUs a job: 0.9 x 49,128 = 44,215 holds it.
    assert assess_slot(fourteen, (0, 1), [gpu(0, L4_MIB), gpu(1, L4_MIB)]).fits
    # A 4-bit checkpoint: 14e9 x 0.5 bytes = 6,675.7 MiB.
    assert GpuNeeds("unsloth/Qwen2.5-14B-Instruct-bnb-4bit", 0.9).weights_mib == 6676


def test_memory_held_by_others_makes_a_job_that_fits_wait() -> None:
    needs = GpuNeeds("Qwen/Qwen2.5-7B-Instruct", 0.7)
    held = gpu(0, H100_MIB, 61_000, GpuProcess(4242, "python3", 60_000))
    fit = assess_slot(needs, (0,), [held], owner=lambda pid: "job-a" if pid == 4242 else None)
    # vLLM needs 0.7 x 81,559 = 57,091.3 MiB free; 20,559 are.
    assert not fit.fits and fit.too_small is None
    assert "GPU 0 has 20,559 MiB free of 81,559 MiB" in fit.reason
    assert "0.7 x 81,559 = 57,091 MiB free" in fit.reason
    assert "pid 4242 (python3, 60,000 MiB, runner job job-a)" in fit.reason
    assert "1,000 MiB by processes not listed" in fit.reason
    assert [(h.pid, h.job_id) for h in fit.holders] == [(4242, "job-a")]
    # 57,091.3 MiB free is enough; 57,091 is not.
    assert assess_slot(needs, (0,), [gpu(0, H100_MIB, 81559 - 57092)]).fits
    assert not assess_slot(needs, (0,), [gpu(0, H100_MIB, 81559 - 57091)]).fits


def test_without_the_constants_only_a_mostly_held_gpu_waits() -> None:
    unknown = GpuNeeds(None, None)
    fit = assess_slot(unknown, (0,), [gpu(0, H100_MIB, 40_000)])
    assert fit.fits and "model's size was not checked" in fit.notes[0]
    assert not assess_slot(unknown, (0,), [gpu(0, H100_MIB, 41_000)]).fits  # > half of 81,559
    house = assess_slot(GpuNeeds("my-org/house-model", 0.9), (0,), [gpu(0, L4_MIB)])
    assert house.fits and "not in its name" in house.notes[0]
    # No GPU reading at all (no NVML, no nvidia-smi): nothing to check.
    assert assess_slot(GpuNeeds("Qwen/Qwen2.5-72B", 0.9), (0,), []).fits


# ---- NVML, with a fake of pynvml's shape that raises pynvml's own errors ------------------------


def _error(code: int) -> type[Exception]:
    """pynvml's own NVMLError subclass for an error code (NVMLError_NotFound, ...)."""
    return pynvml.nvmlExceptionClass(code)


class FakeNvml:
    """pynvml's functions the probe calls, with their names and arguments, over fake GPUs; errors
    are the installed pynvml's NVMLError subclasses."""

    NVMLError: type[Exception] = pynvml.NVMLError

    def __init__(self, gpus: list[dict[str, Any]], *, init_error: type[Exception] | None = None):
        self.gpus = gpus
        self.init_error = init_error
        self.initialised = False
        self.names: dict[int, str] = {}

    def _handle(self, handle: object) -> dict[str, Any]:
        if not self.initialised:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)()
        if not isinstance(handle, SimpleNamespace):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)()
        gpu = self.gpus[handle.index]
        if gpu.get("lost"):
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)()
        return gpu

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()
        self.initialised = True

    def nvmlDeviceGetCount(self) -> int:
        if not self.initialised:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        if not isinstance(index, int) or not 0 <= index < len(self.gpus):
            raise _error(pynvml.NVML_ERROR_INVALID_ARGUMENT)()
        return SimpleNamespace(index=index)

    def nvmlDeviceGetName(self, handle: object) -> str:
        return self._handle(handle)["name"]

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        return self._handle(handle)["uuid"]

    def nvmlDeviceGetMemoryInfo(self, handle: object, version: int | None = None) -> Any:
        gpu = self._handle(handle)
        mib = 1024 * 1024
        return SimpleNamespace(
            total=gpu["total"] * mib,
            used=gpu["used"] * mib,
            free=(gpu["total"] - gpu["used"]) * mib,
        )

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Any:
        gpu = self._handle(handle)
        if gpu.get("utilization") is None:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)()
        return SimpleNamespace(gpu=gpu["utilization"], memory=0)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list[Any]:
        return [
            SimpleNamespace(
                pid=pid,
                usedGpuMemory=None if used is None else used * 1024 * 1024,
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
            for pid, used in self._handle(handle)["processes"]
        ]

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        if not self.initialised:
            raise _error(pynvml.NVML_ERROR_UNINITIALIZED)()
        if pid not in self.names:
            raise _error(pynvml.NVML_ERROR_NOT_FOUND)()
        return self.names[pid]


def test_the_fake_has_pynvmls_shape() -> None:
    for name, member in inspect.getmembers(NvmlLibrary):
        if not name.startswith("nvml"):
            continue
        real = inspect.signature(getattr(pynvml, name))
        fake = inspect.signature(getattr(FakeNvml, name))
        assert list(real.parameters) == [p for p in fake.parameters if p != "self"], name
        del member
    not_found = _error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert not_found.__name__ == "NVMLError_LibraryNotFound"
    assert issubclass(not_found, pynvml.NVMLError)


def _smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus: list[list[object]]) -> str:
    state = tmp_path / "nvidia-smi.json"
    state.write_text(json.dumps({"gpus": gpus, "apps": []}))
    monkeypatch.setenv("FAKE_NVIDIA_SMI_STATE", str(state))
    return str(SCRIPTS / "fake_nvidia_smi.py")


def test_gpus_are_read_through_nvml() -> None:
    fake = FakeNvml(
        [
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-aaa",
                "total": H100_MIB,
                "used": 61_000,
                "utilization": 37,
                "processes": [(4242, 60_000), (4343, None)],
            },
            {"name": "NVIDIA L4", "uuid": "GPU-bbb", "total": L4_MIB, "used": 0, "processes": []},
        ]
    )
    fake.names[4242] = "python3 -m vllm.entrypoints.openai.api_server"
    gpus = GpuProbe("no-such-nvidia-smi", nvml=fake).snapshot()
    assert gpus == [
        GpuInfo(
            0,
            "GPU-aaa",
            "NVIDIA H100 80GB HBM3",
            H100_MIB,
            61_000,
            H100_MIB - 61_000,
            37,
            (
                GpuProcess(4242, "python3 -m vllm.entrypoints.openai.api_server", 60_000),
                GpuProcess(4343, "", 0),  # no name (NotFound, not in /proc), memory not reported
            ),
        ),
        GpuInfo(1, "GPU-bbb", "NVIDIA L4", L4_MIB, 0, L4_MIB, None, ()),  # NotSupported
    ]


@pytest.mark.parametrize(
    "error",
    [_error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), _error(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)],
)
def test_without_nvml_the_probe_asks_nvidia_smi(
    error: type[Exception], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = _smi(tmp_path, monkeypatch, [[0, "GPU-aaa", "NVIDIA H100", H100_MIB, 0, H100_MIB, 3]])
    probe = GpuProbe(smi, nvml=FakeNvml([], init_error=error))
    assert probe.available
    assert [(g.index, g.uuid, g.memory_free_mib) for g in probe.snapshot()] == [
        (0, "GPU-aaa", H100_MIB)
    ]
    # A CPU machine: neither.
    cpu = GpuProbe(str(tmp_path / "no-nvidia-smi"), nvml=FakeNvml([], init_error=error))
    assert not cpu.available and cpu.snapshot() == []


def test_an_nvml_error_while_reading_falls_back_to_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = _smi(tmp_path, monkeypatch, [[0, "GPU-aaa", "NVIDIA H100", H100_MIB, 5, 81554, 0]])
    lost = FakeNvml([{"name": "x", "uuid": "GPU-aaa", "total": 1, "used": 0, "lost": True}])
    gpus = GpuProbe(smi, nvml=lost).snapshot()
    assert [(g.uuid, g.memory_used_mib) for g in gpus] == [("GPU-aaa", 5)]


# ---- a real runner over fake GPUs --------------------------------------------------------------


class FakeGpus:
    """The stand-in nvidia-smi's state: GPUs and the processes on them, rewritten by the test."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, totals: list[int]):
        self.path = tmp_path / "nvidia-smi.json"
        self.totals = totals
        monkeypatch.setenv("FAKE_NVIDIA_SMI_STATE", str(self.path))
        self.set()

    @property
    def command(self) -> str:
        return str(SCRIPTS / "fake_nvidia_smi.py")

    def set(self, *apps: tuple[int, int, str, int]) -> None:
        """(gpu, pid, name, MiB) of each process holding memory."""
        gpus, rows = [], []
        for index, total in enumerate(self.totals):
            used = sum(mib for gpu, _, _, mib in apps if gpu == index)
            gpus.append([index, f"GPU-{index}", "NVIDIA", total, used, total - used, 0])
        for gpu, pid, name, mib in apps:
            rows.append([f"GPU-{gpu}", pid, name, mib])
        part = self.path.with_suffix(".part")
        part.write_text(json.dumps({"gpus": gpus, "apps": rows}))
        part.replace(self.path)


def _until(check: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _failure(runner: Runner, job_id: str) -> Failure:
    events = runner.follow(job_id, timeout=60)
    assert events[-1].type is EventType.failed
    job = runner.client.job(job_id)
    assert job.state is JobState.failed and job.failure is not None
    return job.failure


def _with_constants(name: str, model: str, share: float) -> str:
    """The script as a generated one says its model and vLLM's share (constants, as literals)."""
    script = script_text(name).replace(
        'BASE_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"', f'BASE_MODEL = "{model}"'
    )
    assert f'BASE_MODEL = "{model}"' in script
    return f"GPU_MEMORY_UTILIZATION = {share}\n" + script


def test_a_job_that_can_never_fit_is_refused_with_the_numbers(
    make_runner: RunnerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGpus(tmp_path, monkeypatch, [L4_MIB, L4_MIB])
    runner = make_runner(nvidia_smi=fake.command, gpu_slots="0,1")
    script = _with_constants("train_ok.py", "Qwen/Qwen2.5-14B-Instruct", 0.9)
    job_id = runner.submit("train_ok.py", script=script)
    failure = _failure(runner, job_id)
    assert failure.kind is FailureKind.gpu_too_small
    assert "Qwen/Qwen2.5-14B-Instruct needs about 28,751 MiB" in failure.summary
    assert "0.9 x 24,564 MiB = 22,108 MiB" in failure.summary
    assert "smaller base model" in failure.fix and "ARTBOT_RUNNER_GPU_SLOTS" in failure.fix
    assert [e.type for e in runner.client.events(job_id).events] == [
        EventType.queued,
        EventType.failed,
    ]
    assert not (runner.run_dir(job_id) / ".art").exists()  # it never ran
    # A model that fits the same GPU runs.
    small = _with_constants("train_ok.py", "Qwen/Qwen2.5-7B-Instruct", 0.9)
    assert runner.follow(runner.submit("train_ok.py", script=small))[-1].type is (
        EventType.succeeded
    )


def test_a_job_waits_behind_a_runner_job_holding_memory_and_starts_when_it_frees(
    make_runner: RunnerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGpus(tmp_path, monkeypatch, [H100_MIB, H100_MIB])
    runner = make_runner(nvidia_smi=fake.command, gpu_slots="0,1")
    first = runner.submit("gate.py")
    started = _until(
        lambda: [e for e in runner.client.events(first).events if e.type is EventType.started],
        "the first job started",
    )
    assert started[0].data["gpus"] == [0]
    pid = started[0].data["pid"]  # its supervisor: the job's process group
    # Its vLLM server (as the fake GPUs say) holds memory on the other GPU.
    fake.set((1, pid, "python3 -m vllm.entrypoints.openai.api_server", 60_000))
    second = runner.submit("train_ok.py", args=["--gpu-memory-utilization", "0.7"])
    waiting = _until(
        lambda: runner.client.job(second).waiting_for or "", "the second job says it waits"
    )
    job = runner.client.job(second)
    assert job.state is JobState.queued and job.queue_position == 1
    assert "GPU 1 has 21,559 MiB free of 81,559 MiB" in waiting
    assert f"pid {pid} (python3 -m vllm.entrypoints.openai.api_server, 60,000 MiB, " in waiting
    assert f"runner job {first})" in waiting
    told = [e for e in runner.client.events(second).events if e.type is EventType.waiting]
    assert len(told) == 1
    assert told[0].data["holders"] == [
        {
            "gpu": 1,
            "pid": pid,
            "name": "python3 -m vllm.entrypoints.openai.api_server",
            "used_mib": 60_000,
            "job_id": first,
        }
    ]
    # A local job behind it waits too (FIFO); a serverless one does not.
    third = runner.submit("train_ok.py")
    assert runner.follow(runner.submit("train_ok.py", backend="serverless"))[-1].type is (
        EventType.succeeded
    )
    assert runner.client.job(third).state is JobState.queued
    # The memory frees: it starts on that GPU, and the one behind it once a slot frees.
    fake.set()
    events = runner.follow(second, timeout=60)
    assert events[-1].type is EventType.succeeded
    assert runner.client.job(second).gpus == [1]
    assert runner.client.job(second).waiting_for is None
    (runner.run_dir(first) / "release").write_text("")
    assert runner.follow(first)[-1].type is EventType.succeeded
    assert runner.follow(third, timeout=60)[-1].type is EventType.succeeded


def test_a_job_that_waited_too_long_for_memory_fails_naming_who_holds_it(
    make_runner: RunnerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGpus(tmp_path, monkeypatch, [H100_MIB, H100_MIB])
    fake.set((0, 4242, "python3 -m vllm.entrypoints", 60_000))
    runner = make_runner(nvidia_smi=fake.command, gpu_slots="0", gpu_wait_s="1")
    # No constants: only that others do not hold most of the GPU.
    failure = _failure(runner, runner.submit("train_ok.py"))
    assert failure.kind is FailureKind.stale_gpu_memory
    assert "waited" in failure.summary and "for GPU memory" in failure.summary
    assert "pid 4242 (python3 -m vllm.entrypoints, 60,000 MiB)" in failure.summary
    assert "kill 4242" in failure.fix and "ARTBOT_RUNNER_GPU_WAIT_S" in failure.fix
    health = runner.client.health()
    assert [g["index"] for g in health.gpus] == [0, 1]
    assert health.gpus[0]["processes"][0]["pid"] == 4242


def test_free_memory_is_checked_against_what_the_script_asks(
    make_runner: RunnerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGpus(tmp_path, monkeypatch, [H100_MIB])
    # Memory in use by processes the runner cannot see (another container).
    state = json.loads(fake.path.read_text())
    state["gpus"][0][4:6] = [40_000, H100_MIB - 40_000]
    fake.path.write_text(json.dumps(state))
    runner = make_runner(nvidia_smi=fake.command, gpu_slots="0", gpu_wait_s="1")
    low = _failure(runner, runner.submit("gate.py", args=["--gpu-memory-utilization", "0.7"]))
    assert low.kind is FailureKind.stale_gpu_memory
    assert "GPU 0 has 41,559 MiB free" in low.summary
    assert "40,000 MiB by processes not listed" in low.summary
    job_id = runner.submit("train_ok.py", args=["--gpu-memory-utilization=0.3"])
    assert runner.follow(job_id)[-1].type is EventType.succeeded
