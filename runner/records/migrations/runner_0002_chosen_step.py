"""A job keeps which checkpoint its owner chose as the model (`PUT /jobs/{id}/model`): serving,
export and download use it instead of the best one.

Revision ID: runner_0002
Revises: runner_0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "runner_0002"
down_revision: str | Sequence[str] | None = "runner_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE, COLUMN = "runner_jobs", "chosen_step"


def _schema() -> str | None:
    """The PostgreSQL schema the tables are in (None: the default). ALTER TABLE is not
    translated like CREATE TABLE (schema_translate_map), so it is named."""
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def upgrade() -> None:
    op.add_column(TABLE, sa.Column(COLUMN, sa.Integer(), nullable=True), schema=_schema())


def downgrade() -> None:
    # SQLite drops a column only by copying the table (batch mode).
    with op.batch_alter_table(TABLE, schema=_schema()) as batch:
        batch.drop_column(COLUMN)
