"""What people said of the assistant's streamed answers: the feedback buttons under each one
(helpful or not), one verdict per person and answer (a second click replaces the first), kept
in the bot's database and counted in its metrics (`artbot_answer_feedback`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, cast

from sqlalchemy import Integer, String, Table, func, select
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column

from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sql_store import SqlStore

Verdict = Literal["helpful", "unhelpful"]
VERDICTS: tuple[Verdict, ...] = ("helpful", "unhelpful")


class Base(MappedAsDataclass, DeclarativeBase):
    pass


class AnswerFeedback(Base, kw_only=True):
    """One person's verdict on one streamed answer (its message)."""

    __tablename__ = "artbot_answer_feedback"

    team: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    message_ts: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    helpful: Mapped[int] = mapped_column(Integer)
    """1 helpful, 0 not."""
    at: Mapped[datetime] = mapped_column(UTCDateTime())


metadata = Base.metadata
"""The feedback table, for the migrations (bot.migrations.bot_tables)."""
FEEDBACK = cast(Table, AnswerFeedback.__table__)


class AnswerFeedbackStore(SqlStore):
    """The verdicts, on the bot's database. Each method is one transaction."""

    def record(
        self,
        team: str,
        channel: str,
        message_ts: str,
        user: str,
        verdict: Verdict,
        clicked_at: datetime | None = None,
    ) -> None:
        """`user` found the answer `message_ts` helpful or not at `clicked_at` (Slack's time of
        the click; now when unknown): their last word on it, whichever order two quick clicks
        are handled in (an older click never replaces a newer one)."""
        values = {
            "team": team,
            "channel": channel,
            "message_ts": message_ts,
            "user": user,
            "helpful": int(verdict == "helpful"),
            "at": clicked_at or self._clock(),
        }
        with self._writing() as connection:
            insert = (
                postgres_insert(FEEDBACK)
                if connection.dialect.name == "postgresql"
                else sqlite_insert(FEEDBACK)
            ).values(values)
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=["team", "channel", "message_ts", "user"],
                    set_={"helpful": insert.excluded.helpful, "at": insert.excluded.at},
                    where=FEEDBACK.c.at < insert.excluded.at,
                )
            )

    def counts(self) -> dict[str, int]:
        """How many verdicts say helpful, how many unhelpful (0 for none)."""
        query = select(FEEDBACK.c.helpful, func.count()).group_by(FEEDBACK.c.helpful)
        with self._looking() as connection:
            rows = connection.execute(query).all()
        by_flag = {int(flag): int(count) for flag, count in rows}
        return {"helpful": by_flag.get(1, 0), "unhelpful": by_flag.get(0, 0)}
