"""Runs keep what their `succeeded` event said (the served model's name and URL, the step), for
`try <prompt>` in the thread.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _schema() -> str | None:
    """The PostgreSQL schema the tables are in (None: the default). ALTER TABLE is not
    translated like CREATE TABLE (schema_translate_map), so it is named."""
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def upgrade() -> None:
    column = sa.Column("result_json", sa.Text(), nullable=True)
    op.add_column("artbot_runs", column, schema=_schema())


def downgrade() -> None:
    op.drop_column("artbot_runs", "result_json", schema=_schema())
