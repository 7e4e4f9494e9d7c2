"""The runner's jobs and their append-only events.

Revision ID: runner_0001
Revises: (none)

Runners from before migrations ran at start-up made these tables with `create_all`: `upgrade`
adopts such a database (the tables match) and stamps it instead of running this revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "runner_0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runner_jobs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("idempotency_key", sa.String(200), nullable=False, unique=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("script_name", sa.String(100), nullable=False),
        sa.Column("script_sha256", sa.String(64), nullable=False),
        sa.Column("script", sa.Text(), nullable=False),
        sa.Column("backend", sa.String(16), nullable=False),
        sa.Column("metadata_json", sa.Text(), nullable=False),
        sa.Column("required_env_json", sa.Text(), nullable=False),
        sa.Column("args_json", sa.Text(), nullable=False),
        sa.Column("resume_from_job", sa.String(64), nullable=True),
        sa.Column("run_dir", sa.Text(), nullable=False),
        sa.Column("gpus_json", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("process_start", sa.String(80), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("failure_json", sa.Text(), nullable=True),
        sa.Column("last_event_seq", sa.Integer(), nullable=False),
    )
    op.create_index("ix_runner_jobs_state", "runner_jobs", ["state", "created_at"])
    op.create_table(
        "runner_job_events",
        sa.Column("job_id", sa.String(40), sa.ForeignKey("runner_jobs.id"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("data_json", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("runner_job_events")
    op.drop_index("ix_runner_jobs_state", table_name="runner_jobs")
    op.drop_table("runner_jobs")
