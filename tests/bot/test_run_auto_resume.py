"""A job that dies of a transient cause resumes by itself: vLLM's engine dying under it, or the
runner losing it (the host rebooted) makes the bot queue a new job resuming the last checkpoint,
told in the thread, up to ARTBOT_AUTO_RESUME_MAX times in a row; then the failure is told with
the resumes it took. The script's own exception is never retried.

Real runners on loopback running the stand-in trainer (tests/bot/scripts/stand_in_training.py),
the fake Slack, and the follower's rounds driven by the test (`follow_until_finished`)."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

from bot.runs.service import RunService
from runner.api.server import RunnerServer, build_service
from runner.schemas import EventsPage, EventType, Failure, FailureKind, JobEvent, JobState
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_run_followups import NOBODY_LISTENS, a_bot, an_approved_run
from tests.bot.test_runs_end_to_end import STAND_IN, finished_wizard, follow_until_finished
from tests.bot.test_runs_end_to_end import runs_of as runs_of_user
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import USER_ID
from tests.runner.conftest import TOKEN, RunnerFactory, alive, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

RESUMING = "from its last checkpoint automatically"
ENGINE_DIED = "Engine core proc EngineCore_0 died unexpectedly"


def trained_steps(runs: RunService, run_id: int) -> list[int]:
    run = runs.runs.get(run_id)
    assert run is not None
    return [point["step"] for point in run.points if point.get("train") is not None]


def said(user: SlackUser, words: str) -> list[str]:
    return [m.text for m in user.bot_messages() if words in m.text]


def test_an_engine_that_keeps_dying_is_resumed_twice_then_the_failure_is_told(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode engine-dies {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)

    runs = runs_of_user(user)
    first, second, third = runs.runs.for_thread(user.key)
    assert [first.state, second.state, third.state] == ["failed"] * 3
    assert second.resume_from_job == first.job_id and third.resume_from_job == second.job_id
    # Each job went on from the checkpoint of the one before: one step each, in one curve.
    assert trained_steps(runs, third.id) == [1, 2, 3]
    resumed = said(user, RESUMING)
    assert len(resumed) == 2
    for attempt, (job, text) in enumerate(zip((first, second), resumed, strict=True), start=1):
        assert text.startswith(f":arrows_counterclockwise: Job `{job.job_id}` died: ")
        assert ENGINE_DIED in text and f"(attempt {attempt} of 2)" in text
    [failed] = said(user, "Training failed")
    assert f"<@{USER_ID}>" in failed and ENGINE_DIED in failed
    assert "Gave up after 2 automatic resumes." in failed
    plots = [u for u in fake.uploaded_files() if u.name.endswith("-rewards.png")]
    assert len(plots) == 1  # once, at the end of the last job
    assert runs.client.job(third.job_id).failure.transient  # type: ignore[arg-type,union-attr]


def test_an_engine_that_dies_once_is_resumed_and_the_run_succeeds(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode engine-dies-then-resume {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)

    first, resumed = runs_of_user(user).runs.for_thread(user.key)
    assert first.state == "failed" and resumed.state == "succeeded"
    assert resumed.resume_from_job == first.job_id
    [told] = said(user, RESUMING)
    assert "(attempt 1 of 2)" in told
    assert said(user, "Training failed") == []
    assert len(said(user, "Training finished at step 6")) == 1


def test_the_scripts_own_exception_is_never_retried(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode fail-then-resume {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)

    [run] = runs_of_user(user).runs.for_thread(user.key)
    assert run.state == "failed"
    [failed] = said(user, "Training failed")
    assert "ValueError: the reply has no answer" in failed
    assert "automatic" not in failed and said(user, RESUMING) == []
    # The owner may still resume it, by hand (the fix button).
    assert any(
        element["text"]["text"] == "Resume from the last checkpoint"
        for message in user.bot_messages()
        for block in message.blocks or []
        if block["type"] == "actions"
        for element in block["elements"]
    )


def test_a_job_lost_with_its_host_resumes_from_its_checkpoint_on_the_restarted_runner(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    first_host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        # Trains 2 steps and waits for good, unless it finds checkpoints: then goes on.
        command=f"{{python}} {STAND_IN} --mode stall-then-resume {{script}}",
    )
    user = finished_wizard(make_bot, fake, first_host.base_url)
    user.click("Approve and run")
    runs = runs_of_user(user)
    [first] = runs.runs.for_thread(user.key)
    assert first.job_id is not None
    deadline = time.monotonic() + 30
    while 2 not in trained_steps(runs, first.id):
        assert time.monotonic() < deadline, "the job never trained 2 steps"
        runs.poll_once(user.bot.app.client_for)
        time.sleep(0.05)

    # The host goes down with the job: the runner stops, the job's processes die.
    supervisor = runs.client.events(first.job_id).events[1].data["pid"]
    first_host.stop(cancel_jobs=False)
    os.killpg(supervisor, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(supervisor):
        assert time.monotonic() < deadline, "the job's supervisor did not die"
        time.sleep(0.02)
    port = urlsplit(first_host.base_url).port
    service = build_service(
        first_host.settings, environ=job_environ(OPENAI_API_KEY="sk-test-not-real")
    )
    with RunnerServer(service, TOKEN, port=port or 0):  # back where the bot expects it
        assert runs.client.job(first.job_id).state is JobState.lost
        follow_until_finished(user)
    service.store.close()

    lost, resumed = runs.runs.for_thread(user.key)
    assert lost.state == "lost" and resumed.state == "succeeded"
    assert resumed.resume_from_job == lost.job_id
    [told] = said(user, RESUMING)
    assert told == (
        f":arrows_counterclockwise: Job `{lost.job_id}` was lost: the runner restarted and its "
        "process was gone. Resuming from its last checkpoint automatically (attempt 1 of 2)."
    )
    assert said(user, "was lost") == [told]  # not told a second time, as a plain loss
    assert len(said(user, "Training finished at step 6")) == 1


# ---- the decision, on events handed to the run (no runner is asked) ----------------------------


def failed_page(job: str, failure: Failure) -> EventsPage:
    at = datetime.now(UTC)
    event = JobEvent(
        seq=1, job_id=job, type=EventType.failed, at=at, data=failure.model_dump(mode="json")
    )
    return EventsPage(job_id=job, events=[event], next_after=1, finished=True)


ENGINE_FAILURE = Failure(
    kind=FailureKind.engine_died,
    summary="vLLM's inference engine died under the job: EngineDeadError",
    fix="Run it again.",
    transient=True,
)


def test_with_automatic_resumes_off_a_transient_failure_is_told_as_before(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot(
        ARTBOT_AUTO_RESUME_MAX="0", ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN
    )
    key, run = an_approved_run(bot)
    runs = bot.service.runs
    assert runs is not None and runs.auto_resume_max == 0
    runs.runs.update(run.id, job_id="job-1", state="running")
    runs.apply(run.id, failed_page("job-1", ENGINE_FAILURE))
    user = SlackUser(bot, thread=key.thread)
    user.settle()
    [failed] = said(user, "Training failed")
    assert "EngineDeadError" in failed and "automatic" not in failed
    assert len(runs.runs.for_thread(key)) == 1


def test_a_transient_failure_of_a_script_that_changed_is_not_resumed_and_says_why(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    key, run = an_approved_run(bot)  # its script is not in the bot's scripts folder
    runs = bot.service.runs
    assert runs is not None
    runs.runs.update(run.id, job_id="job-1", state="running")
    runs.apply(run.id, failed_page("job-1", ENGINE_FAILURE))
    user = SlackUser(bot, thread=key.thread)
    user.settle()
    [failed] = said(user, "Training failed")
    assert "Nothing was retried automatically: the approved script changed" in failed
    assert len(runs.runs.for_thread(key)) == 1
