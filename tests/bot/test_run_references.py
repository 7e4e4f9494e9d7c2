"""A run is named in Slack by its public id (random), and only within its own workspace: a click,
a modal or a command from another workspace that names it does nothing and says nothing of it.

Two workspaces installed through OAuth on one bot, requests over real HTTP, as an attacker in
the second workspace would send them: signed by Slack, from their own workspace, carrying the
first workspace's run references (and even its owner's user id)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from sqlalchemy import text

from bot.migrations import BOT_DATABASE
from bot.process.serve import BotServer, web_for
from bot.runs.service import RunService
from bot.runs.store import PUBLIC_ID, Run, RunRef
from bot.runs.trained_model.tryit import try_modal
from bot.slack.blocks import (
    RESULT_ACTIONS,
    RUN_CANCEL_ACTION,
    RUN_COMPARE_ACTION,
    RUN_FIX_ACTION,
    RUN_RERUN_ACTION,
    RUN_TRY_ACTION,
)
from bot.workspaces.installations import schema_engine
from flows import TRAIN_RL, replay
from runner.schemas import EventsPage, EventType, JobEvent
from storage import migrations
from storage.database import create_database_engine
from storage.sessions import SessionKey
from tests.bot.conftest import Bot, BotFactory, Database, SlackUser
from tests.bot.test_run_followups import BASELINE, CHANGED, NOBODY_LISTENS, TOKEN
from tests.bot.test_workspaces import CLIENT_ID, CLIENT_SECRET, OAuthBot
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import block_actions, slash_command, view_submission

NORTH, SOUTH = ("T0NORTH", "C0NORTH"), ("T0SOUTH", "C0SOUTH")
OWNER = "U0OWNER"
RUN_ACTIONS = (
    RUN_CANCEL_ACTION,
    f"{RUN_FIX_ACTION}:retry_lower_gpu_memory",
    f"{RUN_FIX_ACTION}:resume",
    RUN_RERUN_ACTION,
    RUN_COMPARE_ACTION,
    RUN_TRY_ACTION,
)


@pytest.fixture
def two_teams(make_bot: BotFactory, fake: FakeSlack) -> Iterator[Bot]:
    """One bot with a runner, installed in two workspaces."""
    for team, channel in (NORTH, SOUTH):
        fake.add_workspace(team, [channel])
    fake.oauth_app(CLIENT_ID, CLIENT_SECRET)
    bot = make_bot(
        SLACK_CLIENT_ID=CLIENT_ID,
        SLACK_CLIENT_SECRET=CLIENT_SECRET,
        ARTBOT_RUNNER_URL=NOBODY_LISTENS,
        ARTBOT_RUNNER_TOKEN=TOKEN,
    )
    server = BotServer(web_for(bot.app, bot.service)).start()
    bot.http_url = f"{server.base_url}/slack/events"
    installer = OAuthBot(bot, server, fake)
    for team, _ in (NORTH, SOUTH):
        installer.install(team)
    yield bot
    server.stop()


def runs_of(bot: Bot) -> RunService:
    assert bot.service.runs is not None
    return bot.service.runs


def a_run(
    bot: Bot, answers: dict[str, Any], *, ends: EventType | None, team: str = NORTH[0]
) -> tuple[SlackUser, Run]:
    """A wizard thread in `team`'s channel with `answers`, whose approved run is running
    (`ends` None) or ended as the runner tells it (succeeded or failed)."""
    channel = dict((NORTH, SOUTH))[team]
    client = bot.app.client_for(team)
    parent = client.chat_postMessage(channel=channel, text=f"<@{OWNER}> started a wizard.")
    key = SessionKey(team, channel, str(parent["ts"]))
    bot.service.store.create(key, OWNER, replay(TRAIN_RL, answers))
    runs = runs_of(bot)
    approval = runs.records.record_approval(key, OWNER, "print('train')\n", "train.py")
    run = runs.runs.create(
        approval_id=approval.id,
        key=key,
        owner=OWNER,
        script_name="train.py",
        script_sha256=approval.script_sha256,
        backend="serverless",
    )
    job = f"job-{run.id}"
    run = runs.runs.update(run.id, job_id=job, state="running")
    at = datetime.now(UTC)
    events = [JobEvent(seq=1, job_id=job, type=EventType.step, at=at, data={"step": 1})]
    if ends is EventType.succeeded:
        data = {"model": "m@1", "inference_url": "http://127.0.0.1:9/v1", "step": 1}
        events.append(JobEvent(seq=2, job_id=job, type=ends, at=at, data=data))
    elif ends is EventType.failed:
        data = {"kind": "oom", "summary": "CUDA out of memory."}
        events.append(JobEvent(seq=2, job_id=job, type=ends, at=at, data=data))
    page = EventsPage(job_id=job, events=events, next_after=len(events), finished=ends is not None)
    runs.apply(run.id, page)
    user = SlackUser(bot, user=OWNER, channel=channel, thread=key.thread, team=team)
    user.settle()
    found = runs.runs.get(run.id)
    assert found is not None
    return user, found


def the_state(bot: Bot, fake: FakeSlack) -> object:
    """What a request could change: Slack calls (other than the token checks Bolt makes), the
    sessions, the runs."""
    runs = runs_of(bot).runs
    return (
        [(c.method, c.params) for c in fake.calls() if c.method != "auth.test"],
        fake.responses(),
        bot.service.store.count_by_status(),
        [
            (r.id, r.state, r.job_id, r.args)
            for team, _ in (NORTH, SOUTH)
            for r in runs.for_owner(OWNER, team)
        ],
    )


def click(bot: Bot, action_id: str, value: str, *, team: str, channel: str, thread: str) -> int:
    """A signed click on a button `action_id` carrying `value`, from `team`'s `channel`."""
    fake: FakeSlack = bot.fake
    request = block_actions(
        action_id,
        value,
        message_ts=thread,
        thread_ts=thread,
        user_id=OWNER,
        channel_id=channel,
        team_id=team,
        trigger_id=fake.issue_trigger(OWNER),
        response_url=fake.response_url(),
    )
    return request.post(bot.http_url or "").status


def test_a_click_from_another_workspace_naming_a_run_does_nothing_and_says_nothing(
    two_teams: Bot, fake: FakeSlack
) -> None:
    bot = two_teams
    running_user, running = a_run(bot, BASELINE, ends=None)
    failed_user, failed = a_run(bot, BASELINE, ends=EventType.failed)
    _, succeeded = a_run(bot, CHANGED, ends=EventType.succeeded)
    south = SlackUser(bot, user=OWNER, channel=SOUTH[1], team=SOUTH[0])
    south.command()  # a thread of their own in their own workspace, for the clicks to sit in
    before = the_state(bot, fake)
    messages = [fake.messages(channel) for channel in (NORTH[1], SOUTH[1])]

    forged: list[tuple[str, int]] = []
    for run in (running, failed, succeeded):
        for action_id in RUN_ACTIONS:
            for channel, thread in ((SOUTH[1], south.thread), (run.channel, run.thread)):
                status = click(
                    bot, action_id, run.public_id, team=SOUTH[0], channel=channel, thread=thread
                )
                forged.append((action_id, status))
        modal = try_modal(run)
        submitted = view_submission(
            {**modal, "id": "V0FORGED"},
            {"prompt": {"prompt_text": "What is 2 + 2?"}},
            user_id=OWNER,
            team_id=SOUTH[0],
        )
        forged.append(("modal", submitted.post(bot.http_url or "").status))
        forged.append(
            (
                RESULT_ACTIONS[0],
                click(
                    bot,
                    RESULT_ACTIONS[0],
                    f"{NORTH[0]}|{NORTH[1]}|{run.thread}",
                    team=SOUTH[0],
                    channel=SOUTH[1],
                    thread=south.thread,
                ),
            )
        )
    south.settle()
    running_user.settle()

    assert {status for _, status in forged} == {200}
    assert the_state(bot, fake) == before
    assert [fake.messages(channel) for channel in (NORTH[1], SOUTH[1])] == messages
    assert fake.ephemerals() == [] and fake.modals() == []

    # The same clicks from the run's own workspace act: the Cancel is answered, the rerun
    # opens a new thread.
    click(
        bot,
        RUN_CANCEL_ACTION,
        running.public_id,
        team=NORTH[0],
        channel=NORTH[1],
        thread=running.thread,
    )
    click(
        bot,
        RUN_RERUN_ACTION,
        failed.public_id,
        team=NORTH[0],
        channel=NORTH[1],
        thread=failed.thread,
    )
    fake.wait_for(lambda f: any("Could not cancel" in m.text for m in f.ephemerals()))
    fake.wait_for(lambda f: any("reopened these answers" in m.text for m in f.messages(NORTH[1])))
    failed_user.settle()


def test_compare_from_another_workspace_finds_no_run_of_the_first(
    two_teams: Bot, fake: FakeSlack
) -> None:
    bot = two_teams
    _, first = a_run(bot, BASELINE, ends=EventType.succeeded)
    _, second = a_run(bot, CHANGED, ends=EventType.succeeded)
    before = len(fake.responses())

    for team, channel in (SOUTH, NORTH):
        slash_command(
            text=f"compare #{first.public_id} {second.public_id}",
            user_id=OWNER,
            team_id=team,
            channel_id=channel,
            response_url=fake.response_url(),
        ).post(bot.http_url or "")
        fake.wait_for(lambda f, seen=before: len(f.responses()) > seen)
        before = len(fake.responses())

    from_south, from_north = [json.dumps(r) for r in fake.responses()[-2:]]
    assert f"No run #{first.public_id} or #{second.public_id} among yours" in from_south
    assert "Posted the comparison" in from_north
    [plot] = [u for u in fake.uploaded_files() if u.name.startswith("compare-")]
    assert plot.channel == NORTH[1]


def test_run_references_in_slack_are_public_ids_never_the_row_ids(
    two_teams: Bot, fake: FakeSlack
) -> None:
    """Every way Slack sees a run (its buttons and their blocks, the Try modal, the runs list)
    names it by its public id: 12 random characters, different for every run, never the
    sequential row id."""
    bot = two_teams
    made = [a_run(bot, BASELINE, ends=ends)[1] for ends in (None, EventType.failed)]
    made += [a_run(bot, BASELINE, ends=EventType.succeeded, team=SOUTH[0])[1]]
    made += [a_run(bot, CHANGED, ends=EventType.succeeded)[1] for _ in range(3)]
    runs = [runs_of(bot).runs.get(run.id) or run for run in made]
    slash_command(
        text="runs",
        user_id=OWNER,
        team_id=NORTH[0],
        channel_id=NORTH[1],
        response_url=fake.response_url(),
    ).post(bot.http_url or "")
    fake.wait_for(lambda f: any("Your training runs" in json.dumps(r) for r in f.responses()))

    seen: set[str] = set()
    for channel in (NORTH[1], SOUTH[1]):
        for message in fake.messages(channel):
            for block in message.blocks or []:
                for element in block.get("elements", []) if block.get("type") == "actions" else []:
                    if element.get("action_id", "").split(":")[0] in {
                        a.split(":")[0] for a in RUN_ACTIONS
                    }:
                        seen.add(element["value"])
                        seen.add(block["block_id"].partition(":")[2])
    seen |= {try_modal(run)["private_metadata"].split()[0] for run in runs}
    listed = json.dumps(fake.responses())

    public_ids = {run.public_id for run in runs}
    assert len(public_ids) == len(runs)
    assert all(PUBLIC_ID.fullmatch(public_id) for public_id in public_ids)
    assert seen == public_ids
    assert all(f"#{run.public_id}" in listed for run in runs if run.team == NORTH[0])
    assert not any(f"#{run.id} " in listed or f"#{run.id}\\n" in listed for run in runs)
    assert RunRef.parse(SOUTH[0], str(runs[0].id)) is None  # a row id names nothing
    found = runs_of(bot).runs.find(RunRef(SOUTH[0], runs[0].public_id))
    assert found is None  # nor does a public id in another workspace
    assert runs_of(bot).runs.find(runs[0].ref) == runs[0]


def test_the_migration_gives_every_existing_run_a_public_id(database: Database) -> None:
    engine = create_database_engine(database.url)
    try:
        with schema_engine(engine, database.schema).begin() as connection:
            config = migrations.alembic_config(
                BOT_DATABASE, database.url, schema=database.schema, connection=connection
            )
            command.upgrade(config, "0006")
        runs = f'"{database.schema}".artbot_runs' if database.schema else "artbot_runs"
        with engine.begin() as connection:
            for n in range(5):
                connection.execute(
                    text(
                        f"INSERT INTO {runs} (approval_id, team, channel, thread, owner, "
                        "script_name, script_sha256, backend, args_json, state, cursor, "
                        "points_json, required_env_json, submit_attempts, "
                        "unreachable_notified, warnings_posted, created_at) VALUES (:n, 'T0', "
                        "'C0', '1.2', 'U0', 's.py', 'x', 'local', '[]', 'succeeded', 0, '[]', "
                        "'[]', 0, 0, 0, :at)"
                    ),
                    {"n": n, "at": datetime(2026, 1, 1, tzinfo=UTC)},
                )
        migrations.upgrade(BOT_DATABASE, database.url, schema=database.schema)
        with engine.connect() as connection:
            public_ids = [
                row[0] for row in connection.execute(text(f"SELECT public_id FROM {runs}"))
            ]
    finally:
        engine.dispose()
    assert len(set(public_ids)) == 5
    assert all(PUBLIC_ID.fullmatch(public_id) for public_id in public_ids)
