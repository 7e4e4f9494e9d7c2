"""Approved scripts on their way through the runner: one row per run, with the event cursor.

The cursor lives here so that a restarted bot resumes following each job where it stopped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select

from bot.records import Base, RunRow
from storage.sessions import SessionKey
from storage.sql_store import SqlStore, utc_now

ACTIVE_STATES = ("submitting", "waiting_for_runner", "queued", "starting", "running")


@dataclass(frozen=True)
class Run:
    id: int
    approval_id: int
    key: SessionKey
    owner: str
    script_name: str
    script_sha256: str
    backend: str
    args: list[str]
    resume_from_job: str | None
    job_id: str | None
    state: str
    cursor: int
    card_ts: str | None
    card_updated_at: datetime | None
    points: list[dict[str, Any]]
    required_env: list[str]
    submit_attempts: int
    next_attempt_at: datetime | None
    unreachable_notified: bool
    warnings_posted: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


class RunStore(SqlStore):
    """Runs, on the bot's database. Each method is one transaction."""

    def __init__(
        self, engine: Engine, *, clock: Callable[[], datetime] = utc_now, schema: str | None = None
    ) -> None:
        super().__init__(engine, Base.metadata, clock=clock, schema=schema)

    def create(
        self,
        *,
        approval_id: int,
        key: SessionKey,
        owner: str,
        script_name: str,
        script_sha256: str,
        backend: str,
        required_env: list[str] | None = None,
        args: list[str] | None = None,
        resume_from_job: str | None = None,
    ) -> Run:
        with self._transaction() as orm:
            row = RunRow(
                approval_id=approval_id,
                team=key.team,
                channel=key.channel,
                thread=key.thread,
                owner=owner,
                script_name=script_name,
                script_sha256=script_sha256,
                backend=backend,
                args_json=json.dumps(args or []),
                resume_from_job=resume_from_job,
                state="submitting",
                cursor=0,
                points_json="[]",
                required_env_json=json.dumps(required_env or []),
                submit_attempts=0,
                unreachable_notified=0,
                warnings_posted=0,
                created_at=self._clock(),
            )
            orm.add(row)
            orm.flush()
            return _run(row)

    def get(self, run_id: int) -> Run | None:
        with self._transaction() as orm:
            row = orm.get(RunRow, run_id)
            return _run(row) if row else None

    def update(self, run_id: int, **changes: Any) -> Run:
        """Set columns; `points` and `args` may be given as lists."""
        with self._transaction() as orm:
            row = orm.get(RunRow, run_id)
            if row is None:
                raise KeyError(run_id)
            if "points" in changes:
                changes["points_json"] = json.dumps(changes.pop("points"))
            if "args" in changes:
                changes["args_json"] = json.dumps(changes.pop("args"))
            if "unreachable_notified" in changes:
                changes["unreachable_notified"] = int(bool(changes["unreachable_notified"]))
            for name, value in changes.items():
                setattr(row, name, value)
            return _run(row)

    def active(self) -> list[Run]:
        with self._transaction() as orm:
            rows = orm.scalars(
                select(RunRow).where(RunRow.state.in_(ACTIVE_STATES)).order_by(RunRow.id)
            ).all()
            return [_run(row) for row in rows]

    def for_thread(self, key: SessionKey) -> list[Run]:
        with self._transaction() as orm:
            rows = orm.scalars(
                select(RunRow)
                .where(
                    RunRow.team == key.team,
                    RunRow.channel == key.channel,
                    RunRow.thread == key.thread,
                )
                .order_by(RunRow.id)
            ).all()
            return [_run(row) for row in rows]

    def for_owner(self, owner: str, team: str) -> list[Run]:
        with self._transaction() as orm:
            rows = orm.scalars(
                select(RunRow)
                .where(RunRow.owner == owner, RunRow.team == team)
                .order_by(RunRow.id.desc())
                .limit(20)
            ).all()
            return [_run(row) for row in rows]


def _run(row: RunRow) -> Run:
    return Run(
        id=row.id,
        approval_id=row.approval_id,
        key=SessionKey(row.team, row.channel, row.thread),
        owner=row.owner,
        script_name=row.script_name,
        script_sha256=row.script_sha256,
        backend=row.backend,
        args=json.loads(row.args_json or "[]"),
        resume_from_job=row.resume_from_job,
        job_id=row.job_id,
        state=row.state,
        cursor=row.cursor,
        card_ts=row.card_ts,
        card_updated_at=row.card_updated_at,
        points=json.loads(row.points_json or "[]"),
        required_env=json.loads(row.required_env_json or "[]"),
        submit_attempts=row.submit_attempts,
        next_attempt_at=row.next_attempt_at,
        unreachable_notified=bool(row.unreachable_notified),
        warnings_posted=row.warnings_posted,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )
