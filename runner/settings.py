"""The runner's settings, from ARTBOT_RUNNER_* variables. Missing or invalid ones stop startup
with a message that lists every problem."""

from __future__ import annotations

import os
import re
import shlex
import string
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from config.from_environment import SettingsError, load_from_environment
from runner.jobs.gpu import parse_slots
from runner.jobs.local.job_user import JobUser, can_switch_users
from runner.schemas import ENV_NAME_PATTERN
from storage.database import data_dir

__all__ = ["RunnerSettings", "SettingsError", "load_settings"]

ENV_PREFIX = "ARTBOT_RUNNER_"
MIN_TOKEN_CHARS = 16
MAX_RUNTIME_LIMIT_S = 366 * 24 * 3600.0
"""A year: a deadline must stay a datetime, and a longer run is a mistake, not a plan."""
MAX_LOG_BYTES = 1024**4
COMMAND_FIELDS = frozenset({"script", "python", "workdir"})
SERVE_COMMAND_FIELDS = frozenset({"python", "workdir", "base_model", "lora_path", "model", "port"})
DEFAULT_SERVE_COMMAND = (
    "uvx --from vllm vllm serve {base_model} --enable-lora --max-lora-rank 64 "
    "--lora-modules {model}={lora_path} --host 127.0.0.1 --port {port}"
)


ROOT_JOBS_REFUSED = (
    "the runner runs as root with no ARTBOT_RUNNER_JOB_USER, so it runs no job: a job would "
    "run as root on the GPU host. Set ARTBOT_RUNNER_JOB_USER to an unprivileged user (or, "
    "knowingly, ARTBOT_RUNNER_ALLOW_ROOT_JOBS=true) and restart the runner"
)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
MIN_SIZE_BYTES = 1024**2
MAX_SIZE_BYTES = 1024**5


def parse_size(text: str) -> int | None:
    """Bytes from `123`, `512M`, `64G`, `1.5T` (powers of 1024); None for "" or "none"."""
    if text.strip().lower() in ("", "none"):
        return None
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size: write e.g. 512M, 64G or 2T")
    size = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if not MIN_SIZE_BYTES <= size <= MAX_SIZE_BYTES:
        raise ValueError(f"{text!r} is out of range: 1M to 1024T")
    return size


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


class RunnerSettings(BaseSettings):
    """`artbot runner serve`'s configuration (ARTBOT_RUNNER_<FIELD>). The token never prints."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, case_sensitive=False, extra="ignore")

    token: SecretStr = Field(description="the bearer token clients must send (16+ characters)")
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the job store (default: runner.db in artbot's data folder)",
    )
    workdir: Path | None = Field(
        default=None,
        description="where jobs' folders go (default: runner-jobs in artbot's data folder)",
    )
    gpu_slots: str | None = Field(
        default=None,
        description=(
            'GPU slots, e.g. "0,1" (or "0+1,2+3" for two GPUs a job); '
            'unset: one per GPU the host has (NVML or nvidia-smi); "none": no GPUs'
        ),
    )
    command: str = Field(
        default="uv run --script {script}",
        description=(
            "how a job's script is run; {script}, {python} and {workdir} are filled in; no shell"
        ),
    )
    job_secrets: str = Field(
        default="",
        description=(
            "names of the runner's environment variables jobs get, "
            "e.g. OPENAI_API_KEY,WANDB_API_KEY,HF_TOKEN"
        ),
    )
    cancel_grace_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="SIGTERM, then SIGKILL after this",
    )
    max_runtime_s: float | None = Field(
        default=48 * 3600.0,
        ge=1,
        le=MAX_RUNTIME_LIMIT_S,
        allow_inf_nan=False,
        description='a job running longer is stopped and fails (timeout); "none": no limit',
    )
    log_max_bytes: int = Field(
        default=50_000_000,
        ge=64 * 1024,
        le=MAX_LOG_BYTES,
        description="a job's output log keeps its head and tail within this",
    )
    serve_command: str = Field(
        default=DEFAULT_SERVE_COMMAND,
        description=(
            "how a succeeded LocalBackend job's model is served (POST /jobs/{id}/serve): an "
            "OpenAI-compatible server on 127.0.0.1:{port} serving the LoRA {lora_path} as "
            "{model} on {base_model}; also {python}, {workdir}; no shell"
        ),
    )
    serve_idle_s: float = Field(
        default=600.0,
        ge=1.0,
        le=7 * 24 * 3600.0,
        description="a serving job stops after this many seconds without a request",
    )
    serve_start_timeout_s: float = Field(
        default=1800.0,
        ge=1.0,
        le=24 * 3600.0,
        description="how long a serving job may take to answer its first health check",
    )
    serve_max_jobs: int = Field(
        default=1,
        ge=1,
        le=64,
        description="serving jobs at once (queued, starting or serving); a request for one "
        "more is refused (409) until one stops",
    )
    serve_max_lifetime_s: float = Field(
        default=3600.0,
        ge=1.0,
        le=7 * 24 * 3600.0,
        allow_inf_nan=False,
        description="a serving job is stopped this long after its process started, however "
        "busy it is (a GPU slot is never held for `try` alone for longer)",
    )
    export_max_uploads: int = Field(
        default=2,
        ge=1,
        le=16,
        description="exports to the Hugging Face Hub uploading at once (POST /jobs/{id}/exports; "
        "the token is HF_TOKEN of the runner's environment); more wait their turn",
    )
    export_timeout_s: float = Field(
        default=300.0,
        ge=1.0,
        le=3600.0,
        allow_inf_nan=False,
        description="how long an export waits for the Hub to answer one request (or to take the "
        "next bytes of an upload) before it fails; huggingface_hub itself waits for ever",
    )
    download_link_lifetime_s: float = Field(
        default=3600.0,
        ge=60.0,
        le=7 * 24 * 3600.0,
        allow_inf_nan=False,
        description="how long a checkpoint's download link works (POST /jobs/{id}/checkpoints/"
        "{step}/download-link): whoever has it downloads the adapter without the token",
    )
    host: str = Field(default="127.0.0.1", description="address to listen on")
    port: int = Field(
        default=8700, ge=0, le=65535, description="the port to listen on (`--port` overrides it)"
    )
    stall_after_s: float = Field(
        default=1800.0,
        ge=0.1,
        le=7 * 24 * 3600.0,
        allow_inf_nan=False,
        description="a running job with no output and no progress this long is reported "
        "stalled (once per stall), until it has timed a step: then stall_step_factor x its "
        "slowest step, at least stall_floor_s",
    )
    stall_floor_s: float = Field(
        default=300.0,
        ge=0.1,
        le=7 * 24 * 3600.0,
        allow_inf_nan=False,
        description="the least silence called a stall once the threshold comes from step times",
    )
    stall_step_factor: float = Field(
        default=3.0,
        ge=1.0,
        le=100.0,
        allow_inf_nan=False,
        description="a stall, once the job has timed a step: this many times its slowest step",
    )
    poll_interval_s: float = Field(
        default=0.5,
        ge=0.01,
        le=10,
        allow_inf_nan=False,
        description="how often a running job's files are read",
    )
    nvidia_smi: str = Field(
        default="nvidia-smi", description="the nvidia-smi command, used where NVML is not"
    )
    nvml: bool = Field(
        default=True,
        description="read the GPUs through NVML (nvidia-ml-py) where its library loads; "
        "false: nvidia-smi only",
    )
    gpu_wait_s: float = Field(
        default=1800.0,
        ge=0,
        le=7 * 24 * 3600.0,
        allow_inf_nan=False,
        description="a LocalBackend job that would fit its GPU but finds the memory held by "
        "other processes stays queued this long, then fails (stale_gpu_memory)",
    )
    retention_days: float | None = Field(
        default=30.0,
        gt=0,
        le=36500,
        allow_inf_nan=False,
        description='finished jobs (folders and rows) older than this are removed; "none": kept',
    )
    retention_max_bytes: int | None = Field(
        default=None,
        description="while the jobs' folders take more, the oldest finished jobs are removed "
        '(e.g. "500G"); unset: no size limit',
    )
    job_memory_max: int | None = Field(
        default=None,
        description="a job whose processes hold more memory (RSS, summed) is stopped and fails "
        '(e.g. "64G"); unset: no limit',
    )
    executor: Literal["local", "ray"] = Field(
        default="local",
        description='where jobs run: "local" (this host) or "ray" (a Ray cluster\'s job API)',
    )
    ray_address: str | None = Field(
        default=None,
        description="the Ray dashboard's job API (with ARTBOT_RUNNER_EXECUTOR=ray), "
        "e.g. http://127.0.0.1:8265",
    )
    ray_python: str = Field(
        default="python3",
        description="the Python on the Ray nodes that runs the job's wrapper (and {python})",
    )
    ray_gpus_per_job: int = Field(
        default=1, ge=1, le=64, description="GPUs Ray reserves for a LocalBackend job"
    )
    job_user: str | None = Field(
        default=None,
        description="an unprivileged user jobs run as (the runner must be root or hold "
        "CAP_SETUID and CAP_SETGID); unset: jobs run as the runner's user",
    )
    allow_root_jobs: bool = Field(
        default=False,
        description="let jobs and serving jobs run as root when the runner is root and no "
        "ARTBOT_RUNNER_JOB_USER is set (else such a runner refuses them)",
    )

    @field_validator("token")
    @classmethod
    def _token_strength(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value().strip()) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"must be at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
            )
        return value

    @field_validator("retention_days", mode="before")
    @classmethod
    def _keep_forever(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none"):
            return None
        return value

    @field_validator("retention_max_bytes", "job_memory_max", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        return parse_size(value)

    @field_validator("job_user")
    @classmethod
    def _job_user_exists(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        JobUser.named(value.strip())
        if not can_switch_users():
            raise ValueError(
                "the runner cannot start processes as another user: run it as root "
                "(or with CAP_SETUID and CAP_SETGID), or leave this unset"
            )
        return value.strip()

    @field_validator("gpu_slots")
    @classmethod
    def _slots_shape(cls, value: str | None) -> str | None:
        if value is not None:
            parse_slots(value)
        return value

    @field_validator("max_runtime_s", mode="before")
    @classmethod
    def _no_limit(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip().lower()
        if text in ("", "none"):
            return None
        try:
            number = float(text)
        except ValueError:
            return value  # pydantic says it is not a number
        if number == 0:
            raise ValueError('0 is no limit in some programs: say "none" for no limit')
        return value

    @field_validator("command")
    @classmethod
    def _command_shape(cls, value: str) -> str:
        try:
            parts = shlex.split(value)
        except ValueError as error:
            raise ValueError(f"cannot split into arguments: {error}") from None
        if not parts:
            raise ValueError("is empty")
        fields = {
            name
            for part in parts
            for _, name, _, _ in string.Formatter().parse(part)
            if name is not None
        }
        unknown = fields - COMMAND_FIELDS
        if unknown:
            raise ValueError(
                f"unknown placeholder {{{sorted(unknown)[0]}}}: "
                "use {script}, {python}, {workdir}"
            )
        if "script" not in fields:
            raise ValueError("must contain {script}")
        return value

    @field_validator("serve_command")
    @classmethod
    def _serve_command_shape(cls, value: str) -> str:
        fields = _placeholders(value)
        unknown = fields - SERVE_COMMAND_FIELDS
        if unknown:
            raise ValueError(
                f"unknown placeholder {{{sorted(unknown)[0]}}}: use "
                + ", ".join(f"{{{name}}}" for name in sorted(SERVE_COMMAND_FIELDS))
            )
        missing = {"port", "lora_path", "model"} - fields
        if missing:
            raise ValueError(f"must contain {{{sorted(missing)[0]}}}")
        return value

    @field_validator("job_secrets")
    @classmethod
    def _secret_names(cls, value: str) -> str:
        bad = [name for name in _names(value) if not re.fullmatch(ENV_NAME_PATTERN, name)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(bad)}")
        own = [name for name in _names(value) if name.startswith(ENV_PREFIX)]
        if own:
            raise ValueError(f"the runner's own settings never go to jobs: {', '.join(own)}")
        return value

    @field_validator("ray_address")
    @classmethod
    def _ray_address_shape(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value.strip()):
            raise ValueError(
                f"{value!r} is not the Ray dashboard's address: write e.g. http://127.0.0.1:8265"
            )
        return value.strip().rstrip("/")

    @model_validator(mode="after")
    def _ray_needs_address(self) -> Self:
        if self.executor == "ray" and self.ray_address is None:
            raise ValueError(
                "ARTBOT_RUNNER_EXECUTOR=ray needs ARTBOT_RUNNER_RAY_ADDRESS, the Ray dashboard's "
                "job API (e.g. http://127.0.0.1:8265)"
            )
        return self

    # -- derived --

    @property
    def job_account(self) -> JobUser | None:
        return JobUser.named(self.job_user) if self.job_user else None

    def root_jobs_refusal(self, euid: int | None = None) -> str | None:
        """Why this runner runs no job, when it is root (`euid`, default this process's) with
        no job user and no ARTBOT_RUNNER_ALLOW_ROOT_JOBS; None when it may run them. Ray runs
        jobs as its own nodes' user: not this runner's concern."""
        uid = os.geteuid() if euid is None else euid
        if uid != 0 or self.job_user or self.allow_root_jobs or self.executor != "local":
            return None
        return ROOT_JOBS_REFUSED

    @property
    def secret_names(self) -> list[str]:
        return _names(self.job_secrets)

    @property
    def slots(self) -> list[tuple[int, ...]] | None:
        """The configured slots, or None to ask nvidia-smi."""
        return None if self.gpu_slots is None else parse_slots(self.gpu_slots)

    @property
    def resolved_workdir(self) -> Path:
        return (self.workdir or data_dir() / "runner-jobs").expanduser().resolve()

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{data_dir() / 'runner.db'}"

    def serve_argv(self, values: Mapping[str, str]) -> list[str]:
        """The serving command, placeholders filled in from `values` (and `{python}`)."""
        filled = {"python": sys.executable, **values}
        return [part.format(**filled) for part in shlex.split(self.serve_command)]

    def command_argv(self, script: Path, workdir: Path, python: str | None = None) -> list[str]:
        """The job's command, placeholders filled in (each argument separately: no shell);
        `{python}` is `python`, by default the runner's own interpreter."""
        values = {
            "script": str(script),
            "python": python or sys.executable,
            "workdir": str(workdir),
        }
        return [part.format(**values) for part in shlex.split(self.command)]


def _placeholders(command: str) -> set[str]:
    try:
        parts = shlex.split(command)
    except ValueError as error:
        raise ValueError(f"cannot split into arguments: {error}") from None
    if not parts:
        raise ValueError("is empty")
    return {
        name
        for part in parts
        for _, name, _, _ in string.Formatter().parse(part)
        if name is not None
    }


def load_settings(env: Mapping[str, str] | None = None) -> RunnerSettings:
    """Settings from `env` (default: the process environment); SettingsError lists what is wrong."""
    return load_from_environment(RunnerSettings, env, prefix=ENV_PREFIX, program="the runner")
