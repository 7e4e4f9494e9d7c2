"""Runs get a public id, what Slack sees of them instead of the row's sequential id: random, unique
(`bot.runs.store.new_public_id`). Existing runs get one each.

Revision ID: 0007
Revises: 0006

Buttons posted before this revision carry the old ids and no longer name a run (a status card
gets the new id at its next update); `/train-rl runs` lists the new ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from bot.runs.store import PUBLIC_ID_LENGTH, new_public_id

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE, COLUMN, INDEX = "artbot_runs", "public_id", "ix_artbot_runs_public_id"


def _schema() -> str | None:
    """The PostgreSQL schema the tables are in (None: the default); named, as in 0005."""
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def upgrade() -> None:
    schema = _schema()
    column = sa.Column(COLUMN, sa.String(PUBLIC_ID_LENGTH), nullable=True)
    op.add_column(TABLE, column, schema=schema)
    runs = sa.table(TABLE, sa.column("id", sa.Integer()), sa.column(COLUMN), schema=schema)
    connection = op.get_bind()
    for (run_id,) in connection.execute(sa.select(runs.c.id)).all():
        connection.execute(
            sa.update(runs).where(runs.c.id == run_id).values({COLUMN: new_public_id()})
        )
    # SQLite changes a column's nullability only by copying the table (batch mode).
    with op.batch_alter_table(TABLE, schema=schema) as batch:
        batch.alter_column(
            COLUMN,
            existing_type=sa.String(PUBLIC_ID_LENGTH),
            existing_nullable=True,
            nullable=False,
        )
    op.create_index(INDEX, TABLE, [COLUMN], unique=True, schema=schema)


def downgrade() -> None:
    schema = _schema()
    op.drop_index(INDEX, table_name=TABLE, schema=schema)
    with op.batch_alter_table(TABLE, schema=schema) as batch:
        batch.drop_column(COLUMN)
