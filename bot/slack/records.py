"""What the Slack edge remembers besides sessions: deliveries seen, question messages, approvals.

The models are what the store returns: rows detached after their transaction, compared by value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import (
    Connection,
    Engine,
    Index,
    Integer,
    Select,
    String,
    Table,
    Text,
    bindparam,
    delete,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column

from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sessions import SessionKey, key_params
from storage.sql_store import SqlStore, utc_now


class Base(MappedAsDataclass, DeclarativeBase):
    pass


class Delivery(Base, kw_only=True):
    """A Slack delivery (event_id, or an action's identity) already handled: retries stop here."""

    __tablename__ = "artbot_slack_deliveries"

    id: Mapped[str] = mapped_column(String(300), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class QuestionMessage(Base, kw_only=True):
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


class Approval(Base, kw_only=True):
    """Who approved which script, when: runs are submitted from these."""

    __tablename__ = "artbot_approvals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True, init=False)
    team: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    approved_by: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    approved_at: Mapped[datetime] = mapped_column(UTCDateTime())
    script_sha256: Mapped[str] = mapped_column(String(64))
    script_name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(32), default="pending")
    """pending until a runner takes it."""

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.team, self.channel, self.thread)


metadata = Base.metadata
"""The tables of this module, for the migrations (artbot.database.ARTBOT_TABLES)."""
DELIVERIES = cast(Table, Delivery.__table__)
QUESTIONS = cast(Table, QuestionMessage.__table__)
"""The tables, for the statements of the hot path (Core: no ORM unit of work per turn)."""
_RECORD = insert(DELIVERIES)
_SEEN = select(DELIVERIES.c.id).where(DELIVERIES.c.id == bindparam("delivery"))
_UNANSWERED = select(QUESTIONS).where(
    QUESTIONS.c.team == bindparam("k_team"),
    QUESTIONS.c.channel == bindparam("k_channel"),
    QUESTIONS.c.thread == bindparam("k_thread"),
    QUESTIONS.c.answered == 0,
)
"""Built once, as every turn reads them (a statement caches its compiled form and cache key)."""


def script_digest(script: str) -> str:
    """The sha256 an approval records: a run is submitted only while its script still has it."""
    return hashlib.sha256(script.encode()).hexdigest()


class DuplicateDelivery(Exception):
    """This delivery id was handled already (Slack retried, or sent it twice)."""


class SlackRecords(SqlStore):
    """Deliveries, question messages and approvals, on the sessions' database.

    Each method is one transaction.
    """

    def __init__(
        self, engine: Engine, *, clock: Callable[[], datetime] = utc_now, schema: str | None = None
    ) -> None:
        super().__init__(engine, clock=clock, schema=schema)

    # -- deliveries --

    def first_delivery(self, delivery_id: str | None) -> bool:
        """True the first time `delivery_id` is seen, False for a retry or a duplicate. None
        (not a delivery of Slack's: a reply the bot hands on itself) is always the first."""
        if delivery_id is None:
            return True
        try:
            with self._writing() as connection:
                self.record_delivery(connection, delivery_id)
        except DuplicateDelivery:
            return False
        return True

    def seen(self, delivery_id: str) -> bool:
        """Was `delivery_id` handled already? (A look: `record_delivery` decides, in the
        transaction that keeps what handling it did.)"""
        with self._looking() as connection:
            return connection.execute(_SEEN, {"delivery": delivery_id[:300]}).first() is not None

    def record_delivery(self, connection: Connection, delivery_id: str) -> None:
        """Record `delivery_id` in the open transaction on `connection`; DuplicateDelivery (the
        transaction must roll back) when it was recorded before: a retry or a duplicate."""
        try:
            connection.execute(_RECORD, {"id": delivery_id[:300], "seen_at": self._clock()})
        except IntegrityError:
            raise DuplicateDelivery(delivery_id) from None

    def forget_deliveries(self, older_than: timedelta) -> int:
        """Drop delivery ids older than Slack's retry window (keeps the table small)."""
        with self._transaction() as orm:
            result = orm.execute(
                delete(Delivery).where(Delivery.seen_at < self._clock() - older_than)
            )
            return int(getattr(result, "rowcount", 0) or 0)

    # -- question messages --

    def remember_question(self, key: SessionKey, ts: str, step_id: str, text: str) -> None:
        """Keep the message `ts` that asked `step_id`, to show the answer on it later."""
        question = QuestionMessage(
            team=key.team, channel=key.channel, thread=key.thread, ts=ts, step_id=step_id, text=text
        )
        with self._transaction() as orm:
            orm.merge(question)

    def open_questions(self, key: SessionKey, step_id: str | None) -> list[QuestionMessage]:
        """Messages that asked `step_id` (None: anything) and still show their buttons; marks
        them answered."""
        query = _unanswered(key)
        if step_id is not None:
            query = query.where(QuestionMessage.step_id == step_id)
        with self._transaction() as orm:
            questions = orm.scalars(query).all()
            for question in questions:
                question.answered = 1
            return list(questions)

    def live_questions(
        self, key: SessionKey, step_id: str | None = None, *, keep: str | None = None
    ) -> list[QuestionMessage]:
        """Messages of the thread that asked `step_id` (None: anything but `keep`) and still
        show their buttons, oldest first. Unlike `open_questions`, marks nothing: the outbox
        marks each one retired once Slack has updated it."""
        with self._looking() as connection:
            questions = _unanswered_in(connection, key)
        return [
            question
            for question in questions
            if (question.step_id == step_id if step_id is not None else question.step_id != keep)
        ]

    def retired(self, key: SessionKey, ts: str) -> None:
        """The question message `ts` has lost its buttons."""
        with self._transaction() as orm:
            question = orm.get(QuestionMessage, (key.team, key.channel, key.thread, ts))
            if question is not None:
                question.answered = 1

    # -- approvals --

    def record_approval(
        self, key: SessionKey, user: str, script: str, script_name: str
    ) -> Approval:
        """`user` approved `script` in the thread `key`: who, when and which script (its sha256)."""
        approval = Approval(
            team=key.team,
            channel=key.channel,
            thread=key.thread,
            approved_by=user,
            approved_at=self._clock(),
            script_sha256=script_digest(script),
            script_name=script_name,
            status="pending",
        )
        with self._transaction() as orm:
            orm.add(approval)
        return approval

    def approvals(self, key: SessionKey) -> list[Approval]:
        """The thread's approvals, oldest first."""
        with self._transaction() as orm:
            return list(
                orm.scalars(
                    select(Approval)
                    .where(
                        Approval.team == key.team,
                        Approval.channel == key.channel,
                        Approval.thread == key.thread,
                    )
                    .order_by(Approval.id)
                )
            )


def unanswered_questions(connection: Connection, key: SessionKey) -> list[QuestionMessage]:
    """The thread's question messages that still show their buttons, oldest first, in the open
    transaction on `connection` (the outbox reads them with its claim)."""
    return _unanswered_in(connection, key)


def _unanswered_in(connection: Connection, key: SessionKey) -> list[QuestionMessage]:
    rows = connection.execute(_UNANSWERED, key_params(key))
    return _oldest_first(
        QuestionMessage(
            team=row.team,
            channel=row.channel,
            thread=row.thread,
            ts=row.ts,
            step_id=row.step_id,
            text=row.text,
            answered=row.answered,
        )
        for row in rows
    )


def _oldest_first(questions: Iterable[QuestionMessage]) -> list[QuestionMessage]:
    return sorted(questions, key=lambda q: _ts_order(q.ts))


def _ts_order(ts: str) -> tuple[int, int]:
    """Slack timestamps in time order (as strings, "9.1" would sort after "10.1")."""
    seconds, _, micros = ts.partition(".")
    return (int(seconds), int(micros)) if seconds.isdigit() and micros.isdigit() else (0, 0)


def _unanswered(key: SessionKey) -> Select[QuestionMessage]:
    """The thread's question messages that still show their buttons."""
    return select(QuestionMessage).where(
        QuestionMessage.team == key.team,
        QuestionMessage.channel == key.channel,
        QuestionMessage.thread == key.thread,
        QuestionMessage.answered == 0,
    )
