"""The initial schema: wizard sessions, and the Slack bot's deliveries, questions, approvals.

Revision ID: 0001
Revises: (none)

Databases from before migrations ran at start-up: their stores made the tables with
`create_all`, so such a database has the models' tables but no `alembic_version` row.
`storage.migrations.upgrade` does not run this migration on it (CREATE TABLE would fail on the
existing tables): it compares the tables that exist with the models and, when they match, creates
the missing ones from the models and stamps the head revision. This migration therefore only
ever runs on a database without artbot's tables, and creates them plainly.

The tables are spelled out here rather than taken from the models: a migration records the
schema as of its revision, while the models move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = 255  # storage.sessions.KEY_PART_MAX: team, channel, thread and user ids


def upgrade() -> None:
    op.create_table(
        "artbot_sessions",
        sa.Column("team", sa.String(KEY), primary_key=True),
        sa.Column("channel", sa.String(KEY), primary_key=True),
        sa.Column("thread", sa.String(KEY), primary_key=True),
        sa.Column("owner", sa.String(KEY), nullable=False),
        sa.Column("flow", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("step", sa.String(64), nullable=True),
        sa.Column("session_json", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expired_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_artbot_sessions_owner", "artbot_sessions", ["owner", "updated_at"])
    op.create_index("ix_artbot_sessions_idle", "artbot_sessions", ["status", "updated_at"])

    op.create_table(
        "artbot_slack_deliveries",
        sa.Column("id", sa.String(300), primary_key=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_artbot_slack_deliveries_seen_at", "artbot_slack_deliveries", ["seen_at"])

    op.create_table(
        "artbot_slack_questions",
        sa.Column("team", sa.String(KEY), primary_key=True),
        sa.Column("channel", sa.String(KEY), primary_key=True),
        sa.Column("thread", sa.String(KEY), primary_key=True),
        sa.Column("ts", sa.String(64), primary_key=True),
        sa.Column("step_id", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("answered", sa.Integer(), nullable=False),
    )
    op.create_index(
        "ix_artbot_slack_questions_step",
        "artbot_slack_questions",
        ["team", "channel", "thread", "step_id"],
    )

    op.create_table(
        "artbot_approvals",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("team", sa.String(KEY), nullable=False),
        sa.Column("channel", sa.String(KEY), nullable=False),
        sa.Column("thread", sa.String(KEY), nullable=False),
        sa.Column("approved_by", sa.String(KEY), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("script_sha256", sa.String(64), nullable=False),
        sa.Column("script_name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("artbot_approvals")
    op.drop_index("ix_artbot_slack_questions_step", table_name="artbot_slack_questions")
    op.drop_table("artbot_slack_questions")
    op.drop_index("ix_artbot_slack_deliveries_seen_at", table_name="artbot_slack_deliveries")
    op.drop_table("artbot_slack_deliveries")
    op.drop_index("ix_artbot_sessions_idle", table_name="artbot_sessions")
    op.drop_index("ix_artbot_sessions_owner", table_name="artbot_sessions")
    op.drop_table("artbot_sessions")
