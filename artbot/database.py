"""`artbot db upgrade` and `artbot db current`, on the bot's database (`bot.migrations`).

Their options are declared with the other subcommands' in `artbot.cli`.
"""

from __future__ import annotations

import argparse
import sys

from sqlalchemy.exc import SQLAlchemyError

from artbot.exit_status import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from bot.migrations import BOT_DATABASE
from storage import migrations
from storage.database import (
    DatabaseUrlError,
    database_problem,
    default_database_url,
    normalize_database_url,
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
        newest = migrations.head(BOT_DATABASE)
        before = migrations.current(BOT_DATABASE, url)
        if args.db_action == "current":
            state = (
                "(head)" if before == newest else f"(newest is {newest}: run `artbot db upgrade`)"
            )
            print(f"{where}: {before or 'none'} {state}")
            return EXIT_OK
        migrations.upgrade(BOT_DATABASE, url)
        after = migrations.current(BOT_DATABASE, url)
    except migrations.SchemaMismatch as error:
        print(f"artbot db: {where}: {error}", file=sys.stderr)
        return EXIT_PROBLEMS
    except SQLAlchemyError as error:
        # The driver's own message: it names the host and the problem, never the password.
        reason = database_problem(error)
        print(f"artbot db: {where}: {reason}", file=sys.stderr)
        return EXIT_PROBLEMS
    if before == after:
        print(f"{where}: already at {after} (head)")
    else:
        print(f"{where}: upgraded from {before or 'none'} to {after} (head)")
    return EXIT_OK
