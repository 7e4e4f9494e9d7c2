"""Preflights keep what they measured, by thread and script (`bot.runs.preflight_records`): the
estimate uses it, and the run approved from that script shows it again when training ends.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = 255
TABLE, INDEX = "artbot_preflights", "ix_artbot_preflights_script"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("team", sa.String(KEY), nullable=False),
        sa.Column("channel", sa.String(KEY), nullable=False),
        sa.Column("thread", sa.String(KEY), nullable=False),
        sa.Column("script_sha256", sa.String(64), nullable=False),
        sa.Column("numbers_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index(INDEX, TABLE, ["team", "channel", "thread", "script_sha256"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.drop_table(TABLE)
