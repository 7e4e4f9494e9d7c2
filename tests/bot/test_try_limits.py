"""What `try <prompt>` may cost: rate limits per person and per workspace, said in the thread
with when to try again, and a pool of its own so that tries never hold the listeners (acks, and
other workspaces' wizards, go on while a slow model answers).

The real bot (signed requests, the fake Slack on loopback), a trained ServerlessBackend model
served by the loopback fake OpenAI; a slow model is one held by an event, never a clock."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from bot.process.serve import BotServer, web_for
from bot.runs.trained_model.try_limits import TryLimits, TryPool
from flows import TRAIN_RL, replay
from runner.schemas import EventsPage, EventType, JobEvent
from storage.sessions import SessionKey
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_run_followups import BASELINE, NOBODY_LISTENS, TOKEN, a_served_run
from tests.bot.test_workspaces import CLIENT_ID, CLIENT_SECRET, TEAMS, OAuthBot
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import slash_command

GENEROUS_S = 60.0  # a hang guard on a loaded machine, never a measurement
TRIES = 70


def replies(user: SlackUser, needle: str) -> list[str]:
    return [m.text for m in user.bot_messages() if needle in m.text]


def test_the_try_past_the_per_user_limit_is_refused_with_when_to_retry_and_calls_no_model(
    make_bot: BotFactory,
) -> None:
    with FakeOpenAI(otherwise=Scripted.text("4")) as model:
        bot = make_bot(
            ARTBOT_RUNNER_URL=NOBODY_LISTENS,
            ARTBOT_RUNNER_TOKEN=TOKEN,
            WANDB_API_KEY=model.key,
            ARTBOT_TRY_PER_USER="3",
            ARTBOT_TRY_WINDOW_S="600",
        )
        user, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)
        for n in range(3):
            user.reply(f"try What is {n} + 2?")
        assert len(model.requests) == 3 and len(replies(user, "```4```")) == 3

        user.reply("try What is 3 + 2?")  # the fourth in ten minutes

        said = user.bot_messages()[-1].text
        assert said.startswith(":no_entry_sign: ") and "more than 3 `try` prompts" in said
        assert "in 10 minutes, the most one person may send" in said
        # When the first of the three leaves the window: under ten minutes from now.
        wait = re.search(r"Try again in (\d+) minutes\.", said)
        assert wait is not None and 1 < int(wait.group(1)) <= 10
        user.reply("try And now?", wait=False)  # refused again, not said again: no flood
        user.settle()
        assert len(model.requests) == 3  # no model call for either
        assert len(replies(user, "the most one person may send")) == 1


def test_the_workspaces_tries_are_limited_across_its_threads(make_bot: BotFactory) -> None:
    with FakeOpenAI(otherwise=Scripted.text("4")) as model:
        bot = make_bot(
            ARTBOT_RUNNER_URL=NOBODY_LISTENS,
            ARTBOT_RUNNER_TOKEN=TOKEN,
            WANDB_API_KEY=model.key,
            ARTBOT_TRY_PER_WORKSPACE="2",
            ARTBOT_TRY_WINDOW_S="30",
        )
        first, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)
        second, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)
        first.reply("try one")
        first.reply("try two")

        second.reply("try three")

        said = second.bot_messages()[-1].text
        assert "This workspace has sent 2 `try` prompts in 30 seconds" in said
        assert "Try again in " in said and len(model.requests) == 2


def test_a_limit_counts_a_window_and_says_when_it_frees() -> None:
    now = [1000.0]
    limits = TryLimits(per_user=2, per_workspace=3, window_s=60, clock=lambda: now[0])
    assert limits.take("T1", "U1") is None
    now[0] += 20
    assert limits.take("T1", "U1") is None
    now[0] += 5
    refused = limits.take("T1", "U1")
    assert refused is not None and refused.say and "Try again in 35 seconds." in refused.text
    again = limits.take("T1", "U1")
    assert again is not None and not again.say  # said once until it frees
    assert limits.take("T1", "U2") is None  # another person: the workspace has room for one
    workspace = limits.take("T1", "U3")
    assert workspace is not None and "This workspace has sent 3" in workspace.text
    assert limits.take("T2", "U1") is None  # another workspace counts apart
    now[0] += 35
    assert limits.take("T1", "U1") is None  # the first try left the window
    now[0] += 300
    assert limits.take("T1", "U1") is None and limits.take("T1", "U1") is None
    refused = limits.take("T1", "U1")
    assert refused is not None and refused.say  # a new spell of refusals is said again


def test_the_pool_runs_at_most_its_threads_and_a_workspaces_share_at_once() -> None:
    pool = TryPool(threads=2, per_workspace=3)
    release, started = threading.Event(), threading.Semaphore(0)

    def held() -> None:
        started.release()
        assert release.wait(GENEROUS_S)

    assert [pool.submit("T1", held) for _ in range(3)] == [None, None, None]
    refusal = pool.submit("T1", held)
    assert refusal is not None and "3 `try` prompts of this workspace" in refusal
    assert pool.submit("T2", held) is None  # another workspace still gets in
    assert started.acquire(timeout=GENEROUS_S) and started.acquire(timeout=GENEROUS_S)
    assert not started.acquire(timeout=0.2)  # two threads: the third waits
    assert pool.in_flight("T1") == 3 and pool.in_flight() == 4
    release.set()
    deadline = time.monotonic() + GENEROUS_S
    while pool.in_flight():
        assert time.monotonic() < deadline, "the pool never emptied"
        time.sleep(0.01)
    assert pool.submit("T1", held) is None


# -- a slow model does not delay another workspace --


@contextlib.contextmanager
def two_workspaces(make_bot: BotFactory, fake: FakeSlack, **env: str) -> Iterator[OAuthBot]:
    for team, channel in TEAMS.items():
        fake.add_workspace(team, [channel])
    fake.oauth_app(CLIENT_ID, CLIENT_SECRET)
    bot = make_bot(dryrun=None, SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, **env)
    server = BotServer(web_for(bot.app, bot.service)).start()
    bot.http_url = f"{server.base_url}/slack/events"  # over HTTP, as Slack sends them
    try:
        oauth = OAuthBot(bot, server, fake)
        for team in TEAMS:
            oauth.install(team)
        yield oauth
    finally:
        server.stop()


def served_run_in(bot: Bot, team: str, user: str, model_url: str) -> SlackUser:
    """A thread of `team` whose wizard's run succeeded with a served ServerlessBackend model."""
    channel = TEAMS[team]
    parent = bot.app.client_for(team).chat_postMessage(channel=channel, text=f"<@{user}> ...")
    key = SessionKey(team, channel, str(parent["ts"]))
    bot.service.store.create(key, user, replay(TRAIN_RL, BASELINE))
    runs = bot.service.runs
    assert runs is not None
    approval = runs.records.record_approval(key, user, "print('train')\n", "train.py")
    run = runs.runs.create(
        approval_id=approval.id,
        key=key,
        owner=user,
        script_name="train.py",
        script_sha256=approval.script_sha256,
        backend="serverless",
    )
    runs.runs.update(run.id, job_id=f"job-{run.id}", state="running")
    done = JobEvent(
        seq=1,
        job_id=f"job-{run.id}",
        type=EventType.succeeded,
        at=datetime.now(UTC),
        data={"model": "math-solver@12", "inference_url": model_url, "step": 12},
    )
    page = EventsPage(job_id=done.job_id, events=[done], next_after=1, finished=True)
    runs.apply(run.id, page)
    tries = SlackUser(bot, user=user, channel=channel, thread=key.thread, team=team)
    tries.settle()
    return tries


def test_seventy_tries_at_a_slow_model_leave_another_workspaces_wizard_answered(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    """Issue 25: 70 tries against a slow model held every listener thread, and another
    workspace's /train-rl waited for them. Here the model holds every try until the other
    workspace's first question is in its thread."""
    model_holds = threading.Event()
    with (
        FakeOpenAI(otherwise=Scripted.text("4"), gate=model_holds) as model,
        two_workspaces(
            make_bot,
            fake,
            ARTBOT_RUNNER_URL=NOBODY_LISTENS,
            ARTBOT_RUNNER_TOKEN=TOKEN,
            WANDB_API_KEY=model.key,
            # Only the pool bounds them here: every one of the 70 is let through the limits.
            ARTBOT_TRY_PER_USER="1000",
            ARTBOT_TRY_PER_WORKSPACE="1000",
            ARTBOT_TRY_IN_FLIGHT_PER_WORKSPACE="1000",
            ARTBOT_TRY_THREADS="8",
        ) as oauth,
    ):
        bot = oauth.bot
        north = served_run_in(bot, "T0NORTH", "U0NORTH", model.base_url)
        south = SlackUser(bot, user="U0SOUTH", channel=TEAMS["T0SOUTH"], team="T0SOUTH")
        done_before = bot.works_done()
        try:
            for n in range(TRIES):
                assert north.reply(f"try What is {n} + 1?", wait=False) == 200
            # Every try was handed over (the listeners are free), and 8 are at the model.
            bot.wait_for_works_done(done_before + TRIES, timeout=GENEROUS_S)
            fake.wait_for(lambda f: len(model.requests) >= 8, timeout=GENEROUS_S)
            trier = bot.service.trier
            assert trier is not None and trier.pool.in_flight("T0NORTH") == TRIES

            command = slash_command(
                text="Summarize support tickets in one sentence.",
                user_id=south.user,
                channel_id=south.channel,
                team_id=south.team,
            )
            assert bot.dispatch(command) == 200
            fake.wait_for(
                lambda f: any(m.is_reply for m in f.messages(south.channel)), timeout=GENEROUS_S
            )

            [parent] = [m for m in fake.messages(south.channel) if not m.is_reply]
            south.thread = parent.ts
            assert south.bot_messages()[0].text.startswith("Can an episode")
            assert not model_holds.is_set()  # asked while all 70 tries were held
            assert len(model.requests) == 8 and model.most_in_flight == 8  # the pool's cap
        finally:
            model_holds.set()
        fake.wait_for(lambda f: len(replies(north, "```4```")) == TRIES, timeout=GENEROUS_S)
        assert len(model.requests) == TRIES and model.most_in_flight == 8
