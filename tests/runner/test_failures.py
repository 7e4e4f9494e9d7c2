"""Failure classification: the pure classifier as a table, then each class from a real job."""

from __future__ import annotations

import pytest

from runner.jobs.failures import FailureContext, classify_failure, last_traceback
from runner.jobs.gpu import GpuInfo, GpuProcess
from runner.schemas import EventType, FailureKind, FixAction, JobState
from tests.runner.conftest import SCRIPTS, Runner, RunnerFactory, job_environ

SCRIPT_TRACEBACK = """\
Scenarios: 2 for training, 0 for validation.
Traceback (most recent call last):
  File "/jobs/abc/rl_train.py", line 120, in <module>
    asyncio.run(main())
  File "/usr/lib/python3.11/asyncio/runners.py", line 190, in run
    return runner.run(main)
  File "/jobs/abc/rl_train.py", line 98, in main
    await rollout(model, scenario)
  File "/jobs/abc/rl_train.py", line 61, in rollout
    reward = compute_reward(scenario, answer)
  File "/jobs/abc/rl_train.py", line 40, in compute_reward
    return len(answer) / 0
           ~~~~~~~~~~~~^~~
ZeroDivisionError: division by zero
"""

EXCEPTION_GROUP = """\
  + Exception Group Traceback (most recent call last):
  |   File "/jobs/abc/rl_train.py", line 98, in main
  |     await gather(...)
  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "/jobs/abc/rl_train.py", line 61, in rollout
    |     tool(**arguments)
    |   File "/jobs/abc/rl_train.py", line 30, in search_web
    |     raise KeyError(query)
    | KeyError: 'weather'
    +------------------------------------
"""

ART_ONLY_TRACEBACK = """\
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/art/local/backend.py", line 300, in train
    raise RuntimeError("trainer crashed")
RuntimeError: trainer crashed
"""

# Transient failures, as vLLM, PyTorch and NCCL print them (lines from vLLM issues #17965,
# #23517, #27549, #10812, vLLM-fork #2134, PyTorch #149984, NCCL #207, and the CUDA error text).
ENGINE_DEAD_IN_ROLLOUT = """\
train:  40%|####      | 2/5 [03:12<04:48, 96.1s/it]
(EngineCore_0 pid=675221) ERROR 08-25 11:05:40 [core.py:700] EngineCore encountered a fatal error.
ERROR 08-25 11:05:40 [core_client.py:564] Engine core proc EngineCore_0 died unexpectedly, \
shutting down client.
Traceback (most recent call last):
  File "/jobs/abc/rl_train.py", line 212, in <module>
    asyncio.run(main())
  File "/jobs/abc/rl_train.py", line 180, in main
    groups = await art.gather_trajectory_groups(pipeline)
  File "/jobs/abc/rl_train.py", line 95, in rollout
    response = await client.chat.completions.create(
  File "/venv/lib/python3.12/site-packages/openai/_base_client.py", line 1594, in request
    raise self._make_status_error_from_response(err.response) from None
openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'EngineCore \
encountered an issue. See stack trace (above) for the root cause.', 'type': \
'InternalServerError', 'param': None, 'code': 500}
"""

ENGINE_DEAD_IN_PROCESS = """\
Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 1423, in _run_engine
    step_outputs = self.llm_engine.step()
  File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core_client.py", line 558, in get_output
    raise self._format_exception(outputs) from None
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace \
(above) for the root cause.
"""

MQ_ENGINE_DEAD = """\
ERROR 12-01 13:05:02 client.py:282] RuntimeError('Engine process (pid 76) died.')
ERROR 12-01 13:05:02 client.py:282] NoneType: None
CRITICAL 12-01 13:05:02 launcher.py:99] MQLLMEngine is already dead, terminating server process
"""

NCCL_ERROR = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81
[rank0]: torch.distributed.DistBackendError: NCCL error in: \
../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with \
NCCL_DEBUG=INFO for details), NCCL version 2.21.5
[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or \
device error.
[rank0]: Last error:
"""

ILLEGAL_MEMORY_ACCESS_IN_TRAIN = """\
Traceback (most recent call last):
  File "/jobs/abc/rl_train.py", line 212, in <module>
    asyncio.run(main())
  File "/jobs/abc/rl_train.py", line 190, in main
    await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
  File "/venv/lib/python3.12/site-packages/art/model.py", line 380, in train
    async for _ in self.backend()._train_model(self, groups, config, dev_config):
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace \
below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""

DEVICE_SIDE_ASSERT = """\
Traceback (most recent call last):
  File "/jobs/abc/rl_train.py", line 140, in compute_reward
    return scores[index].item()
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace \
below might be incorrect.
"""

ENGINE_GONE_AFTER_THE_SCRIPT_RAISED = (
    SCRIPT_TRACEBACK
    + "ERROR 01-16 17:16:49 [core_client.py:605] Engine core proc EngineCore_DP0 died "
    "unexpectedly, shutting down client.\n"
)


def gpu(index: int, *processes: GpuProcess, free: int = 70_000) -> GpuInfo:
    return GpuInfo(
        index,
        f"GPU-{index}",
        "NVIDIA H100 80GB HBM3",
        81_559,
        81_559 - free,
        free,
        0,
        tuple(processes),
    )


STALE = gpu(0, GpuProcess(4242, "python3", 60_000), free=20_000)
STALE_ELSEWHERE = gpu(1, GpuProcess(4343, "python3", 60_000), free=20_000)

# (case, exit code, log, gpus, context, kind, fix action, words in summary+fix+excerpt)
CASES = [
    (
        "cuda oom",
        1,
        "step 3\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.10 GiB\n",
        [],
        FailureContext(job_gpus=[0]),
        FailureKind.cuda_oom,
        FixAction.retry_lower_gpu_memory,
        ["ran out of memory", "--gpu-memory-utilization", "Tried to allocate 2.00 GiB"],
    ),
    (
        "oom with memory held by a stale process",
        1,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
        [STALE],
        FailureContext(job_gpus=[0]),
        FailureKind.stale_gpu_memory,
        None,
        ["pid 4242", "60000 MiB on GPU 0", "kill 4242"],
    ),
    (
        "oom, a stale process on the job's GPU 1",
        1,
        "torch.cuda.OutOfMemoryError: CUDA out of memory.\n",
        [STALE, STALE_ELSEWHERE],
        FailureContext(job_gpus=[1]),
        FailureKind.stale_gpu_memory,
        None,
        ["pid 4343"],
    ),
    (
        "oom, the stale process is on another GPU",
        1,
        "torch.cuda.OutOfMemoryError: CUDA out of memory.\n",
        [gpu(0), STALE_ELSEWHERE],
        FailureContext(job_gpus=[0]),
        FailureKind.cuda_oom,
        FixAction.retry_lower_gpu_memory,
        ["CUDA out of memory"],
    ),
    (
        "vllm cannot reserve its share at startup",
        1,
        "ValueError: Free memory on device (12.1/79.1 GiB) on startup is less than desired "
        "GPU memory utilization (0.7, 55.4 GiB).\n",
        [],
        FailureContext(job_gpus=[0]),
        FailureKind.cuda_oom,
        FixAction.retry_lower_gpu_memory,
        ["Free memory on device"],
    ),
    (
        "missing environment variables",
        1,
        "Missing environment variables:\n"
        "  OPENAI_API_KEY: RULER's judge (openai/gpt-5.4) needs it\n"
        "  WANDB_API_KEY: ServerlessBackend trains on W&B and needs it\n"
        "Set them, or put them in a .env file next to this script, and run again.\n",
        [],
        FailureContext(),
        FailureKind.missing_env,
        None,
        ["OPENAI_API_KEY, WANDB_API_KEY", "ARTBOT_RUNNER_JOB_SECRETS", "RULER's judge"],
    ),
    (
        "the openai client without a key",
        1,
        "openai.OpenAIError: The api_key client option must be set either by passing api_key "
        "to the client or by setting the OPENAI_API_KEY environment variable\n",
        [],
        FailureContext(),
        FailureKind.missing_env,
        None,
        ["OPENAI_API_KEY"],
    ),
    (
        "uv cannot resolve",
        1,
        "Reading inline script metadata from `rl_train.py`\n"
        "  \u00d7 No solution found when resolving script dependencies:\n"
        "  \u2570\u2500\u25b6 Because there is no version of openpipe-art==9.9 "
        "and you require openpipe-art==9.9, "
        "we can conclude that your requirements are unsatisfiable.\n",
        [],
        FailureContext(),
        FailureKind.dependency_install,
        None,
        ["No solution found", "# /// script", "uv run --script rl_train.py"],
    ),
    (
        "uv cannot download",
        2,
        "error: Failed to download `torch==2.5.1`\n"
        "  Caused by: Request failed after 3 retries\n  Caused by: dns error\n",
        [],
        FailureContext(),
        FailureKind.dependency_install,
        None,
        ["Failed to download", "Caused by: dns error", "UV_INDEX_URL"],
    ),
    (
        "a module that is not installed",
        1,
        "Traceback (most recent call last):\n"
        '  File "/jobs/abc/rl_train.py", line 30, in <module>\n    import tiktoken\n'
        "ModuleNotFoundError: No module named 'tiktoken'\n",
        [],
        FailureContext(),
        FailureKind.import_error,
        None,
        ["`tiktoken`", "dependencies"],
    ),
    (
        "a name that cannot be imported",
        1,
        "Traceback (most recent call last):\n"
        '  File "/jobs/abc/rl_train.py", line 31, in <module>\n    from art import LocalBackend\n'
        "ImportError: cannot import name 'LocalBackend' from 'art'\n",
        [],
        FailureContext(),
        FailureKind.import_error,
        None,
        ["cannot import name 'LocalBackend'"],
    ),
    (
        "an exception in the script's reward code",
        1,
        SCRIPT_TRACEBACK,
        [],
        FailureContext(),
        FailureKind.user_code,
        None,
        [
            "ZeroDivisionError: division by zero",
            "`compute_reward` (rl_train.py line 40)",
            "return len(answer) / 0",
        ],
    ),
    (
        "the same, with checkpoints to resume from",
        1,
        SCRIPT_TRACEBACK,
        [],
        FailureContext(has_checkpoints=True),
        FailureKind.user_code,
        FixAction.resume,
        ["resumes from its last checkpoint"],
    ),
    (
        "an exception group from a task group in a tool",
        1,
        EXCEPTION_GROUP,
        [],
        FailureContext(),
        FailureKind.user_code,
        None,
        ["KeyError: 'weather'", "`search_web` (rl_train.py line 30)"],
    ),
    (
        "the script printing 'Failed to' is not an install failure",
        1,
        "Failed to parse the answer, retrying\n" + SCRIPT_TRACEBACK,
        [],
        FailureContext(),
        FailureKind.user_code,
        None,
        ["compute_reward"],
    ),
    (
        "a chained exception: the last traceback counts",
        1,
        SCRIPT_TRACEBACK
        + "\nDuring handling of the above exception, another exception occurred:\n\n"
        + ART_ONLY_TRACEBACK,
        [],
        FailureContext(),
        FailureKind.unknown,
        None,
        ["RuntimeError: trainer crashed"],
    ),
    (
        "a traceback only inside a library",
        1,
        ART_ONLY_TRACEBACK,
        [],
        FailureContext(),
        FailureKind.unknown,
        None,
        ["RuntimeError: trainer crashed", "art/local/backend.py"],
    ),
    (
        "killed by the kernel",
        -9,
        "step 12\n",
        [],
        FailureContext(),
        FailureKind.unknown,
        None,
        ["SIGKILL", "out-of-memory killer"],
    ),
    (
        "a plain exit with a message",
        1,
        "Stopping: three steps in a row where every rollout failed.\n",
        [],
        FailureContext(),
        FailureKind.unknown,
        None,
        ["exit code 1: Stopping: three steps in a row"],
    ),
    (
        "vllm's engine died under a rollout: the script's call failed with it",
        1,
        ENGINE_DEAD_IN_ROLLOUT,
        [],
        FailureContext(has_checkpoints=True),
        FailureKind.engine_died,
        FixAction.resume,
        [
            "inference engine died",
            "Engine core proc EngineCore_0 died unexpectedly",
            "Resuming continues from the last checkpoint",
        ],
    ),
    (
        "vllm's engine died in the job's own process, no checkpoint yet",
        1,
        ENGINE_DEAD_IN_PROCESS,
        [],
        FailureContext(),
        FailureKind.engine_died,
        None,
        ["EngineDeadError", "starts from the beginning"],
    ),
    (
        "vllm 0.6's engine process died",
        1,
        MQ_ENGINE_DEAD,
        [],
        FailureContext(),
        FailureKind.engine_died,
        None,
        ["Engine process (pid 76) died"],
    ),
    (
        "an nccl system error",
        1,
        NCCL_ERROR,
        [],
        FailureContext(has_checkpoints=True),
        FailureKind.gpu_error,
        FixAction.resume,
        ["The GPU failed", "unhandled system error", "nvidia-smi -q -d ECC"],
    ),
    (
        "an illegal memory access while training: the GPU's, not the script's",
        1,
        ILLEGAL_MEMORY_ACCESS_IN_TRAIN,
        [],
        FailureContext(),
        FailureKind.gpu_error,
        None,
        ["CUDA error: an illegal memory access was encountered"],
    ),
    (
        "a device-side assert is the code's",
        1,
        DEVICE_SIDE_ASSERT,
        [],
        FailureContext(),
        FailureKind.user_code,
        None,
        ["device-side assert triggered", "`compute_reward`"],
    ),
    (
        "cuda's out of memory error is an oom, even with the engine dead after it",
        1,
        "RuntimeError: CUDA error: out of memory\n" + ENGINE_DEAD_IN_PROCESS,
        [],
        FailureContext(job_gpus=[0]),
        FailureKind.cuda_oom,
        FixAction.retry_lower_gpu_memory,
        ["CUDA error: out of memory"],
    ),
    (
        "an oom that killed the engine stays an oom",
        1,
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        + ENGINE_DEAD_IN_ROLLOUT,
        [],
        FailureContext(job_gpus=[0]),
        FailureKind.cuda_oom,
        FixAction.retry_lower_gpu_memory,
        ["Tried to allocate 2.00 GiB"],
    ),
    (
        "the engine going down after the script raised: the script's error",
        1,
        ENGINE_GONE_AFTER_THE_SCRIPT_RAISED,
        [],
        FailureContext(),
        FailureKind.user_code,
        None,
        ["ZeroDivisionError: division by zero"],
    ),
    (
        "timeout",
        -15,
        "torch.OutOfMemoryError: CUDA out of memory.\n",
        [],
        FailureContext(timed_out=True, max_runtime_s=7200, has_checkpoints=True),
        FailureKind.timeout,
        FixAction.resume,
        ["maximum runtime of 7200 s", "ARTBOT_RUNNER_MAX_RUNTIME_S"],
    ),
    (
        "timeout without checkpoints",
        -9,
        "",
        [],
        FailureContext(timed_out=True),
        FailureKind.timeout,
        None,
        ["maximum runtime"],
    ),
    (
        "nothing to go on",
        None,
        "",
        [],
        FailureContext(),
        FailureKind.unknown,
        None,
        ["an unknown status"],
    ),
]


TRANSIENT = (FailureKind.engine_died, FailureKind.gpu_error)
"""The kinds the same job often survives: the bot resumes them by itself."""


@pytest.mark.parametrize(
    ("exit_code", "log", "gpus", "context", "kind", "action", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_classify_failure(
    exit_code: int | None,
    log: str,
    gpus: list[GpuInfo],
    context: FailureContext,
    kind: FailureKind,
    action: FixAction | None,
    words: list[str],
) -> None:
    failure = classify_failure(exit_code, log, gpus, context)
    assert failure.kind is kind
    assert failure.fix_action is action
    assert failure.transient is (kind in TRANSIENT)
    assert failure.fix, "every failure says what to do"
    text = "\n".join([failure.summary, failure.fix, failure.log_excerpt])
    for word in words:
        assert word in text


def test_last_traceback_reads_frames_and_the_exception() -> None:
    tb = last_traceback("noise\n" + SCRIPT_TRACEBACK + "more noise\n")
    assert tb is not None
    assert tb.exception == "ZeroDivisionError: division by zero"
    assert tb.frames[-1] == ("/jobs/abc/rl_train.py", 40, "compute_reward")
    assert last_traceback("no traceback here") is None


# ---- from real jobs ----------------------------------------------------------------------------


def _failure(runner: Runner, job_id: str):
    events = runner.follow(job_id)
    assert events[-1].type is EventType.failed
    job = runner.client.job(job_id)
    assert job.state is JobState.failed
    assert job.failure is not None
    assert events[-1].data == job.failure.model_dump(mode="json")
    return job.failure


def test_an_exception_in_the_rollout_points_at_the_script(runner: Runner) -> None:
    failure = _failure(runner, runner.submit("rollout_error.py"))
    assert failure.kind is FailureKind.user_code
    assert "ZeroDivisionError" in failure.summary
    assert "`score` (rl_train.py line 16)" in failure.summary
    assert "in rollout" in failure.log_excerpt
    assert failure.fix_action is None  # no checkpoint to resume from

    with_checkpoint = _failure(runner, runner.submit("rollout_error.py", args=["--checkpoint"]))
    assert with_checkpoint.fix_action is FixAction.resume


def test_a_dead_engine_is_transient_and_resumes_from_the_checkpoint(runner: Runner) -> None:
    failure = _failure(runner, runner.submit("engine_died.py"))
    assert failure.kind is FailureKind.engine_died and failure.transient
    assert "Engine core proc EngineCore_0 died unexpectedly" in failure.summary
    assert failure.fix_action is FixAction.resume  # it left a checkpoint


def test_cuda_oom(runner: Runner) -> None:
    failure = _failure(runner, runner.submit("cuda_oom.py"))
    assert failure.kind is FailureKind.cuda_oom
    assert failure.fix_action is FixAction.retry_lower_gpu_memory
    assert runner.client.job(runner.jobs[-1]).exit_code == 1


def test_missing_environment_variable_from_the_script(runner: Runner) -> None:
    failure = _failure(runner, runner.submit("missing_env.py"))
    assert failure.kind is FailureKind.missing_env
    assert "OPENAI_API_KEY" in failure.summary


def test_import_error(runner: Runner) -> None:
    failure = _failure(runner, runner.submit("import_error.py"))
    assert failure.kind is FailureKind.import_error
    assert "surely_not_installed_module" in failure.summary


def test_dependency_install_failure(make_runner: RunnerFactory) -> None:
    runner = make_runner(command=f"{{python}} {SCRIPTS / 'fake_uv.py'} run --script {{script}}")
    failure = _failure(runner, runner.submit("train_ok.py"))
    assert failure.kind is FailureKind.dependency_install
    assert "No solution found" in failure.log_excerpt


def test_preflight_fails_at_once_on_a_missing_required_variable(runner: Runner) -> None:
    job_id = runner.submit("gate.py", required_env=["OPENAI_API_KEY"])  # not in the runner's env
    failure = _failure(runner, job_id)
    assert failure.kind is FailureKind.missing_env
    assert "OPENAI_API_KEY" in failure.summary and "ARTBOT_RUNNER_JOB_SECRETS" in failure.fix
    assert [e.type for e in runner.client.events(job_id).events] == [
        EventType.queued,
        EventType.failed,
    ]
    assert not (runner.run_dir(job_id) / "env.json").exists()  # the script never ran


def test_preflight_passes_when_the_secret_is_passed_on(make_runner: RunnerFactory) -> None:
    runner = make_runner(environ=job_environ(OPENAI_API_KEY="sk-test"))
    job_id = runner.submit("missing_env.py", required_env=["OPENAI_API_KEY"])
    assert runner.follow(job_id)[-1].type is EventType.succeeded


def test_preflight_without_a_gpu_fails_local_jobs_but_runs_serverless_ones(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner(gpu_slots="none")
    failure = _failure(runner, runner.submit("train_ok.py"))
    assert failure.kind is FailureKind.preflight
    assert "no GPU" in failure.summary
    assert (
        runner.follow(runner.submit("train_ok.py", backend="serverless"))[-1].type
        is EventType.succeeded
    )


def test_preflight_when_the_command_is_not_installed(make_runner: RunnerFactory) -> None:
    runner = make_runner(command="surely-not-a-command-uv run --script {script}")
    failure = _failure(runner, runner.submit("train_ok.py"))
    assert failure.kind is FailureKind.preflight
    assert "surely-not-a-command-uv" in failure.summary


def test_long_messages_are_clipped_to_the_schema() -> None:
    huge = SCRIPT_TRACEBACK.replace("division by zero", "x" * 50_000)
    failure = classify_failure(1, huge, [], FailureContext())
    assert failure.kind is FailureKind.user_code
    assert len(failure.summary) <= 2_000 and failure.summary.endswith("\u2026")
    many = [gpu(0, *(GpuProcess(1000 + i, "p" * 3000, 600) for i in range(20)))]
    stale = classify_failure(1, "CUDA out of memory\n", many, FailureContext(job_gpus=[0]))
    assert stale.kind is FailureKind.stale_gpu_memory
    assert len(stale.summary) <= 2_000


def test_a_runner_bug_while_settling_fails_the_job_instead_of_leaving_it_running(
    runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.jobs import outcome

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("classifier bug")

    monkeypatch.setattr(outcome, "classify_failure", broken)
    failure = _failure(runner, runner.submit("cuda_oom.py"))
    assert failure.kind is FailureKind.unknown
    assert "RuntimeError: classifier bug" in failure.summary
    assert runner.client.health().free_slots == 2
