"""The run follower of `artbot serve`: one events long-poll per run, against a real runner on
loopback and the fake Slack. Each job here is tests/runner/scripts/gate.py, which runs until a
file named `release` appears in its folder, so the test decides when its last event happens."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest

from bot.runs.follower import Backoff, RunFollower
from bot.runs.store import Run
from runner.api.server import RunnerServer, build_service
from runner.client import AsyncRunnerClient
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_runs_end_to_end import finished_wizard, runs_of
from tests.fakes.slack_api import FakeSlack
from tests.runner.conftest import SCRIPTS, TOKEN, Runner, RunnerFactory, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

GATE = SCRIPTS / "gate.py"
QUICK_RETRIES = Backoff(first_s=0.1, cap_s=0.5)


@pytest.fixture
def gpu_host(make_runner: RunnerFactory) -> Runner:
    return make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {GATE} {{script}}",
    )


@pytest.fixture
def start_follower() -> Iterator[Callable[..., RunFollower]]:
    """`start_follower(user, runner_url)`: the follower `artbot serve` starts, for user's bot.
    The sweep is an hour apart: whatever reaches a thread here came through a long-poll."""
    started: list[RunFollower] = []

    def start(user: SlackUser, runner_url: str, **options: object) -> RunFollower:
        options = {"sweep_s": 3600.0, "backoff": QUICK_RETRIES, **options}
        follower = RunFollower(
            runs_of(user), user.bot.app.client_for, AsyncRunnerClient(runner_url, TOKEN), **options
        )
        started.append(follower.start())
        return follower

    yield start
    for follower in started:
        follower.stop()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def long_polls_waiting(host: Runner) -> int:
    return host.server.service.wakeups.waiting()


def texts(user: SlackUser) -> list[str]:
    return [m.text for m in user.bot_messages()]


def said(user: SlackUser, start: str) -> int:
    return sum(text.startswith(start) for text in texts(user))


def the_run(user: SlackUser) -> Run:
    [run] = runs_of(user).runs.for_thread(user.key)
    return run


def release(host: Runner, run: Run) -> None:
    assert run.job_id is not None
    (host.run_dir(run.job_id) / "release").touch()


def approved_and_started(
    make_bot: BotFactory,
    fake: FakeSlack,
    host: Runner,
    start_follower: Callable[..., RunFollower],
    **options: object,
) -> tuple[SlackUser, RunFollower]:
    """A run approved in Slack whose job started, told by a follower now long-polling it."""
    user = finished_wizard(make_bot, fake, host.base_url)
    follower = start_follower(user, host.base_url, **options)
    user.click("Approve and run")
    wait_until(lambda: said(user, ":rocket: Training started") == 1, "the start told")
    wait_until(lambda: long_polls_waiting(host) == 1, "the follower's long-poll waits")
    return user, follower


def test_an_event_reaches_the_thread_through_the_long_poll_waiting_for_it(
    make_bot: BotFactory,
    fake: FakeSlack,
    gpu_host: Runner,
    start_follower: Callable[..., RunFollower],
) -> None:
    user, follower = approved_and_started(make_bot, fake, gpu_host, start_follower, wait_s=30.0)
    run = the_run(user)
    assert follower.following() == {run.id}
    assert not any("Training finished" in t for t in texts(user))

    def card_text() -> str:
        card = fake.message(user.channel, run.card_ts or "")
        return card.text if card is not None else ""

    # No event comes while the job waits: the long-poll waits only until the throttled status
    # card may show `running`, not its whole 30 s.
    wait_until(lambda: ": running" in card_text(), "the card shows the job running", timeout=20)

    release(gpu_host, run)  # the job ends: the runner records `succeeded`, the waiting poll answers

    wait_until(lambda: the_run(user).state == "succeeded", "the run recorded as succeeded")
    wait_until(lambda: not follower.following(), "following ends with the run")
    job_events = gpu_host.client.events(run.job_id or "").events
    assert the_run(user).cursor == job_events[-1].seq
    assert "succeeded" in card_text()
    assert said(user, ":rocket: Training started") == 1


def test_stopping_the_follower_drops_its_long_poll_and_a_new_bot_resumes_without_repeats(
    make_bot: BotFactory,
    fake: FakeSlack,
    gpu_host: Runner,
    start_follower: Callable[..., RunFollower],
) -> None:
    # The long-poll would wait 30 s, longer than stop() waits for the thread: it must be dropped.
    user, follower = approved_and_started(make_bot, fake, gpu_host, start_follower, wait_s=30.0)
    cursor = the_run(user).cursor
    assert cursor > 0

    follower.stop(timeout_s=20)

    assert not follower.alive
    assert the_run(user).cursor == cursor and the_run(user).active

    restarted = SlackUser(
        make_bot(ARTBOT_RUNNER_URL=gpu_host.base_url, ARTBOT_RUNNER_TOKEN=TOKEN),
        thread=user.thread,
    )
    start_follower(restarted, gpu_host.base_url)
    wait_until(lambda: long_polls_waiting(gpu_host) >= 1, "the new follower's long-poll waits")
    release(gpu_host, the_run(restarted))
    wait_until(lambda: the_run(restarted).state == "succeeded", "the run recorded as succeeded")
    restarted.settle()
    assert said(restarted, ":rocket: Training started") == 1  # told once, by the first bot
    assert the_run(restarted).cursor > cursor


def test_the_runner_down_then_up_is_told_once_and_following_goes_on(
    make_bot: BotFactory,
    fake: FakeSlack,
    gpu_host: Runner,
    start_follower: Callable[..., RunFollower],
) -> None:
    user, _ = approved_and_started(make_bot, fake, gpu_host, start_follower)
    port = urlsplit(gpu_host.base_url).port
    assert port is not None

    gpu_host.stop(cancel_jobs=False)  # the job keeps running; the next runner re-attaches it
    wait_until(lambda: said(user, ":warning: Lost contact with the GPU runner") == 1, "told")

    service = build_service(
        gpu_host.settings, environ=job_environ(OPENAI_API_KEY="sk-test-not-real")
    )
    with RunnerServer(service, TOKEN, port=port):  # the runner is back where the bot expects it
        wait_until(lambda: said(user, ":electric_plug: The GPU runner answers again") == 1, "told")
        release(gpu_host, the_run(user))
        wait_until(lambda: the_run(user).state == "succeeded", "the run recorded as succeeded")
    service.store.close()
    assert said(user, ":warning: Lost contact with the GPU runner") == 1
    assert said(user, ":rocket: Training started") == 1


def test_a_job_the_runner_does_not_know_ends_the_run_as_lost(
    make_bot: BotFactory,
    fake: FakeSlack,
    make_runner: RunnerFactory,
    start_follower: Callable[..., RunFollower],
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {GATE} {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    run = the_run(user)
    runs_of(user).runs.update(run.id, job_id="no-such-job")
    start_follower(user, host.base_url)
    wait_until(lambda: the_run(user).state == "lost", "the run ended as lost")
    # Told through the outbox, after the run's state is saved.
    wait_until(
        lambda: said(user, ":grey_question: The runner no longer knows this job") == 1, "told"
    )
    host.client.cancel(run.job_id or "")
