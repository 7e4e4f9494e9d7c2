"""Pausing a run from its thread and resuming it: *Pause* on the status card stops the job whole
(its GPU freed, its checkpoints kept), the thread says it is paused and offers *Resume*, which
goes on from the last checkpoint in a new job: the step count goes on where it was. Only the
run's owner does either. A real runner on loopback with the stand-in trainer."""

from __future__ import annotations

import time

from runner.schemas import EventType, JobState
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_run_followups import a_bot, an_approved_run, runs_of
from tests.bot.test_run_stalls import STRANGER
from tests.bot.test_runs_end_to_end import STAND_IN, finished_wizard, follow_until_finished
from tests.bot.test_runs_end_to_end import runs_of as runs_of_user
from tests.fakes.slack_api import FakeSlack, Message
from tests.fakes.workspace import USER_ID
from tests.runner.conftest import RunnerFactory, job_environ, processes_with_env
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

GENEROUS_S = 60.0  # a hang guard on a loaded machine, never a measurement


def wait_until(check: object, what: str, user: SlackUser) -> None:
    runs = runs_of_user(user)
    deadline = time.monotonic() + GENEROUS_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        runs.poll_once(user.bot.app.client_for)
        time.sleep(0.1)
    user.settle()


def card_of(user: SlackUser, card_ts: str | None) -> Message:
    card = user.fake.message(user.channel, card_ts or "")
    assert card is not None
    return card


def test_pause_stops_the_job_keeps_its_checkpoints_and_resume_goes_on_from_them(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    # The stand-in trains 2 steps (a checkpoint each) and then waits for ever, unless it finds
    # checkpoints: then it goes on from them to step 6.
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode stall-then-resume {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    runs = runs_of_user(user)
    [first] = runs.runs.for_thread(user.key)

    def trained_two_steps() -> bool:
        run = runs.runs.get(first.id)
        return run is not None and any(p.get("step") == 2 for p in run.points)

    wait_until(trained_two_steps, "the job never trained 2 steps", user)
    first = runs.runs.get(first.id) or first
    assert first.job_id is not None and first.state == "running"
    card = card_of(user, first.card_ts)
    assert [e["text"]["text"] for e in card.blocks[-1]["elements"]] == ["Pause", "Cancel"]

    stranger = SlackUser(user.bot, user=STRANGER, thread=user.thread)
    stranger.click("Pause", on=card, wait=False)
    fake.wait_for(
        lambda f: any(
            f"Only <@{USER_ID}> can pause" in m.text
            for m in f.ephemerals()
            if m.ephemeral_to == STRANGER
        ),
        timeout=GENEROUS_S,
    )
    assert (runs.runs.get(first.id) or first).state == "running"

    user.click("Pause", on=card, wait=False)
    wait_until(lambda: (runs.runs.get(first.id) or first).state == "paused", "never paused", user)
    assert host.client.job(first.job_id).state is JobState.cancelled
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={first.job_id}") == []  # its GPU is free
    said = [m.text for m in user.bot_messages()]
    assert any(f"<@{USER_ID}> pauses job `{first.job_id}`" in text for text in said)
    paused = next(m for m in user.bot_messages() if "is paused after step 2" in m.text)
    assert not any("was cancelled" in text for text in said)
    assert "Pause" not in str(card_of(user, first.card_ts).blocks)  # the card has no buttons

    stranger.click("Resume", on=paused, wait=False)
    fake.wait_for(
        lambda f: any(
            f"Only <@{USER_ID}> can resume" in m.text
            for m in f.ephemerals()
            if m.ephemeral_to == STRANGER
        ),
        timeout=GENEROUS_S,
    )
    assert runs.runs.for_thread(user.key) == [runs.runs.get(first.id)]

    user.click("Resume", on=paused, wait=False)
    wait_until(lambda: len(runs.runs.for_thread(user.key)) == 2, "never resumed", user)
    user.click("Resume", on=paused, wait=False)  # a second click resumes nothing more
    follow_until_finished(user, timeout=GENEROUS_S)
    first, resumed = runs.runs.for_thread(user.key)
    assert first.state == "paused" and resumed.state == "succeeded"
    assert resumed.resume_from_job == first.job_id and resumed.job_id is not None
    steps = [
        e.data["step"]
        for e in host.client.events(resumed.job_id).events
        if e.type is EventType.step
    ]
    assert steps and steps[0] == 3 and steps[-1] == 6  # the step count went on
    said = [m.text for m in user.bot_messages()]
    assert any(f"<@{USER_ID}> resumes job `{first.job_id}`" in text for text in said)
    assert any("Training finished at step 6" in text for text in said)
    fake.wait_for(
        lambda f: any(f"`{first.job_id}` is resumed already" in m.text for m in f.ephemerals()),
        timeout=GENEROUS_S,
    )


def test_a_pause_the_runner_cannot_carry_out_leaves_the_run_running_and_says_why(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)  # its runner is never there
    key, run = an_approved_run(bot)
    runs = runs_of(bot)
    card = bot.app.client_for(key.team).chat_postMessage(channel=key.channel, text="card")
    runs.runs.update(run.id, job_id="job-1", state="running", card_ts=str(card["ts"]))
    runs.reporter.refresh_card(runs.runs.get(run.id) or run, force=True)
    user = SlackUser(bot, thread=key.thread)
    user.settle()

    user.click("Pause", on=card_of(user, str(card["ts"])), wait=False)

    told = ephemeral_saying(fake, "Could not pause it")
    assert told.ephemeral_to == USER_ID and "runner" in told.text.lower()
    assert (runs.runs.get(run.id) or run).state == "running"
    assert not any("pauses job" in m.text for m in user.bot_messages())


def ephemeral_saying(fake: FakeSlack, needle: str) -> Message:
    fake.wait_for(lambda f: any(needle in m.text for m in f.ephemerals()), timeout=GENEROUS_S)
    return next(m for m in fake.ephemerals() if needle in m.text)
