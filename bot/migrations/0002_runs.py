"""Runs: approved scripts on their way through the GPU runner, with each job's event cursor.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEY = 255


def upgrade() -> None:
    op.create_table(
        "artbot_runs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("approval_id", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(KEY), nullable=False),
        sa.Column("channel", sa.String(KEY), nullable=False),
        sa.Column("thread", sa.String(KEY), nullable=False),
        sa.Column("owner", sa.String(KEY), nullable=False),
        sa.Column("script_name", sa.String(200), nullable=False),
        sa.Column("script_sha256", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("args_json", sa.Text(), nullable=False),
        sa.Column("resume_from_job", sa.String(64), nullable=True),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("cursor", sa.Integer(), nullable=False),
        sa.Column("card_ts", sa.String(64), nullable=True),
        sa.Column("card_updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("points_json", sa.Text(), nullable=False),
        sa.Column("required_env_json", sa.Text(), nullable=False),
        sa.Column("submit_attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("unreachable_notified", sa.Integer(), nullable=False),
        sa.Column("warnings_posted", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_artbot_runs_state", "artbot_runs", ["state"])
    op.create_index("ix_artbot_runs_thread", "artbot_runs", ["team", "channel", "thread"])
    op.create_index("ix_artbot_runs_owner", "artbot_runs", ["owner", "team"])


def downgrade() -> None:
    op.drop_index("ix_artbot_runs_owner", table_name="artbot_runs")
    op.drop_index("ix_artbot_runs_thread", table_name="artbot_runs")
    op.drop_index("ix_artbot_runs_state", table_name="artbot_runs")
    op.drop_table("artbot_runs")
