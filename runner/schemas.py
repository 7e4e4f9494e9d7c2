"""The runner's wire schemas: the only thing the bot and the runner share. They talk over HTTP.

A job is one training script run on a GPU host. Its events are an append-only log with a
cursor (`seq`), so a follower that restarts resumes where it was.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_SCRIPT_BYTES = 2_000_000
ENV_NAME_PATTERN = r"^[A-Z_][A-Z0-9_]{0,127}$"
_HUB_PART = r"(?!.*(?:--|\.\.))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
HUB_REPO_ID = re.compile(rf"{_HUB_PART}/{_HUB_PART}")
"""A Hugging Face Hub repository id as the Hub takes it: `namespace/name`, each part 1-96
characters of letters, digits, `.`, `_` and `-`, not starting or ending with `.` or `-`, with no
`--` or `..`."""


class JobState(StrEnum):
    queued = "queued"
    starting = "starting"  # preflight and dependency install
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    lost = "lost"  # the runner restarted and the job's process was gone

    @property
    def finished(self) -> bool:
        return self in (JobState.succeeded, JobState.failed, JobState.cancelled, JobState.lost)


class EventType(StrEnum):
    queued = "queued"
    started = "started"
    step = "step"
    validation = "validation"
    checkpoint = "checkpoint"
    rollouts = "rollouts"  # the best and the worst validation rollout of a step
    warning = "warning"
    stalled = "stalled"  # quiet for a while (runner.progress.stall): once per stall
    waiting = "waiting"  # queued: GPU memory held by others (runner.jobs.gpu_fit), once per holders
    failed = "failed"
    succeeded = "succeeded"
    cancelled = "cancelled"
    lost = "lost"
    serving = "serving"  # a serving job of a succeeded job's model answers (POST .../serve)
    stopped = "stopped"  # that serving job stopped: idle, asked to, or the runner stopped
    exported = "exported"  # a checkpoint's adapter is on the Hugging Face Hub (POST .../exports)
    export_failed = "export_failed"  # that export did not make it, and what to do about it


class FailureKind(StrEnum):
    cuda_oom = "cuda_oom"
    stale_gpu_memory = "stale_gpu_memory"
    missing_env = "missing_env"
    dependency_install = "dependency_install"
    import_error = "import_error"
    user_code = "user_code"  # an exception in the rollout, reward or tool code
    preflight = "preflight"
    timeout = "timeout"
    memory_limit = "memory_limit"  # over the runner's per-job host memory limit
    gpu_too_small = "gpu_too_small"  # the base model cannot fit any GPU slot, even empty
    engine_died = "engine_died"  # vLLM's engine process died under the script: transient
    gpu_error = "gpu_error"  # a CUDA or NCCL error that is not an OOM: transient
    unknown = "unknown"


class FixAction(StrEnum):
    """A fix the bot can offer as a button."""

    retry_lower_gpu_memory = "retry_lower_gpu_memory"
    resume = "resume"  # from the last checkpoint: same job again, the script resumes by itself


class Failure(BaseModel):
    """Why a job failed, in words a user can act on."""

    kind: FailureKind
    summary: str = Field(max_length=2_000)
    fix: str = Field(default="", max_length=2_000, description="what to do about it")
    fix_action: FixAction | None = None
    log_excerpt: str = Field(default="", max_length=8_000)
    transient: bool = Field(
        default=False,
        description="the cause was not the script's (a dead engine, a GPU error): the same job "
        "again may well pass, so the bot resumes it by itself a few times",
    )


class JobSubmission(BaseModel):
    """POST /jobs. The same idempotency key returns the same job."""

    model_config = ConfigDict(extra="forbid")

    script: str = Field(min_length=1, max_length=MAX_SCRIPT_BYTES)
    script_name: str = Field(
        default="rl_train.py", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.py$"
    )
    idempotency_key: str = Field(min_length=8, max_length=200)
    backend: Literal["local", "serverless"] = "local"
    required_env: list[str] = Field(default_factory=list, max_length=32)
    args: list[str] = Field(
        default_factory=list, max_length=64, description="extra script arguments"
    )
    metadata: dict[str, str] = Field(
        default_factory=dict, description="e.g. team, channel, thread, session"
    )
    resume_from_job: str | None = Field(
        default=None,
        max_length=64,
        description="run in that job's working directory (its .art checkpoints), so the script "
        "resumes from its last step",
    )


class Job(BaseModel):
    """GET /jobs/{id}."""

    id: str
    state: JobState
    script_name: str
    script_sha256: str
    backend: Literal["local", "serverless"]
    metadata: dict[str, str]
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    gpus: list[int] = Field(default_factory=list)
    queue_position: int | None = None
    waiting_for: str | None = Field(
        default=None,
        description="why a queued job has not started yet: a free GPU slot, or GPU memory other "
        "processes hold (each named: pid, name, MiB, runner job)",
    )
    failure: Failure | None = None
    last_event_seq: int = 0
    cancel_requested_at: datetime | None = Field(
        default=None, description="when a cancel was asked for; the state says when it took effect"
    )


class JobsPage(BaseModel):
    """GET /jobs?state=...&before=ID&limit=N: jobs newest first."""

    jobs: list[Job]
    next_before: str | None = Field(
        default=None, description="pass as `before` for the next page; null on the last page"
    )


class JobEvent(BaseModel):
    """One entry of a job's append-only event log."""

    seq: int = Field(ge=1, description="increasing per job; the cursor")
    job_id: str
    type: EventType
    at: datetime
    data: dict[str, Any] = Field(default_factory=dict)
    """step: {step, train/reward, ...metrics}; validation: {step, val/reward}; checkpoint: {step};
    rollouts: ValidationRollouts; warning: {message}; failed: Failure;
    waiting: {reason, holders: [{gpu, pid, name, used_mib, job_id}], wait_s};
    succeeded: {model, inference_url, step}; serving: {model, step, gpus, idle_timeout_s,
    max_lifetime_s}; stopped: {reason}; exported: {step, repo_id, url, commit, private};
    export_failed: {step, repo_id, reason, private} (the reason says what to do)"""


class RolloutMessage(BaseModel):
    """One message of a rollout as ART records it (its parquet's `messages` column), cut."""

    role: str
    content: str = ""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tool_call_id: str | None = None
    trainable: bool = False
    """True for the model's own turns (a Choice in ART's trajectory)."""


class Rollout(BaseModel):
    """One validation trajectory: its reward, metrics and messages (bounded: see `cut`)."""

    reward: float
    metrics: dict[str, float | int | bool | None] = Field(default_factory=dict)
    messages: list[RolloutMessage] = Field(default_factory=list)
    cut: bool = False
    """Whether messages or their texts were shortened to fit the event."""


class ValidationRollouts(BaseModel):
    """The `rollouts` event of a validation step: its best and worst trajectory by reward."""

    step: int
    count: int = Field(ge=0, description="how many validation trajectories the step had")
    best: Rollout
    worst: Rollout


class RolloutsPage(BaseModel):
    """GET /jobs/{id}/rollouts?step=N: the validation steps with rollouts, and the asked one
    (the latest without `step`; null when there is none)."""

    job_id: str
    steps: list[int]
    rollouts: ValidationRollouts | None = None


class ServingState(StrEnum):
    queued = "queued"  # waiting for a GPU slot
    starting = "starting"  # launched, not answering yet
    serving = "serving"
    stopped = "stopped"


class Serving(BaseModel):
    """POST/GET/DELETE /jobs/{id}/serve: the short-lived serving job of a succeeded LocalBackend
    job's model (its chosen checkpoint, else its best). Its API is the runner's, behind the
    runner's token:
    `/jobs/{id}/serve/v1/chat/completions` (and `/v1/models`)."""

    job_id: str
    state: ServingState
    model: str = Field(description="the served name to call it by (the LoRA's, `name@step`)")
    step: int
    gpus: list[int] = Field(default_factory=list)
    after_seq: int = Field(
        description="the job's events after this seq are this serving job's (`serving`, `stopped`)"
    )
    idle_timeout_s: float
    max_lifetime_s: float | None = Field(
        default=None,
        description="it stops this long after its process started, however busy (None: no "
        "limit, from a runner before the limit)",
    )
    stopped_reason: str | None = None


class CheckpointInfo(BaseModel):
    """One checkpoint of a job's model: its step, the rewards history.jsonl logged at that step
    (None when none was), and the size of its folder."""

    step: int
    val_reward: float | None = None
    train_reward: float | None = None
    size_bytes: int = 0


class Checkpoints(BaseModel):
    """GET /jobs/{id}/checkpoints (and PUT /jobs/{id}/model): a LocalBackend job's checkpoints,
    ascending, and which one is the model."""

    job_id: str
    model: str | None = Field(
        default=None, description="the model's name (model.json); served as `name@step`"
    )
    base_model: str | None = None
    checkpoints: list[CheckpointInfo] = Field(default_factory=list)
    best_step: int | None = Field(
        default=None,
        description="the highest val/reward (the later step on a tie); the last step when no "
        "checkpoint has a val/reward",
    )
    chosen_step: int | None = Field(default=None, description="what the owner picked, if anyone")
    model_step: int | None = Field(
        default=None,
        description="the model that serving, export and download use by default: the chosen "
        "step (while its checkpoint is there), else the best",
    )


class ChooseCheckpoint(BaseModel):
    """PUT /jobs/{id}/model: make this step the job's model."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, le=2**31 - 1)


class ExportRequest(BaseModel):
    """POST /jobs/{id}/exports: push a checkpoint's LoRA adapter to a Hugging Face Hub repository
    (created when missing, private by default)."""

    model_config = ConfigDict(extra="forbid")

    repo_id: str = Field(min_length=3, max_length=193, description="`namespace/name`")
    private: bool = True
    step: int | None = Field(default=None, ge=0, le=2**31 - 1, description="default: the model")

    @field_validator("repo_id")
    @classmethod
    def _hub_repo_id(cls, value: str) -> str:
        if not HUB_REPO_ID.fullmatch(value):
            raise ValueError(
                "not a Hub repository id: `namespace/name`, each part 1-96 letters, digits, "
                "`.`, `_` or `-`, not starting or ending with `.` or `-`, no `--` or `..`"
            )
        return value


class ExportState(StrEnum):
    queued = "queued"  # waiting for an upload slot (ARTBOT_RUNNER_EXPORT_MAX_UPLOADS)
    uploading = "uploading"
    done = "done"
    failed = "failed"


class Export(BaseModel):
    """POST/GET /jobs/{id}/exports: a job's export to the Hub (its latest one on GET)."""

    job_id: str
    step: int
    repo_id: str
    private: bool
    state: ExportState
    url: str | None = Field(default=None, description="the repository on the Hub, once done")
    commit: str | None = Field(default=None, description="the commit's id, once done")
    error: str | None = Field(default=None, description="why it failed, and what to do")
    after_seq: int = Field(
        description="the job's events after this seq are this export's (`exported`, "
        "`export_failed`)"
    )


class DownloadLink(BaseModel):
    """POST /jobs/{id}/checkpoints/{step}/download-link: a signed path on the runner that
    downloads the checkpoint's adapter as a .tar.gz without the runner's token, until it
    expires."""

    job_id: str
    step: int
    path: str = Field(description="path on the runner, e.g. `/downloads/<signed>`")
    expires_at: datetime


class EventsPage(BaseModel):
    """GET /jobs/{id}/events?after=SEQ&wait=SECONDS."""

    job_id: str
    events: list[JobEvent]
    next_after: int
    finished: bool


class LogTail(BaseModel):
    job_id: str
    text: str
    truncated: bool


class Health(BaseModel):
    """GET /health (no auth)."""

    status: Literal["ok"] = "ok"
    version: str
    gpus: list[dict[str, Any]] = Field(default_factory=list)
    gpu_slots: int
    free_slots: int
    queued: int
    running: int
