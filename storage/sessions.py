"""Durable wizard sessions in SQL: one row per conversation, written with optimistic concurrency.

SQLite by default (a file under the user's data directory), PostgreSQL by URL (engines from
`storage.database`). The table is defined here and only here; Alembic's migrations create it.

Expiry is the store's business, not the wizard's: an idle session gets an `expired_at` time and
keeps its `Session` (and its `status`) exactly as the engine left it. The engine's statuses say
where the conversation stands; `expired_at` says that the store stopped offering it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Engine,
    Index,
    Integer,
    String,
    Table,
    Text,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import CursorResult, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from flows import FLOWS, Flow, Session
from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sql_store import SqlStore, utc_now

AlsoWrite = Callable[[Connection], None]
"""More writes for a store's transaction, given its connection: they commit with it or not at
all."""


# ---- errors ------------------------------------------------------------------------------


class SessionStoreError(Exception):
    """A store operation that cannot be done; the message says why, for the user."""


class DuplicateSession(SessionStoreError):
    """`create` for a key that already has a session."""


class SessionNotFound(SessionStoreError):
    """`save` for a key that has no session (deleted meanwhile, or never created)."""


class SessionExpired(SessionStoreError):
    """`save` for a session the store has expired: a late reply does not revive an idle one."""


class StaleSession(SessionStoreError):
    """`save` from a reply computed on an old revision: another reply got there first."""

    def __init__(self, key: SessionKey, expected: int, stored: int) -> None:
        super().__init__(
            f"session {key} is at revision {stored}, not {expected}: it changed meanwhile"
        )
        self.key = key
        self.expected = expected
        self.stored = stored


# ---- what callers see --------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class SessionKey:
    """Which conversation: a Slack workspace, channel and thread (or 'terminal', user, name)."""

    team: str
    channel: str
    thread: str

    def __post_init__(self) -> None:
        for name in ("team", "channel", "thread"):
            part = getattr(self, name)
            if not isinstance(part, str) or not part or len(part) > KEY_PART_MAX:
                raise ValueError(f"SessionKey.{name} must be 1 to {KEY_PART_MAX} characters")
            if "\x00" in part:  # PostgreSQL text cannot hold NUL
                raise ValueError(f"SessionKey.{name} contains a NUL character")

    def __str__(self) -> str:
        return f"{self.team}/{self.channel}/{self.thread}"


@dataclass(frozen=True)
class StoredSession:
    """A session as stored: its key, who started it, the session itself and its timestamps."""

    key: SessionKey
    owner: str
    session: Session
    created_at: datetime
    updated_at: datetime
    expired_at: datetime | None = None
    step: str | None = None
    """The open question's step id, while the session is active."""

    @property
    def expired(self) -> bool:
        return self.expired_at is not None

    @property
    def resumable(self) -> bool:
        """Active and not expired: the conversation can go on."""
        return self.session.status == "active" and not self.expired


# ---- the table ---------------------------------------------------------------------------


class Base(DeclarativeBase):
    pass


class SessionRow(Base):
    """One conversation's wizard session."""

    __tablename__ = "artbot_sessions"

    team: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    channel: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    thread: Mapped[str] = mapped_column(String(KEY_PART_MAX), primary_key=True)
    owner: Mapped[str] = mapped_column(String(KEY_PART_MAX))
    flow: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    """The Session's status (active, complete, cancelled), copied out for queries."""
    step: Mapped[str | None] = mapped_column(String(64))
    # Text is unbounded on SQLite and PostgreSQL: scenario data makes sessions of a few MB.
    session_json: Mapped[str] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(Integer)
    """The Session's revision: `save` writes only over the revision it read (compare and set)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        Index("ix_artbot_sessions_owner", "owner", "updated_at"),
        Index("ix_artbot_sessions_idle", "status", "updated_at"),
    )


metadata = Base.metadata
SESSIONS = cast(Table, SessionRow.__table__)
_KEY_IS = and_(
    SESSIONS.c.team == bindparam("k_team"),
    SESSIONS.c.channel == bindparam("k_channel"),
    SESSIONS.c.thread == bindparam("k_thread"),
)
# The statements of every turn, built once (each caches its compiled form and cache key).
_GET = select(SESSIONS).where(_KEY_IS)
_CREATE = insert(SESSIONS)
_WHY_NOT_SAVED = select(SESSIONS.c.revision, SESSIONS.c.expired_at).where(_KEY_IS)
_SAVE = (
    update(SESSIONS)
    .where(_KEY_IS, SESSIONS.c.revision == bindparam("expected"), SESSIONS.c.expired_at.is_(None))
    .values(
        flow=bindparam("v_flow"),
        status=bindparam("v_status"),
        step=bindparam("v_step"),
        session_json=bindparam("v_json"),
        revision=bindparam("v_revision"),
        updated_at=bindparam("v_updated"),
    )
)


# ---- the store ---------------------------------------------------------------------------


class SessionStore(SqlStore):
    """Sessions by SessionKey. Each method is one transaction; none holds a lock between calls."""

    def __init__(
        self,
        engine: Engine,
        *,
        flows: Mapping[str, Flow] = FLOWS,
        clock: Callable[[], datetime] = utc_now,
        schema: str | None = None,
    ) -> None:
        super().__init__(engine, clock=clock, schema=schema)
        self._flows = flows

    # -- reading --

    def get(self, key: SessionKey) -> StoredSession | None:
        """The session for `key`, expired or not, or None."""
        with self._looking() as connection:
            row = connection.execute(_GET, key_params(key)).first()
            return _stored(row) if row is not None else None

    def list_for_owner(self, owner: str, team: str | None = None) -> list[StoredSession]:
        """`owner`'s sessions (in `team` if given), most recently active first."""
        query = select(SessionRow).where(SessionRow.owner == owner)
        if team is not None:
            query = query.where(SessionRow.team == team)
        query = query.order_by(SessionRow.updated_at.desc(), SessionRow.thread)
        with self._transaction() as orm:
            return [_stored(row) for row in orm.scalars(query)]

    def count_by_status(self) -> dict[str, int]:
        """How many sessions are in each state: the Session's status, or `expired`."""
        state = case((SessionRow.expired_at.is_not(None), "expired"), else_=SessionRow.status)
        query = select(state, func.count()).group_by(state)
        with self._transaction() as orm:
            return {str(name): int(count) for name, count in orm.execute(query)}

    # -- writing --

    def create(
        self, key: SessionKey, owner: str, session: Session, *, also: AlsoWrite | None = None
    ) -> StoredSession:
        """Store a new session for `key`; DuplicateSession if the key has one already.

        `also` writes more in the same transaction (what the turn must say: an outbox)."""
        if not owner or len(owner) > KEY_PART_MAX or "\x00" in owner:
            raise ValueError(f"owner must be 1 to {KEY_PART_MAX} characters, without NUL")
        now = self._clock()
        step = self._open_step(session)
        row = {
            "team": key.team,
            "channel": key.channel,
            "thread": key.thread,
            "owner": owner,
            "flow": session.flow,
            "status": session.status,
            "step": step,
            "session_json": session.to_json(),
            "revision": session.revision,
            "created_at": now,
            "updated_at": now,
            "expired_at": None,
        }
        try:
            with self._writing() as connection:
                # A duplicate key fails here, before `also` writes anything.
                connection.execute(_CREATE, row)
                if also is not None:
                    also(connection)
        except IntegrityError:
            raise DuplicateSession(f"there is already a session for {key}") from None
        return StoredSession(key, owner, session, now, now, None, step)

    def save(
        self,
        key: SessionKey,
        session: Session,
        expected_revision: int,
        *,
        also: AlsoWrite | None = None,
    ) -> None:
        """Replace the stored session if it is still at `expected_revision`, else StaleSession.

        Two replies computed from the same revision cannot both be saved: the write is one
        UPDATE ... WHERE revision = expected, atomic on every backend. `also` writes more in the
        same transaction, only when the session is saved (what the turn must say: an outbox).
        """
        if session.revision < expected_revision:
            raise ValueError(
                f"session revision {session.revision} is older than the one it replaces "
                f"({expected_revision})"
            )
        values = key_params(key) | {
            "expected": expected_revision,
            "v_flow": session.flow,
            "v_status": session.status,
            "v_step": self._open_step(session),
            "v_json": session.to_json(),
            "v_revision": session.revision,
            "v_updated": self._clock(),
        }
        with self._writing() as connection:
            if _rowcount(connection.execute(_SAVE, values)) == 1:
                if also is not None:
                    also(connection)
                return
            # Nothing matched: tell the caller why, from the row as it is now.
            row = connection.execute(_WHY_NOT_SAVED, key_params(key)).first()
        if row is None:
            raise SessionNotFound(f"there is no session for {key}")
        if row.expired_at is not None:
            raise SessionExpired(f"the session for {key} expired after being idle")
        raise StaleSession(key, expected_revision, row.revision)

    def expire_idle(
        self, older_than: timedelta, owns: Callable[[SessionKey], bool] | None = None
    ) -> list[SessionKey]:
        """Mark active sessions idle for longer than `older_than` (those `owns` says, if given)
        as expired; return their keys."""
        now = self._clock()
        idle = and_(
            SessionRow.status == "active",
            SessionRow.expired_at.is_(None),
            SessionRow.updated_at < now - older_than,
        )
        if owns is not None:  # a worker of several expires its own channels' sessions only
            with self._reading() as orm:
                candidates = [
                    SessionKey(*row)
                    for row in orm.execute(
                        select(SessionRow.team, SessionRow.channel, SessionRow.thread).where(idle)
                    )
                ]
            mine = [key for key in candidates if owns(key)]
            if not mine:
                return []
            idle = and_(idle, or_(*(_key_is(key) for key in mine)))
        statement = (
            update(SessionRow)
            .where(idle)
            .values(expired_at=now)
            .returning(SessionRow.team, SessionRow.channel, SessionRow.thread)
            .execution_options(synchronize_session=False)
        )
        with self._transaction() as orm:
            keys = [SessionKey(*row) for row in orm.execute(statement)]
        return sorted(keys)

    def expire_team(self, team: str) -> list[SessionKey]:
        """Mark every open session of `team` expired (the app left that workspace); their keys."""
        statement = (
            update(SessionRow)
            .where(
                SessionRow.team == team,
                SessionRow.status == "active",
                SessionRow.expired_at.is_(None),
            )
            .values(expired_at=self._clock())
            .returning(SessionRow.team, SessionRow.channel, SessionRow.thread)
            .execution_options(synchronize_session=False)
        )
        with self._transaction() as orm:
            keys = [SessionKey(*row) for row in orm.execute(statement)]
        return sorted(keys)

    def delete(self, key: SessionKey) -> bool:
        """Forget the session for `key`; False if there was none."""
        with self._transaction() as orm:
            result = orm.execute(
                delete(SessionRow).where(_key_is(key)).execution_options(synchronize_session=False)
            )
            return _rowcount(result) == 1

    # -- internals --

    def _open_step(self, session: Session) -> str | None:
        flow = self._flows.get(session.flow)
        if flow is None or session.status != "active":
            return None
        step = flow.next_step(session.answers)
        return step.id if step is not None else None


def _rowcount(result: Any) -> int:
    # DML results are CursorResults; Session.execute is typed with the general Result.
    return cast(CursorResult[Any], result).rowcount


def key_params(key: SessionKey) -> dict[str, str]:
    """The values of a statement's `k_team`, `k_channel` and `k_thread` parameters."""
    return {"k_team": key.team, "k_channel": key.channel, "k_thread": key.thread}


def _key_is(key: SessionKey) -> Any:
    return and_(
        SessionRow.team == key.team,
        SessionRow.channel == key.channel,
        SessionRow.thread == key.thread,
    )


def _stored(row: SessionRow | Row[Any]) -> StoredSession:
    return StoredSession(
        key=SessionKey(row.team, row.channel, row.thread),
        owner=row.owner,
        session=Session.from_json(row.session_json),
        created_at=row.created_at,
        updated_at=row.updated_at,
        expired_at=row.expired_at,
        step=row.step,
    )


__all__ = [
    "AlsoWrite",
    "DuplicateSession",
    "SessionExpired",
    "SessionKey",
    "SessionNotFound",
    "SessionStore",
    "SessionStoreError",
    "StaleSession",
    "StoredSession",
    "metadata",
]
