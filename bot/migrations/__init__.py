"""The bot's database under Alembic: the wizard's sessions, the Slack records, the runs, the
outbox and the installations (slack_sdk's OAuth tables among them).

The revisions are the files beside this one. `artbot serve`, `artbot chat` and `artbot db
upgrade` bring the database to the newest before anything else (`storage.migrations.upgrade`).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import MetaData

from storage.migrations import MigrationChain


def bot_tables() -> tuple[MetaData, ...]:
    """The models of every table in the bot's database (imported now: the Slack records and the
    installations bring in slack_sdk, which an upgrade alone does not need)."""
    from bot.delivery.outbox_rows import metadata as outbox_metadata
    from bot.runs.preflight_records import metadata as preflight_metadata
    from bot.runs.store import metadata as run_metadata
    from bot.slack.answer_feedback import metadata as feedback_metadata
    from bot.slack.records import metadata as slack_records_metadata
    from bot.workspaces.installations import metadata as installation_metadata
    from storage.sessions import metadata as session_metadata

    return (
        session_metadata,
        slack_records_metadata,
        run_metadata,
        preflight_metadata,
        feedback_metadata,
        outbox_metadata,
        installation_metadata,
    )


BOT_DATABASE = MigrationChain(
    name="artbot",
    versions_dir=Path(__file__).resolve().parent,
    version_table="alembic_version",
    table_names=frozenset(
        {
            "artbot_sessions",  # storage.sessions
            "artbot_slack_questions",  # bot.slack.records
            "artbot_slack_deliveries",
            "artbot_runs",  # bot.runs.store
            "artbot_approvals",
            "artbot_preflights",  # bot.runs.preflight_records
            "artbot_answer_feedback",  # bot.slack.answer_feedback
            "artbot_slack_outbox",  # bot.delivery.outbox_rows
            "artbot_workspaces",  # bot.workspaces.store
            "slack_installations",  # bot.workspaces.installations (slack_sdk's stores)
            "slack_bots",
            "slack_oauth_states",
        }
    ),
    load_tables=bot_tables,
)
"""The chain of the bot's database: every table in it, from revision 0001 on."""
