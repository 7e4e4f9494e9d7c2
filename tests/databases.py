"""The databases tests run on: SQLite files always, and PostgreSQL too when
ARTBOT_TEST_POSTGRES_URL names a server (each test in a schema of its own, dropped after).

    @pytest.fixture(params=BACKENDS)
    def store(request, tmp_path):
        if request.param == "sqlite":
            ...
        with throwaway_schema("artbot_runner") as schema:
            ...
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from storage.database import create_database_engine

POSTGRES_URL = os.environ.get("ARTBOT_TEST_POSTGRES_URL")

BACKENDS = [
    "sqlite",
    pytest.param(
        "postgres",
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(not POSTGRES_URL, reason="ARTBOT_TEST_POSTGRES_URL is not set"),
        ],
    ),
]
"""Parameters for a fixture that runs its tests on each backend."""


@contextlib.contextmanager
def throwaway_schema(prefix: str) -> Iterator[str]:
    """A new, empty schema on the test PostgreSQL server, dropped with all it holds afterwards."""
    assert POSTGRES_URL is not None, "a PostgreSQL test without ARTBOT_TEST_POSTGRES_URL"
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_database_engine(POSTGRES_URL)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield schema
    finally:
        try:
            _drop_schema(admin, schema)
        finally:
            admin.dispose()


DROP_ATTEMPTS = 5


def _drop_schema(admin: Engine, schema: str) -> None:
    """DROP SCHEMA ... CASCADE, even while a connection the test left behind (a bot's worker
    finishing a transaction) still holds locks in it: PostgreSQL may then pick the drop as a
    deadlock's victim, or the drop waits. Each failed attempt ends the sessions holding locks on
    the schema's tables (only this test's: the schema is its own) and tries again."""
    for attempt in range(1, DROP_ATTEMPTS + 1):
        try:
            with admin.begin() as connection:
                connection.execute(text("SET LOCAL lock_timeout = '10s'"))
                connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
            return
        except OperationalError:
            if attempt == DROP_ATTEMPTS:
                raise
            with admin.begin() as connection:
                connection.execute(
                    text(
                        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l "
                        "JOIN pg_class c ON c.oid = l.relation "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = :schema AND l.pid <> pg_backend_pid()"
                    ),
                    {"schema": schema},
                )
            time.sleep(0.2 * attempt)
