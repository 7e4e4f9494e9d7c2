"""Several bot processes (`artbot serve --workers N`) split the channels between them: each
channel's conversations belong to one worker, which alone delivers their Slack effects, takes
over its own dead claims at start and expires its own sessions (`bot.process.shards`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from slack_sdk import WebClient

from bot.delivery.effects import Post
from bot.delivery.outbox import Outbox
from bot.delivery.worker import OutboxWorker
from bot.migrations import BOT_DATABASE
from bot.process.shards import ALONE, Shard, shard_of
from bot.services import LISTENER_SLOTS, build_services
from bot.settings import BotSettings
from bot.slack.blocks import text_message
from storage import migrations
from storage.database import create_database_engine
from storage.sessions import SessionKey
from tests.bot.conftest import Database
from tests.fakes.workspace import BOT_TOKEN, SIGNING_SECRET

LEASE = timedelta(minutes=2)
CHANNELS = [f"C0{n:04d}" for n in range(40)]


def a_thread_of(shard: Shard) -> SessionKey:
    channel = next(c for c in CHANNELS if shard_of("T0", c, shard.count) == shard.index)
    return SessionKey("T0", channel, "1700000000.000100")


def test_each_channel_belongs_to_exactly_one_of_the_workers() -> None:
    for count in (1, 2, 3, 8):
        shards = [Shard(index, count) for index in range(count)]
        for channel in CHANNELS:
            key = SessionKey("T0", channel, "1.0")
            assert sum(shard.owns(key) for shard in shards) == 1
    assert len({shard_of("T0", c, 2) for c in CHANNELS}) == 2  # both get some
    assert ALONE.owns(SessionKey("T9", "C9", "1.0"))


def test_every_process_agrees_on_the_owner_whatever_its_hash_seed() -> None:
    program = (
        "from bot.process.shards import shard_of; "
        "print([shard_of('T0', f'C{n}', 3) for n in range(50)])"
    )
    answers = {
        subprocess.run(
            [sys.executable, "-c", program],
            cwd=Path(__file__).resolve().parents[2],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(answers) == 1


@pytest.mark.parametrize("text", ["1/2", "0/1", "3/8"])
def test_a_shard_reads_as_it_prints(text: str) -> None:
    assert str(Shard.parse(text)) == text


@pytest.mark.parametrize("text", ["2/2", "1", "a/b", "-1/2", "0/0", ""])
def test_a_shard_that_cannot_be_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Shard.parse(text)


@pytest.fixture
def outbox(database: Database) -> Iterator[Outbox]:
    migrations.upgrade(BOT_DATABASE, database.url, schema=database.schema)
    store = Outbox(create_database_engine(database.url), schema=database.schema)
    yield store
    store.close()


def test_a_worker_at_its_start_takes_over_its_own_dead_claims_not_a_live_neighbours(
    outbox: Outbox,
) -> None:
    first, second = Shard(0, 2), Shard(1, 2)
    mine, theirs = a_thread_of(first), a_thread_of(second)
    for key in (mine, theirs):
        outbox.enqueue(key, [Post(text_message("Noted."))])
        assert outbox.claim(key, LEASE)  # claimed, then the claimer is gone (or alive)

    assert outbox.release_claims(first) == 1

    assert outbox.claim(mine, LEASE)  # due again
    assert not outbox.claim(theirs, LEASE)  # still its worker's
    assert outbox.release_claims(second) == 1
    assert outbox.claim(theirs, LEASE)


def test_a_worker_leaves_another_workers_thread_to_it(outbox: Outbox) -> None:
    first = Shard(0, 2)
    theirs = a_thread_of(Shard(1, 2))

    asked: list[str] = []

    def client_for(team: str) -> WebClient:
        asked.append(team)
        return WebClient(token="xoxb-nowhere", base_url="http://127.0.0.1:9/")

    worker = OutboxWorker(outbox, client_for, generate=lambda *_: None, shard=first, poll_s=60)
    worker.start()
    try:
        assert not worker.hold(theirs)  # its turns are not saved here either
        outbox.enqueue(theirs, [Post(text_message("Noted."))])  # e.g. an uninstall's note
        worker.deliver_now(theirs)
        worker._dispatch()  # pyright: ignore[reportPrivateUsage]  # the loop's one pass, here
    finally:
        worker.stop()
    assert asked == [] and outbox.depth() == 1  # its own worker's loop delivers it


@pytest.mark.parametrize(("count", "slots"), [(1, LISTENER_SLOTS), (2, 4), (4, 2), (16, 2)])
def test_workers_share_the_compute_slots_of_one_process(
    tmp_path: Path, count: int, slots: int
) -> None:
    settings = BotSettings.model_validate(
        {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "ARTBOT_DATABASE_URL": f"sqlite:///{tmp_path / 'artbot.db'}",
            "ARTBOT_SCRIPTS_DIR": str(tmp_path / "scripts"),
            "ARTBOT_DRYRUN": "false",
        }
    )
    service = build_services(settings, dryrun=None, shard=Shard(count - 1, count))
    try:
        assert service.slots.free == slots
    finally:
        service.store.close()
