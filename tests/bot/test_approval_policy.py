"""Who may approve, when the bot serves any workspace (OAuth): an approval runs code on the GPU
host, so with no policy nobody approves (and the operator is told what to set); with
ARTBOT_APPROVAL=admins only a workspace's admins and owners do, as Slack's `users.info` says.

The real bot over HTTP with Bolt's OAuth flow against the fake Slack, and a real runner on
loopback: "nothing reaches the runner" is read from the runner itself."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.process.serve import BotServer, web_for
from bot.runs.approval import NO_POLICY, NOT_ADMIN, ApprovalPolicy
from bot.settings import SettingsError, load_settings
from bot.workspaces.installations import BOT_SCOPES
from storage.sessions import SessionKey
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_runs_end_to_end import STAND_IN
from tests.bot.test_slack_wizard import answer_single_turn_ruler
from tests.bot.test_workspaces import CLIENT_ID, CLIENT_SECRET, TEAMS, OAuthBot
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import SIGNING_SECRET
from tests.runner.conftest import TOKEN, Runner, RunnerFactory, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

GENEROUS_S = 60.0  # a hang guard on a loaded machine, never a measurement
MEMBER = "U0NORTHMEMBER"


@pytest.fixture
def gpu_host(make_runner: RunnerFactory) -> Iterator[Runner]:
    yield make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} {{script}}",
    )


@contextlib.contextmanager
def oauth_bot_with_runner(
    make_bot: BotFactory, fake: FakeSlack, runner: Runner, **env: str
) -> Iterator[OAuthBot]:
    for team, channel in TEAMS.items():
        fake.add_workspace(team, [channel])
    fake.oauth_app(CLIENT_ID, CLIENT_SECRET)
    bot = make_bot(
        dryrun=None,
        SLACK_CLIENT_ID=CLIENT_ID,
        SLACK_CLIENT_SECRET=CLIENT_SECRET,
        ARTBOT_RUNNER_URL=runner.base_url,
        ARTBOT_RUNNER_TOKEN=TOKEN,
        **env,
    )
    server = BotServer(web_for(bot.app, bot.service)).start()
    bot.http_url = f"{server.base_url}/slack/events"
    try:
        yield OAuthBot(bot, server, fake)
    finally:
        server.stop()


def install_with(oauth: OAuthBot, team: str, scopes: list[str]) -> None:
    """A person in `team` installs the app, approving these scopes on slack.com."""
    state, cookie, _ = oauth.start_install()
    page = oauth.redirect(oauth.fake.authorize(team, scopes=scopes), state, cookie)
    assert page.status == 200, page.body


def member_with_a_script(oauth: OAuthBot) -> SlackUser:
    user = SlackUser(oauth.bot, user=MEMBER, channel=TEAMS["T0NORTH"], team="T0NORTH")
    user.command()
    answer_single_turn_ruler(user)  # ends with the result card
    return user


def click_approve(user: SlackUser) -> None:
    user.click("Approve and run", wait=False, on=user.result_cards()[-1])


def said_to(user: SlackUser, words: str) -> None:
    user.fake.wait_for(
        lambda f: any(words in m.text for m in f.ephemerals() if m.ephemeral_to == user.user),
        timeout=GENEROUS_S,
    )
    user.settle()


def test_with_oauth_and_no_policy_approve_is_refused_and_nothing_reaches_the_runner(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    with oauth_bot_with_runner(make_bot, fake, gpu_host) as oauth:
        oauth.install("T0NORTH")
        fake.add_user(MEMBER, team_id="T0NORTH", is_owner=True, is_admin=True)
        user = member_with_a_script(oauth)

        click_approve(user)

        said_to(user, "Approving is off on this bot")
        [refusal] = [m.text for m in fake.ephemerals() if "Approving is off" in m.text]
        assert "`ARTBOT_APPROVERS`" in refusal and "`ARTBOT_APPROVAL=admins`" in refusal
        runs = oauth.bot.service.runs
        assert runs is not None and runs.runs.for_thread(user.key) == []
        assert oauth.bot.service.records.approvals(user.key) == []
        assert gpu_host.client.jobs().jobs == []  # nothing reached the runner
        assert fake.calls("users.info") == []  # no policy: nobody is asked about


def test_with_the_admins_policy_a_member_is_refused_and_an_admin_approves(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    with oauth_bot_with_runner(make_bot, fake, gpu_host, ARTBOT_APPROVAL="admins") as oauth:
        # Installed before users:read was asked for: the check cannot be made, so it refuses.
        install_with(oauth, "T0NORTH", [s for s in BOT_SCOPES if s != "users:read"])
        fake.add_user(MEMBER, team_id="T0NORTH", is_admin=True)
        user = member_with_a_script(oauth)
        click_approve(user)
        said_to(user, "lacks Slack's `users:read` scope here")

        oauth.install("T0NORTH")  # reinstalled with today's scopes
        fake.add_user(MEMBER, team_id="T0NORTH")  # a member, not an admin
        click_approve(user)
        said_to(user, NOT_ADMIN)
        assert gpu_host.client.jobs().jobs == []

        fake.add_user(MEMBER, team_id="T0NORTH", is_admin=True)  # made an admin
        click_approve(user)
        fake.wait_for(lambda f: bool(gpu_host.client.jobs().jobs), timeout=GENEROUS_S)
        user.settle()
        runs = oauth.bot.service.runs
        assert runs is not None
        [run] = runs.runs.for_thread(user.key)
        assert run.job_id is not None and run.owner == MEMBER
        [job] = gpu_host.client.jobs().jobs
        assert job.id == run.job_id
        asked = fake.calls("users.info")
        assert [c.params["user"] for c in asked] == [MEMBER] * 3
        token = next(i.bot_token for i in fake.installs() if i.team_id == "T0NORTH")
        assert {c.token for c in asked} == {token}  # asked in the clicker's own workspace


def test_an_admin_of_another_workspace_is_no_admin_here(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    """In a channel shared with another organization, the one clicking may be that other
    workspace's admin: Slack says so of their own workspace, not of this one."""
    with oauth_bot_with_runner(make_bot, fake, gpu_host, ARTBOT_APPROVAL="admins") as oauth:
        oauth.install("T0NORTH")
        policy = ApprovalPolicy.from_settings(oauth.bot.settings)
        north = oauth.bot.app.client_for("T0NORTH")
        key = SessionKey("T0NORTH", TEAMS["T0NORTH"], "1700000000.000100")
        fake.add_user("U0SOUTHADMIN", team_id="T0SOUTH", is_admin=True, is_owner=True)
        assert policy.refusal(north, key, "U0SOUTHADMIN", "U0SOUTHADMIN") is not None
        fake.add_user("U0NORTHOWNER", team_id="T0NORTH", is_primary_owner=True)
        assert policy.refusal(north, key, "U0NORTHOWNER", "U0NORTHOWNER") is None
        assert policy.refusal(north, key, "U0NORTHOWNER", MEMBER) == (
            f"Only <@{MEMBER}> can approve this script."
        )


BASE = {"SLACK_SIGNING_SECRET": SIGNING_SECRET}
OAUTH = {**BASE, "SLACK_CLIENT_ID": CLIENT_ID, "SLACK_CLIENT_SECRET": CLIENT_SECRET}
ONE_WORKSPACE = {**BASE, "SLACK_BOT_TOKEN": "xoxb-one-workspace"}


def test_the_policy_by_settings_one_workspace_keeps_its_default_oauth_has_none() -> None:
    assert load_settings(ONE_WORKSPACE).approval_mode == "anyone"
    assert load_settings(OAUTH).approval_mode is None
    assert load_settings({**OAUTH, "ARTBOT_APPROVERS": "U1,U2"}).approval_mode == "approvers"
    admins = load_settings({**OAUTH, "ARTBOT_APPROVAL": "admins", "ARTBOT_APPROVERS": "U1"})
    assert admins.approval_mode == "admins" and admins.approvers == {"U1"}
    with pytest.raises(SettingsError, match="ARTBOT_APPROVAL=approvers needs ARTBOT_APPROVERS"):
        load_settings({**OAUTH, "ARTBOT_APPROVAL": "approvers"})
    with pytest.raises(SettingsError, match="say different things"):
        load_settings({**OAUTH, "ARTBOT_APPROVAL": "anyone", "ARTBOT_APPROVERS": "U1"})
    with pytest.raises(SettingsError, match="ARTBOT_APPROVAL"):
        load_settings({**OAUTH, "ARTBOT_APPROVAL": "everyone"})


@pytest.mark.parametrize(
    ("approval", "said"),
    [
        (
            "",
            'level=WARNING logger=bot.process.serve msg="approvals are refused: this bot serves',
        ),
        (
            "admins",
            'level=INFO logger=bot.process.serve msg="approvals: workspace admins and owners may',
        ),
    ],
)
def test_artbot_serve_says_its_approval_policy_at_start_up(
    tmp_path: Path, approval: str, said: str
) -> None:
    """A real `artbot serve` with OAuth and a runner: the line comes before the database is
    opened, so a database nobody listens on ends the process right after it (exit 2)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ARTBOT_", "PORT"))}
    env.update(
        OAUTH,
        ARTBOT_APPROVAL=approval,
        ARTBOT_RUNNER_URL="http://127.0.0.1:9",
        ARTBOT_RUNNER_TOKEN=TOKEN,
        ARTBOT_DATABASE_URL="postgresql+psycopg://artbot@127.0.0.1:9/artbot",
        XDG_DATA_HOME=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=GENEROUS_S,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    if not approval:
        assert "set ARTBOT_APPROVERS (user ids) or ARTBOT_APPROVAL=admins" in done.stderr
    assert NO_POLICY not in done.stderr  # the thread's words, not the log's
