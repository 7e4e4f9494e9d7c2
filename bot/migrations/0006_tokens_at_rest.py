"""Slack tokens encrypted at rest: the token columns of `slack_installations` and `slack_bots`
widened for a Fernet token, and the plaintext tokens an older artbot stored encrypted.

Revision ID: 0006
Revises: 0005

The key: the cipher the caller hands over (`artbot serve` resolves it first, generating the key
file with OAuth and no ARTBOT_TOKEN_KEYS: `bot.workspaces.installations.stored_token_cipher`), else
ARTBOT_TOKEN_KEYS or an existing key file (`artbot db upgrade`, `artbot chat`). With plaintext
tokens and no key the upgrade is refused, changing nothing: a migration never makes a key of
its own (run where the bot is not, its key would be lost with the machine). A database with no
token, such as `artbot chat`'s, needs no key.

Downgrade decrypts the tokens again (the same keys are needed) and narrows the columns back.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from bot.workspaces.token_keys import (
    TokenCipher,
    TokenKeyError,
    looks_encrypted,
    rewrite_tokens,
    stored_tokens,
    token_cipher_from_environment,
)
from storage.migrations import MigrationRefused

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WIDE, NARROW = 1000, 200
TOKENS = {
    "slack_installations": ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token"),
    "slack_bots": ("bot_token", "bot_refresh_token"),
}


def _schema() -> str | None:
    """The PostgreSQL schema the tables are in (None: the default); named, as in 0005."""
    schema = context.config.attributes.get("schema")
    return str(schema) if schema else None


def _tables() -> list[sa.Table]:
    """The token columns of both tables, as this revision knows them."""
    metadata = sa.MetaData()
    return [
        sa.Table(
            name,
            metadata,
            sa.Column("id", sa.Integer(), primary_key=True),
            *(sa.Column(column, sa.String()) for column in columns),
            schema=_schema(),
        )
        for name, columns in TOKENS.items()
    ]


def _cipher(why: str) -> TokenCipher:
    """The caller's cipher, else the environment's; MigrationRefused when there is none."""
    given = context.config.attributes.get("token_cipher")
    if isinstance(given, TokenCipher):
        return given
    try:
        found = token_cipher_from_environment()
    except TokenKeyError as error:
        raise MigrationRefused(f"revision 0006 ({why}): {error}") from None
    if found is None:
        raise MigrationRefused(
            f"revision 0006 ({why}) needs the token keys: set ARTBOT_TOKEN_KEYS (docs/slack.md: "
            "Tokens at rest), or start `artbot serve` with OAuth, which makes the key file"
        )
    return found


def _resize(length: int) -> None:
    for name, columns in TOKENS.items():
        # SQLite cannot change a column's type: batch mode copies the table (it is small).
        with op.batch_alter_table(name, schema=_schema()) as batch:
            for column in columns:
                batch.alter_column(
                    column,
                    existing_type=sa.String(NARROW if length == WIDE else WIDE),
                    type_=sa.String(length),
                    existing_nullable=True,
                )


# The key is found, and every token it must read is read, before the columns change: on SQLite
# the DDL is not undone when the upgrade's transaction rolls back.


def upgrade() -> None:
    connection = op.get_bind()
    tables = _tables()
    plaintext = any(not looks_encrypted(t.value) for t in stored_tokens(connection, tables))
    cipher = _cipher("plaintext Slack tokens are stored") if plaintext else None
    _resize(WIDE)
    if cipher is not None:
        rewrite_tokens(connection, tables, cipher, only_plaintext=True)


def downgrade() -> None:
    connection = op.get_bind()
    tables = _tables()
    encrypted = [t for t in stored_tokens(connection, tables) if looks_encrypted(t.value)]
    cipher = _cipher("encrypted Slack tokens are stored") if encrypted else None
    try:
        plain = [cipher.decrypt(t.value) for t in encrypted] if cipher else []
    except TokenKeyError as error:
        raise MigrationRefused(f"revision 0006: {error}") from None
    by_name = {table.name: table for table in tables}
    for token, value in zip(encrypted, plain, strict=True):
        table = by_name[token.table]
        connection.execute(
            sa.update(table).where(table.c.id == token.row_id).values({token.column: value})
        )
    _resize(NARROW)
