"""One runner per database, enforced: a lock held for the runner's whole life, which the
operating system or the database server drops when the process ends, however it ends.

- SQLite: an exclusive `flock` on `<database file>.runner-lock` beside the file.
- PostgreSQL: a session advisory lock (`pg_try_advisory_lock`) on a connection kept open.

Why refuse a second runner rather than share: the queue's wake-ups and the long polls live in the
runner's memory, and a starting runner takes every started job in the database for its own
(re-attaching it, or marking it lost when its processes are not on this host). Claiming a job is
already compare-and-set, but the rest would need runner ids and leases on every row.
"""

from __future__ import annotations

import fcntl
import hashlib
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, func, select

from storage.database import create_database_engine, normalize_database_url, sqlite_file


class DatabaseInUse(Exception):
    """Another runner holds the database."""


class RunnerLock:
    """Held from `acquire` to `release` (or the process's end)."""

    def __init__(self, file: IO[str] | None, connection: Connection | None) -> None:
        self._file = file
        self._connection = connection

    @classmethod
    def acquire(cls, url: str, schema: str | None = None) -> RunnerLock:
        """Take the database's runner lock; DatabaseInUse when another runner has it."""
        parsed = normalize_database_url(url)
        path = sqlite_file(parsed)
        if parsed.get_backend_name() == "sqlite":
            return cls(_lock_file(path), None) if path is not None else cls(None, None)
        engine = create_database_engine(url)
        connection = engine.connect()
        key = _advisory_key(f"artbot-runner:{schema or ''}")
        if not connection.execute(select(func.pg_try_advisory_lock(key))).scalar_one():
            connection.close()
            engine.dispose()
            raise DatabaseInUse(_MESSAGE)
        connection.commit()  # the lock is the session's, not the transaction's
        return cls(None, connection)

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
        if self._connection is not None:
            engine = self._connection.engine
            self._connection.close()  # the session ends: the server drops its advisory lock
            engine.dispose()
            self._connection = None


_MESSAGE = (
    "another runner is using this database: one runner per database (stop the other one, or "
    "give this one a database of its own)"
)


def _lock_file(path: Path | None) -> IO[str]:
    assert path is not None
    lock = path.with_name(f"{path.name}.runner-lock").open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise DatabaseInUse(_MESSAGE) from None
    return lock


def _advisory_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
