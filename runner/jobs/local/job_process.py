"""Running a job on this host: its folder, environment, arguments, preflight and process.

A job runs as `python -I runner/jobs/local/supervisor.py ... -- <command> <script> <args>` in a new
session (its own process group), never through a shell, with an environment built from an allow-list
plus the secrets the operator listed, and CUDA_VISIBLE_DEVICES set to its GPU slot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.jobs.failures import make_failure
from runner.jobs.gpu import GpuInfo
from runner.jobs.local import supervisor as supervise
from runner.jobs.local.job_user import JobUser
from runner.jobs.local.processes import JOB_MARKER_ENV, is_alive, process_start_id
from runner.schemas import Failure, FailureKind

# Variables a job gets from the runner's environment when set there. Not the whole environment:
# the runner's own token and unrelated credentials stay out of the job.
ALLOWED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "NCCL_DEBUG",
    "XDG_CACHE_HOME",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_CACHE",
    "TORCH_HOME",
    "TRITON_CACHE_DIR",
    "VLLM_CACHE_ROOT",
    "UV_CACHE_DIR",
    "UV_PYTHON",
    "UV_PYTHON_INSTALL_DIR",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_OFFLINE",
    "UV_LINK_MODE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
ART_PATH_FLAG = "--art-path"


RUNNER_SET_ENV = ("CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "PYTHONUNBUFFERED")
"""Set by the runner for every job (with its marker, ARTBOT_RUNNER_JOB_ID)."""


def passed_env_names(secret_names: Sequence[str]) -> frozenset[str]:
    """Every variable a job may get: the allow-list, the operator's secrets, the runner's own."""
    return frozenset((*ALLOWED_ENV, *secret_names, *RUNNER_SET_ENV))


def build_env(
    source: Mapping[str, str],
    secret_names: Sequence[str],
    job_id: str,
    gpus: Sequence[int] | None,
    run_dir: Path,
) -> dict[str, str]:
    """The job's environment: allow-listed and secret variables from `source`, plus the runner's."""
    env = {name: source[name] for name in ALLOWED_ENV if name in source}
    env.update({name: source[name] for name in secret_names if name in source})
    env.setdefault("PATH", os.defpath)
    env.setdefault("HOME", str(run_dir))
    env.update(
        {
            # nvidia-smi numbers GPUs in PCI order; CUDA's default order may differ.
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            # None (serverless): no GPU at all, so the job cannot take one a local job needs.
            "CUDA_VISIBLE_DEVICES": ",".join(str(gpu) for gpu in gpus or ()),
            "PYTHONUNBUFFERED": "1",  # output (and so warnings) arrive as they are printed
            JOB_MARKER_ENV: job_id,  # finds the job's processes, even those that left its group
        }
    )
    return env


def script_args(script: str, run_dir: Path, args: Sequence[str]) -> list[str]:
    """The script's arguments: the submitted ones, plus `--art-path <run_dir>/.art` when the script
    takes that flag and the submission did not set it (else ART finds `./.art` from the cwd)."""
    given = list(args)
    if ART_PATH_FLAG in script and not any(
        a == ART_PATH_FLAG or a.startswith(ART_PATH_FLAG + "=") for a in given
    ):
        given += [ART_PATH_FLAG, str(run_dir / ".art")]
    return given


def supervisor_argv(
    runner_dir: Path,
    run_dir: Path,
    max_bytes: int,
    command: Sequence[str],
    user: JobUser | None = None,
) -> list[str]:
    """The supervisor, run by path in isolated mode: it needs nothing but the standard library.
    With `user`, it runs the command as that user."""
    as_user = ["--user", str(user.uid), "--group", str(user.gid)] if user is not None else []
    return [
        sys.executable,
        "-I",
        str(Path(supervise.__file__).resolve()),
        "--dir",
        str(runner_dir),
        "--cwd",
        str(run_dir),
        "--max-bytes",
        str(max_bytes),
        *as_user,
        "--",
        *command,
    ]


# ---- preflight --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreflightInput:
    """What preflight looks at: the job's environment, command, GPUs and what nvidia-smi sees."""

    backend: str
    env: Mapping[str, str]
    required_env: Sequence[str]
    command: Sequence[str]
    gpus: Sequence[int] | None
    snapshot: Sequence[GpuInfo]
    nvidia_smi_present: bool
    """Whether the GPUs can be read (NVML or nvidia-smi)."""


def runs_as_root(refusal: str) -> Failure:
    """A job this runner will not start: it is root with no job user (`refusal` says so)."""
    return make_failure(
        kind=FailureKind.preflight,
        summary="The runner runs as root with no job user, so it runs no job.",
        fix=refusal[0].upper() + refusal[1:] + ".",
    )


def preflight(check: PreflightInput) -> Failure | None:
    """Why the job cannot start, or None: variables, the command, a GPU that is there."""
    missing = [name for name in check.required_env if not check.env.get(name)]
    if missing:
        listed = ", ".join(missing)
        return make_failure(
            kind=FailureKind.missing_env,
            summary=f"The job needs {listed}, which the runner does not pass to jobs.",
            fix=(
                f"On the runner host, set {listed} in the runner's environment and add the "
                "name(s) to ARTBOT_RUNNER_JOB_SECRETS, restart the runner, then run the job again."
            ),
        )
    if shutil.which(check.command[0], path=check.env.get("PATH")) is None:
        return make_failure(
            kind=FailureKind.preflight,
            summary=f"The runner cannot find `{check.command[0]}` to run the script.",
            fix=(
                "Install it on the runner host (uv: https://docs.astral.sh/uv/) "
                "or change ARTBOT_RUNNER_COMMAND."
            ),
        )
    if check.backend != "local":
        return None
    if not check.gpus:
        return make_failure(
            kind=FailureKind.preflight,
            summary="This runner has no GPU for a LocalBackend job.",
            fix=(
                "Run it on a GPU host (ARTBOT_RUNNER_GPU_SLOTS lists the GPUs jobs may use), "
                "or choose ServerlessBackend."
            ),
        )
    if not check.nvidia_smi_present:
        return None  # slots from the configuration count; nothing more to check
    by_index = {gpu.index: gpu for gpu in check.snapshot}
    absent = [gpu for gpu in check.gpus if gpu not in by_index]
    if absent:
        return make_failure(
            kind=FailureKind.preflight,
            summary=(
                f"The host does not list GPU {absent[0]}, which the runner assigned to the job."
            ),
            fix="Check ARTBOT_RUNNER_GPU_SLOTS against `nvidia-smi -L` on the runner host.",
        )
    return None  # free memory and who holds it: checked before it left the queue (GpuGate)


# ---- the process ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExitStatus:
    """What the supervisor recorded when the command ended."""

    exit_code: int
    started: bool
    supervisor_max_rss_kb: int | None = None


class JobProcess:
    """A running job's supervisor: started here (`popen`) or found again after a restart."""

    def __init__(
        self,
        pid: int,
        start_id: str | None,
        runner_dir: Path,
        popen: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.pid = pid
        self.start_id = start_id
        self.runner_dir = runner_dir
        self._popen = popen

    @property
    def attached(self) -> bool:
        """Found again after a restart: not this process's child, its exit status read from file."""
        return self._popen is None

    def running(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return is_alive(self.pid, self.start_id)

    def reap(self) -> None:
        """Collect our child's exit, so it does not stay a zombie."""
        if self._popen is not None:
            self._popen.poll()

    def release(self) -> None:
        """Let the supervisor start the command (its launch is recorded by now)."""
        assert self._popen is not None and self._popen.stdin is not None
        with self._popen.stdin as gate:
            gate.write(supervise.GO_LINE)

    def abandon(self) -> None:
        """Give up a launch that could not be recorded: the supervisor sees EOF and runs nothing."""
        assert self._popen is not None and self._popen.stdin is not None
        self._popen.stdin.close()
        self._popen.wait()

    def released(self) -> bool:
        """Whether the supervisor was told to start the command (it may have ended since)."""
        return (self.runner_dir / supervise.RELEASED_FILE).exists()

    def exit_status(self) -> ExitStatus | None:
        """The command's exit as the supervisor recorded it, or None (the supervisor was killed)."""
        try:
            value = json.loads((self.runner_dir / supervise.EXIT_FILE).read_text(encoding="utf-8"))
            return ExitStatus(
                int(value["exit_code"]),
                bool(value.get("started", True)),
                value.get("supervisor_max_rss_kb"),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


def launch(
    argv: Sequence[str], env: Mapping[str, str], run_dir: Path, runner_dir: Path
) -> JobProcess:
    """Start the supervisor in a new session (its own process group), without a shell.

    It waits for `release()` before it runs the command: record its pid first."""
    for name in supervise.RUN_FILES:  # an earlier launch that was never released
        (runner_dir / name).unlink(missing_ok=True)
    with (runner_dir / supervise.SUPERVISOR_LOG).open("ab") as supervisor_log:
        popen = subprocess.Popen(
            list(argv),
            cwd=run_dir,
            env=dict(env),
            stdin=subprocess.PIPE,  # the release gate: `go`, or EOF if the runner dies first
            stdout=supervisor_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return JobProcess(popen.pid, process_start_id(popen.pid), runner_dir, popen)
