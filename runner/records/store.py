"""Jobs and their events in SQL: the runner's record of truth.

Two tables (`runner.records.rows`): `runner_jobs` (one row per job: its state, script, process
and outcome) and `runner_job_events` (append-only: rows are inserted, never updated or
deleted). An event's `seq` is allocated from the job row (`last_event_seq + 1`) in the
transaction that inserts it, so a job's events are numbered 1, 2, 3... without gaps whatever the
backend.

SQLite by default, PostgreSQL by URL, engines as artbot's session store makes them. State
changes are compare-and-set (`UPDATE ... WHERE state IN (...)`): two threads cannot both
start, or both finish, one job.

The store hands out `JobRow`s detached from their session: typed, read-only by convention
(changing one changes nothing stored; `transition` does).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypedDict, Unpack, cast

from sqlalchemy import (
    and_,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as OrmSession

from runner.errors import IdempotencyConflict, JobNotFound
from runner.records.rows import EventRow, JobRow, NewEvent
from runner.schemas import EventType, Failure, JobEvent, JobState, JobSubmission
from storage.sql_store import SqlStore, utc_now


class JobChanges(TypedDict, total=False):
    """Columns a state change may set besides the state."""

    gpus: list[int]
    pid: int | None
    process_start: str | None
    started_at: datetime | None
    finished_at: datetime
    cancel_requested_at: datetime
    exit_code: int | None
    failure: Failure | None


def submission_fingerprint(submission: JobSubmission) -> str:
    """What a retry of the same submission must repeat: everything but the idempotency key."""
    fields = submission.model_dump(mode="json", exclude={"idempotency_key"})
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _differences(row: JobRow, submission: JobSubmission) -> list[str]:
    given = submission.model_dump(mode="json", exclude={"idempotency_key"})
    return [name for name, value in row.submitted().items() if given.get(name) != value]


# ---- the store --------------------------------------------------------------------------------


class JobStore(SqlStore):
    """Jobs by id. Each method is one transaction (SqlStore's plumbing, like artbot's other
    stores)."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utc_now,
        schema: str | None = None,
    ) -> None:
        super().__init__(engine, clock=clock, schema=schema)
        self._last_created: datetime | None = None
        self._created_lock = threading.Lock()

    # -- jobs --

    def create(self, job_id: str, submission: JobSubmission, run_dir: str) -> tuple[JobRow, bool]:
        """Store a new queued job (with its `queued` event), or return the job that already has
        this idempotency key: (job, created). IdempotencyConflict if that job is different."""
        fingerprint = submission_fingerprint(submission)
        now = self._created_at()
        row = JobRow(
            id=job_id,
            idempotency_key=submission.idempotency_key,
            fingerprint=fingerprint,
            state=JobState.queued,
            script_name=submission.script_name,
            script_sha256=hashlib.sha256(submission.script.encode()).hexdigest(),
            script=submission.script,
            backend=submission.backend,
            job_metadata=dict(sorted(submission.metadata.items())),
            required_env=list(submission.required_env),
            args=list(submission.args),
            resume_from_job=submission.resume_from_job,
            run_dir=run_dir,
            gpus=[],
            created_at=now,
            last_event_seq=1,
        )
        try:
            with self._transaction() as orm:
                existing = self._by_key(orm, submission.idempotency_key)
                if existing is None:
                    orm.add(row)
                    orm.flush()
                    orm.add(EventRow(job_id=job_id, seq=1, type=EventType.queued, at=now, data={}))
                    return row, True
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
        return existing, False

    def get(self, job_id: str) -> JobRow | None:
        with self._transaction() as orm:
            return orm.get(JobRow, job_id)

    def require(self, job_id: str) -> JobRow:
        """The job; JobNotFound when there is none."""
        # An id over 64 characters (the API's limit) names no job: it is not looked up.
        job = self.get(job_id) if len(job_id) <= 64 else None
        if job is None:
            raise JobNotFound(f"no job {job_id!r}")
        return job

    def get_by_key(self, idempotency_key: str) -> JobRow | None:
        with self._transaction() as orm:
            return self._by_key(orm, idempotency_key)

    def in_states(self, states: Iterable[JobState]) -> list[JobRow]:
        """Jobs in `states`, oldest first (the queue's order)."""
        query = (
            select(JobRow)
            .where(JobRow.state.in_(list(states)))
            .order_by(JobRow.created_at, JobRow.id)
        )
        with self._transaction() as orm:
            return list(orm.scalars(query))

    def page(self, states: Sequence[JobState], before: JobRow | None, limit: int) -> list[JobRow]:
        """Jobs newest first, in `states` (all when empty), created before `before`."""
        query = select(JobRow).order_by(JobRow.created_at.desc(), JobRow.id.desc()).limit(limit)
        if states:
            query = query.where(JobRow.state.in_(list(states)))
        if before is not None:
            query = query.where(
                or_(
                    JobRow.created_at < before.created_at,
                    and_(JobRow.created_at == before.created_at, JobRow.id < before.id),
                )
            )
        with self._transaction() as orm:
            return list(orm.scalars(query))

    def finished_before(self, cutoff: datetime, limit: int) -> list[JobRow]:
        """Finished jobs that finished before `cutoff`, oldest first."""
        finished = [state for state in JobState if state.finished]
        query = (
            select(JobRow)
            .where(JobRow.state.in_(finished), JobRow.finished_at < cutoff)
            .order_by(JobRow.finished_at, JobRow.id)
            .limit(limit)
        )
        with self._transaction() as orm:
            return list(orm.scalars(query))

    def finished_oldest_first(self) -> list[JobRow]:
        """Every finished job, oldest end first (the order retention by size removes them)."""
        finished = [state for state in JobState if state.finished]
        query = (
            select(JobRow).where(JobRow.state.in_(finished)).order_by(JobRow.finished_at, JobRow.id)
        )
        with self._transaction() as orm:
            return list(orm.scalars(query))

    def users_of_run_dir(self, run_dir: str) -> list[JobRow]:
        """Every job that works (or worked) in `run_dir`: the job that made it and its resumes."""
        with self._transaction() as orm:
            return list(orm.scalars(select(JobRow).where(JobRow.run_dir == run_dir)))

    def delete_finished(self, job_ids: Sequence[str]) -> int:
        """Delete these jobs and their events, those of them that are finished; how many."""
        finished = [state for state in JobState if state.finished]
        with self._transaction() as orm:
            gone = list(
                orm.scalars(
                    select(JobRow.id).where(
                        JobRow.id.in_(list(job_ids)), JobRow.state.in_(finished)
                    )
                )
            )
            if gone:
                orm.execute(delete(EventRow).where(EventRow.job_id.in_(gone)))
                orm.execute(delete(JobRow).where(JobRow.id.in_(gone)))
            return len(gone)

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
        event: NewEvent | None = None,
        **changes: Unpack[JobChanges],
    ) -> JobRow | None:
        """Move the job to `to_state` (setting `changes`) if it is in one of `from_states`, and
        append `event` in the same transaction; None (and nothing written) if it was not."""
        columns = {getattr(JobRow, name): value for name, value in changes.items()}
        columns[JobRow.state] = to_state
        with self._transaction() as orm:
            statement = (
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.state.in_(list(from_states)))
                .values(columns)
                .execution_options(synchronize_session=False)
            )
            if cast(CursorResult[Any], orm.execute(statement)).rowcount != 1:
                return None
            if event is not None:
                self._append(orm, job_id, *event)
            row = orm.get(JobRow, job_id, populate_existing=True)
            assert row is not None
            return row

    def request_cancel(self, job_id: str) -> JobRow | None:
        """Note that the job should stop (the first request's time is kept)."""
        with self._transaction() as orm:
            orm.execute(
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.cancel_requested_at.is_(None))
                .values(cancel_requested_at=self._clock())
                .execution_options(synchronize_session=False)
            )
            return orm.get(JobRow, job_id, populate_existing=True)

    def choose_step(self, job_id: str, step: int) -> JobRow | None:
        """Keep `step` as the finished job's chosen checkpoint; None (and nothing written) when
        the job is not finished."""
        finished = [state for state in JobState if state.finished]
        with self._transaction() as orm:
            statement = (
                update(JobRow)
                .where(JobRow.id == job_id, JobRow.state.in_(finished))
                .values(chosen_step=step)
                .execution_options(synchronize_session=False)
            )
            if cast(CursorResult[Any], orm.execute(statement)).rowcount != 1:
                return None
            return orm.get(JobRow, job_id, populate_existing=True)

    def active_in_run_dir(self, run_dir: str) -> JobRow | None:
        """A job that is not finished and works in `run_dir`, if any."""
        active = [state for state in JobState if not state.finished]
        query = select(JobRow).where(JobRow.run_dir == run_dir, JobRow.state.in_(active)).limit(1)
        with self._transaction() as orm:
            return orm.scalars(query).first()

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
            return [row.to_event() for row in orm.scalars(query)]

    def events_of_types(self, job_id: str, types: Iterable[EventType]) -> list[JobEvent]:
        query = (
            select(EventRow)
            .where(EventRow.job_id == job_id, EventRow.type.in_(list(types)))
            .order_by(EventRow.seq)
        )
        with self._transaction() as orm:
            return [row.to_event() for row in orm.scalars(query)]

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
        row = EventRow(job_id=job_id, seq=seq, type=type, at=self._clock(), data=data)
        orm.add(row)
        orm.flush()
        return row.to_event()

    @staticmethod
    def _by_key(orm: OrmSession, key: str) -> JobRow | None:
        return orm.scalars(select(JobRow).where(JobRow.idempotency_key == key)).first()

    def _created_at(self) -> datetime:
        # Strictly increasing within this process, so that the queue's order is the order of
        # submission even when two arrive in the same microsecond.
        with self._created_lock:
            now = self._clock()
            if self._last_created is not None and now <= self._last_created:
                now = self._last_created + timedelta(microseconds=1)
            self._last_created = now
            return now
