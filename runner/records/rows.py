"""The runner's two tables as SQLAlchemy models: `runner_jobs` (one row per job: its state,
script, process and outcome) and `runner_job_events` (append-only), and the job states a monitor
follows. `runner.records.store` reads and writes them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Dialect, Enum, ForeignKey, Index, Integer, String, Text, TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from runner.schemas import EventType, Failure, Job, JobEvent, JobState
from storage.database import JsonText, UTCDateTime

Backend = Literal["local", "serverless"]
NewEvent = tuple[EventType, dict[str, Any]]
"""An event to append: its type and data (its seq and time are the store's)."""
STARTED_STATES = (JobState.starting, JobState.running)
"""Taken from the queue and not finished: a monitor follows the job (or should)."""


class FailureText(TypeDecorator[Failure]):
    """A Failure kept as its JSON text in a TEXT column."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Failure | None, dialect: Dialect) -> str | None:
        return value.model_dump_json() if value is not None else None

    def process_result_value(self, value: str | None, dialect: Dialect) -> Failure | None:
        return Failure.model_validate_json(value) if value else None


def _enum_text(enum: type[JobState] | type[EventType]) -> Enum:
    # VARCHAR(16) holding the enum's value, with no CHECK constraint or database enum type:
    # the same column as a plain String(16), read back as the enum.
    return Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=16,
        values_callable=lambda members: [member.value for member in members],
    )


class Base(DeclarativeBase):
    pass


class JobRow(Base):
    """A job as stored."""

    __tablename__ = "runner_jobs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(200), unique=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    """sha256 of the submission without its key: a retry must match it."""
    state: Mapped[JobState] = mapped_column(_enum_text(JobState))
    script_name: Mapped[str] = mapped_column(String(100))
    script_sha256: Mapped[str] = mapped_column(String(64))
    script: Mapped[str] = mapped_column(Text)
    backend: Mapped[Backend] = mapped_column(String(16))
    # `metadata` is taken: declarative classes keep their tables' MetaData under that name.
    job_metadata: Mapped[dict[str, str]] = mapped_column("metadata_json", JsonText)
    required_env: Mapped[list[str]] = mapped_column("required_env_json", JsonText)
    args: Mapped[list[str]] = mapped_column("args_json", JsonText)
    resume_from_job: Mapped[str | None] = mapped_column(String(64))
    run_dir: Mapped[str] = mapped_column(Text)
    """The job's working directory (shared with the job it resumes)."""
    gpus: Mapped[list[int]] = mapped_column("gpus_json", JsonText)
    pid: Mapped[int | None] = mapped_column(Integer)
    """The supervisor's pid, which is also the job's process group id."""
    process_start: Mapped[str | None] = mapped_column(String(80))
    """boot id and start time of that pid: tells it from a later process with the same pid."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    exit_code: Mapped[int | None] = mapped_column(Integer)
    failure: Mapped[Failure | None] = mapped_column("failure_json", FailureText)
    last_event_seq: Mapped[int] = mapped_column(Integer, default=0)
    chosen_step: Mapped[int | None] = mapped_column(Integer)
    """The checkpoint its owner chose as the model (runner.checkpoints); None: the best one."""

    __table_args__ = (Index("ix_runner_jobs_state", "state", "created_at"),)

    def submitted(self) -> dict[str, Any]:
        """The fields of the submission that made the job, as JobSubmission names them."""
        return {
            "script": self.script,
            "script_name": self.script_name,
            "backend": self.backend,
            "required_env": self.required_env,
            "args": self.args,
            "metadata": self.job_metadata,
            "resume_from_job": self.resume_from_job,
        }

    def to_job(self, queue_position: int | None) -> Job:
        """The job as the API shows it."""
        return Job(
            id=self.id,
            state=self.state,
            script_name=self.script_name,
            script_sha256=self.script_sha256,
            backend=self.backend,
            metadata=self.job_metadata,
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=self.finished_at,
            exit_code=self.exit_code,
            gpus=self.gpus,
            queue_position=queue_position,
            failure=self.failure,
            last_event_seq=self.last_event_seq,
            cancel_requested_at=self.cancel_requested_at,
        )


class EventRow(Base):
    __tablename__ = "runner_job_events"

    job_id: Mapped[str] = mapped_column(String(40), ForeignKey("runner_jobs.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[EventType] = mapped_column(_enum_text(EventType))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    data: Mapped[dict[str, Any]] = mapped_column("data_json", JsonText)

    def to_event(self) -> JobEvent:
        return JobEvent.model_validate(self, from_attributes=True)


metadata = Base.metadata
