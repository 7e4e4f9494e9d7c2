"""Trying a trained model from its thread: `try <prompt>` and the *Try it* button's modal.

A LocalBackend run end to end: approved in the fake Slack, trained by the real runner on
loopback (the stand-in trainer), then served again by a serving job of that runner (the stand-in
vLLM, a real OpenAI-compatible server in a subprocess) and called through the runner. The modal's
own rules (owner only, a prompt required) on a ServerlessBackend run, whose model the loopback
fake OpenAI serves."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from bot.slack.blocks import TRY_MODAL
from runner.schemas import EventType, ServingState
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_run_followups import NOBODY_LISTENS, OTHER_USER, TOKEN, a_served_run
from tests.bot.test_runs_end_to_end import STAND_IN, finished_wizard, follow_until_finished
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.slack_requests import view_submission
from tests.fakes.workspace import USER_ID
from tests.runner.conftest import Runner, RunnerFactory, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)
from tests.runner.test_serving_jobs import SERVE_COMMAND

GENEROUS_S = 60.0  # a hang guard on a loaded machine, never a measurement
IDLE_S = "5"
"""The serving job's idle timeout here: long enough for a prompt right after it starts."""


@pytest.fixture
def gpu_host(make_runner: RunnerFactory) -> Iterator[Runner]:
    yield make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} {{script}}",
        serve_command=SERVE_COMMAND,
        serve_idle_s=IDLE_S,
        gpu_slots="0",
    )


def texts(user: SlackUser) -> list[str]:
    return [m.text for m in user.bot_messages()]


def wait_for_text(user: SlackUser, needle: str, count: int = 1) -> None:
    user.fake.wait_for(lambda f: sum(needle in t for t in texts(user)) >= count, timeout=GENEROUS_S)
    user.settle()


def final_message(user: SlackUser) -> Message:
    return next(m for m in user.bot_messages() if "Training finished" in m.text)


def open_try_modal(user: SlackUser) -> dict[str, object]:
    """Click *Try it* on the run's final message; the modal Slack opened for it."""
    before = len(user.fake.modals(user.user))
    user.click("Try it", wait=False, on=final_message(user))
    user.fake.wait_for(lambda f: len(f.modals(user.user)) > before, timeout=GENEROUS_S)
    return user.fake.modals(user.user)[-1]


def submit_prompt(bot: Bot, modal: dict[str, object], prompt: str) -> tuple[int, str]:
    return bot.answer(view_submission(modal, {"prompt": {"prompt_text": prompt}}))


def test_try_on_a_local_run_serves_its_last_checkpoint_on_the_runner_and_posts_the_reply(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    user = finished_wizard(make_bot, fake, gpu_host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    [run] = user.bot.service.runs.runs.for_thread(user.key) if user.bot.service.runs else []
    assert run.job_id is not None
    assert "*Try it*" in json.dumps(final_message(user).blocks)

    user.reply("try What is 2 + 2?")

    wait_for_text(user, "heard:")
    said = texts(user)
    [starting] = [t for t in said if t.startswith(":hourglass_flowing_sand: Starting the model")]
    assert "`m1@4`" in starting and f"{IDLE_S} seconds pass without a prompt" in starting
    assert "```m1@4 heard: What is 2 + 2?```" in said[-1]
    assert gpu_host.client.serving(run.job_id).state is ServingState.serving

    # The button's modal reaches the same serving job: no second start.
    modal = open_try_modal(user)
    assert (
        modal["callback_id"] == TRY_MODAL
        and modal["private_metadata"] == f"{run.public_id} {run.key.channel}"
    )
    assert submit_prompt(user.bot, modal, "And 3 + 3?") == (200, "")
    wait_for_text(user, "heard: And 3 + 3?")
    assert sum("Starting the model" in t for t in texts(user)) == 1

    # It stops when idle; the next `try` starts it again.
    serving = gpu_host.client.serving(run.job_id)
    deadline = time.monotonic() + GENEROUS_S
    while gpu_host.client.serving(run.job_id).state is not ServingState.stopped:
        assert time.monotonic() < deadline, "the serving job never went idle"
        time.sleep(0.1)
    stopped = gpu_host.client.events(run.job_id, after=serving.after_seq).events
    assert [e.data for e in stopped if e.type is EventType.stopped] == [
        {"reason": f"idle for {IDLE_S} s"}
    ]
    user.reply("try Once more")
    wait_for_text(user, "heard: Once more")
    assert sum("Starting the model" in t for t in texts(user)) == 2

    # The thread's Cancel (on the message that said it was starting) stops it.
    starting_message = [m for m in user.bot_messages() if "Starting the model" in m.text][-1]
    user.click("Cancel", wait=False, on=starting_message)
    fake.wait_for(
        lambda f: any("Stopping the served model `m1@4`" in m.text for m in f.ephemerals()),
        timeout=GENEROUS_S,
    )
    deadline = time.monotonic() + GENEROUS_S
    while gpu_host.client.serving(run.job_id).state is not ServingState.stopped:
        assert time.monotonic() < deadline, "Cancel did not stop the serving job"
        time.sleep(0.1)
    assert gpu_host.client.serving(run.job_id).stopped_reason == "stopped on request"


def test_try_on_a_local_run_says_when_the_runner_does_not_answer(make_bot: BotFactory) -> None:
    bot = make_bot(ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN)
    user, _ = a_served_run(bot, backend="local", model_url="http://127.0.0.1:8000/v1")

    user.reply("try What is 2 + 2?")

    assert "The runner did not answer" in user.bot_messages()[-1].text


def test_the_try_it_modal_posts_the_prompt_and_the_reply_into_the_runs_thread(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    with FakeOpenAI() as model:
        model.script(Scripted.text("4"))
        bot = make_bot(
            ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN, WANDB_API_KEY=model.key
        )
        user, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)

        modal = open_try_modal(user)
        status, body = submit_prompt(bot, modal, "What is 2 + 2?")

        assert (status, body) == (200, "")  # the modal closes
        wait_for_text(user, "```4```")
        said = user.bot_messages()[-1].text
        assert "math-solver@12" in said and "What is 2 + 2?" in said
        [request] = model.requests
        assert request["messages"] == [{"role": "user", "content": "What is 2 + 2?"}]


def test_the_try_it_modal_wants_a_prompt_and_only_the_owner_opens_it(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    with FakeOpenAI() as model:
        bot = make_bot(
            ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN, WANDB_API_KEY=model.key
        )
        user, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)

        modal = open_try_modal(user)
        status, body = submit_prompt(bot, modal, "   ")
        assert status == 200
        assert json.loads(body) == {
            "response_action": "errors",
            "errors": {"prompt": "Type a prompt for the model."},
        }

        stranger = SlackUser(bot, user=OTHER_USER, thread=user.thread)
        stranger.click("Try it", wait=False, on=final_message(user))
        fake.wait_for(lambda f: any("can try this model" in m.text for m in f.ephemerals()))
        assert fake.modals(OTHER_USER) == []
        assert model.requests == []
        assert fake.modals(USER_ID) == [modal]
