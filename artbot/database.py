"""artbot's database: the tables it keeps, and `artbot db upgrade` and `artbot db current`."""

from __future__ import annotations

import argparse
import os
import sys

from sqlalchemy import MetaData
from sqlalchemy.exc import SQLAlchemyError

from bot.runs.store import metadata as run_metadata
from bot.slack_records import metadata as slack_records_metadata
from storage import migrations
from storage.database import DatabaseUrlError, default_database_url, normalize_database_url
from storage.sessions import metadata as session_metadata

DATABASE_URL_ENV = "ARTBOT_DATABASE_URL"

ARTBOT_TABLES: tuple[MetaData, ...] = (session_metadata, slack_records_metadata, run_metadata)
"""Every table in artbot's database, which its migrations manage: sessions, the bot's Slack
records (deliveries, question messages, approvals) and its runs."""

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2


def add_db_arguments(parser: argparse.ArgumentParser) -> None:
    """`artbot db upgrade|current [--database-url URL]`."""
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    for name, help_text in (
        ("upgrade", "create or migrate the tables to the newest revision (safe to repeat)"),
        ("current", "print the revision the database is at, and the newest one"),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument(
            "--database-url",
            default=os.environ.get(DATABASE_URL_ENV),
            metavar="URL",
            help=(
                f"the database (also ${DATABASE_URL_ENV}): sqlite:///PATH or "
                "postgresql+psycopg://USER@HOST/DB [an SQLite file in $XDG_DATA_HOME/artbot]"
            ),
        )


def run_db_command(args: argparse.Namespace) -> int:
    """Run `artbot db ACTION`; exit 2 for a bad URL, 1 when the database refuses."""
    url: str | None = args.database_url
    try:
        where = normalize_database_url(url or default_database_url()).render_as_string(
            hide_password=True
        )
    except DatabaseUrlError as error:
        print(f"artbot db: --database-url: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        newest = migrations.head()
        before = migrations.current(url)
        if args.db_action == "current":
            state = (
                "(head)" if before == newest else f"(newest is {newest}: run `artbot db upgrade`)"
            )
            print(f"{where}: {before or 'none'} {state}")
            return EXIT_OK
        migrations.upgrade(url, tables=ARTBOT_TABLES)
        after = migrations.current(url)
    except migrations.SchemaMismatch as error:
        print(f"artbot db: {where}: {error}", file=sys.stderr)
        return EXIT_PROBLEMS
    except SQLAlchemyError as error:
        # The driver's own message: it names the host and the problem, never the password.
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        print(f"artbot db: {where}: {reason}", file=sys.stderr)
        return EXIT_PROBLEMS
    if before == after:
        print(f"{where}: already at {after} (head)")
    else:
        print(f"{where}: upgraded from {before or 'none'} to {after} (head)")
    return EXIT_OK
