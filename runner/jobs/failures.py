"""Why a job failed, and what to do about it: a pure function over what the runner saw.

`classify_failure(exit_code, log_text, gpus, ...)` looks at the exit status, the output (its
head and tail) and the GPU snapshot taken before the start, and returns a `Failure` whose
summary and fix speak to the person who asked for the run. Rules are tried in order; the first
that matches wins, so the specific causes come before the general ones (a CUDA OOM raised
inside a rollout is an OOM, not a bug in the rollout).

A few causes are `transient`: vLLM's engine process dying and CUDA or NCCL errors that are not an
OOM, which the same job often survives when run again (the bot resumes such a job by itself).
Everything else is deterministic: running it again fails again.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from runner.jobs.gpu import GpuInfo
from runner.schemas import Failure, FailureKind, FixAction

EXCERPT_CHARS = 4_000
SUMMARY_CHARS = 2_000
STALE_PROCESS_MIB = 512  # memory held on a job's GPU before it started that counts as stale


@dataclass(frozen=True)
class FailureContext:
    """Everything the classifier may look at besides the exit code and the log."""

    script_name: str = "rl_train.py"
    job_gpus: Sequence[int] = ()
    has_checkpoints: bool = False
    timed_out: bool = False
    max_runtime_s: float | None = None
    memory_used_bytes: int | None = None
    """Set when the runner stopped the job for holding more memory than the per-job limit."""
    memory_limit_bytes: int | None = None


@dataclass(frozen=True)
class TracebackInfo:
    """The last traceback in the output: its frames (file, line, function) and exception line."""

    frames: tuple[tuple[str, int, str], ...]
    exception: str
    text: str


_FRAME = re.compile(r'^\s*(?:\|\s*)?File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
_TRACEBACK_START = re.compile(r"^[ \t]*(?:\|[ \t]*)?Traceback \(most recent call last\):\s*$", re.M)


def last_traceback(log_text: str) -> TracebackInfo | None:
    """The last Python traceback in `log_text`, or None."""
    starts = list(_TRACEBACK_START.finditer(log_text))
    if not starts:
        return None
    lines = log_text[starts[-1].start() :].splitlines()
    # Inside an exception group every line carries the group's margin ("    | "): drop it.
    margin = lines[0][: lines[0].index("Traceback")]
    frames: list[tuple[str, int, str]] = []
    exception = ""
    kept: list[str] = [lines[0]]
    for raw in lines[1:]:
        kept.append(raw)
        line = raw[len(margin) :] if margin and raw.startswith(margin) else raw
        match = _FRAME.match(line)
        if match:
            frames.append((match["file"], int(match["line"]), match["func"].strip()))
            continue
        stripped = line.strip().lstrip("|").strip()
        if (
            not stripped
            or line.startswith((" ", "\t"))
            or stripped.startswith(("^", "~", "+-", "..."))
        ):
            continue
        exception = stripped  # the first unindented line after the frames
        break
    return TracebackInfo(tuple(frames), exception, "\n".join(kept))


def make_failure(
    kind: FailureKind,
    summary: str,
    fix: str = "",
    fix_action: FixAction | None = None,
    log_excerpt: str = "",
    *,
    transient: bool = False,
) -> Failure:
    """A Failure with every text clipped to the schema's limits (an exception message, a
    process name, a log line can be any length; a Failure that cannot be built helps no one)."""
    return Failure(
        kind=kind,
        summary=_clip(summary, SUMMARY_CHARS),
        fix=_clip(fix, SUMMARY_CHARS),
        fix_action=fix_action,
        log_excerpt=log_excerpt[-EXCERPT_CHARS:],
        transient=transient,
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    return text[-limit:]


def _last_lines(log_text: str, count: int = 30) -> str:
    lines = [line for line in log_text.rstrip().splitlines() if line.strip()]
    return _excerpt("\n".join(lines[-count:]))


# ---- the rules --------------------------------------------------------------------------------

_OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED"
    r"|No available memory for the cache blocks"
    r"|Free memory on device .{0,80} is less than desired GPU memory utilization",
)
_MISSING_ENV_BLOCK = re.compile(r"Missing environment variables:\n((?:[ \t]+[^\n]*\n?)+)")
_MISSING_ENV_LINE = re.compile(r"^\s+([A-Z_][A-Z0-9_]*):\s*(.*)$", re.M)
_OPENAI_KEY = re.compile(r"api_key client option must be set.{0,80}OPENAI_API_KEY", re.S)
_UV_FAILURE = re.compile(
    r"No solution found when resolving|requirements are unsatisfiable"
    r"|(?:error:|\u00d7)\s*"
    r"(?:Failed to (?:download|fetch|build|prepare|resolve|install)|Request failed)"
    r"|Because .{0,300} we can conclude"
    r"|Distribution not found|Could not find a version that satisfies",
    re.S,
)
_UV_LINE = re.compile(
    r"^(?:\s*[\u00d7x]\s|error:|\s*\u2570\u2500\u25b6|\s*Caused by:|\s*help:|\s*hint:).*$", re.M
)
# vLLM's engine process died under the script: V1's EngineDeadError and the client's line when
# it sees the process go, V0's AsyncEngineDeadError / MQEngineDeadError and their messages.
_ENGINE_DIED = re.compile(
    r"EngineDeadError|EngineCore encountered an issue"
    r"|Engine core proc \S+ died unexpectedly"
    r"|Engine process \(pid \d+\) died"
    r"|Background loop has errored already"
)
# CUDA and NCCL errors that come from the GPU, its driver or the links between GPUs, not from
# the script: an OOM is matched before these, and a device-side assert (an index out of range
# in a kernel, a bad token id) or NCCL's invalid usage are the code's and stay out.
_GPU_ERROR = re.compile(
    r"CUDA error: (?:an illegal memory access|an illegal instruction|unspecified launch failure"
    r"|uncorrectable ECC error|the launch timed out|unknown error"
    r"|CUDA-capable device\(s\) is/are busy or unavailable)"
    r"|NCCL error\b.{0,200}?(?:unhandled system error|unhandled cuda error|internal error"
    r"|remote process exited|network error)"
    r"|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError|ncclInternalError"
    r"|Watchdog caught collective operation timeout"
    r"|CUDNN_STATUS_EXECUTION_FAILED|CUBLAS_STATUS_EXECUTION_FAILED"
)
# The exceptions a script sees when the engine it calls died: its own calls failing with them
# are the engine's fault, not the script's.
_ENGINE_UNREACHABLE = re.compile(
    r"APIConnectionError|InternalServerError|APITimeoutError|ConnectError|RemoteProtocolError"
)
_IMPORT_ERROR = re.compile(r"^(?:ModuleNotFoundError|ImportError): (.*)$")
_NO_MODULE = re.compile(r"No module named '([^']+)'")


def _stale_processes(
    gpus: Sequence[GpuInfo], job_gpus: Sequence[int]
) -> list[tuple[int, int, int, str]]:
    """(gpu, pid, MiB, name) of processes that held memory on the job's GPUs before it started."""
    held = []
    for gpu in gpus:
        if job_gpus and gpu.index not in job_gpus:
            continue
        for process in gpu.processes:
            if process.used_mib >= STALE_PROCESS_MIB:
                held.append((gpu.index, process.pid, process.used_mib, process.name))
    return held


def stale_gpu_failure(
    gpus: Sequence[GpuInfo], job_gpus: Sequence[int], excerpt: str = ""
) -> Failure | None:
    """A stale_gpu_memory failure if other processes hold memory on the job's GPUs, else None."""
    held = _stale_processes(gpus, job_gpus)
    if not held:
        return None
    listed = ", ".join(
        f"pid {pid} ({name or '?'}, {mib} MiB on GPU {gpu})" for gpu, pid, mib, name in held[:8]
    )
    pids = " ".join(str(pid) for _, pid, _, _ in held[:8])
    return make_failure(
        kind=FailureKind.stale_gpu_memory,
        summary=(
            "GPU memory is held by other processes that were there before the job started: "
            f"{listed}."
        ),
        fix=(
            "Those are usually leftovers of an earlier run (a vLLM server that did not exit). On "
            f"the runner host, check them with `nvidia-smi` and stop them (`kill {pids}`), or wait "
            "for them to finish, then run the job again."
        ),
        log_excerpt=_excerpt(excerpt),
    )


def _oom(log_text: str, gpus: Sequence[GpuInfo], ctx: FailureContext) -> Failure:
    line = next(
        (m.group(0) for m in re.finditer(r"^.*(?:" + _OOM.pattern + r").*$", log_text, re.M)), ""
    )
    stale = stale_gpu_failure(gpus, ctx.job_gpus, line or _last_lines(log_text))
    if stale is not None:
        return stale
    return make_failure(
        kind=FailureKind.cuda_oom,
        summary="The GPU ran out of memory (CUDA out of memory).",
        fix=(
            "Lower the share of GPU memory vLLM reserves for inference (--gpu-memory-utilization, "
            "e.g. from 0.7 to 0.6) so that training has room, or use a smaller base model or "
            "fewer rollouts per group. Retrying with lower GPU memory does the first."
        ),
        fix_action=FixAction.retry_lower_gpu_memory,
        log_excerpt=_excerpt(line.strip() or _last_lines(log_text)),
    )


def _missing_env(log_text: str) -> Failure | None:
    block = _MISSING_ENV_BLOCK.search(log_text)
    names: list[tuple[str, str]] = []
    if block:
        names = [(m[1], m[2].strip()) for m in _MISSING_ENV_LINE.finditer(block.group(1))]
    elif _OPENAI_KEY.search(log_text):
        names = [("OPENAI_API_KEY", "the OpenAI client needs it")]
    if not names:
        return None
    listed = ", ".join(name for name, _ in names)
    return make_failure(
        kind=FailureKind.missing_env,
        summary=f"The script needs environment variables the job did not have: {listed}.",
        fix=(
            f"On the runner host, set {listed} in the runner's environment and add "
            f"{'its name' if len(names) == 1 else 'their names'} to ARTBOT_RUNNER_JOB_SECRETS "
            "(jobs get only the variables listed there), restart the runner, "
            "then run the job again."
        ),
        log_excerpt=_excerpt("\n".join(f"{name}: {why}" for name, why in names)),
    )


def _dependency_install(log_text: str, ctx: FailureContext) -> Failure | None:
    if not _UV_FAILURE.search(log_text):
        return None
    lines = [m.group(0).rstrip() for m in _UV_LINE.finditer(log_text)]
    excerpt = "\n".join(lines[:40]) or _last_lines(log_text)
    return make_failure(
        kind=FailureKind.dependency_install,
        summary=(
            "Installing the script's dependencies failed (uv could not resolve or download them)."
        ),
        fix=(
            "Check the pins in the `# /// script` header at the top of the script, and that the "
            "runner host can reach the package index (or set UV_INDEX_URL for a mirror). Running "
            f"`uv run --script {ctx.script_name}` on the host shows the whole error."
        ),
        log_excerpt=_excerpt(excerpt),
    )


def _import_error(tb: TracebackInfo | None, ctx: FailureContext) -> Failure | None:
    if tb is None:
        return None
    match = _IMPORT_ERROR.match(tb.exception)
    if not match:
        return None
    module = _NO_MODULE.search(match.group(1))
    what = f"the module `{module.group(1)}`" if module else "a name it imports"
    return make_failure(
        kind=FailureKind.import_error,
        summary=f"The script could not import {what}: {tb.exception}",
        fix=(
            "Add the missing package to the `dependencies` list in the script's `# /// script` "
            "header (with a version pin), or fix the import; then run the job again."
        ),
        log_excerpt=_excerpt(tb.text),
    )


def _script_frames(tb: TracebackInfo, ctx: FailureContext) -> list[tuple[str, int, str]]:
    return [
        frame
        for frame in tb.frames
        if frame[0].endswith("/" + ctx.script_name) or frame[0] == ctx.script_name
    ]


def _transient(log_text: str, tb: TracebackInfo | None, ctx: FailureContext) -> Failure | None:
    """vLLM's engine died, or the GPU failed (CUDA, NCCL): a failure the same job often survives.
    Not when the script's own exception came last and is neither: then the engine's death
    (vLLM logs one when a script exits while it runs) followed the script's error."""
    # A GPU error is usually what killed the engine too: it is named first.
    rule = next((r for r in (_GPU_ERROR, _ENGINE_DIED) if r.search(log_text)), None)
    if rule is None:
        return None
    if (
        tb is not None
        and _script_frames(tb, ctx)
        and not any(r.search(tb.exception) for r in (_ENGINE_DIED, _GPU_ERROR, _ENGINE_UNREACHABLE))
    ):
        return None
    lines = [
        m.group(0).strip() for m in re.finditer(r"^.*(?:" + rule.pattern + r").*$", log_text, re.M)
    ]
    cause = _clip(lines[0], 300)  # the first: what followed is often its consequence
    summary = (
        f"The GPU failed under the job: {cause}"
        if rule is _GPU_ERROR
        else f"vLLM's inference engine died under the job: {cause}"
    )
    again = (
        "Resuming continues from the last checkpoint."
        if ctx.has_checkpoints
        else "It saved no checkpoint: running it again starts from the beginning."
    )
    return make_failure(
        kind=FailureKind.gpu_error if rule is _GPU_ERROR else FailureKind.engine_died,
        summary=summary,
        fix=(
            "This is rarely the script's fault (a crash inside vLLM, the GPU or its driver), and "
            f"the same job usually passes when run again. {again} If it keeps failing the same "
            "way, check the GPU on the runner host (`nvidia-smi -q -d ECC`, and `dmesg` for Xid "
            "errors)."
        ),
        fix_action=FixAction.resume if ctx.has_checkpoints else None,
        log_excerpt=_excerpt("\n".join(list(dict.fromkeys(lines))[:10])),
        transient=True,
    )


def _user_code(tb: TracebackInfo | None, ctx: FailureContext) -> Failure | None:
    if tb is None or not tb.frames:
        return None
    in_script = _script_frames(tb, ctx)
    if not in_script:
        return None
    _, line, function = in_script[-1]
    where = f"`{function}` ({ctx.script_name} line {line})"
    # The excerpt: the last frames that point into the script, each with its source line.
    frame_lines = tb.text.splitlines()
    script_frames: list[str] = []
    for index, text in enumerate(frame_lines):
        match = _FRAME.match(text)
        if match and (
            match["file"].endswith("/" + ctx.script_name) or match["file"] == ctx.script_name
        ):
            script_frames.append(text)
            if index + 1 < len(frame_lines) and not _FRAME.match(frame_lines[index + 1]):
                script_frames.append(frame_lines[index + 1])
    excerpt = "\n".join([*script_frames[-8:], tb.exception])
    resume = ctx.has_checkpoints
    return make_failure(
        kind=FailureKind.user_code,
        summary=f"The script raised {tb.exception or 'an exception'} in {where}.",
        fix=(
            f"Fix {where} (your rollout, reward or tool code) and run it again."
            + (" The run resumes from its last checkpoint." if resume else "")
        ),
        fix_action=FixAction.resume if resume else None,
        log_excerpt=_excerpt(excerpt),
    )


def _timeout(ctx: FailureContext) -> Failure:
    limit = f" of {ctx.max_runtime_s:g} s" if ctx.max_runtime_s else ""
    return make_failure(
        kind=FailureKind.timeout,
        summary=f"The job ran past the runner's maximum runtime{limit} and was stopped.",
        fix=(
            "Train for fewer steps (--num-steps or --num-epochs), or ask the runner's operator to "
            "raise ARTBOT_RUNNER_MAX_RUNTIME_S."
            + (" Resuming continues from the last checkpoint." if ctx.has_checkpoints else "")
        ),
        fix_action=FixAction.resume if ctx.has_checkpoints else None,
    )


def _memory_limit(ctx: FailureContext) -> Failure:
    gib = 1024**3
    used = f"{(ctx.memory_used_bytes or 0) / gib:.1f} GiB"
    limit = f" of {ctx.memory_limit_bytes / gib:.1f} GiB" if ctx.memory_limit_bytes else ""
    return make_failure(
        kind=FailureKind.memory_limit,
        summary=(
            f"The job's processes held {used} of host memory, over the runner's per-job "
            f"limit{limit}, and were stopped."
        ),
        fix=(
            "Lower what the job keeps in host memory (smaller batches or datasets loaded "
            "lazily), or ask the runner's operator to raise ARTBOT_RUNNER_JOB_MEMORY_MAX."
            + (" Resuming continues from the last checkpoint." if ctx.has_checkpoints else "")
        ),
        fix_action=FixAction.resume if ctx.has_checkpoints else None,
    )


def _unknown(exit_code: int | None, log_text: str, tb: TracebackInfo | None) -> Failure:
    if exit_code is not None and exit_code < 0:
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        hint = (
            " (the kernel's out-of-memory killer sends SIGKILL when the host runs out of RAM)"
            if name == "SIGKILL"
            else ""
        )
        summary = f"The job was killed by {name}{hint}."
    elif tb is not None and tb.exception:
        summary = f"The job failed: {tb.exception}"
    else:
        last = next((line.strip() for line in reversed(log_text.splitlines()) if line.strip()), "")
        code = "an unknown status" if exit_code is None else f"exit code {exit_code}"
        summary = f"The job ended with {code}" + (f": {last}" if last else ".")
    return make_failure(
        kind=FailureKind.unknown,
        summary=summary[:2_000],
        fix=(
            "Read the log excerpt (or the whole log from the runner) for the cause, "
            "fix it and run the job again."
        ),
        log_excerpt=_excerpt(tb.text if tb is not None else _last_lines(log_text)),
    )


def classify_failure(
    exit_code: int | None,
    log_text: str,
    gpus: Sequence[GpuInfo] = (),
    context: FailureContext | None = None,
) -> Failure:
    """The Failure that explains a job's end: timeout, OOM, stale GPU memory, missing variables,
    dependency install, import error, a dead engine or a GPU error (both `transient`), an
    exception in the script's own code, else unknown.

    `gpus` is the nvidia-smi snapshot taken before the job started (empty without nvidia-smi).
    """
    ctx = context or FailureContext()
    if ctx.timed_out:
        return _timeout(ctx)
    if ctx.memory_used_bytes is not None:
        return _memory_limit(ctx)
    tb = last_traceback(log_text)
    if _OOM.search(log_text):
        return _oom(log_text, gpus, ctx)
    for found in (
        _missing_env(log_text),
        _dependency_install(log_text, ctx),
        _import_error(tb, ctx),
        _transient(log_text, tb, ctx),
        _user_code(tb, ctx),
    ):
        if found is not None:
            return found
    return _unknown(exit_code, log_text, tb)
