"""A stalled job in its thread: the runner's `stalled` event told once with what the job was
doing and its last lines, the card saying *possibly stalled* until it moves on, and the owner's
*Restart from the last checkpoint* (the job stopped, whole, then resumed in a new job) or *Keep
waiting*; anyone else is refused."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from runner.schemas import EventsPage, EventType, JobEvent, JobState
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_run_followups import a_bot, an_approved_run, runs_of
from tests.bot.test_runs_end_to_end import STAND_IN, finished_wizard, follow_until_finished
from tests.bot.test_runs_end_to_end import runs_of as runs_of_user
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import USER_ID
from tests.runner.conftest import RunnerFactory, job_environ, processes_with_env
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

STRANGER = "U0OTHER"
LOG_TAIL = "step 1: training\n" + "x" * 3_000 + "\ngather: <b>&ok</b> 3/8"


def page(job: str, *events: tuple[int, EventType, dict[str, Any]]) -> EventsPage:
    at = datetime.now(UTC)
    told = [
        JobEvent(seq=seq, job_id=job, type=kind, at=at, data=data) for seq, kind, data in events
    ]
    return EventsPage(job_id=job, events=told, next_after=told[-1].seq, finished=False)


def card_text(fake: FakeSlack, channel: str, ts: str) -> str:
    card = fake.message(channel, ts)
    assert card is not None
    return card.text


def stalled(idle_s: float = 1_930.0) -> dict[str, Any]:
    return {
        "idle_s": idle_s,
        "threshold_s": 1_800.0,
        "phase": "rollouts",
        "last_step": 1,
        "log_tail": LOG_TAIL,
    }


def test_a_stall_is_told_once_with_its_buttons_and_the_card_says_so_until_progress(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    key, run = an_approved_run(bot)
    runs = runs_of(bot)
    card = bot.app.client_for(key.team).chat_postMessage(channel=key.channel, text="card")
    runs.runs.update(run.id, job_id="job-1", state="running", card_ts=str(card["ts"]))
    runs.apply(run.id, page("job-1", (1, EventType.step, {"step": 1, "train/reward": 0.5})))
    runs.apply(run.id, page("job-1", (2, EventType.stalled, stalled())))
    user = SlackUser(bot, thread=key.thread)
    user.settle()
    [told] = [m for m in user.bot_messages() if "may be stalled" in m.text]
    assert f"<@{USER_ID}>" in told.text
    assert "for 32m10s. It was gathering rollouts after step 1." in told.text
    assert "gather: &lt;b&gt;&amp;ok&lt;/b&gt; 3/8```" in told.text  # escaped, its end kept
    assert "step 1: training" not in told.text  # clipped from the start
    labels = [
        element["text"]["text"]
        for block in told.blocks or []
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert labels == ["Restart from the last checkpoint", "Keep waiting"]
    assert runs.runs.get(run.id).state == "stalled"  # type: ignore[union-attr]
    assert "possibly stalled" in card_text(fake, key.channel, str(card["ts"]))

    user.click("Keep waiting", on=told)
    user.settle()
    assert any("keeps waiting for job `job-1`" in m.text for m in user.bot_messages())
    stranger = SlackUser(bot, user=STRANGER, thread=key.thread)
    stranger.click("Restart from the last checkpoint", on=told, wait=False)
    fake.wait_for(
        lambda f: any(
            f"Only <@{USER_ID}> can restart" in m.text
            for m in f.ephemerals()
            if m.ephemeral_to == STRANGER
        )
    )
    assert runs.runs.get(run.id).state == "stalled"  # type: ignore[union-attr]

    runs.apply(run.id, page("job-1", (3, EventType.step, {"step": 2, "train/reward": 0.6})))
    user.settle()
    assert runs.runs.get(run.id).state == "running"  # type: ignore[union-attr]
    assert "possibly stalled" not in card_text(fake, key.channel, str(card["ts"]))
    assert sum("may be stalled" in m.text for m in user.bot_messages()) == 1


def test_restart_stops_the_stalled_job_whole_and_resumes_it_in_a_new_job(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode stall-then-resume {{script}}",
        # No stall before the job has timed a step (its start may be silent for seconds on a
        # busy host); once steps 1 and 2 are timed, a second of silence is one.
        stall_after_s="3600",
        stall_floor_s="1",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    runs = runs_of_user(user)
    [first] = runs.runs.for_thread(user.key)
    deadline = time.monotonic() + 120  # a hang guard
    while runs.runs.get(first.id).state != "stalled":  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "never told stalled"
        runs.poll_once(user.bot.app.client_for)
        time.sleep(0.1)
    user.settle()
    told = next(m for m in user.bot_messages() if "may be stalled" in m.text)
    assert "after step 2" in told.text
    stranger = SlackUser(user.bot, user=STRANGER, thread=user.thread)
    stranger.click("Restart from the last checkpoint", on=told, wait=False)
    fake.wait_for(
        lambda f: any(
            f"Only <@{USER_ID}> can restart" in m.text
            for m in f.ephemerals()
            if m.ephemeral_to == STRANGER
        )
    )
    assert runs.runs.get(first.id).state == "stalled"  # type: ignore[union-attr]
    user.click("Restart from the last checkpoint", on=told)
    follow_until_finished(user)
    first, resumed = runs.runs.for_thread(user.key)
    assert first.state == "cancelled" and resumed.state == "succeeded"
    assert resumed.resume_from_job == first.job_id and resumed.job_id is not None
    assert runs.client.job(first.job_id).state is JobState.cancelled  # type: ignore[arg-type]
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={first.job_id}") == []
    said = [m.text for m in user.bot_messages()]
    assert any("restarts job" in text and f"<@{USER_ID}>" in text for text in said)
    assert any("stopped; it resumes from its last checkpoint" in text for text in said)
    assert any("Training finished at step 6" in text for text in said)
    assert not any("was cancelled" in text for text in said)


def test_a_stalled_ray_job_offers_cancel_not_a_restart_it_cannot_have(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    key, run = an_approved_run(bot)
    runs = runs_of(bot)
    runs.runs.update(run.id, job_id="job-1", state="running")
    runs.apply(run.id, page("job-1", (1, EventType.stalled, {**stalled(), "resumable": False})))
    user = SlackUser(bot, thread=key.thread)
    user.settle()

    [told] = [m for m in user.bot_messages() if "may be stalled" in m.text]
    assert "cannot resume from its checkpoints" in told.text
    labels = [
        element["text"]["text"]
        for block in told.blocks or []
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert labels == ["Cancel", "Keep waiting"]
