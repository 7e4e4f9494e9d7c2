"""The outbox's table, and a thread effect as a row of it and back: what the outbox stores
(bot.delivery.outbox) and its worker reads back to carry out (bot.delivery.worker).
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Index, Integer, String, Table, Text
from sqlalchemy.engine import Row
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, mapped_column

from assistant import Proposal
from bot.delivery.effects import (
    Ask,
    Edit,
    Generate,
    Offer,
    Post,
    Retire,
    Status,
    ThreadEffect,
    Update,
    Upload,
)
from bot.slack.blocks import PROPOSAL_STEP, SlackMessage
from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sessions import SessionKey


class Base(MappedAsDataclass, DeclarativeBase):
    pass


class OutboxRow(Base, kw_only=True):
    """One thread effect, pending until delivered (or given up on)."""

    __tablename__ = "artbot_slack_outbox"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True, init=False)
    """The order of delivery within a thread."""
    team: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    kind: Mapped[str] = mapped_column(String(16))
    step_id: Mapped[str | None] = mapped_column(String(64))
    text: Mapped[str] = mapped_column(Text)
    """A question's text (remembered with its ts), a proposal's JSON, what a retired
    question shows, or an uploaded file's content."""
    message_json: Mapped[str | None] = mapped_column(Text)
    """What chat.postMessage gets (`text` and `blocks`), for posts and questions."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime())
    """Not before then: a retry's backoff, or a claim's lease while a worker delivers it."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    in_doubt: Mapped[int] = mapped_column(Integer, default=0)
    """1 while an attempt is under way: if it is still 1 at the next claim, that attempt's
    worker died mid-call and Slack may have the message already."""
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), default=None)
    ts: Mapped[str | None] = mapped_column(String(64), default=None)
    """The posted message's ts, once delivered."""
    error: Mapped[str | None] = mapped_column(String(200), default=None)
    """The last failure; set on a delivered row when it was given up."""

    __table_args__ = (
        Index("ix_artbot_slack_outbox_thread", "team", "channel", "thread", "id"),
        Index("ix_artbot_slack_outbox_pending", "delivered_at", "next_attempt_at"),
        # Ids are never reused (a post's metadata names its id), on SQLite too.
        {"sqlite_autoincrement": True},
    )

    @property
    def key(self) -> SessionKey:
        return SessionKey(self.team, self.channel, self.thread)


metadata = Base.metadata
"""The outbox table, for the migrations (bot.migrations.BOT_DATABASE)."""
OUTBOX = cast(Table, OutboxRow.__table__)
"""The table, for the statements of the hot path (Core: no ORM unit of work per turn)."""


def effect_row(key: SessionKey, effect: ThreadEffect, now: datetime) -> dict[str, Any]:
    """The outbox row of `effect`, due now, as the values to insert."""
    message: SlackMessage | None = None
    if isinstance(effect, Upload):  # the file's content in `text`, its names in message_json
        binary = isinstance(effect.content, bytes)
        names = {"filename": effect.filename, "title": effect.title, "comment": effect.comment}
        return _values(
            key,
            kind="upload",
            step_id=None,
            text=(
                base64.b64encode(effect.content).decode("ascii")
                if isinstance(effect.content, bytes)
                else effect.content
            ),
            message_json=json.dumps({**names, "encoding": "base64"} if binary else names),
            now=now,
        )
    if isinstance(effect, Post):
        kind, step_id, text, message = "post", None, "", effect.message
    elif isinstance(effect, Ask):
        kind, step_id, text, message = "question", effect.step_id, effect.text, effect.message
    elif isinstance(effect, Offer):
        kind, step_id, text = "offer", PROPOSAL_STEP, effect.proposal.to_json()
        message = effect.message
    elif isinstance(effect, Retire):
        kind, step_id, text = "retire", effect.step_id, effect.shown
        # The note rides in message_json's text (rows from before notes have none).
        message = SlackMessage(effect.note, []) if effect.note else None
    elif isinstance(effect, Update):
        kind, step_id, text, message = "update", effect.step_id, effect.remembered, effect.message
    elif isinstance(effect, Edit):
        kind, step_id, text, message = "edit", None, effect.ts, effect.message
    elif isinstance(effect, Status):
        kind, step_id, text, message = "status", None, effect.text, None
    else:
        kind, step_id, text = "generate", None, ""
    return _values(
        key,
        kind=kind,
        step_id=step_id,
        text=text,
        message_json=(
            json.dumps({"text": message.text, "blocks": message.blocks}) if message else None
        ),
        now=now,
    )


def _values(
    key: SessionKey,
    *,
    kind: str,
    step_id: str | None,
    text: str,
    message_json: str | None,
    now: datetime,
) -> dict[str, Any]:
    return {
        "team": key.team,
        "channel": key.channel,
        "thread": key.thread,
        "kind": kind,
        "step_id": step_id,
        "text": text,
        "message_json": message_json,
        "created_at": now,
        "next_attempt_at": now,
        "attempts": 0,
        "in_doubt": 0,
        "delivered_at": None,
        "ts": None,
        "error": None,
    }


def row_effect(row: OutboxRow | Row[Any]) -> ThreadEffect:
    """The thread effect an outbox row (or a row of `OUTBOX`) holds."""
    if row.kind == "generate":
        return Generate()
    if row.kind == "status":
        return Status(row.text)
    loaded = json.loads(row.message_json or "{}")
    if row.kind == "upload":
        content = row.text
        return Upload(
            str(loaded.get("filename") or ""),
            str(loaded.get("title") or ""),
            base64.b64decode(content) if loaded.get("encoding") == "base64" else content,
            str(loaded.get("comment") or ""),
        )
    message = SlackMessage(str(loaded.get("text") or ""), list(loaded.get("blocks") or []))
    if row.kind == "retire":
        return Retire(row.step_id, row.text, message.text)
    if row.kind == "update":
        return Update(row.step_id or "", message, row.text)
    if row.kind == "edit":
        return Edit(row.text, message)
    if row.kind == "question":
        return Ask(row.step_id or "", row.text, message)
    if row.kind == "offer":
        return Offer(Proposal.from_json(row.text), message)
    return Post(message)
