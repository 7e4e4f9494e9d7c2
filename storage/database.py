"""Where artbot's databases are and how they are opened: URLs, engines, and two column types
(UTC datetimes, JSON kept as text).

SQLite by default (a file under the user's data directory), PostgreSQL by URL. Every store (the
wizard's sessions, the bot's records, the runner's jobs) opens its engine here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Dialect, Engine, Text, TypeDecorator, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DisconnectionError

KEY_PART_MAX = 255
"""Longest identifier part (a Slack team, channel, thread or user id) a table keeps."""
SQLITE_BUSY_TIMEOUT_S = 30.0
PING_AFTER_IDLE_S = 10.0
"""A pooled database-server connection idle this long is pinged before it is used again (one
round trip, then a fresh connection if the server dropped it); a busy one is not: a ping at
every checkout (`pool_pre_ping`) was a round trip on each of a turn's five checkouts."""


class DatabaseUrlError(ValueError):
    """A database URL that cannot be used; the message says why, for the user."""


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite has no time zones: it gets naive
    UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a store: use UTC-aware times")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JsonText(TypeDecorator[Any]):
    """A JSON value (list, dict...) kept as its text in a TEXT column: typed in Python, plain
    TEXT in the table, so a column can switch to it without a migration."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json.dumps(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return None if value is None else json.loads(value)


def database_problem(error: Exception) -> str:
    """What a database error says, in the driver's own words (its first line): it names the host
    and the problem, never the password, and leaves out the SQL SQLAlchemy adds."""
    return str(getattr(error, "orig", None) or error).strip().splitlines()[0]


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """artbot's data folder: `$XDG_DATA_HOME/artbot`, else `~/.local/share/artbot`."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "artbot"


def default_database_url(env: Mapping[str, str] | None = None) -> str:
    """The SQLite file in artbot's data folder."""
    return f"sqlite:///{data_dir(env) / 'artbot.db'}"


def normalize_database_url(url: str) -> URL:
    """Parse `url`; plain `postgresql://` (or `postgres://`) means the psycopg 3 driver."""
    try:
        parsed = make_url(url)
    except Exception as error:  # SQLAlchemy raises ArgumentError and ValueError here
        raise DatabaseUrlError(f"not a database URL: {error}") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise DatabaseUrlError(
            f"unsupported database {parsed.drivername!r}: use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB"
        )
    return parsed


def sqlite_file(url: URL) -> Path | None:
    """The file an SQLite URL keeps its database in; None for another database, an in-memory
    one, or a `file:` URI (which names no plain path)."""
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    return None if database.startswith("file:") else Path(database).expanduser()


POOL_SIZE = 20
"""Connections kept open: about as many as the bot's threads that use the database at once (8
listeners, 8 outbox drains, the results, the followers). With SQLAlchemy's default of 5, under
load a checkout beyond it opened a new connection, closed when given back (a PostgreSQL
connection's start-up each time): at 200 users on PostgreSQL, 51 to 56 turns/s against 54 to 71
with 20 (benchmarks/bot_turns.py, three runs each)."""
POOL_OVERFLOW = 10


class WriterTurns:
    """Transactions on one SQLite file take turns: the threads of a process on a re-entrant lock,
    and processes on an exclusive `flock` of a file beside the database (`<file>-writers`),
    taken by the outermost hold of a thread. Both wake a waiter as soon as the holder lets go.
    SQLite lets one writer in at a time and a second one waits in its busy handler, which sleeps
    in steps of up to 100 ms however soon the lock frees: under a few concurrent writers, most of
    a turn went to those sleeps, and with several bot processes (`artbot serve --workers`) their
    turn p99 tripled. The database's own locking stays the guarantee; this is only the queue."""

    def __init__(self, lock_file: Path | None) -> None:
        self._threads = threading.RLock()
        self._depth = threading.local()
        self._lock_file = lock_file
        self._descriptor: int | None = None

    def __enter__(self) -> WriterTurns:
        self._threads.acquire()
        depth = getattr(self._depth, "value", 0)
        if depth == 0 and self._lock_file is not None:
            try:
                fcntl.flock(self._file(), fcntl.LOCK_EX)
            except BaseException:
                self._threads.release()
                raise
        self._depth.value = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth.value -= 1
        try:
            if self._depth.value == 0 and self._descriptor is not None:
                fcntl.flock(self._descriptor, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def _file(self) -> int:
        """The lock file's descriptor, opened once (under the thread lock)."""
        if self._descriptor is None:
            assert self._lock_file is not None
            self._descriptor = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        return self._descriptor


_SQLITE_TURNS: dict[Path | None, WriterTurns] = {}
_SQLITE_TURNS_GUARD = threading.Lock()


def writer_turns(engine: Engine) -> contextlib.AbstractContextManager[object]:
    """What a transaction on `engine` holds while it runs: on SQLite, its file's `WriterTurns`
    (one per file in a process); other databases: nothing to hold."""
    if engine.url.get_backend_name() != "sqlite":
        return contextlib.nullcontext()
    file = sqlite_file(engine.url)
    key = file.resolve() if file is not None else None
    lock_file = key.with_name(f"{key.name}-writers") if key is not None else None
    with _SQLITE_TURNS_GUARD:
        return _SQLITE_TURNS.setdefault(key, WriterTurns(lock_file))


def create_database_engine(url: str | None = None) -> Engine:
    """An engine for `url` (default: the SQLite file), with SQLite set up for concurrent writers."""
    parsed = normalize_database_url(url or default_database_url())
    if parsed.get_backend_name() != "sqlite":
        server = create_engine(parsed, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW)
        _ping_after_idle(server)
        return server
    file = sqlite_file(parsed)
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
    pool: dict[str, Any] = (
        {"pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW} if file is not None else {}
    )
    engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S}, **pool)

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # WAL lets readers go on while one process writes; the busy timeout makes a second
        # writer wait for the lock instead of failing with "database is locked".
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def _ping_after_idle(engine: Engine) -> None:
    """Ping a pooled connection at checkout when it has been idle PING_AFTER_IDLE_S or more (a
    server restart, or a proxy closing idle connections, is met there rather than by the
    request that uses it); a dropped one is replaced, as `pool_pre_ping` would."""

    @event.listens_for(engine, "checkin")
    def _idle_from(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            # The pool discards this connection and checks out another (a new one if need be).
            raise DisconnectionError(f"a pooled connection was dropped: {error}") from error
