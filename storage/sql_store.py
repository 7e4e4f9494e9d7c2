"""What every SQL store of artbot shares: a schema per instance, tables made on first use, and one
place where each transaction begins and ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from sqlalchemy import Engine, MetaData
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session as OrmSession


def utc_now() -> datetime:
    return datetime.now(UTC)


class SqlStore:
    """A store's plumbing: subclasses add the queries. Each public method is one transaction."""

    def __init__(
        self,
        engine: Engine,
        metadata: MetaData,
        *,
        clock: Callable[[], datetime] = utc_now,
        schema: str | None = None,
    ) -> None:
        # A schema (PostgreSQL) keeps several stores, or test runs, apart in one database.
        self._engine = (
            engine.execution_options(schema_translate_map={None: schema}) if schema else engine
        )
        self._metadata = metadata
        self._clock = clock
        self._tables_ready = False

    def now(self) -> datetime:
        return self._clock()

    def close(self) -> None:
        self._engine.dispose()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[OrmSession]:
        """The one place a transaction begins and ends: commit on success, roll back on error."""
        self._ensure_tables()
        with OrmSession(self._engine, expire_on_commit=False) as orm, orm.begin():
            yield orm

    def _ensure_tables(self) -> None:
        if self._tables_ready:
            return
        try:
            self._metadata.create_all(self._engine)
        except (OperationalError, ProgrammingError, IntegrityError):
            # Two processes starting at once both see no table and both create it; the loser
            # fails. Checking again finds the winner's table.
            self._metadata.create_all(self._engine)
        self._tables_ready = True
