"""The bot's database under Alembic: the wizard's sessions, the Slack records, the runs, the
outbox and the installations (slack_sdk's OAuth tables among them).

The revisions are the files beside this one. `artbot serve`, `artbot chat` and `artbot db
upgrade` bring the database to the newest before anything else (`storage.migrations.upgrade`).
"""

from __future__ import annotations

from pathlib import Path

from bot.delivery.outbox_rows import metadata as outbox_metadata
from bot.runs.store import metadata as run_metadata
from bot.slack.records import metadata as slack_records_metadata
from bot.workspaces.installations import metadata as installation_metadata
from storage.migrations import MigrationChain
from storage.sessions import metadata as session_metadata

BOT_DATABASE = MigrationChain(
    name="artbot",
    versions_dir=Path(__file__).resolve().parent,
    version_table="alembic_version",
    tables=(
        session_metadata,
        slack_records_metadata,
        run_metadata,
        outbox_metadata,
        installation_metadata,
    ),
)
"""The chain of the bot's database: every table in it, from revision 0001 on."""
