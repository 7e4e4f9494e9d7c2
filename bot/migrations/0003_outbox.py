"""The outbox: the thread messages a saved turn must post or update, until they are delivered.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = 255


def upgrade() -> None:
    op.create_table(
        "artbot_slack_outbox",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("team", sa.String(KEY), nullable=False),
        sa.Column("channel", sa.String(KEY), nullable=False),
        sa.Column("thread", sa.String(KEY), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("step_id", sa.String(64), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("message_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("in_doubt", sa.Integer(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ts", sa.String(64), nullable=True),
        sa.Column("error", sa.String(200), nullable=True),
        sqlite_autoincrement=True,  # a post's metadata names its id: never reused
    )
    op.create_index(
        "ix_artbot_slack_outbox_thread", "artbot_slack_outbox", ["team", "channel", "thread", "id"]
    )
    op.create_index(
        "ix_artbot_slack_outbox_pending", "artbot_slack_outbox", ["delivered_at", "next_attempt_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_artbot_slack_outbox_pending", table_name="artbot_slack_outbox")
    op.drop_index("ix_artbot_slack_outbox_thread", table_name="artbot_slack_outbox")
    op.drop_table("artbot_slack_outbox")
