"""The database schema under Alembic: `upgrade`, `current` and `head`, given the tables to manage.

Alembic is configured from code (`alembic_config`): the migrations ship inside the package
(`storage/migrations/versions`), so an installed artbot needs no alembic.ini and no working
directory. The caller names the tables (`artbot.database.ARTBOT_TABLES`): storage knows no
package above it.

The stores keep creating missing tables with `create_all` on first use, so a fresh SQLite file
works with no setup. `upgrade` makes the two meet:
- a database with none of artbot's tables runs the migrations from the start;
- a database that is already stamped runs the migrations it lacks;
- an unstamped database with some of artbot's tables (the stores made them) is adopted: the
  tables that exist are compared with the models, the missing ones are created as the stores
  would create them, and the head revision is stamped. Tables that differ from the models are
  not guessed at: `SchemaMismatch` lists the differences.
After `upgrade` every table exists, so the stores' `create_all` has nothing left to do.

Alembic is imported where it is used: only commands that migrate need it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, MetaData, Table, inspect

from storage.database import (
    create_database_engine,
    default_database_url,
    is_missing_sqlite_file,
    normalize_database_url,
)

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent


class SchemaMismatch(Exception):
    """Existing, unstamped tables that do not match the models: `upgrade` will not guess."""

    def __init__(self, differences: Sequence[str]) -> None:
        super().__init__(
            "the database has artbot tables that no migration recorded and that differ from "
            "this artbot's models:\n" + "\n".join(f"  {line}" for line in differences)
        )
        self.differences = tuple(differences)


def model_tables(tables: Sequence[MetaData]) -> list[Table]:
    """The models' tables, in creation order."""
    return [table for metadata in tables for table in metadata.sorted_tables]


def alembic_config(
    url: str | None = None,
    *,
    tables: Sequence[MetaData] = (),
    schema: str | None = None,
    connection: Connection | None = None,
) -> Config:
    """Alembic's configuration for the migrations in this folder, with no alembic.ini.

    `tables` are the models the migrations manage (autogenerate compares them with the
    database). With `connection`, migrations run on it (and in its transaction); else env.py
    opens `url`. `schema` (PostgreSQL) puts the tables and the version table in that schema.
    """
    from alembic.config import Config

    config = Config()
    # Config values go through configparser interpolation: a literal % must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["tables"] = tuple(tables)
    config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    return config


def head() -> str:
    """The newest revision in storage/migrations/versions."""
    from alembic.script import ScriptDirectory

    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None, "storage/migrations/versions has no revisions"
    return revision


def current(url: str | None = None, *, schema: str | None = None) -> str | None:
    """The revision the database is stamped with; None if unstamped (or no SQLite file yet)."""
    if is_missing_sqlite_file(normalize_database_url(url or default_database_url())):
        return None  # asking must not create an empty database file
    engine = create_database_engine(url)
    try:
        with engine.connect() as connection:
            return _stamped_revision(connection, schema)
    finally:
        engine.dispose()


def upgrade(
    url: str | None = None, *, tables: Sequence[MetaData], schema: str | None = None
) -> None:
    """Bring the database at `url` (default: the stores' SQLite file) to the newest revision.

    `tables` are the models the migrations manage. Idempotent. A database whose tables the
    stores created is adopted (see the module's docstring); SchemaMismatch if those tables
    differ from the models.
    """
    from alembic import command

    engine = create_database_engine(url)
    try:
        # One transaction for the check and the change (PostgreSQL has transactional DDL).
        with engine.begin() as connection:
            if schema:
                connection = connection.execution_options(schema_translate_map={None: schema})
            config = alembic_config(url, tables=tables, schema=schema, connection=connection)
            present = _present_tables(connection, tables, schema)
            if _stamped_revision(connection, schema) is None and present:
                differences = schema_differences(connection, tables, schema, present)
                if differences:
                    raise SchemaMismatch(differences)
                for metadata in tables:
                    metadata.create_all(connection)  # only the missing tables
                command.stamp(config, "head")
                log.info("adopted tables %s and stamped %s", sorted(present), head())
            else:
                command.upgrade(config, "head")
    finally:
        engine.dispose()


def schema_differences(
    connection: Connection,
    tables: Sequence[MetaData],
    schema: str | None,
    table_names: Iterable[str],
) -> list[str]:
    """How the named tables in the database differ from the models, one line each ([] if not)."""
    inspector = inspect(connection)
    dialect = connection.dialect
    wanted = set(table_names)
    differences: list[str] = []
    for table in model_tables(tables):
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


def _present_tables(
    connection: Connection, tables: Sequence[MetaData], schema: str | None
) -> set[str]:
    existing = set(inspect(connection).get_table_names(schema=schema))
    return {table.name for table in model_tables(tables)} & existing


def _stamped_revision(connection: Connection, schema: str | None) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table_schema": schema})
    return context.get_current_revision()
