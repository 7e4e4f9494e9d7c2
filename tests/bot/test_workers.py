"""`artbot serve --workers 2`: two bot processes behind the router, each owning some channels.
Every conversation is answered once and in order whichever worker owns it; /metrics and /healthz
speak for both; a worker that dies is started again and its channels carry on."""

from __future__ import annotations

import os
import signal
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bot.process.shards import shard_of
from tests.bot.bot_process import BotProcess, process_database_url
from tests.bot.conftest import Database
from tests.bot.test_durable_turns import (
    FIRST,
    SETTLED_WITHIN_S,
    TASK,
    TURNS,
    HttpUser,
    live,
    starting,
)
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import TEAM_ID

CHANNELS = [f"C0WORK{n:02d}" for n in range(8)]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def worker_pids(bot: BotProcess) -> list[int]:
    return [
        int(child)
        for listing in Path(f"/proc/{bot.process.pid}/task").glob("*/children")
        for child in listing.read_text().split()
    ]


def walk_three_steps(bot: BotProcess, user: HttpUser) -> None:
    user.command(bot)
    user.fake.wait_for(lambda f: starting(user.messages(), FIRST) != [], SETTLED_WITHIN_S)
    user.step(bot, "Only logged or static scenarios")
    user.step(bot, "Single-turn")


def test_two_workers_answer_every_channel_once_and_speak_as_one(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    assert {shard_of(TEAM_ID, c, 2) for c in CHANNELS} == {0, 1}  # both workers get some
    url = process_database_url(database.url, database.schema)
    users = [HttpUser(fake, channel=c, user=f"U0WORK{n:02d}") for n, c in enumerate(CHANNELS)]
    with BotProcess(fake, url, tmp_path, workers=2) as bot:
        with ThreadPoolExecutor(max_workers=len(users)) as pool:
            list(pool.map(lambda u: walk_three_steps(bot, u), users))

        for user in users:
            messages = user.messages()
            for question in (FIRST, TURNS, TASK):
                assert len(starting(messages, question)) == 1, (user.channel, question)
            assert live(messages) == starting(messages, TASK)

        health, said = get(f"{bot.base_url}/healthz")
        assert health == 200 and "worker 0" in said and "worker 1" in said
        status, metrics = get(f"{bot.base_url}/metrics")
        assert status == 200
        acks: dict[str, float] = {}
        for family in text_string_to_metric_families(metrics):
            for sample in family.samples:
                if sample.name == "artbot_slack_acks_total":
                    worker = sample.labels["worker"]
                    acks[worker] = acks.get(worker, 0.0) + sample.value
        assert set(acks) == {"0", "1"}  # each worker counted its own channels' requests
        assert sum(acks.values()) == len(users) * 3


def test_a_worker_that_dies_is_started_again_and_its_channels_carry_on(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    url = process_database_url(database.url, database.schema)
    channel = next(c for c in CHANNELS if shard_of(TEAM_ID, c, 2) == 1)
    user = HttpUser(fake, channel=channel)
    with BotProcess(fake, url, tmp_path, workers=2) as bot:
        user.command(bot)
        fake.wait_for(lambda f: starting(user.messages(), FIRST) != [], SETTLED_WITHIN_S)
        before = worker_pids(bot)
        assert len(before) == 2

        for pid in before:  # SIGKILL: no clean-up runs; both die, worker 1 among them
            os.kill(pid, signal.SIGKILL)
        fake.wait_for(
            lambda f: (
                len(set(worker_pids(bot)) - set(before)) == 2
                and get(f"{bot.base_url}/healthz")[0] == 200
            ),
            SETTLED_WITHIN_S,
        )

        user.step(bot, "Only logged or static scenarios")
        assert len(starting(user.messages(), TURNS)) == 1


def running(pid: int) -> bool:
    """Whether `pid` still runs (a zombie, dead and not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_stop_when_their_router_is_killed(
    fake: FakeSlack, database: Database, tmp_path: Path
) -> None:
    url = process_database_url(database.url, database.schema)
    with BotProcess(fake, url, tmp_path, workers=2) as bot:
        workers = worker_pids(bot)
        assert len(workers) == 2 and all(running(pid) for pid in workers)
        bot.kill()  # SIGKILL: the router stops nothing itself
        fake.wait_for(lambda f: not any(running(pid) for pid in workers), SETTLED_WITHIN_S)
