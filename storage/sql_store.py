"""What every SQL store of artbot shares: a schema per instance and one place where each
transaction begins and ends. Stores never create tables: programs migrate their database at
start-up (`storage.migrations.upgrade`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Self

from sqlalchemy import Connection, Engine, text
from sqlalchemy.orm import Session as OrmSession

from storage.database import create_database_engine, writer_turns


def utc_now() -> datetime:
    return datetime.now(UTC)


class SqlStore:
    """A store's plumbing: subclasses add the queries. Each public method is one transaction."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], datetime] = utc_now,
        schema: str | None = None,
    ) -> None:
        # A schema (PostgreSQL) keeps several stores, or test runs, apart in one database.
        self._engine = (
            engine.execution_options(schema_translate_map={None: schema}) if schema else engine
        )
        self._clock = clock
        self._turns = writer_turns(engine)
        # Reads on a database server run in autocommit: one round trip each, where a read-only
        # transaction took three (BEGIN, the query, ROLLBACK), and psycopg forgets its prepared
        # statements at each ROLLBACK. Under PostgreSQL's READ COMMITTED every statement sees a
        # snapshot of its own either way. On SQLite a read begins no transaction.
        self._reader = (
            self._engine
            if engine.dialect.name == "sqlite"
            else self._engine.execution_options(isolation_level="AUTOCOMMIT")
        )

    @classmethod
    def open(cls, url: str | None = None, **options: Any) -> Self:
        """A store on `url` (default: artbot's SQLite file), on an engine of its own."""
        return cls(create_database_engine(url), **options)

    def now(self) -> datetime:
        return self._clock()

    def ping(self) -> None:
        """One round trip to the database; SQLAlchemyError when it cannot be reached."""
        with self._engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def close(self) -> None:
        self._engine.dispose()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[OrmSession]:
        """The one place a transaction begins and ends: commit on success, roll back on error.
        On SQLite, the process's transactions on one file take turns (`writer_turns`)."""
        with self._turns, OrmSession(self._engine, expire_on_commit=False) as orm, orm.begin():
            yield orm

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        """`_transaction` for Core statements: a bare connection in a transaction, committed on
        success (the hot path of a turn: no ORM session to set up, flush and close)."""
        with self._turns, self._engine.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def _looking(self) -> Iterator[Connection]:
        """`_reading` for Core statements: a bare connection (no ORM session to set up)."""
        with self._reader.connect() as connection:
            yield connection

    @contextlib.contextmanager
    def _reading(self) -> Iterator[OrmSession]:
        """A session that only reads (writes go in `_transaction`): on SQLite it does not wait
        for the writers' turns (a reader never waits for a writer there: WAL); on a database
        server it runs in autocommit (`_reader`)."""
        with OrmSession(self._reader, expire_on_commit=False) as orm:
            yield orm
