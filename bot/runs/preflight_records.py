"""What each preflight measured, kept with the thread's script (by its sha256): the run approved
from that script shows it again when training ends, beside what training reached."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Index, Integer, String, Table, select
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column

from checks.preflight.numbers import PreflightNumbers
from storage.database import KEY_PART_MAX, JsonText, UTCDateTime
from storage.sessions import SessionKey
from storage.sql_store import SqlStore


class Base(MappedAsDataclass, DeclarativeBase):
    pass


class PreflightRecord(Base, kw_only=True):
    """One preflight that measured something: its thread, its script, its numbers."""

    __tablename__ = "artbot_preflights"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True, init=False)
    team: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    script_sha256: Mapped[str] = mapped_column(String(64))
    numbers: Mapped[dict[str, Any]] = mapped_column("numbers_json", JsonText)
    """PreflightNumbers.to_json()."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_artbot_preflights_script", "team", "channel", "thread", "script_sha256"),
    )


metadata = Base.metadata
"""The preflight table, for the migrations (bot.migrations.bot_tables)."""
PREFLIGHTS = cast(Table, PreflightRecord.__table__)


class PreflightRecords(SqlStore):
    """The preflights' numbers, on the bot's database. Each method is one transaction."""

    def keep(self, key: SessionKey, script_sha256: str, numbers: PreflightNumbers) -> None:
        """What a preflight of the thread's script `script_sha256` measured."""
        record = PreflightRecord(
            team=key.team,
            channel=key.channel,
            thread=key.thread,
            script_sha256=script_sha256,
            numbers=numbers.to_json(),
            created_at=self._clock(),
        )
        with self._transaction() as orm:
            orm.add(record)

    def latest(self, key: SessionKey, script_sha256: str) -> PreflightNumbers | None:
        """What the newest preflight of that script in that thread measured; None if none did."""
        c = PREFLIGHTS.c
        query = (
            select(c.numbers_json)
            .where(
                c.team == key.team,
                c.channel == key.channel,
                c.thread == key.thread,
                c.script_sha256 == script_sha256,
            )
            .order_by(c.id.desc())
            .limit(1)
        )
        with self._looking() as connection:
            found = connection.execute(query).scalar_one_or_none()
        return PreflightNumbers.from_json(found) if isinstance(found, dict) else None
