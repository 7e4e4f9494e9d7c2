"""The feedback buttons under the assistant's streamed answers: one verdict per person and
answer (`bot.slack.answer_feedback`).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = 255
TABLE = "artbot_answer_feedback"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("team", sa.String(KEY), primary_key=True),
        sa.Column("channel", sa.String(KEY), primary_key=True),
        sa.Column("message_ts", sa.String(64), primary_key=True),
        sa.Column("user", sa.String(KEY), primary_key=True),
        sa.Column("helpful", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table(TABLE)
