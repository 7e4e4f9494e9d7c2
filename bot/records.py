"""What the Slack edge remembers besides sessions: deliveries seen, question messages, approvals, runs."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine, Index, Integer, String, Text, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sessions import SessionKey
from storage.sql_store import SqlStore, utc_now


class Base(DeclarativeBase):
    pass


class DeliveryRow(Base):
    """A Slack delivery (event_id, or an action's identity) already handled: retries stop here."""

    __tablename__ = "artbot_slack_deliveries"

    id: Mapped[str] = mapped_column(String(300), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class QuestionMessageRow(Base):
    """A message that asked a question: updated to show the answer once it is given."""

    __tablename__ = "artbot_slack_questions"

    team: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    ts: Mapped[str] = mapped_column(String(64), primary_key=True)
    step_id: Mapped[str] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    answered: Mapped[int] = mapped_column(Integer, default=0)

    __table_args__ = (
        Index("ix_artbot_slack_questions_step", "team", "channel", "thread", "step_id"),
    )


class ApprovalRow(Base):
    """Who approved which script, when: the runner issue submits from these."""

    __tablename__ = "artbot_approvals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    team: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    approved_by: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    approved_at: Mapped[datetime] = mapped_column(UTCDateTime())
    script_sha256: Mapped[str] = mapped_column(String(64))
    script_name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32), default="pending")
    """pending until a runner takes it (the runner issue)."""


class RunRow(Base):
    """One approved script sent (or being sent) to the runner."""

    __tablename__ = "artbot_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    approval_id: Mapped[int] = mapped_column(Integer)
    team: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    owner: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    script_name: Mapped[str] = mapped_column(String(200))
    script_sha256: Mapped[str] = mapped_column(String(64))
    backend: Mapped[str] = mapped_column(String(16))
    args_json: Mapped[str] = mapped_column(Text, default="[]")
    resume_from_job: Mapped[str | None] = mapped_column(String(64), nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    state: Mapped[str] = mapped_column(String(32))
    cursor: Mapped[int] = mapped_column(Integer, default=0)
    card_ts: Mapped[str | None] = mapped_column(String(64), nullable=True)
    card_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    points_json: Mapped[str] = mapped_column(Text, default="[]")
    """[{"step": n, "train": r|null, "val": r|null}]: the reward curve for the plot."""
    required_env_json: Mapped[str] = mapped_column(Text, default="[]")
    """The environment variable names the script needs, as a JSON list (checked by the runner)."""
    submit_attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    unreachable_notified: Mapped[int] = mapped_column(Integer, default=0)
    warnings_posted: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)

    __table_args__ = (
        Index("ix_artbot_runs_state", "state"),
        Index("ix_artbot_runs_thread", "team", "channel", "thread"),
        Index("ix_artbot_runs_owner", "owner", "team"),
    )


@dataclass(frozen=True)
class QuestionMessage:
    ts: str
    step_id: str
    text: str


@dataclass(frozen=True)
class Approval:
    id: int
    key: SessionKey
    approved_by: str
    approved_at: datetime
    script_sha256: str
    script_name: str
    status: str


def script_digest(script: str) -> str:
    return hashlib.sha256(script.encode()).hexdigest()


class BotRecords(SqlStore):
    """The bot's own tables, on the sessions' database. Each method is one transaction."""

    def __init__(
        self, engine: Engine, *, clock: Callable[[], datetime] = utc_now, schema: str | None = None
    ) -> None:
        super().__init__(engine, Base.metadata, clock=clock, schema=schema)

    # -- deliveries --

    def first_delivery(self, delivery_id: str) -> bool:
        """True the first time `delivery_id` is seen, False for a retry or a duplicate."""
        try:
            with self._transaction() as orm:
                orm.add(DeliveryRow(id=delivery_id[:300], seen_at=self._clock()))
        except IntegrityError:
            return False
        return True

    def forget_deliveries(self, older_than: timedelta) -> int:
        """Drop delivery ids older than Slack's retry window (keeps the table small)."""
        with self._transaction() as orm:
            result = orm.execute(
                delete(DeliveryRow).where(DeliveryRow.seen_at < self._clock() - older_than)
            )
            return int(getattr(result, "rowcount", 0) or 0)

    # -- question messages --

    def remember_question(self, key: SessionKey, ts: str, step_id: str, text: str) -> None:
        with self._transaction() as orm:
            orm.merge(
                QuestionMessageRow(
                    team=key.team,
                    channel=key.channel,
                    thread=key.thread,
                    ts=ts,
                    step_id=step_id,
                    text=text,
                    answered=0,
                )
            )

    def open_questions(self, key: SessionKey, step_id: str) -> list[QuestionMessage]:
        """Messages that asked `step_id` and still show their buttons; marks them answered."""
        with self._transaction() as orm:
            rows = orm.scalars(
                select(QuestionMessageRow).where(
                    QuestionMessageRow.team == key.team,
                    QuestionMessageRow.channel == key.channel,
                    QuestionMessageRow.thread == key.thread,
                    QuestionMessageRow.step_id == step_id,
                    QuestionMessageRow.answered == 0,
                )
            ).all()
            for row in rows:
                row.answered = 1
            return [QuestionMessage(r.ts, r.step_id, r.text) for r in rows]

    # -- approvals --

    def record_approval(
        self, key: SessionKey, user: str, script: str, script_name: str
    ) -> Approval:
        with self._transaction() as orm:
            row = ApprovalRow(
                team=key.team,
                channel=key.channel,
                thread=key.thread,
                approved_by=user,
                approved_at=self._clock(),
                script_sha256=script_digest(script),
                script_name=script_name,
                status="pending",
            )
            orm.add(row)
            orm.flush()
            return _approval(row)

    def approvals(self, key: SessionKey) -> list[Approval]:
        with self._transaction() as orm:
            rows = orm.scalars(
                select(ApprovalRow)
                .where(
                    ApprovalRow.team == key.team,
                    ApprovalRow.channel == key.channel,
                    ApprovalRow.thread == key.thread,
                )
                .order_by(ApprovalRow.id)
            ).all()
            return [_approval(row) for row in rows]


def _approval(row: ApprovalRow) -> Approval:
    return Approval(
        row.id,
        SessionKey(row.team, row.channel, row.thread),
        row.approved_by,
        row.approved_at,
        row.script_sha256,
        row.script_name,
        row.status,
    )
