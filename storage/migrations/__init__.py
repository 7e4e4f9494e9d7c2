"""Database schemas under Alembic, migrated at start-up: `upgrade`, `current` and `head` of a
`MigrationChain` (a database's revisions, its version table and the tables they manage).

Every program that uses a database calls `upgrade` once before it serves anything (the bot, the
terminal chat, the runner); stores never create tables. Two programs starting together are
serialized (`lock.py`): the second waits, then finds the schema at head and does nothing.

Alembic is configured from code (`alembic_config`): `env.py` and the revision template live in
this folder, each chain's revisions beside its owner (`bot/migrations`, `runner/migrations`),
so an installed artbot needs no alembic.ini and no working directory. Storage knows no package
above it: the owners hand their chains in.

`upgrade` also takes over databases from before migrations ran at start-up, whose tables the
stores made with `create_all`:
- a database with none of the chain's tables runs the migrations from the start;
- a database that is already stamped runs the migrations it lacks;
- an unstamped database with some of the chain's tables is adopted: the tables that exist are
  compared with the models, the missing ones are created from the models, and the head revision
  is stamped. Tables that differ from the models are not guessed at: `SchemaMismatch` lists the
  differences.

Alembic is imported where it is used: only commands that migrate need it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, MetaData, inspect

from storage.database import (
    create_database_engine,
    default_database_url,
    normalize_database_url,
    sqlite_file,
)
from storage.migrations.differences import schema_differences
from storage.migrations.lock import locked_transaction

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent


WITHOUT_MODELS = "without_models"
"""An attribute env.py reads: set, it configures Alembic without the chain's models (a plain
upgrade runs the revisions, which spell out their tables; autogenerate needs the models)."""


@dataclass(frozen=True)
class MigrationChain:
    """One database's schema history: where its revisions are, the table that records which
    one the database is at, and the tables they manage: by name, and as models loaded only when
    needed (adopting tables no migration recorded, autogenerate). An upgrade needs the names
    alone, so a program that runs the migrations need not import every model's module (the
    terminal chat upgrades the bot's database without loading Slack's SDK)."""

    name: str
    versions_dir: Path
    version_table: str
    table_names: frozenset[str]
    load_tables: Callable[[], tuple[MetaData, ...]]

    @property
    def tables(self) -> tuple[MetaData, ...]:
        """The models of the chain's tables (their modules imported now)."""
        return self.load_tables()


class MigrationRefused(Exception):
    """A revision that cannot run as configured (a key it needs is missing): its message says
    why and what to set. Nothing was changed: the upgrade's transaction rolled back."""


class SchemaMismatch(MigrationRefused):
    """Existing, unstamped tables that do not match the models: `upgrade` will not guess."""

    def __init__(self, differences: Sequence[str]) -> None:
        super().__init__(
            "the database has artbot tables that no migration recorded and that differ from "
            "this artbot's models:\n" + "\n".join(f"  {line}" for line in differences)
        )
        self.differences = tuple(differences)


def alembic_config(
    chain: MigrationChain,
    url: str | None = None,
    *,
    schema: str | None = None,
    connection: Connection | None = None,
    attributes: Mapping[str, object] | None = None,
) -> Config:
    """Alembic's configuration for `chain`, with no alembic.ini.

    With `connection`, migrations run on it (and in its transaction); else env.py opens `url`.
    `schema` (PostgreSQL) puts the tables and the version table in that schema. `attributes`
    are handed to the revisions (`context.config.attributes`): what a revision needs from its
    owner (the bot's token cipher).
    """
    from alembic.config import Config

    config = Config()
    # Config values go through configparser interpolation: a literal % must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.set_main_option("version_locations", str(chain.versions_dir).replace("%", "%%"))
    config.set_main_option("path_separator", "os")
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["chain"] = chain
    config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    config.attributes.update(attributes or {})
    return config


def head(chain: MigrationChain) -> str:
    """The newest revision of `chain`."""
    from alembic.script import ScriptDirectory

    revision = ScriptDirectory.from_config(alembic_config(chain)).get_current_head()
    assert revision is not None, f"{chain.versions_dir} has no revisions"
    return revision


def current(
    chain: MigrationChain, url: str | None = None, *, schema: str | None = None
) -> str | None:
    """The revision of `chain` the database is at; None if unstamped (or no SQLite file yet)."""
    file = sqlite_file(normalize_database_url(url or default_database_url()))
    if file is not None and not file.exists():
        return None  # asking must not create an empty database file
    engine = create_database_engine(url)
    try:
        with engine.connect() as connection:
            return _stamped_revision(connection, chain, schema)
    finally:
        engine.dispose()


def upgrade(
    chain: MigrationChain,
    url: str | None = None,
    *,
    schema: str | None = None,
    attributes: Mapping[str, object] | None = None,
) -> None:
    """Bring the database at `url` (default: artbot's SQLite file) to `chain`'s newest revision.

    Idempotent, and safe when several processes call it at once. A database whose tables the
    stores created is adopted (see the module's docstring); SchemaMismatch if those tables
    differ from the models; MigrationRefused when a revision cannot run as configured
    (`attributes` are handed to the revisions: `alembic_config`).
    """
    from alembic import command

    engine = create_database_engine(url)
    # Names the lock file beside an SQLite database too: no separator without a schema.
    lock_name = f"{chain.name}.{schema}" if schema else chain.name
    try:
        # One transaction for the check and the change (PostgreSQL has transactional DDL).
        with locked_transaction(engine, lock_name) as connection:
            if schema:
                connection = connection.execution_options(schema_translate_map={None: schema})
            config = alembic_config(
                chain, url, schema=schema, connection=connection, attributes=attributes
            )
            present = _present_tables(connection, chain, schema)
            if _stamped_revision(connection, chain, schema) is None and present:
                differences = schema_differences(connection, chain.tables, schema, present)
                if differences:
                    raise SchemaMismatch(differences)
                for metadata in chain.tables:
                    metadata.create_all(connection)  # only the missing tables
                command.stamp(config, "head")
                log.info("adopted tables %s and stamped %s", sorted(present), head(chain))
            else:
                config.attributes[WITHOUT_MODELS] = True  # the revisions say what to do
                command.upgrade(config, "head")
    finally:
        engine.dispose()


def _present_tables(connection: Connection, chain: MigrationChain, schema: str | None) -> set[str]:
    existing = set(inspect(connection).get_table_names(schema=schema))
    return set(chain.table_names) & existing


def _stamped_revision(
    connection: Connection, chain: MigrationChain, schema: str | None
) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(
        connection,
        opts={"version_table": chain.version_table, "version_table_schema": schema},
    )
    return context.get_current_revision()
