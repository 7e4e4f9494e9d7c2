"""Which workspaces the bot serves, and with which token.

Two modes (bot.settings): one workspace, with SLACK_BOT_TOKEN from the environment; or any
workspace that installs the app through Bolt's OAuth flow (SLACK_CLIENT_ID and
SLACK_CLIENT_SECRET), each with its own bot token kept by slack_sdk's SQLAlchemy installation
store in the bot's database. The tables of slack_sdk's stores are made by our migrations
(bot/migrations/0004_installations.py), never by the stores' `create_tables()`.

Listeners get the right client from Bolt for each request. What posts outside a request (the
outbox worker, the run follower, expiry) asks `SlackClients.client_for(team)`.

`artbot_workspaces` remembers each team the bot has served: its enterprise (where Slack gives
one) and, once the app was uninstalled or its bot token revoked, when and why.

Every token is encrypted at rest (bot/workspaces/token_keys.py): the store's token columns encrypt
as they write and decrypt as they read. An uninstall or a revoked bot token deletes every row of the
team in both tables (`delete_team`). An install link's state row is deleted once used or
expired, and at most MAX_LIVE_STATES of them are kept (the oldest go first).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import Boolean, Engine, String, Table, and_, delete, inspect, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from bot.process.work_slots import WorkSlots, YieldingWebClient
from bot.slack.web_api import KeepAliveWebClient
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
from storage.database import KEY_PART_MAX, UTCDateTime
from storage.sql_store import SqlStore

log = logging.getLogger(__name__)

KEY = KEY_PART_MAX
BOT_SCOPES = (
    "commands",
    "chat:write",
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

ClientFor = Callable[[str], WebClient]
"""The Web API client that acts in a team (its installation's bot token)."""


class Base(DeclarativeBase):
    pass


def _token_columns(table: Table, kind: TypeEngine[str]) -> Table:
    """`table` with its token columns of `kind`."""
    for name in TOKEN_COLUMNS:
        if name in table.c:
            table.c[name].type = kind
    return table


metadata = Base.metadata
"""`artbot_workspaces` and slack_sdk's three tables, as slack_sdk's stores define them, but
for the token columns: wide enough for an encrypted token (migration 0006)."""
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


class WorkspaceRow(Base):
    __tablename__ = "artbot_workspaces"

    team: Mapped[str] = mapped_column(String(KEY), primary_key=True)
    enterprise: Mapped[str | None] = mapped_column(String(KEY))
    """The Enterprise Grid organization, where Slack gives one."""
    enterprise_install: Mapped[bool] = mapped_column(Boolean, default=False)
    """Installed org-wide: the token is the organization's, found by `enterprise`."""
    installed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    removed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    """When the app was last uninstalled or its bot token revoked (kept after a reinstall)."""
    removed_reason: Mapped[str | None] = mapped_column(String(32))
    active: Mapped[bool] = mapped_column(Boolean, default=True)


@dataclass(frozen=True)
class Workspace:
    team: str
    enterprise: str | None
    enterprise_install: bool
    active: bool
    removed_at: datetime | None
    removed_reason: str | None


class NotInstalled(SlackApiError):
    """The app has no installation (or no bot token) in the team: nothing can be said there.
    A SlackApiError whose `error` is `not_installed`, so that callers that give up on Slack's
    refusals give up on this one too."""

    def __init__(self, team: str) -> None:
        super().__init__(
            f"artbot is not installed in {team}", {"ok": False, "error": "not_installed"}
        )
        self.team = team


class Workspaces(SqlStore):
    """The teams the bot serves: their enterprise, and whether the app is still installed; and
    the cipher of their stored tokens (None: no key, as with one workspace)."""

    def __init__(
        self, engine: Engine, *, token_cipher: TokenCipher | None = None, **options: Any
    ) -> None:
        super().__init__(engine, **options)
        self.token_cipher = token_cipher

    @property
    def engine(self) -> Engine:
        """The engine this store uses (its schema applied): slack_sdk's stores share it."""
        return self._engine

    def get(self, team: str) -> Workspace | None:
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            return _workspace(row) if row is not None else None

    def seen(self, team: str, enterprise: str | None, enterprise_install: bool = False) -> None:
        """A request came from `team`: remember its enterprise (for tokens found by it)."""
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            if row is None:
                orm.add(
                    WorkspaceRow(
                        team=team,
                        enterprise=enterprise,
                        enterprise_install=enterprise_install,
                        active=True,
                    )
                )
            elif enterprise is not None and row.enterprise != enterprise:
                row.enterprise = enterprise

    def installed(self, team: str, enterprise: str | None, enterprise_install: bool) -> None:
        """An installation was saved: the team is served (again)."""
        now = self.now()
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            if row is None:
                row = WorkspaceRow(team=team)
                orm.add(row)
            row.enterprise = enterprise
            row.enterprise_install = enterprise_install
            row.installed_at = now
            row.active = True

    def removed(self, team: str, enterprise: str | None, reason: str) -> datetime:
        """The app was uninstalled from `team` or its bot token revoked: marked, not deleted."""
        now = self.now()
        with self._transaction() as orm:
            row = orm.get(WorkspaceRow, team)
            if row is None:
                row = WorkspaceRow(team=team, enterprise=enterprise, enterprise_install=False)
                orm.add(row)
            row.active = False
            row.removed_at = now
            row.removed_reason = reason
        return now


def _workspace(row: WorkspaceRow) -> Workspace:
    return Workspace(
        row.team,
        row.enterprise,
        bool(row.enterprise_install),
        bool(row.active),
        row.removed_at,
        row.removed_reason,
    )


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


CLIENT_CHECKED_EVERY_S = 60.0
"""How long a cached client is used before its team's token is read again. A (re)install or an
uninstall drops the cached client at once in the process that handled it; another worker of
`artbot serve --workers` learns of it from the database within this time."""


class SlackClients:
    """`client_for(team)`: one Web API client per team, with its installation's bot token,
    cached (its token read again every CLIENT_CHECKED_EVERY_S); or, with one workspace, the one
    client for every team."""

    def __init__(
        self,
        make_client: Callable[[str | None], WebClient],
        *,
        single: WebClient | None = None,
        installations: InstallationStore | None = None,
        workspaces: Workspaces | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (single is None) == (installations is None):
            raise ValueError("one client (one workspace) or an installation store (OAuth)")
        self._make = make_client
        self._single = single
        self._installations = installations
        self._workspaces = workspaces
        self._cache: dict[str, tuple[WebClient, float]] = {}
        """Per team: its client and when its token was last read."""
        self._clock = clock
        self._lock = threading.Lock()
        if installations is not None:
            installations.on_saved.append(self.forget)

    def client_for(self, team: str) -> WebClient:
        """The client that acts in `team`; NotInstalled when the app has no bot token there."""
        if self._single is not None:
            return self._single
        now = self._clock()
        with self._lock:
            cached = self._cache.get(team)
        if cached is not None and now - cached[1] < CLIENT_CHECKED_EVERY_S:
            return cached[0]
        token = self._bot_token(team)
        if token is None:
            self.forget(team)
            raise NotInstalled(team)
        client = cached[0] if cached is not None and cached[0].token == token else None
        client = client or self._make(token)
        with self._lock:
            self._cache[team] = (client, now)
        return client

    def forget(self, team: str) -> None:
        """Drop the cached client of `team` (reinstalled, uninstalled, token revoked)."""
        with self._lock:
            self._cache.pop(team, None)

    def tokens_gone(
        self, team: str | None, enterprise: str | None, enterprise_install: bool = False
    ) -> None:
        """The app was uninstalled from `team` or its bot token revoked: every stored copy of
        its tokens is deleted (OAuth) and its cached client dropped."""
        if self._installations is not None:
            self._installations.delete_team(
                enterprise_id=enterprise, team_id=team, enterprise_install=enterprise_install
            )
        if team or enterprise:
            self.forget(team or enterprise or "")

    def _bot_token(self, team: str) -> str | None:
        assert self._installations is not None
        workspace = self._workspaces.get(team) if self._workspaces is not None else None
        if workspace is not None and not workspace.active:
            return None
        enterprise = workspace.enterprise if workspace is not None else None
        bot = self._installations.find_bot(
            enterprise_id=enterprise,
            team_id=team,
            is_enterprise_install=workspace.enterprise_install if workspace else False,
        )
        return bot.bot_token if bot is not None else None


def web_client_maker(
    slots: WorkSlots | None = None, **options: Any
) -> Callable[[str | None], WebClient]:
    """Clients with `options` (base_url, retry handlers) and the token given, on kept-alive
    connections (`bot.slack.web_api`); given `slots`,
    each call gives its thread's work slot back while Slack answers (`YieldingWebClient`)."""
    if slots is not None:
        return lambda token: YieldingWebClient(slots, token=token, **options)
    return lambda token: KeepAliveWebClient(token=token, **options)
