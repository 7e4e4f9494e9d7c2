"""The installations: which token the bot has in each workspace.

Two modes (bot.settings): one workspace, with SLACK_BOT_TOKEN from the environment; or any
workspace that installs the app through Bolt's OAuth flow (SLACK_CLIENT_ID and
SLACK_CLIENT_SECRET), each with its own bot token kept by slack_sdk's SQLAlchemy installation
store in the bot's database. The tables of slack_sdk's stores are made by our migrations
(bot/migrations/0004_installations.py), never by the stores' `create_tables()`.

What posts outside a request finds a team's token through `SlackClients`
(bot.workspaces.clients); `artbot_workspaces` remembers each team served (bot.workspaces.store).

Every token is encrypted at rest (bot/workspaces/token_keys.py): the store's token columns
encrypt as they write and decrypt as they read. An uninstall or a revoked bot token deletes every
row of the team in both tables (`delete_team`). An install link's state row is deleted once used or
expired, and at most MAX_LIVE_STATES of them are kept (the oldest go first).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import Engine, String, Table, and_, delete, inspect, select
from sqlalchemy.types import TypeEngine

from bot.workspaces.store import Workspaces
from bot.workspaces.store import metadata as workspaces_metadata
from bot.workspaces.token_keys import (
    TOKEN_COLUMN_LENGTH,
    TOKEN_COLUMNS,
    EncryptedToken,
    TokenCipher,
    TokenKeyError,
    key_file,
    looks_encrypted,
    rewrite_tokens,
    stored_tokens,
    token_cipher,
)

log = logging.getLogger(__name__)

BOT_SCOPES = (
    "commands",
    "chat:write",
    "assistant:write",
    "files:write",
    "files:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "users:read",
)
"""The bot token's scopes, asked for at install (the manifests list the same: test_manifests)."""
STATE_EXPIRY_S = 600
"""How long an install link's state stays valid."""
MAX_LIVE_STATES = 1000
"""Install links' states kept at most: anyone may GET /slack/install, and each GET stores one.
Beyond this the oldest go first: a flood of GETs costs the oldest open installs their state (the
person starts again), never the table's growth. 1000 is far beyond real installs in 10 minutes."""
INSTALLATIONS_TABLE = SQLAlchemyInstallationStore.default_installations_table_name
BOTS_TABLE = SQLAlchemyInstallationStore.default_bots_table_name
STATES_TABLE = SQLAlchemyOAuthStateStore.default_table_name


def _token_columns(table: Table, kind: TypeEngine[str]) -> Table:
    """`table` with its token columns of `kind`."""
    for name in TOKEN_COLUMNS:
        if name in table.c:
            table.c[name].type = kind
    return table


metadata = workspaces_metadata
"""`artbot_workspaces` (bot.workspaces.store) and slack_sdk's three tables, as slack_sdk's stores
define them, but for the token columns: wide enough for an encrypted token (migration 0006)."""
TOKEN_TABLES = (
    _token_columns(
        SQLAlchemyInstallationStore.build_installations_table(metadata, INSTALLATIONS_TABLE),
        String(TOKEN_COLUMN_LENGTH),
    ),
    _token_columns(
        SQLAlchemyInstallationStore.build_bots_table(metadata, BOTS_TABLE),
        String(TOKEN_COLUMN_LENGTH),
    ),
)
"""The tables that hold tokens, as stored (read them with `token_keys.stored_tokens`)."""
STATES = SQLAlchemyOAuthStateStore.build_oauth_states_table(metadata, STATES_TABLE)


class InstallationStore(SQLAlchemyInstallationStore):
    """slack_sdk's SQLAlchemy store on the bot's database (its tables made by our migrations),
    every token encrypted by `cipher` as it is written and decrypted as it is read; each saved
    installation also marks its team served in `workspaces`."""

    def __init__(
        self, client_id: str, engine: Engine, workspaces: Workspaces, cipher: TokenCipher
    ) -> None:
        super().__init__(client_id, engine)
        # The store's own copies of the tables: every statement slack_sdk makes goes through them.
        _token_columns(self.installations, EncryptedToken(cipher))
        _token_columns(self.bots, EncryptedToken(cipher))
        self.workspaces = workspaces
        self.on_saved: list[Callable[[str], None]] = []

    def create_tables(self) -> None:  # pragma: no cover: a guard
        raise RuntimeError("the installation tables are made by `artbot db upgrade`")

    def save(self, installation: Installation) -> None:
        super().save(installation)
        team = installation.team_id or installation.enterprise_id
        if team:
            self.workspaces.installed(
                team, installation.enterprise_id, bool(installation.is_enterprise_install)
            )
            for listener in self.on_saved:
                listener(team)

    def delete_team(
        self, *, enterprise_id: str | None, team_id: str | None, enterprise_install: bool = False
    ) -> None:
        """Every installation and bot row of the team, whatever enterprise each was saved under
        (a workspace may have joined an organization since); for an org-wide install, the
        organization's rows too. A revoked or uninstalled token leaves no copy behind."""
        with self.engine.begin() as connection:
            for table in (self.installations, self.bots):
                c = table.c
                if team_id is not None:
                    whose = c.team_id == team_id
                    if enterprise_install and enterprise_id is not None:
                        whose = whose | and_(c.enterprise_id == enterprise_id, c.team_id.is_(None))
                elif enterprise_id is not None:
                    whose = and_(c.enterprise_id == enterprise_id, c.team_id.is_(None))
                else:
                    continue
                connection.execute(delete(table).where(c.client_id == self.client_id, whose))


class StateStore(SQLAlchemyOAuthStateStore):
    """slack_sdk's SQLAlchemy OAuth state store, on tables made by our migrations. Each issue
    deletes the expired states and keeps at most `max_live` (default MAX_LIVE_STATES): the
    table stays small however many install links are asked for."""

    def __init__(
        self, expiration_seconds: int, engine: Engine, *, max_live: int | None = None
    ) -> None:
        super().__init__(expiration_seconds, engine)
        self.max_live = max_live if max_live is not None else MAX_LIVE_STATES

    def create_tables(self) -> None:  # pragma: no cover: a guard
        raise RuntimeError("the OAuth state table is made by `artbot db upgrade`")

    def issue(self, *args: Any, **kwargs: Any) -> str:
        state = str(uuid.uuid4())
        now = time.time()
        expires = _naive_utc(now + self.expiration_seconds)
        table, c = self.oauth_states, self.oauth_states.c
        with self.engine.begin() as connection:
            connection.execute(delete(table).where(c.expire_at <= _naive_utc(now)))
            connection.execute(table.insert(), {"state": state, "expire_at": expires})
            newest_kept = (
                select(c.id).order_by(c.id.desc()).offset(self.max_live - 1).limit(1)
            ).scalar_subquery()
            connection.execute(delete(table).where(c.id < newest_kept))
        return state


def _naive_utc(timestamp: float) -> datetime:
    """slack_sdk's state column is a naive DateTime in UTC (its normalize_datetime_for_db)."""
    return datetime.fromtimestamp(timestamp, UTC).replace(tzinfo=None)


def stored_token_cipher(
    keys: SecretStr | None, engine: Engine, schema: str | None, *, oauth: bool
) -> TokenCipher | None:
    """Before migrating, at start-up: the cipher of the stored tokens, from ARTBOT_TOKEN_KEYS
    (`keys`) or the key file. With OAuth and neither, a key file is generated, unless the
    database already holds encrypted tokens (their key is lost: TokenKeyError, not a new key
    that would read none of them). With one workspace and no key: None (no token is stored)."""
    cipher = token_cipher(keys)
    if cipher is not None or not oauth:
        return cipher
    with schema_engine(engine, schema).connect() as connection:
        present = inspect(connection).has_table(BOTS_TABLE, schema=schema)
        encrypted = present and any(
            looks_encrypted(t.value) for t in stored_tokens(connection, TOKEN_TABLES)
        )
    if encrypted:
        raise TokenKeyError(
            "the database holds encrypted Slack tokens and no key is configured: set "
            f"ARTBOT_TOKEN_KEYS to the keys that encrypted them, or put back {key_file()}"
        )
    return token_cipher(None, generate=True)


def rotate_token_key(engine: Engine, cipher: TokenCipher) -> int:
    """Every stored token encrypted again with the cipher's first key (a plaintext one too), in
    one transaction (`engine` sees the tables unqualified); how many. TokenUnreadable, with
    nothing changed, when a token decrypts with none of the keys."""
    with engine.begin() as connection:
        return rewrite_tokens(connection, TOKEN_TABLES, cipher)


def check_stored_tokens(engine: Engine, cipher: TokenCipher) -> int:
    """After migrating: every stored token decrypts with `cipher` (`engine` sees the tables
    unqualified); their number. TokenKeyError says how many do not, and where the keys came
    from: the bot would otherwise fail team by team, at each team's next request."""
    with engine.connect() as connection:
        tokens = list(stored_tokens(connection, TOKEN_TABLES))
    unreadable = 0
    for token in tokens:
        try:
            cipher.decrypt(token.value)
        except TokenKeyError:
            unreadable += 1
    if unreadable:
        raise TokenKeyError(
            f"{unreadable} of {len(tokens)} stored Slack tokens cannot be decrypted with the "
            f"keys from {cipher.source}: add the key that encrypted them (keys after the first "
            "only decrypt)"
        )
    return len(tokens)


def schema_engine(engine: Engine, schema: str | None) -> Engine:
    """`engine`, seeing `schema`'s tables unqualified (PostgreSQL), as our stores do."""
    return engine.execution_options(schema_translate_map={None: schema}) if schema else engine
