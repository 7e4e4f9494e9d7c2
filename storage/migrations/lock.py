"""One migration at a time per database, across processes: a PostgreSQL advisory lock held by
the migrating transaction, or an exclusive lock on a file beside the SQLite file.

Without it two programs starting on a fresh database (the bot's first requests, a chat and the
bot) both find no tables and both create them; the loser fails with "table already exists".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator

from sqlalchemy import Connection, Engine, func, select

from storage.database import sqlite_file


@contextlib.contextmanager
def locked_transaction(engine: Engine, name: str) -> Iterator[Connection]:
    """A transaction on `engine` that holds the migration lock called `name` until it ends.

    Whoever waits for the lock sees, once it has it, everything the holder committed.
    """
    with _sqlite_file_lock(engine, name), engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Released by the transaction's end, commit or rollback alike.
            connection.execute(select(func.pg_advisory_xact_lock(_advisory_key(name))))
        yield connection


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine, name: str) -> Iterator[None]:
    path = sqlite_file(engine.url)
    if path is None:  # PostgreSQL locks in the transaction; in-memory SQLite has nobody to race
        yield
        return
    lock_path = path.with_name(f"{path.name}.{name}.migrate-lock")
    with lock_path.open("a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # waits while another process migrates
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _advisory_key(name: str) -> int:
    """A stable signed 64-bit key for `name` (PostgreSQL's advisory locks take a bigint)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
