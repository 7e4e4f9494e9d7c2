"""Any workspace installs the bot (Bolt's OAuth flow against the fake Slack), each is served
with its own token, and a workspace that removes the app stops its wizards."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from cryptography.fernet import Fernet
from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import Installation

from bot.delivery.effects import Post
from bot.migrations import BOT_DATABASE
from bot.process.serve import BotServer, web_for
from bot.runs.store import Run
from bot.settings import SettingsError, load_settings
from bot.slack.blocks import text_message
from bot.wizard.expiry import STOPPED
from bot.wizard.home import HOME_BLOCKS_MAX, home_blocks
from bot.workspaces.clients import CLIENT_CHECKED_EVERY_S, NotInstalled, SlackClients
from bot.workspaces.installations import BOT_SCOPES, InstallationStore
from bot.workspaces.store import Workspaces
from bot.workspaces.token_keys import TokenCipher
from flows import TRAIN_RL, Session
from storage import migrations
from storage.database import create_database_engine
from storage.sessions import SessionKey, StoredSession
from tests.bot.conftest import Bot, BotFactory, Database, SlackUser
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import app_home_opened_event, event_callback
from tests.fakes.workspace import SIGNING_SECRET

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "fake-client-secret"
TEAMS = {"T0NORTH": "C0NORTH", "T0SOUTH": "C0SOUTH"}
STATE_COOKIE = "slack-app-oauth-state"


@dataclass
class Page:
    status: int
    body: str
    headers: dict[str, str]


def get(url: str, cookie: str | None = None) -> Page:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return Page(response.status, response.read().decode(), _lowered(response.headers))
    except urllib.error.HTTPError as error:
        return Page(error.code, error.read().decode(), _lowered(error.headers))


def _lowered(headers: object) -> dict[str, str]:
    return {k.lower(): v for k, v in dict(headers).items()}  # type: ignore[call-overload]


@dataclass
class OAuthBot:
    bot: Bot
    server: BotServer
    fake: FakeSlack

    def start_install(self) -> tuple[str, str, list[str]]:
        """GET /slack/install: the state (also in the cookie) and the scopes asked for."""
        page = get(f"{self.server.base_url}/slack/install")
        assert page.status == 200
        link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', page.body)
        assert link is not None, page.body
        query = parse_qs(urlsplit(link.group(1).replace("&amp;", "&")).query)
        assert query["client_id"] == [CLIENT_ID]
        cookie = page.headers["set-cookie"].split(";")[0]
        name, _, state = cookie.partition("=")
        assert name == STATE_COOKIE and query["state"] == [state]
        return state, cookie, query["scope"][0].split(",")

    def redirect(self, code: str, state: str, cookie: str | None) -> Page:
        query = urlencode({"code": code, "state": state})
        return get(f"{self.server.base_url}/slack/oauth_redirect?{query}", cookie)

    def install(self, team: str, **grid: str) -> None:
        """A person in `team` installs the app: the whole round trip through Slack."""
        state, cookie, scopes = self.start_install()
        code = self.fake.authorize(team, scopes=scopes, **grid)
        page = self.redirect(code, state, cookie)
        assert page.status == 200, page.body


@pytest.fixture
def oauth_bot(make_bot: BotFactory, fake: FakeSlack) -> Iterator[OAuthBot]:
    for team, channel in TEAMS.items():
        fake.add_workspace(team, [channel])
    fake.oauth_app(CLIENT_ID, CLIENT_SECRET)
    bot = make_bot(SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET)
    server = BotServer(web_for(bot.app, bot.service)).start()
    bot.http_url = f"{server.base_url}/slack/events"  # requests over HTTP, as Slack sends them
    yield OAuthBot(bot, server, fake)
    server.stop()


def test_install_through_oauth_stores_the_workspace_and_its_token(oauth_bot: OAuthBot) -> None:
    fake, bot = oauth_bot.fake, oauth_bot.bot
    state, cookie, scopes = oauth_bot.start_install()
    assert sorted(scopes) == sorted(BOT_SCOPES)
    code = fake.authorize("T0NORTH", scopes=scopes)

    page = oauth_bot.redirect(code, state, cookie)

    assert page.status == 200
    (exchange,) = fake.calls("oauth.v2.access")
    assert exchange.ok and exchange.params["code"] == code
    store = bot.app.installation_store
    assert store is not None
    found = store.find_bot(enterprise_id=None, team_id="T0NORTH")
    issued = next(i for i in fake.installs() if i.team_id == "T0NORTH")
    assert found is not None and found.bot_token == issued.bot_token
    assert found.bot_user_id == issued.bot_user_id and found.bot_id == issued.bot_id
    workspace = bot.service.workspaces.get("T0NORTH") if bot.service.workspaces else None
    assert workspace is not None and workspace.active
    assert bot.app.client_for("T0NORTH").token == issued.bot_token


def test_an_install_is_refused_without_its_state_cookie_or_with_a_used_code(
    oauth_bot: OAuthBot,
) -> None:
    fake = oauth_bot.fake
    state, cookie, scopes = oauth_bot.start_install()
    code = fake.authorize("T0NORTH", scopes=scopes)
    assert oauth_bot.redirect(code, state, None).status != 200  # no cookie: another browser
    assert fake.calls("oauth.v2.access") == []

    state, cookie, scopes = oauth_bot.start_install()
    assert oauth_bot.redirect(code, state, cookie).status == 200
    state, cookie, _ = oauth_bot.start_install()
    assert oauth_bot.redirect(code, state, cookie).status != 200  # the code again
    assert [(c.response or {}).get("error") for c in fake.calls("oauth.v2.access") if not c.ok] == [
        "code_already_used"
    ]


def test_the_fake_checks_the_apps_credentials(oauth_bot: OAuthBot) -> None:
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    code = oauth_bot.fake.authorize("T0NORTH", scopes=BOT_SCOPES)
    client = WebClient(base_url=oauth_bot.fake.base_url)
    with pytest.raises(SlackApiError, match="bad_client_secret"):
        client.oauth_v2_access(client_id=CLIENT_ID, client_secret="wrong", code=code)
    with pytest.raises(SlackApiError, match="invalid_client_id"):
        client.oauth_v2_access(client_id="9.9", client_secret=CLIENT_SECRET, code=code)
    answer = client.oauth_v2_access(client_id=CLIENT_ID, client_secret=CLIENT_SECRET, code=code)
    assert answer["team"]["id"] == "T0NORTH" and answer["token_type"] == "bot"


def user_in(oauth_bot: OAuthBot, team: str) -> SlackUser:
    return SlackUser(oauth_bot.bot, channel=TEAMS[team], team=team)


def token_of(fake: FakeSlack, team: str) -> str:
    return next(i.bot_token for i in fake.installs() if i.team_id == team)


def test_two_workspaces_run_wizards_at_once_each_with_its_own_token(oauth_bot: OAuthBot) -> None:
    fake = oauth_bot.fake
    for team in TEAMS:
        oauth_bot.install(team)
    north, south = user_in(oauth_bot, "T0NORTH"), user_in(oauth_bot, "T0SOUTH")

    north.command("Answer arithmetic questions with only the final number.")
    south.command("Summarize support tickets in one sentence.")
    north.click("Only logged or static scenarios")
    south.click("Only logged or static scenarios")
    north.click("Single-turn")
    south.click("Single-turn")

    assert len(north.bot_messages()) >= 3 and len(south.bot_messages()) >= 3
    for team, channel in TEAMS.items():
        calls = [
            c
            for c in fake.calls()
            if c.params.get("channel") == channel or c.params.get("channel_id") == channel
        ]
        assert calls and {c.token for c in calls} == {token_of(fake, team)}
        assert all(c.ok for c in calls), [c.response for c in calls if not c.ok]
    assert north.asked() == south.asked() != "<done>"


def test_a_token_is_refused_on_another_workspaces_channel(oauth_bot: OAuthBot) -> None:
    from slack_sdk.errors import SlackApiError

    for team in TEAMS:
        oauth_bot.install(team)
    north = oauth_bot.bot.app.client_for("T0NORTH")
    with pytest.raises(SlackApiError, match="channel_not_found"):
        north.chat_postMessage(channel=TEAMS["T0SOUTH"], text="hello")


def uninstalled(team: str) -> dict[str, object]:
    return {"type": "app_uninstalled", "event_ts": "1700000000.000100"}


def test_uninstall_stops_the_workspaces_wizards_and_gives_up_its_outbox(
    oauth_bot: OAuthBot,
) -> None:
    fake, bot = oauth_bot.fake, oauth_bot.bot
    for team in TEAMS:
        oauth_bot.install(team)
    north, south = user_in(oauth_bot, "T0NORTH"), user_in(oauth_bot, "T0SOUTH")
    north.command("Answer arithmetic questions with only the final number.")
    south.command("Summarize support tickets in one sentence.")

    fake.uninstall("T0SOUTH")
    assert bot.dispatch(event_callback(uninstalled("T0SOUTH"), team_id="T0SOUTH")) == 200
    workspaces = bot.service.workspaces
    assert workspaces is not None
    fake.wait_for(lambda f: (w := workspaces.get("T0SOUTH")) is not None and not w.active)
    fake.wait_for(lambda f: _stored(bot, south.key).expired)

    store = bot.app.installation_store
    assert store is not None and store.find_bot(enterprise_id=None, team_id="T0SOUTH") is None
    # Something still queued for the removed workspace is given up, not retried forever.
    bot.service.outbox.enqueue(south.key, [Post(text_message("late news"))])
    fake.wait_for(lambda f: not bot.service.outbox.pending(south.key))
    late = bot.service.outbox.rows(south.key)[-1]
    assert late.error == "not_installed" and late.ts is None
    # The other workspace goes on.
    north.click("Only logged or static scenarios")
    assert north.asked() != "scenario_source"
    assert not _stored(bot, north.key).expired

    # Installed again: the old wizard says why it stopped, with the new token.
    oauth_bot.install("T0SOUTH")
    south.reply("Only logged or static scenarios")
    assert south.last_text() == STOPPED


def test_tokens_revoked_for_the_bot_stops_the_workspace_too(oauth_bot: OAuthBot) -> None:
    fake, bot = oauth_bot.fake, oauth_bot.bot
    oauth_bot.install("T0NORTH")
    north = user_in(oauth_bot, "T0NORTH")
    north.command("Answer arithmetic questions with only the final number.")
    revoked = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UT0NORTHBOT"]}}

    assert bot.dispatch(event_callback(revoked, team_id="T0NORTH")) == 200

    fake.wait_for(lambda f: _stored(bot, north.key).expired)
    workspace = bot.service.workspaces.get("T0NORTH") if bot.service.workspaces else None
    assert workspace is not None and workspace.removed_reason == "tokens_revoked"


def test_single_workspace_mode_handles_an_uninstall_too(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot()
    user = SlackUser(bot)
    user.command("Answer arithmetic questions with only the final number.")

    assert bot.dispatch(event_callback(uninstalled(user.team))) == 200

    fake.wait_for(lambda f: _stored(bot, user.key).expired)
    assert bot.app.client_for("any team") is bot.app.client


def test_the_home_tab_lists_wizards_with_links_in_each_workspace(oauth_bot: OAuthBot) -> None:
    fake, bot = oauth_bot.fake, oauth_bot.bot
    oauth_bot.install("T0NORTH")
    north = user_in(oauth_bot, "T0NORTH")
    north.command("Answer arithmetic questions with only the final number.")

    bot.dispatch(event_callback(app_home_opened_event(north.user), team_id="T0NORTH"))

    fake.wait_for(lambda f: f.home_view(north.user) is not None)
    view = fake.home_view(north.user)
    assert view is not None and view["team_id"] == "T0NORTH"
    (item,) = [b for b in view["blocks"] if b.get("block_id") == "wizard-0"]
    assert "Answer arithmetic questions" in item["text"]["text"]
    assert "waiting for your answer" in item["text"]["text"]
    permalink = item["accessory"]["url"]
    assert f"/archives/{TEAMS['T0NORTH']}/p{north.thread.replace('.', '')}" in permalink
    (publish,) = fake.calls("views.publish")
    assert publish.token == token_of(fake, "T0NORTH")


def test_a_workspace_of_an_enterprise_is_keyed_by_team_and_keeps_its_enterprise(
    oauth_bot: OAuthBot,
) -> None:
    fake, bot = oauth_bot.fake, oauth_bot.bot
    oauth_bot.install("T0NORTH", enterprise_id="E0GRID", enterprise_name="Grid Org")
    token = token_of(fake, "T0NORTH")

    workspace = bot.service.workspaces.get("T0NORTH") if bot.service.workspaces else None
    assert workspace is not None and workspace.enterprise == "E0GRID"
    assert not workspace.enterprise_install
    store = bot.app.installation_store
    assert store is not None
    found = store.find_bot(enterprise_id="E0GRID", team_id="T0NORTH")
    assert found is not None and found.bot_token == token
    assert bot.app.client_for("T0NORTH").token == token
    # A request from that workspace carries the enterprise: Bolt finds the same installation.
    opened = event_callback(
        app_home_opened_event("U0GRIDUSER"), team_id="T0NORTH", enterprise_id="E0GRID"
    )
    assert bot.dispatch(opened) == 200
    fake.wait_for(lambda f: f.home_view("U0GRIDUSER") is not None)
    (publish,) = fake.calls("views.publish")
    assert publish.token == token


def test_the_home_tab_stays_within_slacks_block_limit() -> None:
    now = Session.start(TRAIN_RL.id)
    sessions = [
        StoredSession(SessionKey("T1", "C1", f"1700000000.{i:06d}"), "U1", now, _t(i), _t(i))
        for i in range(60)
    ]

    runs = [
        Run(
            approval_id=i,
            team="T1",
            channel="C1",
            thread=f"1700000000.{i:06d}",
            owner="U1",
            script_name=f"run-{i}.py",
            script_sha256="0" * 64,
            backend="local",
            job_id=f"job-{i}",
            state="running",
            created_at=_t(i),
        )
        for i in range(10)
    ]
    links = {s.key: f"https://x.slack.com/archives/C1/p{i}" for i, s in enumerate(sessions)}

    view = home_blocks(sessions[:15], runs, links, total_sessions=len(sessions))

    blocks = view["blocks"]
    assert len(blocks) <= HOME_BLOCKS_MAX
    assert any("and 45 older" in str(b) for b in blocks)
    run_items = [b for b in blocks if str(b.get("block_id", "")).startswith("run-")]
    assert len(run_items) == 10
    assert "run-0.py" in run_items[0]["text"]["text"] and "training" in run_items[0]["text"]["text"]
    assert run_items[0]["accessory"]["url"] == links[runs[0].key]


def test_oauth_and_a_bot_token_are_one_or_the_other() -> None:
    base = {"SLACK_SIGNING_SECRET": SIGNING_SECRET}
    with pytest.raises(SettingsError, match="not both"):
        load_settings(
            {
                **base,
                "SLACK_BOT_TOKEN": "xoxb-1",
                "SLACK_CLIENT_ID": CLIENT_ID,
                "SLACK_CLIENT_SECRET": CLIENT_SECRET,
            }
        )
    with pytest.raises(SettingsError, match="SLACK_CLIENT_SECRET"):
        load_settings({**base, "SLACK_CLIENT_ID": CLIENT_ID})
    with pytest.raises(SettingsError, match="SLACK_BOT_TOKEN"):
        load_settings(base)
    settings = load_settings(
        {**base, "SLACK_CLIENT_ID": CLIENT_ID, "SLACK_CLIENT_SECRET": CLIENT_SECRET}
    )
    assert settings.multi_workspace and CLIENT_SECRET not in repr(settings)


def _stored(bot: Bot, key: SessionKey) -> StoredSession:
    stored = bot.service.store.get(key)
    assert stored is not None
    return stored


def _t(i: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i)


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def installation(team: str, token: str) -> Installation:
    return Installation(
        app_id="A0APP",
        team_id=team,
        bot_token=token,
        bot_id="B0BOT",
        bot_user_id="U0BOT",
        user_id="U0INSTALLER",
    )


def test_another_worker_uses_a_reinstalled_token_within_a_minute_and_stops_after_an_uninstall(
    database: Database,
) -> None:
    migrations.upgrade(BOT_DATABASE, database.url, schema=database.schema)
    engine = create_database_engine(database.url)
    workspaces = Workspaces(engine, schema=database.schema)
    # Two processes: each its own store (its own on_saved listeners) on the one database.
    cipher = TokenCipher([Fernet.generate_key()], "a test key")
    here = InstallationStore(CLIENT_ID, workspaces.engine, workspaces, cipher)
    there = InstallationStore(CLIENT_ID, workspaces.engine, workspaces, cipher)
    ticks = Ticks()
    clients = SlackClients(
        lambda token: WebClient(token=token),
        installations=there,
        workspaces=workspaces,
        clock=ticks,
    )
    here.save(installation("T0ONE", "xoxb-first"))
    first = clients.client_for("T0ONE")
    assert first.token == "xoxb-first"

    here.save(installation("T0ONE", "xoxb-second"))  # reinstalled, through the other worker
    assert clients.client_for("T0ONE") is first  # cached a while
    ticks.now += CLIENT_CHECKED_EVERY_S
    assert clients.client_for("T0ONE").token == "xoxb-second"
    again = clients.client_for("T0ONE")
    ticks.now += CLIENT_CHECKED_EVERY_S
    assert clients.client_for("T0ONE") is again  # the same token: the same client

    workspaces.removed("T0ONE", None, "app_uninstalled")  # through the other worker
    ticks.now += CLIENT_CHECKED_EVERY_S
    with pytest.raises(NotInstalled):
        clients.client_for("T0ONE")
    engine.dispose()
