"""`artbot db upgrade` and the stores' `create_all`, in either order, on SQLite files always and
on PostgreSQL when ARTBOT_TEST_POSTGRES_URL names a server (each test in a schema of its own,
dropped after)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, MetaData, inspect, text

from artbot.cli import main
from artbot.database import ARTBOT_TABLES
from bot.slack_records import SlackRecords
from flows import TRAIN_RL, Reply, Session, advance, begin
from storage import migrations as db
from storage.database import create_database_engine
from storage.sessions import SessionKey, SessionStore
from tests.databases import BACKENDS, POSTGRES_URL, throwaway_schema

KEY = SessionKey("T0001", "C0001", "1712345678.000100")
HEAD = "0002"  # the newest migration: bump with each new one
MODELS: tuple[MetaData, ...] = ARTBOT_TABLES
MODEL_TABLES = {table.name for metadata in MODELS for table in metadata.tables.values()}


@dataclass
class Database:
    """A fresh, empty database: a SQLite file, or a PostgreSQL schema of its own."""

    url: str
    schema: str | None
    engine: Engine

    def open(self) -> Engine:
        """An engine that sees this database's tables unqualified, as the stores do."""
        if self.schema is None:
            return self.engine
        return self.engine.execution_options(schema_translate_map={None: self.schema})

    def upgrade(self) -> None:
        db.upgrade(self.url, tables=MODELS, schema=self.schema)

    def current(self) -> str | None:
        return db.current(self.url, schema=self.schema)

    def tables(self) -> set[str]:
        return set(inspect(self.engine).get_table_names(schema=self.schema))

    def shape(self) -> dict[str, Any]:
        """Every artbot table as the database describes it: columns, primary key, indexes."""
        inspector = inspect(self.engine)
        dialect = self.engine.dialect
        shape: dict[str, Any] = {}
        for name in sorted(self.tables() & MODEL_TABLES):
            columns = [
                (c["name"], str(c["type"].compile(dialect=dialect)), bool(c["nullable"]))
                for c in inspector.get_columns(name, schema=self.schema)
            ]
            primary = inspector.get_pk_constraint(name, schema=self.schema)["constrained_columns"]
            indexes = sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in inspector.get_indexes(name, schema=self.schema)
            )
            shape[name] = {"columns": columns, "primary_key": primary, "indexes": indexes}
        return shape

    def stores(self) -> tuple[SessionStore, SlackRecords]:
        engine = create_database_engine(self.url)
        return SessionStore(engine, schema=self.schema), SlackRecords(engine, schema=self.schema)

    def version_rows(self) -> list[str]:
        table = f'"{self.schema}".alembic_version' if self.schema else "alembic_version"
        with self.engine.connect() as connection:
            return [row[0] for row in connection.execute(text(f"SELECT version_num FROM {table}"))]


class Databases:
    """Makes fresh databases of one backend and removes them afterwards."""

    def __init__(self, backend: str, folder: Path) -> None:
        self.backend = backend
        self._folder = folder
        self._made: list[Database] = []
        self._cleanup = contextlib.ExitStack()

    def new(self) -> Database:
        if self.backend == "sqlite":
            url, schema = f"sqlite:///{self._folder / f'artbot-{len(self._made)}.db'}", None
        else:
            assert POSTGRES_URL is not None
            url = POSTGRES_URL
            schema = self._cleanup.enter_context(throwaway_schema("artbot_migrations"))
        database = Database(url, schema, create_database_engine(url))
        self._cleanup.callback(database.engine.dispose)  # before its schema is dropped
        self._made.append(database)
        return database

    def close(self) -> None:
        self._cleanup.close()


@pytest.fixture(params=BACKENDS)
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Databases]:
    made = Databases(request.param, tmp_path)
    yield made
    made.close()


@pytest.fixture
def database(databases: Databases) -> Database:
    return databases.new()


@pytest.fixture
def reference(databases: Databases) -> Database:
    """A database whose tables the models made with create_all: what the schema should be."""
    made = databases.new()
    for metadata in MODELS:
        metadata.create_all(made.open())
    return made


def use_the_stores(store: SessionStore, records: SlackRecords, key: SessionKey = KEY) -> None:
    """One round of everything the stores do, so a missing column or table shows."""
    session = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
    store.create(key, "U0OWNER", session)
    turn = advance(TRAIN_RL, session, Reply(text="static"))
    store.save(key, turn.session, expected_revision=session.revision)
    stored = store.get(key)
    assert stored is not None and stored.session == turn.session
    assert key in [s.key for s in store.list_for_owner("U0OWNER")]
    assert store.expire_idle(timedelta(days=1)) == []
    assert records.first_delivery(f"Ev-{key.thread}") is True
    assert records.first_delivery(f"Ev-{key.thread}") is False
    records.remember_question(key, "1712345678.000200", "turns", "Single-turn or multi-turn?")
    assert [q.ts for q in records.open_questions(key, "turns")] == ["1712345678.000200"]
    approval = records.record_approval(key, "U0OWNER", "print('hi')\n", "run.py")
    assert records.approvals(key) == [approval]
    assert records.forget_deliveries(timedelta(days=-1)) >= 1


# --- upgrade on an empty database -----------------------------------------------------------


def test_upgrade_creates_exactly_the_models_tables_and_columns(
    database: Database, reference: Database
) -> None:
    assert database.current() is None
    database.upgrade()
    assert database.tables() == MODEL_TABLES | {"alembic_version"}
    shape = database.shape()
    for metadata in MODELS:
        for table in metadata.tables.values():
            assert [c[0] for c in shape[table.name]["columns"]] == [c.name for c in table.columns]
            assert shape[table.name]["primary_key"] == [c.name for c in table.primary_key.columns]
            assert {i[0] for i in shape[table.name]["indexes"]} == {i.name for i in table.indexes}
    # Types, nullability and index columns too: the same as create_all makes from the models.
    assert shape == reference.shape()
    assert database.current() == db.head() == HEAD
    assert database.version_rows() == [HEAD]


def test_the_models_need_no_migration_beyond_head(tmp_path: Path) -> None:
    """Alembic's autogenerate finds nothing to add: a model changed without a migration fails."""
    url = f"sqlite:///{tmp_path / 'artbot.db'}"
    db.upgrade(url, tables=MODELS)
    engine = create_database_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        models = MetaData()
        for metadata in MODELS:
            for table in metadata.tables.values():
                table.to_metadata(models)
        assert compare_metadata(context, models) == []
    engine.dispose()


def test_upgrade_then_the_stores_work(database: Database) -> None:
    database.upgrade()
    before = database.shape()
    store, records = database.stores()
    use_the_stores(store, records)
    store.close()
    assert database.shape() == before
    assert database.current() == db.head()


def test_upgrade_is_idempotent(database: Database, reference: Database) -> None:
    database.upgrade()
    store, records = database.stores()
    use_the_stores(store, records)
    database.upgrade()
    database.upgrade()
    assert database.shape() == reference.shape()
    assert database.version_rows() == [db.head()]
    assert store.get(KEY) is not None  # nothing was dropped and made again
    store.close()


# --- the stores first -----------------------------------------------------------------------


def test_stores_first_then_upgrade_adopts_their_tables(
    database: Database, reference: Database
) -> None:
    store, records = database.stores()
    use_the_stores(store, records)
    assert database.current() is None
    database.upgrade()
    assert database.current() == db.head()
    assert database.shape() == reference.shape()
    assert store.get(KEY) is not None and len(records.approvals(KEY)) == 1
    use_the_stores(store, records, SessionKey("T0001", "C0001", "1712345678.000900"))
    database.upgrade()
    assert database.version_rows() == [db.head()]
    store.close()


def test_a_database_with_only_the_sessions_table_gets_the_bots_tables(
    database: Database, reference: Database
) -> None:
    """`artbot chat` made only the session table; the bot's tables come with the upgrade."""
    store = SessionStore(create_database_engine(database.url), schema=database.schema)
    assert store.get(KEY) is None  # the first use creates the table
    assert database.tables() == {"artbot_sessions"}
    database.upgrade()
    assert database.shape() == reference.shape()
    assert database.current() == db.head()
    records = SlackRecords(create_database_engine(database.url), schema=database.schema)
    use_the_stores(store, records)
    store.close()


def test_unstamped_tables_that_differ_from_the_models_are_refused(database: Database) -> None:
    # Not from the models: the stores' translate map would not qualify a raw CREATE TABLE.
    table = f'"{database.schema}".artbot_sessions' if database.schema else "artbot_sessions"
    with database.engine.begin() as connection:
        connection.execute(text(f"CREATE TABLE {table} (team VARCHAR(255) PRIMARY KEY)"))
    with pytest.raises(db.SchemaMismatch) as refused:
        database.upgrade()
    assert "artbot_sessions: no column owner" in str(refused.value)
    assert database.current() is None
    assert database.tables() == {"artbot_sessions"}  # nothing created, nothing stamped


def test_downgrade_removes_every_table(database: Database) -> None:
    database.upgrade()
    with database.open().begin() as connection:
        config = db.alembic_config(
            database.url, tables=MODELS, schema=database.schema, connection=connection
        )
        command.downgrade(config, "base")
    assert database.tables() & MODEL_TABLES == set()
    assert database.current() is None


def test_the_config_alone_opens_the_database_itself(
    database: Database, reference: Database
) -> None:
    """As `alembic.command.revision(..., autogenerate=True)` would use it: no connection given."""
    command.upgrade(db.alembic_config(database.url, tables=MODELS, schema=database.schema), "head")
    assert database.shape() == reference.shape()
    assert database.current() == db.head()


# --- the command line -----------------------------------------------------------------------


def test_artbot_db_upgrade_and_current(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'artbot.db'}"
    assert main(["db", "current", "--database-url", url]) == 0
    assert capsys.readouterr().out == f"{url}: none (newest is {HEAD}: run `artbot db upgrade`)\n"
    assert not (tmp_path / "nested").exists()  # asking created nothing
    assert main(["db", "upgrade", "--database-url", url]) == 0
    assert capsys.readouterr().out == f"{url}: upgraded from none to {HEAD} (head)\n"
    assert main(["db", "upgrade", "--database-url", url]) == 0
    assert capsys.readouterr().out == f"{url}: already at {HEAD} (head)\n"
    assert main(["db", "current", "--database-url", url]) == 0
    assert capsys.readouterr().out == f"{url}: {HEAD} (head)\n"


def test_artbot_db_upgrade_defaults_to_the_stores_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("ARTBOT_DATABASE_URL", raising=False)
    assert main(["db", "upgrade"]) == 0
    path = tmp_path / "data" / "artbot" / "artbot.db"
    assert capsys.readouterr().out == f"sqlite:///{path}: upgraded from none to {HEAD} (head)\n"
    store = SessionStore.open()
    assert store.get(KEY) is None
    store.close()


def test_artbot_db_reads_artbot_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("ARTBOT_DATABASE_URL", url)
    assert main(["db", "upgrade"]) == 0
    assert capsys.readouterr().out.startswith(f"{url}: upgraded")


def test_artbot_db_reports_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "upgrade", "--database-url", "mysql://u@h/db"]) == 2
    assert "unsupported database" in capsys.readouterr().err
    url = f"sqlite:///{tmp_path / 'odd.db'}"
    engine = create_database_engine(url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE artbot_approvals (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    assert main(["db", "upgrade", "--database-url", url]) == 1
    err = capsys.readouterr().err
    assert "artbot_approvals: no column team" in err
    assert main(["db", "current", "--database-url", "postgresql://u:s3cret@127.0.0.1:9/db"]) == 1
    err = capsys.readouterr().err
    assert "s3cret" not in err and "***" in err
    assert main(["db"]) == 2


def test_timestamps_written_after_an_upgrade_read_back_in_utc(database: Database) -> None:
    database.upgrade()
    store, _ = database.stores()
    created = store.create(KEY, "U0OWNER", begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session)
    stored = store.get(KEY)
    assert stored is not None and stored.created_at == created.created_at
    assert stored.created_at.tzinfo is not None
    assert abs(stored.created_at - datetime.now(UTC)) < timedelta(minutes=5)
    store.close()
