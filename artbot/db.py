"""artbot's database schema under Alembic: `artbot db upgrade` and `artbot db current`.

Alembic is configured from code (`alembic_config`): the migrations ship inside the package
(`artbot/migrations`), so an installed artbot needs no alembic.ini and no working directory.

The stores keep creating missing tables with `create_all` on first use, so a fresh SQLite file
works with no setup. `upgrade` makes the two meet:
- a database with none of artbot's tables runs the migrations from the start;
- a database that is already stamped runs the migrations it lacks;
- an unstamped database with some of artbot's tables (the stores made them) is adopted: the
  tables that exist are compared with the models, the missing ones are created as the stores
  would create them, and the head revision is stamped. Tables that differ from the models are
  not guessed at: `SchemaMismatch` lists the differences.
After `upgrade` every table exists, so the stores' `create_all` has nothing left to do.

Alembic is imported where it is used: every `artbot` command builds this module's parser, and
only `artbot db` needs Alembic.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, MetaData, Table, inspect
from sqlalchemy.exc import SQLAlchemyError

from artbot.session_store import (
    SessionStoreError,
    create_database_engine,
    default_database_url,
    normalize_database_url,
)
from artbot.session_store import metadata as session_metadata
from bot.records import Base as BotRecordsBase

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DATABASE_URL_ENV = "ARTBOT_DATABASE_URL"

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


class SchemaMismatch(Exception):
    """Existing, unstamped tables that do not match the models: `upgrade` will not guess."""

    def __init__(self, differences: Sequence[str]) -> None:
        super().__init__(
            "the database has artbot tables that no migration recorded and that differ from "
            "this artbot's models:\n" + "\n".join(f"  {line}" for line in differences)
        )
        self.differences = tuple(differences)


def model_metadata() -> tuple[MetaData, ...]:
    """Every table artbot keeps: the sessions and the Slack bot's records."""
    return (session_metadata, BotRecordsBase.metadata)


def model_tables() -> list[Table]:
    """The models' tables, in creation order."""
    return [table for metadata in model_metadata() for table in metadata.sorted_tables]


def alembic_config(
    url: str | None = None, *, schema: str | None = None, connection: Connection | None = None
) -> Config:
    """Alembic's configuration for artbot's migrations, with no alembic.ini.

    With `connection`, migrations run on it (and in its transaction); else env.py opens `url`.
    `schema` (PostgreSQL) puts the tables and the version table in that schema.
    """
    from alembic.config import Config

    config = Config()
    # Config values go through configparser interpolation: a literal % must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    return config


def head() -> str:
    """The newest revision in artbot/migrations."""
    from alembic.script import ScriptDirectory

    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None, "artbot/migrations has no revisions"
    return revision


def current(url: str | None = None, *, schema: str | None = None) -> str | None:
    """The revision the database is stamped with; None if unstamped (or no SQLite file yet)."""
    parsed = normalize_database_url(url or default_database_url())
    database = parsed.database
    if (
        parsed.get_backend_name() == "sqlite"
        and database
        and database != ":memory:"
        and not database.startswith("file:")
        and not Path(database).expanduser().exists()
    ):
        return None  # asking must not create an empty database file
    engine = create_database_engine(url)
    try:
        with engine.connect() as connection:
            return _stamped_revision(connection, schema)
    finally:
        engine.dispose()


def upgrade(url: str | None = None, *, schema: str | None = None) -> None:
    """Bring the database at `url` (default: the stores' SQLite file) to the newest revision.

    Idempotent. A database whose tables the stores created is adopted (see the module's
    docstring); SchemaMismatch if those tables differ from the models.
    """
    from alembic import command

    engine = create_database_engine(url)
    try:
        # One transaction for the check and the change (PostgreSQL has transactional DDL).
        with engine.begin() as connection:
            if schema:
                connection = connection.execution_options(schema_translate_map={None: schema})
            config = alembic_config(url, schema=schema, connection=connection)
            present = _present_tables(connection, schema)
            if _stamped_revision(connection, schema) is None and present:
                differences = schema_differences(connection, schema, present)
                if differences:
                    raise SchemaMismatch(differences)
                for metadata in model_metadata():
                    metadata.create_all(connection)  # only the missing tables
                command.stamp(config, "head")
                log.info("adopted tables %s and stamped %s", sorted(present), head())
            else:
                command.upgrade(config, "head")
    finally:
        engine.dispose()


def schema_differences(
    connection: Connection, schema: str | None, table_names: Iterable[str]
) -> list[str]:
    """How the named tables in the database differ from the models, one line each ([] if not)."""
    inspector = inspect(connection)
    dialect = connection.dialect
    wanted = set(table_names)
    differences: list[str] = []
    for table in model_tables():
        if table.name not in wanted:
            continue
        name = table.name
        found = {c["name"]: c for c in inspector.get_columns(name, schema=schema)}
        expected = {c.name: c for c in table.columns}
        differences += [f"{name}: no column {c}" for c in sorted(expected.keys() - found.keys())]
        differences += [
            f"{name}: unknown column {c}" for c in sorted(found.keys() - expected.keys())
        ]
        for column_name in sorted(expected.keys() & found.keys()):
            model, reflected = expected[column_name], found[column_name]
            # Compiled DDL types compare across spellings (String(255) and VARCHAR(255)).
            want = str(model.type.compile(dialect=dialect))
            have = str(reflected["type"].compile(dialect=dialect))
            if want != have:
                differences.append(f"{name}.{column_name}: type {have}, the model says {want}")
            if bool(reflected["nullable"]) != bool(model.nullable):
                null = "NULL" if model.nullable else "NOT NULL"
                differences.append(f"{name}.{column_name}: the model says {null}")
        primary = inspector.get_pk_constraint(name, schema=schema)["constrained_columns"]
        if list(primary) != [c.name for c in table.primary_key.columns]:
            differences.append(f"{name}: primary key {list(primary)}")
        indexes = {
            i["name"]: list(i["column_names"]) for i in inspector.get_indexes(name, schema=schema)
        }
        expected_indexes = {i.name: [c.name for c in i.columns] for i in table.indexes}
        if indexes != expected_indexes:
            differences.append(f"{name}: indexes {indexes}, the models say {expected_indexes}")
    return differences


def _present_tables(connection: Connection, schema: str | None) -> set[str]:
    existing = set(inspect(connection).get_table_names(schema=schema))
    return {table.name for table in model_tables()} & existing


def _stamped_revision(connection: Connection, schema: str | None) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table_schema": schema})
    return context.get_current_revision()


# ---- artbot db ---------------------------------------------------------------------------


def add_db_arguments(parser: argparse.ArgumentParser) -> None:
    """`artbot db upgrade|current [--database-url URL]`."""
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    for name, help_text in (
        ("upgrade", "create or migrate the tables to the newest revision (safe to repeat)"),
        ("current", "print the revision the database is at, and the newest one"),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument(
            "--database-url",
            default=os.environ.get(DATABASE_URL_ENV),
            metavar="URL",
            help=(
                f"the database (also ${DATABASE_URL_ENV}): sqlite:///PATH or "
                "postgresql+psycopg://USER@HOST/DB [an SQLite file in $XDG_DATA_HOME/artbot]"
            ),
        )


def run_db_command(args: argparse.Namespace) -> int:
    """Run `artbot db ACTION`; exit 2 for a bad URL, 1 when the database refuses."""
    url: str | None = args.database_url
    try:
        where = normalize_database_url(url or default_database_url()).render_as_string(
            hide_password=True
        )
    except SessionStoreError as error:
        print(f"artbot db: --database-url: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        newest = head()
        before = current(url)
        if args.db_action == "current":
            state = (
                "(head)" if before == newest else f"(newest is {newest}: run `artbot db upgrade`)"
            )
            print(f"{where}: {before or 'none'} {state}")
            return EXIT_OK
        upgrade(url)
        after = current(url)
    except SchemaMismatch as error:
        print(f"artbot db: {where}: {error}", file=sys.stderr)
        return EXIT_PROBLEMS
    except SQLAlchemyError as error:
        # The driver's own message: it names the host and the problem, never the password.
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        print(f"artbot db: {where}: {reason}", file=sys.stderr)
        return EXIT_PROBLEMS
    if before == after:
        print(f"{where}: already at {after} (head)")
    else:
        print(f"{where}: upgraded from {before or 'none'} to {after} (head)")
    return EXIT_OK
