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
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text

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
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
