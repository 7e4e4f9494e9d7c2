"""Migrations at start-up: `upgrade` on empty databases, on databases an older artbot made with
`create_all`, from many processes at once, and `artbot db`; on SQLite files always and on
PostgreSQL when ARTBOT_TEST_POSTGRES_URL names a server (each test in a schema of its own,
dropped after)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
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
from sqlalchemy.exc import SQLAlchemyError

from artbot.cli import main
from bot.migrations import BOT_DATABASE
from bot.slack.records import SlackRecords
from flows import TRAIN_RL, Reply, Session, advance, begin
from runner.records.migrations import RUNNER_DATABASE
from runner.records.store import JobStore
from runner.schemas import JobSubmission
from storage import migrations as db
from storage.database import create_database_engine
from storage.sessions import SessionKey, SessionStore
from storage.sessions import metadata as session_metadata
from tests.databases import BACKENDS, POSTGRES_URL, throwaway_schema

ROOT = Path(__file__).resolve().parents[2]
KEY = SessionKey("T0001", "C0001", "1712345678.000100")
HEAD = "0009"  # the newest migration: bump with each new one
RUNNER_HEAD = "runner_0002"  # the runner's newest: bump with each new one
MODELS: tuple[MetaData, ...] = BOT_DATABASE.tables
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
        db.upgrade(BOT_DATABASE, self.url, schema=self.schema)

    def current(self) -> str | None:
        return db.current(BOT_DATABASE, self.url, schema=self.schema)

    def create_all(self, *tables: MetaData) -> None:
        """Tables as an artbot from before migrations ran at start-up made them: unstamped."""
        for metadata in tables or MODELS:
            metadata.create_all(self.open())

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
    made.create_all()
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
    assert database.current() == db.head(BOT_DATABASE) == HEAD
    assert database.version_rows() == [HEAD]


@pytest.mark.parametrize("chain", [BOT_DATABASE, RUNNER_DATABASE], ids=lambda c: c.name)
def test_the_models_need_no_migration_beyond_head(tmp_path: Path, chain: db.MigrationChain) -> None:
    """Alembic's autogenerate finds nothing to add: a model changed without a migration fails."""
    url = f"sqlite:///{tmp_path / 'artbot.db'}"
    db.upgrade(chain, url)
    engine = create_database_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "version_table": chain.version_table}
        )
        models = MetaData()
        for metadata in chain.tables:
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
    assert database.current() == db.head(BOT_DATABASE)


def test_upgrade_is_idempotent(database: Database, reference: Database) -> None:
    database.upgrade()
    store, records = database.stores()
    use_the_stores(store, records)
    database.upgrade()
    database.upgrade()
    assert database.shape() == reference.shape()
    assert database.version_rows() == [db.head(BOT_DATABASE)]
    assert store.get(KEY) is not None  # nothing was dropped and made again
    store.close()


# --- databases an older artbot made --------------------------------------------------------


def test_stores_first_then_upgrade_adopts_their_tables(
    database: Database, reference: Database
) -> None:
    database.create_all()
    store, records = database.stores()
    use_the_stores(store, records)
    assert database.current() is None
    database.upgrade()
    assert database.current() == db.head(BOT_DATABASE)
    assert database.shape() == reference.shape()
    assert store.get(KEY) is not None and len(records.approvals(KEY)) == 1
    use_the_stores(store, records, SessionKey("T0001", "C0001", "1712345678.000900"))
    database.upgrade()
    assert database.version_rows() == [db.head(BOT_DATABASE)]
    store.close()


def test_a_database_with_only_the_sessions_table_gets_the_bots_tables(
    database: Database, reference: Database
) -> None:
    """An older `artbot chat` made only the session table; the bot's come with the upgrade."""
    database.create_all(session_metadata)
    store = SessionStore(create_database_engine(database.url), schema=database.schema)
    assert store.get(KEY) is None
    assert database.tables() == {"artbot_sessions"}
    database.upgrade()
    assert database.shape() == reference.shape()
    assert database.current() == db.head(BOT_DATABASE)
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
            BOT_DATABASE, database.url, schema=database.schema, connection=connection
        )
        command.downgrade(config, "base")
    assert database.tables() & MODEL_TABLES == set()
    assert database.current() is None


def test_the_config_alone_opens_the_database_itself(
    database: Database, reference: Database
) -> None:
    """As `alembic.command.revision(..., autogenerate=True)` would use it: no connection given."""
    command.upgrade(db.alembic_config(BOT_DATABASE, database.url, schema=database.schema), "head")
    assert database.shape() == reference.shape()
    assert database.current() == db.head(BOT_DATABASE)


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


# --- start-up: every program migrates, nothing else creates tables --------------------------

STARTING_PROGRAM = """
import sys, time
from pathlib import Path
from bot.migrations import BOT_DATABASE
from flows import TRAIN_RL, Session, begin
from storage import migrations
from storage.database import create_database_engine
from storage.sessions import SessionKey, SessionStore

url, schema, go, number = sys.argv[1], sys.argv[2] or None, Path(sys.argv[3]), sys.argv[4]
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:  # start together
    time.sleep(0.005)
migrations.upgrade(BOT_DATABASE, url, schema=schema)
store = SessionStore(create_database_engine(url), schema=schema)
session = begin(TRAIN_RL, Session.start(TRAIN_RL.id)).session
store.create(SessionKey("T0001", "C0001", f"1712345678.{number:0>6}"), "U0OWNER", session)
store.close()
"""


def test_programs_starting_together_on_a_fresh_database_migrate_it_once(
    database: Database, reference: Database, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    programs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                STARTING_PROGRAM,
                database.url,
                database.schema or "",
                go,
                str(n),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    go.touch()
    outcomes = [program.communicate(timeout=120) for program in programs]
    assert [program.returncode for program in programs] == [0] * 6, outcomes
    assert database.version_rows() == [HEAD]
    assert database.shape() == reference.shape()
    store, _ = database.stores()
    assert len(store.list_for_owner("U0OWNER")) == 6
    store.close()


def test_a_store_on_a_database_nobody_migrated_creates_no_table(database: Database) -> None:
    store = SessionStore(create_database_engine(database.url), schema=database.schema)
    with pytest.raises(SQLAlchemyError):
        store.get(KEY)
    store.close()
    assert database.tables() == set()


def test_the_runner_and_the_bot_keep_their_own_chains_in_one_database(
    database: Database,
) -> None:
    runner_tables = {t.name for t in RUNNER_DATABASE.tables[0].sorted_tables}
    db.upgrade(RUNNER_DATABASE, database.url, schema=database.schema)
    assert database.tables() == runner_tables | {"runner_alembic_version"}
    assert database.current() is None  # the bot's chain has not started
    database.upgrade()
    database.upgrade()
    db.upgrade(RUNNER_DATABASE, database.url, schema=database.schema)
    assert database.tables() == MODEL_TABLES | runner_tables | {
        "alembic_version",
        "runner_alembic_version",
    }
    assert database.current() == HEAD
    runner_at = db.current(RUNNER_DATABASE, database.url, schema=database.schema)
    assert runner_at == db.head(RUNNER_DATABASE) == RUNNER_HEAD


def test_an_older_runners_tables_are_adopted(database: Database) -> None:
    database.create_all(*RUNNER_DATABASE.tables)
    store = JobStore(create_database_engine(database.url), schema=database.schema)
    job, _ = store.create(
        "job1",
        JobSubmission.model_validate({"script": "print(1)\n", "idempotency_key": "key-000001"}),
        "/w/job1",
    )
    db.upgrade(RUNNER_DATABASE, database.url, schema=database.schema)
    assert db.current(RUNNER_DATABASE, database.url, schema=database.schema) == RUNNER_HEAD
    kept = store.get("job1")
    assert kept is not None and kept.id == job.id  # nothing dropped and made again
    store.close()


@pytest.mark.parametrize("chain", [BOT_DATABASE, RUNNER_DATABASE], ids=lambda c: c.name)
def test_a_chain_names_exactly_the_tables_of_its_models(chain: db.MigrationChain) -> None:
    """An upgrade finds the chain's tables by name, without loading the models: the names must
    be the models' own (a table added to a model and not here would never be adopted)."""
    assert chain.table_names == {t.name for m in chain.tables for t in m.sorted_tables}


def test_the_terminal_upgrades_the_bots_database_without_loading_slack(tmp_path: Path) -> None:
    """`artbot chat` brings the bot's database to the newest revision at start-up; the Slack
    SDK (the OAuth tables' models) is not needed for that, and is not imported."""
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    probe = (
        "import sys\n"
        "import artbot.terminal.chat\n"
        "from bot.migrations import BOT_DATABASE\n"
        "from storage import migrations\n"
        f"migrations.upgrade(BOT_DATABASE, {url!r})\n"
        f"print(migrations.current(BOT_DATABASE, {url!r}))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('slack_sdk', 'slack_bolt'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == [HEAD, "[]"]
