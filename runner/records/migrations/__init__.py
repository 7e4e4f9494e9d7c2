"""The runner's database under Alembic: jobs and their events.

The revisions are the files beside this one; `artbot runner serve` brings the database to the
newest before it serves (`storage.migrations.upgrade`). The chain is the runner's own, with its
own version table: the runner is a program of its own on its own host, usually with a database
of its own, and where it shares the bot's database neither chain touches the other's tables.
"""

from __future__ import annotations

from pathlib import Path

from runner.records.rows import metadata as runner_metadata
from storage.migrations import MigrationChain

RUNNER_DATABASE = MigrationChain(
    name="runner",
    versions_dir=Path(__file__).resolve().parent,
    version_table="runner_alembic_version",
    table_names=frozenset(runner_metadata.tables),
    load_tables=lambda: (runner_metadata,),
)
"""The chain of the runner's database: every table in it, from revision runner_0001 on."""
