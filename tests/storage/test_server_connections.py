"""Pooled PostgreSQL connections: pinged before use only after sitting idle, so a server that
dropped one (a restart, a proxy's idle timeout) costs no request, and a busy pool costs no
round trip per checkout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from storage import database
from storage.database import create_database_engine
from tests.databases import POSTGRES_URL

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not POSTGRES_URL, reason="ARTBOT_TEST_POSTGRES_URL is not set"),
]


@pytest.fixture
def engine() -> Iterator[Engine]:
    assert POSTGRES_URL is not None
    engine = create_database_engine(POSTGRES_URL)
    yield engine
    engine.dispose()


def backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def drop_on_the_server(pid: int) -> None:
    """What a server restart does to one pooled connection: its backend ends."""
    assert POSTGRES_URL is not None
    admin = create_database_engine(POSTGRES_URL)
    try:
        with admin.begin() as connection:
            ended = connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            assert ended.scalar_one() is True
    finally:
        admin.dispose()


def test_an_idle_connection_the_server_dropped_is_replaced_before_a_request_uses_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 0.0)  # every checkout counts as idle
    dropped = backend_pid(engine)
    drop_on_the_server(dropped)

    assert backend_pid(engine) != dropped  # no error: the ping found it gone, a new one served


def test_a_connection_in_use_is_not_pinged_at_each_checkout(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 3600.0)
    dropped = backend_pid(engine)
    drop_on_the_server(dropped)

    # Not idle long enough to be pinged: the request meets the drop itself...
    with pytest.raises(OperationalError):
        backend_pid(engine)
    # ...and the pool, told of the disconnect, serves the next one on a new connection.
    assert backend_pid(engine) != dropped
