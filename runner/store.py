"""Jobs and their events in SQL: the runner's record of truth.

Two tables: `runner_jobs` (one row per job: its state, script, process and outcome) and
`runner_job_events` (append-only: rows are inserted, never updated or deleted). An event's
`seq` is allocated from the job row (`last_event_seq + 1`) in the transaction that inserts it,
so a job's events are numbered 1, 2, 3... without gaps whatever the backend.

SQLite by default, PostgreSQL by URL, engines as artbot's session store makes them. State
changes are compare-and-set (`UPDATE ... WHERE state IN (...)`): two threads cannot both
start, or both finish, one job.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    func,
    select,
    update,
)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.orm import Session as OrmSession

from runner.errors import IdempotencyConflict
from runner.schemas import EventType, Failure, JobEvent, JobState, JobSubmission
from storage.database import UTCDateTime, create_database_engine
from storage.sql_store import SqlStore, utc_now

# ---- the tables -------------------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


class JobRow(Base):
    __tablename__ = "runner_jobs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    idempotency_key: Mapped[str] = mapped_column(String(200), unique=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    """sha256 of the submission without its key: a retry must match it."""
    state: Mapped[str] = mapped_column(String(16))
    script_name: Mapped[str] = mapped_column(String(100))
    script_sha256: Mapped[str] = mapped_column(String(64))
    script: Mapped[str] = mapped_column(Text)
    backend: Mapped[str] = mapped_column(String(16))
    metadata_json: Mapped[str] = mapped_column(Text)
    required_env_json: Mapped[str] = mapped_column(Text)
    args_json: Mapped[str] = mapped_column(Text)
    resume_from_job: Mapped[str | None] = mapped_column(String(64))
    run_dir: Mapped[str] = mapped_column(Text)
    """The job's working directory (shared with the job it resumes)."""
    gpus_json: Mapped[str] = mapped_column(Text, default="[]")
    pid: Mapped[int | None] = mapped_column(Integer)
    """The supervisor's pid, which is also the job's process group id."""
    process_start: Mapped[str | None] = mapped_column(String(80))
    """boot id and start time of that pid: tells it from a later process with the same pid."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    exit_code: Mapped[int | None] = mapped_column(Integer)
    failure_json: Mapped[str | None] = mapped_column(Text)
    last_event_seq: Mapped[int] = mapped_column(Integer, default=0)

    __table_args__ = (Index("ix_runner_jobs_state", "state", "created_at"),)


class EventRow(Base):
    __tablename__ = "runner_job_events"

    job_id: Mapped[str] = mapped_column(String(40), ForeignKey("runner_jobs.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    data_json: Mapped[str] = mapped_column(Text)


metadata = Base.metadata


# ---- what callers see -------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRecord:
    """A job as stored."""

    id: str
    idempotency_key: str
    state: JobState
    script_name: str
    script_sha256: str
    script: str
    backend: str
    metadata: dict[str, str]
    required_env: list[str]
    args: list[str]
    resume_from_job: str | None
    run_dir: str
    gpus: list[int]
    pid: int | None
    process_start: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None
    exit_code: int | None
    failure: Failure | None
    last_event_seq: int


def _record(row: JobRow) -> JobRecord:
    return JobRecord(
        id=row.id,
        idempotency_key=row.idempotency_key,
        state=JobState(row.state),
        script_name=row.script_name,
        script_sha256=row.script_sha256,
        script=row.script,
        backend=row.backend,
        metadata=json.loads(row.metadata_json),
        required_env=json.loads(row.required_env_json),
        args=json.loads(row.args_json),
        resume_from_job=row.resume_from_job,
        run_dir=row.run_dir,
        gpus=json.loads(row.gpus_json),
        pid=row.pid,
        process_start=row.process_start,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        cancel_requested_at=row.cancel_requested_at,
        exit_code=row.exit_code,
        failure=Failure.model_validate_json(row.failure_json) if row.failure_json else None,
        last_event_seq=row.last_event_seq,
    )


def _event(row: EventRow) -> JobEvent:
    return JobEvent(
        seq=row.seq,
        job_id=row.job_id,
        type=EventType(row.type),
        at=row.at,
        data=json.loads(row.data_json),
    )


def submission_fingerprint(submission: JobSubmission) -> str:
    """What a retry of the same submission must repeat: everything but the idempotency key."""
    fields = submission.model_dump(mode="json", exclude={"idempotency_key"})
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _differences(row: JobRow, submission: JobSubmission) -> list[str]:
    stored = {
        "script": row.script,
        "script_name": row.script_name,
        "backend": row.backend,
        "required_env": json.loads(row.required_env_json),
        "args": json.loads(row.args_json),
        "metadata": json.loads(row.metadata_json),
        "resume_from_job": row.resume_from_job,
    }
    given = submission.model_dump(mode="json", exclude={"idempotency_key"})
    return [name for name, value in stored.items() if given.get(name) != value]


Finish = tuple[EventType, dict[str, Any]]


# ---- the store --------------------------------------------------------------------------------


class JobStore(SqlStore):
    """Jobs by id. Each method is one transaction (SqlStore's plumbing, like artbot's other stores)."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utc_now,
        schema: str | None = None,
    ) -> None:
        super().__init__(engine, metadata, clock=clock, schema=schema)
        self._last_created: datetime | None = None
        self._created_lock = threading.Lock()

    @classmethod
    def open(cls, url: str | None = None, **options: Any) -> JobStore:
        """A store on `url` (SQLite file or PostgreSQL)."""
        return cls(create_database_engine(url), **options)

    # -- jobs --

    def create(
        self, job_id: str, submission: JobSubmission, run_dir: str
    ) -> tuple[JobRecord, bool]:
        """Store a new queued job (with its `queued` event), or return the job that already has
        this idempotency key: (job, created). IdempotencyConflict if that job is different."""
        fingerprint = submission_fingerprint(submission)
        now = self._created_at()
        row = JobRow(
            id=job_id,
            idempotency_key=submission.idempotency_key,
            fingerprint=fingerprint,
            state=JobState.queued.value,
            script_name=submission.script_name,
            script_sha256=hashlib.sha256(submission.script.encode()).hexdigest(),
            script=submission.script,
            backend=submission.backend,
            metadata_json=json.dumps(submission.metadata, sort_keys=True),
            required_env_json=json.dumps(submission.required_env),
            args_json=json.dumps(submission.args),
            resume_from_job=submission.resume_from_job,
            run_dir=run_dir,
            gpus_json="[]",
            created_at=now,
            last_event_seq=1,
        )
        try:
            with self._transaction() as orm:
                existing = self._by_key(orm, submission.idempotency_key)
                if existing is None:
                    orm.add(row)
                    orm.flush()
                    orm.add(
                        EventRow(
                            job_id=job_id,
                            seq=1,
                            type=EventType.queued.value,
                            at=now,
                            data_json="{}",
                        )
                    )
                    return _record(row), True
        except IntegrityError:
            pass  # another request with the same key won the race: compare with its job
        with self._transaction() as orm:
            existing = self._by_key(orm, submission.idempotency_key)
            if existing is None:  # pragma: no cover - the unique key guarantees it
                raise RuntimeError("idempotency key vanished")
        if existing.fingerprint != fingerprint:
            differing = ", ".join(_differences(existing, submission)) or "the submission"
            raise IdempotencyConflict(
                f"idempotency key {submission.idempotency_key!r} already names job {existing.id}, "
                f"submitted with a different {differing}"
            )
        return _record(existing), False

    def get(self, job_id: str) -> JobRecord | None:
        with self._transaction() as orm:
            row = orm.get(JobRow, job_id)
            return _record(row) if row is not None else None

    def get_by_key(self, idempotency_key: str) -> JobRecord | None:
        with self._transaction() as orm:
            row = self._by_key(orm, idempotency_key)
            return _record(row) if row is not None else None

    def in_states(self, states: Iterable[JobState]) -> list[JobRecord]:
        """Jobs in `states`, oldest first (the queue's order)."""
        query = (
            select(JobRow)
            .where(JobRow.state.in_([state.value for state in states]))
            .order_by(JobRow.created_at, JobRow.id)
        )
        with self._transaction() as orm:
            return [_record(row) for row in orm.scalars(query)]

    def counts(self) -> dict[JobState, int]:
        query = select(JobRow.state, func.count()).group_by(JobRow.state)
        with self._transaction() as orm:
            return {JobState(state): count for state, count in orm.execute(query)}

    def transition(
        self,
        job_id: str,
        from_states: Sequence[JobState],
        to_state: JobState,
        *,
        event: Finish | None = None,
        **values: Any,
    ) -> JobRecord | None:
        """Move the job to `to_state` (setting `values`) if it is in one of `from_states`, and
        append `event` in the same transaction; None (and nothing written) if it was not."""
        columns = self._columns(values)
        columns["state"] = to_state.value
        with self._transaction() as orm:
            statement = (
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.state.in_([s.value for s in from_states]))
                .values(**columns)
                .execution_options(synchronize_session=False)
            )
            if cast(CursorResult[Any], orm.execute(statement)).rowcount != 1:
                return None
            if event is not None:
                self._append(orm, job_id, *event)
            row = orm.get(JobRow, job_id, populate_existing=True)
            assert row is not None
            return _record(row)

    def request_cancel(self, job_id: str) -> JobRecord | None:
        """Note that the job should stop (the first request's time is kept)."""
        with self._transaction() as orm:
            orm.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.cancel_requested_at.is_(None))
                .values(cancel_requested_at=self._clock())
                .execution_options(synchronize_session=False)
            )
            row = orm.get(JobRow, job_id, populate_existing=True)
            return _record(row) if row is not None else None

    def active_in_run_dir(self, run_dir: str) -> JobRecord | None:
        """A job that is not finished and works in `run_dir`, if any."""
        active = [s.value for s in JobState if not s.finished]
        query = select(JobRow).where(JobRow.run_dir == run_dir, JobRow.state.in_(active)).limit(1)
        with self._transaction() as orm:
            row = orm.scalars(query).first()
            return _record(row) if row is not None else None

    # -- events --

    def append_event(
        self, job_id: str, type: EventType, data: dict[str, Any] | None = None
    ) -> JobEvent:
        """Append one event to the job's log; its seq is the job's next."""
        with self._transaction() as orm:
            return self._append(orm, job_id, type, data or {})

    def events(self, job_id: str, after: int = 0, limit: int = 500) -> list[JobEvent]:
        """The job's events with seq > `after`, in order, at most `limit`."""
        query = (
            select(EventRow)
            .where(EventRow.job_id == job_id, EventRow.seq > after)
            .order_by(EventRow.seq)
            .limit(limit)
        )
        with self._transaction() as orm:
            return [_event(row) for row in orm.scalars(query)]

    def events_of_types(self, job_id: str, types: Iterable[EventType]) -> list[JobEvent]:
        query = (
            select(EventRow)
            .where(EventRow.job_id == job_id, EventRow.type.in_([t.value for t in types]))
            .order_by(EventRow.seq)
        )
        with self._transaction() as orm:
            return [_event(row) for row in orm.scalars(query)]

    # -- internals --

    def _append(
        self, orm: OrmSession, job_id: str, type: EventType, data: dict[str, Any]
    ) -> JobEvent:
        # The row lock taken by this UPDATE serializes appenders of one job on PostgreSQL;
        # SQLite has one writer at a time anyway.
        seq = orm.execute(
            update(JobRow)
            .where(JobRow.id == job_id)
            .values(last_event_seq=JobRow.last_event_seq + 1)
            .returning(JobRow.last_event_seq)
            .execution_options(synchronize_session=False)
        ).scalar_one()
        row = EventRow(
            job_id=job_id, seq=seq, type=type.value, at=self._clock(), data_json=json.dumps(data)
        )
        orm.add(row)
        orm.flush()
        return _event(row)

    @staticmethod
    def _by_key(orm: OrmSession, key: str) -> JobRow | None:
        return orm.scalars(select(JobRow).where(JobRow.idempotency_key == key)).first()

    @staticmethod
    def _columns(values: dict[str, Any]) -> dict[str, Any]:
        columns: dict[str, Any] = {}
        for name, value in values.items():
            if name == "gpus":
                columns["gpus_json"] = json.dumps(list(value))
            elif name == "failure":
                columns["failure_json"] = value.model_dump_json() if value is not None else None
            else:
                columns[name] = value
        return columns

    def _created_at(self) -> datetime:
        # Strictly increasing within this process, so that the queue's order is the order of
        # submission even when two arrive in the same microsecond.
        with self._created_lock:
            now = self._clock()
            if self._last_created is not None and now <= self._last_created:
                now = self._last_created + timedelta(microseconds=1)
            self._last_created = now
            return now
