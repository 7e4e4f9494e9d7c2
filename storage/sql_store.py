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
    def _looking(self) -> Iterator[Connection]:
        """`_reading` for Core statements: a bare connection (no ORM session to set up), which
        rolls back when it closes."""
        with self._engine.connect() as connection:
            yield connection

    @contextlib.contextmanager
    def _reading(self) -> Iterator[OrmSession]:
        """A transaction that only reads: on SQLite it does not wait for the writers' turns (a
        reader never waits for a writer there: WAL). It ends with a rollback: nothing written in
        it would be kept."""
        with OrmSession(self._engine, expire_on_commit=False) as orm:
            yield orm
