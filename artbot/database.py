"""`artbot db upgrade`, `artbot db current` and `artbot db rotate-token-key`, on the bot's
database (`bot.migrations`).

Their options are declared with the other subcommands' in `artbot.cli`. The token keys come
from ARTBOT_TOKEN_KEYS or an existing key file (`bot.workspaces.token_keys`); these commands never
make one.
"""

from __future__ import annotations

import argparse
import sys

from sqlalchemy.exc import SQLAlchemyError

from artbot.exit_status import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from bot.migrations import BOT_DATABASE
from bot.workspaces.installations import rotate_token_key
from bot.workspaces.token_keys import (
    TokenCipher,
    TokenKeyError,
    TokenUnreadable,
    token_cipher_from_environment,
)
from storage import migrations
from storage.database import (
    DatabaseUrlError,
    create_database_engine,
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
        cipher = token_cipher_from_environment() if args.db_action != "current" else None
    except TokenKeyError as error:
        print(f"artbot db: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.db_action == "rotate-token-key" and cipher is None:
        print(
            "artbot db rotate-token-key: no keys: set ARTBOT_TOKEN_KEYS (the new key first, then "
            "the old ones), or run it where `artbot serve` keeps its key file",
            file=sys.stderr,
        )
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
        migrations.upgrade(BOT_DATABASE, url, attributes={"token_cipher": cipher})
        after = migrations.current(BOT_DATABASE, url)
        if args.db_action == "rotate-token-key":
            assert cipher is not None
            return _rotate(url, where, cipher)
    except migrations.MigrationRefused as error:  # SchemaMismatch, or a token key missing
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


def _rotate(url: str | None, where: str, cipher: TokenCipher) -> int:
    engine = create_database_engine(url)
    try:
        rewritten = rotate_token_key(engine, cipher)
    except TokenUnreadable as error:
        print(f"artbot db rotate-token-key: {where}: {error}; nothing changed", file=sys.stderr)
        return EXIT_PROBLEMS
    finally:
        engine.dispose()
    print(
        f"{where}: {rewritten} Slack token(s) encrypted again with the first of "
        f"{cipher.key_count} key(s) from {cipher.source}"
    )
    return EXIT_OK
