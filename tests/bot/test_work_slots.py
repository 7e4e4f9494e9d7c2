"""Work slots: few listener threads compute at once, any number wait on Slack, and a thread back
from Slack never waits for a slot (it may hold a lock that threads in slots wait for)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

import pytest

from bot.process.work_slots import (
    BEHIND_THE_ACKS_NICENESS,
    WorkSlots,
    YieldingWebClient,
    behind_the_acks,
)
from bot.services import LISTENER_SLOTS
from tests.bot.conftest import BotFactory, SlackUser
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import BOT_TOKEN, CHANNEL_ID

JOIN_S = 10.0
"""A bound on waiting for a thread that must finish (a hang, not a timing, fails the test)."""


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + JOIN_S
    while not condition():
        assert time.monotonic() < deadline, "the threads never got there"
        time.sleep(0.001)


def in_thread(work: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_no_more_threads_than_slots_run_their_work_at_once() -> None:
    slots = WorkSlots(2)
    inside, peak, go = 0, 0, threading.Event()
    changed = threading.Condition()

    def work() -> None:
        nonlocal inside, peak
        with slots.holding():
            with changed:
                inside += 1
                peak = max(peak, inside)
                changed.notify_all()
            go.wait(JOIN_S)
            with changed:
                inside -= 1

    threads = [in_thread(work) for _ in range(5)]
    with changed:
        assert changed.wait_for(lambda: inside == 2, JOIN_S)
    assert slots.free == 0
    go.set()
    for thread in threads:
        thread.join(JOIN_S)
        assert not thread.is_alive()
    assert peak == 2
    assert slots.free == 2


def test_slots_go_to_waiting_threads_in_the_order_they_asked_never_to_a_newcomer() -> None:
    slots = WorkSlots(1)
    order: list[str] = []

    def work(name: str) -> Callable[[], None]:
        def in_a_slot() -> None:
            with slots.holding():
                order.append(name)

        return in_a_slot

    with slots.holding():
        first = in_thread(work("first"))
        wait_until(lambda: slots.queued == 1)
        second = in_thread(work("second"))
        wait_until(lambda: slots.queued == 2)
    # The slot went straight to the oldest waiter: none is free for a thread asking now.
    with slots.holding():
        order.append("newcomer")
    for thread in (first, second):
        thread.join(JOIN_S)
        assert not thread.is_alive()
    assert order == ["first", "second", "newcomer"]
    assert (slots.free, slots.queued) == (1, 0)


def test_a_thread_without_a_slot_waits_on_slack_without_touching_them() -> None:
    slots = WorkSlots(1)
    with slots.waiting():
        assert slots.free == 1
    assert not slots.held_here()


def test_a_slack_call_gives_the_slot_to_another_thread_and_takes_it_back_after(
    fake: FakeSlack,
) -> None:
    slots = WorkSlots(1)
    client = YieldingWebClient(slots, token=BOT_TOKEN, base_url=fake.base_url)
    held_after_the_call: list[bool] = []

    def post_in_a_slot() -> None:
        with slots.holding():
            client.chat_postMessage(channel=CHANNEL_ID, text="Which model?")
            held_after_the_call.append(slots.held_here())

    fake.hold("chat.postMessage")
    poster = in_thread(post_in_a_slot)
    fake.wait_for(lambda f: f.holding("chat.postMessage") == 1)
    # Slack has not answered: the poster's slot is free for other work meanwhile.
    assert slots.free == 1
    with slots.holding():
        assert slots.free == 0
        # Slack answers while this thread holds the only slot: the poster takes its slot back
        # at once (it could hold its conversation's lock) and finishes.
        fake.release("chat.postMessage")
        poster.join(JOIN_S)
        assert not poster.is_alive()
    assert held_after_the_call == [True]
    assert slots.free == 1
    assert [m.text for m in fake.messages(CHANNEL_ID)] == ["Which model?"]


def test_a_thread_back_from_slack_computes_over_the_bound_until_it_is_done(
    fake: FakeSlack,
) -> None:
    slots = WorkSlots(1)
    client = YieldingWebClient(slots, token=BOT_TOKEN, base_url=fake.base_url)
    back, go_on = threading.Event(), threading.Event()

    def post_in_a_slot() -> None:
        with slots.holding():
            client.chat_postMessage(channel=CHANNEL_ID, text="Which model?")
            back.set()
            go_on.wait(JOIN_S)

    fake.hold("chat.postMessage")
    poster = in_thread(post_in_a_slot)
    fake.wait_for(lambda f: f.holding("chat.postMessage") == 1)
    with slots.holding():
        fake.release("chat.postMessage")
        assert back.wait(JOIN_S)
        assert slots.free == -1  # two threads compute: the poster came back over the bound
        go_on.set()
        poster.join(JOIN_S)
        assert not poster.is_alive()
        assert slots.free == 0
    assert slots.free == 1


def test_slots_are_at_least_one() -> None:
    with pytest.raises(ValueError):
        WorkSlots(0)


def test_more_racing_replies_than_slots_while_slack_holds_the_first_answer_all_get_handled(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    """The first reply's next question waits on Slack while its thread's lock is held; the
    others fill every slot waiting for that lock. Slack answering must not leave the first one
    waiting for a slot (all would wait forever): every reply is handled, in turn."""
    user = SlackUser(make_bot())
    user.command()
    user.settle()
    posted = len(user.bot_messages())
    replies = LISTENER_SLOTS + 4
    fake.hold("chat.postMessage")
    for _ in range(replies):
        assert user.reply("1", wait=False) == 200
    fake.wait_for(lambda f: f.holding("chat.postMessage") == 1)
    fake.release("chat.postMessage")
    user.settle(timeout=60)

    # "1" picks the first option of the two choice questions, then is too short for the task
    # (each time the task is asked again): one message per reply.
    assert len(user.bot_messages()) == posted + replies
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.step == "task"
    assert user.bot.service.outbox.depth() == 0


def test_the_work_behind_the_acks_is_counted_in_flight_until_it_ends(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot()
    user = SlackUser(bot)
    user.command()
    user.settle()
    assert bot.works_in_flight() == 0
    fake.hold("chat.postMessage")

    assert user.reply("1", wait=False) == 200
    fake.wait_for(lambda f: f.holding("chat.postMessage") == 1)
    assert bot.works_in_flight() == 1  # acked, its next question waiting on Slack
    fake.release("chat.postMessage")

    fake.wait_for(lambda f: bot.works_in_flight() == 0, timeout=JOIN_S)
    assert "artbot_listener_works_in_flight 0.0" in bot.app.metrics.exposition().decode()


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
def test_the_threads_that_compute_run_behind_the_acks_and_the_rest_do_not() -> None:
    niceness: dict[str, int] = {}

    def worker() -> None:
        behind_the_acks()
        niceness["worker"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    thread = in_thread(worker)
    thread.join(JOIN_S)

    process = os.getpriority(os.PRIO_PROCESS, 0)
    assert niceness["worker"] == min(19, process + BEHIND_THE_ACKS_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == process
