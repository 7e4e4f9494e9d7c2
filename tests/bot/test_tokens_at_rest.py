"""Slack tokens at rest: what the database holds, read with plain SQL, after installs through the
OAuth flow, a key rotation, the migration of an older artbot's plaintext rows, an uninstall or a
revoked token; and install links that anyone may ask for, by the hundred. On SQLite, and on
PostgreSQL when ARTBOT_TEST_POSTGRES_URL is set."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from cryptography.fernet import Fernet, InvalidToken
from slack_sdk.oauth.installation_store import Installation
from sqlalchemy import text

from bot.migrations import BOT_DATABASE
from bot.process.serve import BotServer, web_for
from bot.settings import load_settings
from bot.workspaces.installations import InstallationStore, rotate_token_key, schema_engine
from bot.workspaces.store import Workspaces
from bot.workspaces.token_keys import TokenCipher, TokenKeyError
from storage import migrations
from storage.database import create_database_engine
from tests.bot.conftest import BotFactory, Database, SlackUser
from tests.bot.test_workspaces import CLIENT_ID, CLIENT_SECRET, TEAMS, OAuthBot, get, token_of
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import event_callback
from tests.fakes.workspace import SIGNING_SECRET
from tests.storage.test_migrations import HEAD

TOKEN_COLUMNS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token")
TABLES = ("slack_installations", "slack_bots")


# ---- reading the database as an attacker with a copy of it would ------------------------------


def raw_rows(database: Database, name: str, where: str = "") -> list[dict[str, object]]:
    """Every row of table `name`, by plain SQL: no model, no store, no cipher."""
    engine = create_database_engine(database.url)
    try:
        with engine.connect() as connection:
            result = connection.execute(text(f"SELECT * FROM {table(database, name)} {where}"))
            return [dict(row._mapping) for row in result]
    finally:
        engine.dispose()


def raw_tokens(database: Database) -> list[str]:
    """Every token cell that holds something, in both tables."""
    return [
        str(row[column])
        for name in TABLES
        for row in raw_rows(database, name)
        for column in TOKEN_COLUMNS
        if row.get(column) is not None
    ]


def every_cell(database: Database) -> str:
    return "\n".join(
        str(v) for name in TABLES for r in raw_rows(database, name) for v in r.values()
    )


FERNET_TOKEN = re.compile(r"gAAAAA[A-Za-z0-9_-]+=*")


def cells_in_clear(database: Database) -> str:
    """Every cell but the encrypted ones (their base64 may spell "xox" by chance)."""
    return "\n".join(
        cell for cell in every_cell(database).split("\n") if not FERNET_TOKEN.fullmatch(cell)
    )


def execute(database: Database, sql: str, **params: object) -> None:
    """Plain SQL (its tables named with `table`, the schema spelled out)."""
    engine = create_database_engine(database.url)
    try:
        with engine.begin() as connection:
            connection.execute(text(sql), params)
    finally:
        engine.dispose()


def table(database: Database, name: str) -> str:
    """`name` as plain SQL reaches it: in the test's schema on PostgreSQL."""
    return f'"{database.schema}".{name}' if database.schema else name


def decrypts_with(key: str, stored: str) -> str | None:
    """What `stored` decrypts to with `key` alone (cryptography itself), or None."""
    try:
        return Fernet(key.encode()).decrypt(stored.encode()).decode()
    except InvalidToken:
        return None


# ---- bots ----------------------------------------------------------------------------------


@dataclass
class OAuthBots:
    """Makes OAuth bots on the test's database, each served over HTTP until the test ends."""

    make_bot: BotFactory
    fake: FakeSlack
    servers: list[BotServer] = field(default_factory=list)

    def __call__(self, **env: str) -> OAuthBot:
        bot = self.make_bot(SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, **env)
        server = BotServer(web_for(bot.app, bot.service)).start()
        self.servers.append(server)
        bot.http_url = f"{server.base_url}/slack/events"
        return OAuthBot(bot, server, self.fake)


@pytest.fixture
def oauth_bots(make_bot: BotFactory, fake: FakeSlack) -> Iterator[OAuthBots]:
    for team, channel in TEAMS.items():
        fake.add_workspace(team, [channel])
    fake.oauth_app(CLIENT_ID, CLIENT_SECRET)
    bots = OAuthBots(make_bot, fake)
    yield bots
    for server in bots.servers:
        server.stop()


def start_oauth_bot(make_bot: BotFactory, **env: str) -> None:
    """An OAuth bot started and dropped: start-up is what is tested."""
    make_bot(SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, **env)


def installation(team: str, **fields: str | None) -> Installation:
    """An installation as slack_sdk saves it; `fields` its tokens, its user, its enterprise."""
    return Installation(
        app_id="A0APP",
        team_id=team,
        bot_id="B0BOT",
        bot_user_id="U0BOT",
        user_id=str(fields.pop("user_id", None) or "U0INSTALLER"),
        **fields,  # type: ignore[arg-type]
    )


# ---- encrypted, whatever the path ------------------------------------------------------------


def test_an_oauth_install_leaves_no_token_in_clear_in_the_database(
    make_bot: BotFactory, fake: FakeSlack, oauth_bots: OAuthBots, database: Database
) -> None:
    installs = oauth_bots()
    installs.install("T0NORTH")
    issued = token_of(fake, "T0NORTH")
    # A user token and refresh tokens too, as slack_sdk would store them for a user install.
    store = installs.bot.app.installation_store
    assert isinstance(store, InstallationStore)
    store.save(
        installation(
            "T0SOUTH",
            bot_token="xoxb-south-bot-0123456789",
            bot_refresh_token="xoxe-1-south-bot-refresh",
            user_id="U0PERSON",
            user_token="xoxp-south-user-0123456789",
            user_refresh_token="xoxe-1-south-user-refresh",
        )
    )

    cells = every_cell(database)
    for secret in (issued, "xoxb-south", "xoxe-1-south", "xoxp-south"):
        assert secret not in cells
    assert "xox" not in cells_in_clear(database)
    tokens = raw_tokens(database)
    assert len(tokens) == 2 + 6  # north: one row in each table; south: 4 + 2 cells
    key = make_bot.token_keys
    assert {decrypts_with(key, t) for t in tokens} >= {issued, "xoxp-south-user-0123456789"}
    assert None not in {decrypts_with(key, t) for t in tokens}
    # ...and the bot reads them back.
    assert installs.bot.app.client_for("T0NORTH").token == issued
    found = store.find_installation(enterprise_id=None, team_id="T0SOUTH", user_id="U0PERSON")
    assert found is not None and found.user_token == "xoxp-south-user-0123456789"
    assert found.user_refresh_token == "xoxe-1-south-user-refresh"


def test_a_bot_keeps_working_after_a_key_rotation(
    make_bot: BotFactory, fake: FakeSlack, oauth_bots: OAuthBots, database: Database
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    oauth_bots(ARTBOT_TOKEN_KEYS=old).install("T0NORTH")
    north = token_of(fake, "T0NORTH")

    # A new key first, the old one after it: old rows read, new rows written with the new key.
    both = oauth_bots(ARTBOT_TOKEN_KEYS=f"{new},{old}")
    assert both.bot.app.client_for("T0NORTH").token == north
    both.install("T0SOUTH")
    south = token_of(fake, "T0SOUTH")
    by_team = {str(r["team_id"]): str(r["bot_token"]) for r in raw_rows(database, "slack_bots")}
    assert decrypts_with(old, by_team["T0NORTH"]) == north
    assert decrypts_with(new, by_team["T0SOUTH"]) == south

    engine = create_database_engine(database.url)
    cipher = TokenCipher([new.encode(), old.encode()], "the test's keys")
    assert rotate_token_key(schema_engine(engine, database.schema), cipher) == 4
    engine.dispose()

    tokens = raw_tokens(database)
    assert len(tokens) == 4
    assert all(decrypts_with(old, t) is None for t in tokens)
    assert sorted(decrypts_with(new, t) or "" for t in tokens) == sorted([north] * 2 + [south] * 2)
    # The old key can go: a bot with the new one alone talks to both workspaces.
    newest = make_bot(
        SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, ARTBOT_TOKEN_KEYS=new
    )
    user = SlackUser(newest, channel=TEAMS["T0NORTH"], team="T0NORTH")
    user.command("Answer arithmetic questions with only the final number.")
    posts = fake.calls("chat.postMessage")
    assert posts and {c.token for c in posts} == {north} and all(c.ok for c in posts)
    assert newest.app.client_for("T0SOUTH").token == south
    # A bot with only the old key is refused at start-up, saying why, instead of failing later.
    with pytest.raises(TokenKeyError, match="4 of 4 stored Slack tokens cannot be decrypted"):
        start_oauth_bot(make_bot, ARTBOT_TOKEN_KEYS=old)


def test_artbot_db_rotate_token_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from artbot.cli import main

    url = f"sqlite:///{tmp_path / 'artbot.db'}"
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # no key file there
    monkeypatch.setenv("ARTBOT_TOKEN_KEYS", old)
    migrations.upgrade(BOT_DATABASE, url)
    engine = create_database_engine(url)
    cipher = TokenCipher([old.encode()], "old")
    InstallationStore(CLIENT_ID, engine, Workspaces(engine), cipher).save(
        installation("T0NORTH", bot_token="xoxb-north-0123456789")
    )
    engine.dispose()

    monkeypatch.setenv("ARTBOT_TOKEN_KEYS", f"{new},{old}")
    assert main(["db", "rotate-token-key", "--database-url", url]) == 0
    assert "2 Slack token(s) encrypted again with the first of 2 key(s)" in capsys.readouterr().out
    stored = raw_tokens(Database(url))
    assert [decrypts_with(new, t) for t in stored] == ["xoxb-north-0123456789"] * 2
    assert [decrypts_with(old, t) for t in stored] == [None, None]

    # Keys that read none of them: refused, nothing changed.
    monkeypatch.setenv("ARTBOT_TOKEN_KEYS", Fernet.generate_key().decode())
    assert main(["db", "rotate-token-key", "--database-url", url]) == 1
    assert "nothing changed" in capsys.readouterr().err
    assert raw_tokens(Database(url)) == stored
    monkeypatch.delenv("ARTBOT_TOKEN_KEYS")
    assert main(["db", "rotate-token-key", "--database-url", url]) == 2
    assert "no keys: set ARTBOT_TOKEN_KEYS" in capsys.readouterr().err


# ---- the migration of an older artbot's rows -------------------------------------------------

PLAINTEXT = {
    "bot_token": "xoxb-old-bot-0123456789",
    "bot_refresh_token": "xoxe-1-old-refresh",
    "user_token": "xoxp-old-user-0123456789",
}


def upgrade_to(database: Database, revision: str) -> None:
    engine = create_database_engine(database.url)
    try:
        with schema_engine(engine, database.schema).begin() as connection:
            config = migrations.alembic_config(
                BOT_DATABASE, database.url, schema=database.schema, connection=connection
            )
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def downgrade_to(database: Database, revision: str, cipher: TokenCipher) -> None:
    engine = create_database_engine(database.url)
    try:
        with schema_engine(engine, database.schema).begin() as connection:
            config = migrations.alembic_config(
                BOT_DATABASE,
                database.url,
                schema=database.schema,
                connection=connection,
                attributes={"token_cipher": cipher},
            )
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def insert_plaintext_rows(database: Database) -> None:
    """What artbot stored before tokens were encrypted: slack_sdk's rows, tokens in clear."""
    now = datetime(2026, 1, 1, 12, 0)
    common = "client_id, app_id, team_id, bot_id, bot_user_id, is_enterprise_install, installed_at"
    values = ":client, 'A0APP', :team, 'B0BOT', 'U0BOT', :no, :at"
    installations = table(database, "slack_installations")
    execute(
        database,
        f"INSERT INTO {installations} ({common}, user_id, bot_token, bot_refresh_token, "
        f"user_token) VALUES ({values}, 'U0INSTALLER', :bot_token, :bot_refresh_token, "
        ":user_token)",
        client=CLIENT_ID,
        team="T0OLD",
        no=False,
        at=now,
        **PLAINTEXT,
    )
    execute(
        database,
        f"INSERT INTO {table(database, 'slack_bots')} ({common}, bot_token) "
        f"VALUES ({values}, :bot_token)",
        client=CLIENT_ID,
        team="T0OLD",
        no=False,
        at=now,
        bot_token=PLAINTEXT["bot_token"],
    )
    execute(  # a row with no token at all stays as it is
        database,
        f"INSERT INTO {installations} ({common}, user_id) VALUES ({values}, 'U0NOBODY')",
        client=CLIENT_ID,
        team="T0EMPTY",
        no=False,
        at=now,
    )


def test_the_migration_encrypts_the_plaintext_rows_of_an_older_artbot(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # no key file there
    monkeypatch.delenv("ARTBOT_TOKEN_KEYS", raising=False)
    upgrade_to(database, "0005")
    insert_plaintext_rows(database)
    before = sorted(raw_tokens(database))
    assert before == sorted([*PLAINTEXT.values(), PLAINTEXT["bot_token"]])

    # No key anywhere: refused, saying what to set, and nothing changed.
    with pytest.raises(migrations.MigrationRefused, match="set ARTBOT_TOKEN_KEYS"):
        migrations.upgrade(BOT_DATABASE, database.url, schema=database.schema)
    assert migrations.current(BOT_DATABASE, database.url, schema=database.schema) == "0005"
    assert sorted(raw_tokens(database)) == before
    assert not (tmp_path / "data").exists()  # and no key was made up

    # `artbot db upgrade` with ARTBOT_TOKEN_KEYS set: every plaintext token encrypted.
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("ARTBOT_TOKEN_KEYS", key)
    migrations.upgrade(BOT_DATABASE, database.url, schema=database.schema)
    assert migrations.current(BOT_DATABASE, database.url, schema=database.schema) == HEAD
    after = raw_tokens(database)
    assert len(after) == 4 and "xox" not in cells_in_clear(database)
    assert sorted(decrypts_with(key, t) or "" for t in after) == before
    (empty,) = raw_rows(database, "slack_installations", "WHERE team_id = 'T0EMPTY'")
    assert all(empty[c] is None for c in TOKEN_COLUMNS)
    # The bot reads them.
    engine = create_database_engine(database.url)
    workspaces = Workspaces(engine, schema=database.schema)
    cipher = TokenCipher([key.encode()], "the test's key")
    store = InstallationStore(CLIENT_ID, workspaces.engine, workspaces, cipher)
    found = store.find_installation(enterprise_id=None, team_id="T0OLD")
    assert found is not None and found.bot_token == PLAINTEXT["bot_token"]
    assert found.user_token == PLAINTEXT["user_token"]
    engine.dispose()

    # Downgraded, the tokens are as they were.
    downgrade_to(database, "0005", cipher)
    assert sorted(raw_tokens(database)) == before


def test_serve_makes_a_key_file_once_and_will_not_start_when_it_is_lost(
    make_bot: BotFactory,
    fake: FakeSlack,
    oauth_bots: OAuthBots,
    database: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OAuth with no ARTBOT_TOKEN_KEYS: the key is made in the data dir, readable by its owner
    only, kept across restarts; an older artbot's plaintext rows are encrypted with it."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    key_file = tmp_path / "data" / "artbot" / "token-keys"
    upgrade_to(database, "0005")
    insert_plaintext_rows(database)

    first = oauth_bots(ARTBOT_TOKEN_KEYS="")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    (key,) = [line for line in key_file.read_text().splitlines() if not line.startswith("#")]
    first.install("T0NORTH")
    tokens = raw_tokens(database)
    assert len(tokens) == 6 and "xox" not in cells_in_clear(database)
    assert all(decrypts_with(key, t) for t in tokens)

    again = make_bot(
        SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, ARTBOT_TOKEN_KEYS=""
    )
    assert again.app.client_for("T0NORTH").token == token_of(fake, "T0NORTH")
    assert again.app.client_for("T0OLD").token == PLAINTEXT["bot_token"]
    assert [line for line in key_file.read_text().splitlines() if not line.startswith("#")] == [key]

    key_file.chmod(0o644)
    with pytest.raises(TokenKeyError, match="chmod 600"):
        start_oauth_bot(make_bot, ARTBOT_TOKEN_KEYS="")
    key_file.unlink()
    with pytest.raises(TokenKeyError, match="holds encrypted Slack tokens and no key"):
        start_oauth_bot(make_bot, ARTBOT_TOKEN_KEYS="")
    assert not key_file.exists()  # no new key that would read none of them


def test_artbot_serve_says_why_it_will_not_start_without_its_key(tmp_path: Path) -> None:
    """The command itself: exit 2 and one clear line, as for other settings that cannot work."""
    url = f"sqlite:///{tmp_path / 'artbot.db'}"
    migrations.upgrade(BOT_DATABASE, url)
    engine = create_database_engine(url)
    cipher = TokenCipher([Fernet.generate_key()], "a lost key")
    InstallationStore(CLIENT_ID, engine, Workspaces(engine), cipher).save(
        installation("T0NORTH", bot_token="xoxb-north-0123456789")
    )
    engine.dispose()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "ARTBOT_DATABASE_URL": url,
        "SLACK_CLIENT_ID": CLIENT_ID,
        "SLACK_CLIENT_SECRET": CLIENT_SECRET,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }
    serve = [sys.executable, "-c", "from artbot.cli import main; raise SystemExit(main())", "serve"]
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [*serve, "--port", "0"], env=env, cwd=root, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "Cannot start artbot: the database holds encrypted Slack tokens and no key" in (
        result.stderr
    )
    wrong = {**env, "ARTBOT_TOKEN_KEYS": Fernet.generate_key().decode()}
    result = subprocess.run(
        [*serve, "--port", "0"], env=wrong, cwd=root, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert "2 of 2 stored Slack tokens cannot be decrypted with the keys from " in result.stderr
    assert wrong["ARTBOT_TOKEN_KEYS"] not in result.stderr + result.stdout


# ---- revocation and uninstall ----------------------------------------------------------------


def team_rows(database: Database, team: str) -> int:
    return sum(len(raw_rows(database, t, f"WHERE team_id = '{team}'")) for t in TABLES)


def test_tokens_revoked_and_app_uninstalled_leave_no_token_row(
    fake: FakeSlack, oauth_bots: OAuthBots, database: Database
) -> None:
    installs = oauth_bots()
    for team in TEAMS:
        installs.install(team)
    bot, store = installs.bot, installs.bot.app.installation_store
    assert isinstance(store, InstallationStore)
    # An older copy, saved while the workspace was in an organization: it must go too.
    store.save(installation("T0NORTH", bot_token="xoxb-north-older", enterprise_id="E0GRID"))
    # A person's install in the south, with a user token: revoking it removes that person's
    # installation row; the bot's token stays.
    south = token_of(fake, "T0SOUTH")
    person = installation("T0SOUTH", bot_token=south, user_id="U0PERSON", user_token="xoxp-1")
    store.save(person)
    assert team_rows(database, "T0NORTH") == 4 and team_rows(database, "T0SOUTH") == 4

    user_revoked = {"type": "tokens_revoked", "tokens": {"oauth": ["U0PERSON"], "bot": []}}
    assert bot.dispatch(event_callback(user_revoked, team_id="T0SOUTH")) == 200
    assert raw_rows(database, "slack_installations", "WHERE user_id = 'U0PERSON'") == []
    assert team_rows(database, "T0SOUTH") == 3
    assert bot.app.client_for("T0SOUTH").token == south

    bot_revoked = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UT0NORTHBOT"]}}
    assert bot.dispatch(event_callback(bot_revoked, team_id="T0NORTH")) == 200
    fake.wait_for(lambda f: team_rows(database, "T0NORTH") == 0)
    assert team_rows(database, "T0SOUTH") == 3  # the other workspace keeps its tokens

    fake.uninstall("T0SOUTH")
    uninstalled = {"type": "app_uninstalled", "event_ts": "1700000000.000100"}
    assert bot.dispatch(event_callback(uninstalled, team_id="T0SOUTH")) == 200
    fake.wait_for(lambda f: team_rows(database, "T0SOUTH") == 0)
    assert raw_tokens(database) == []


# ---- install links ---------------------------------------------------------------------------


def test_a_flood_of_install_links_keeps_the_state_table_bounded(
    fake: FakeSlack,
    oauth_bots: OAuthBots,
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bot.workspaces.installations.MAX_LIVE_STATES", 100)
    installs = oauth_bots()
    states = table(database, "slack_oauth_states")
    long_ago = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
    for i in range(50):  # expired install links nobody followed
        execute(
            database,
            f"INSERT INTO {states} (state, expire_at) VALUES (:state, :at)",
            state=f"expired-{i}",
            at=long_ago,
        )
    oldest, oldest_cookie, scopes = installs.start_install()

    for _ in range(300):
        assert get(f"{installs.server.base_url}/slack/install").status == 200
    newest, newest_cookie, _ = installs.start_install()

    rows = raw_rows(database, "slack_oauth_states")
    assert len(rows) == 100
    assert not any(str(row["state"]).startswith("expired-") for row in rows)
    assert oldest not in {row["state"] for row in rows}
    # The newest link still installs; the oldest, pushed out by the flood, is refused.
    code = fake.authorize("T0NORTH", scopes=scopes)
    assert installs.redirect(code, oldest, oldest_cookie).status != 200
    assert installs.redirect(code, newest, newest_cookie).status == 200
    assert installs.bot.app.client_for("T0NORTH").token == token_of(fake, "T0NORTH")


def test_oauth_settings_refuse_malformed_token_keys() -> None:
    base = {
        "SLACK_CLIENT_ID": CLIENT_ID,
        "SLACK_CLIENT_SECRET": CLIENT_SECRET,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
    }
    good = Fernet.generate_key().decode()
    from bot.settings import SettingsError

    with pytest.raises(SettingsError, match="ARTBOT_TOKEN_KEYS: key 2 is not a Fernet key") as bad:
        load_settings({**base, "ARTBOT_TOKEN_KEYS": f"{good},not-a-key"})
    assert good not in str(bad.value)
    settings = load_settings({**base, "ARTBOT_TOKEN_KEYS": f" {good} , "})
    assert good not in repr(settings)


def test_build_service_without_oauth_needs_no_key(
    make_bot: BotFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One workspace (SLACK_BOT_TOKEN): no token is stored, so no key is asked for or made."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    bot = make_bot(ARTBOT_TOKEN_KEYS="")
    assert bot.service.workspaces is not None and bot.service.workspaces.token_cipher is None
    assert not (tmp_path / "data").exists()
