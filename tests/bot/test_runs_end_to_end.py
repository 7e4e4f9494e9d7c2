"""Approve in Slack, train under the real runner on loopback, read the progress in the thread."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.runs.service import RunService
from runner.api.server import RunnerServer, build_service
from runner.settings import load_settings
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_slack_wizard import answer_single_turn_ruler
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import USER_ID
from tests.runner.conftest import TOKEN, Runner, RunnerFactory, job_environ, runner_env
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

STAND_IN = Path(__file__).resolve().parent / "scripts" / "stand_in_training.py"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def gpu_host(make_runner: RunnerFactory) -> Iterator[Runner]:
    yield make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} {{script}}",
    )


def runs_of(user: SlackUser) -> RunService:
    assert user.bot.service.runs is not None
    return user.bot.service.runs


def follow_until_finished(user: SlackUser, timeout: float = 60.0) -> None:
    """What the bot's follower thread does, driven here so the test decides the pace."""
    runs = runs_of(user)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs.poll_once(user.bot.app.client_for)
        if not runs.runs.active():
            user.settle()
            return
        time.sleep(0.1)
    raise AssertionError(f"runs still active: {runs.runs.active()}")


def finished_wizard(make_bot: BotFactory, fake: FakeSlack, runner_url: str) -> SlackUser:
    user = SlackUser(make_bot(ARTBOT_RUNNER_URL=runner_url, ARTBOT_RUNNER_TOKEN=TOKEN))
    user.command()
    answer_single_turn_ruler(user)  # ends with the result card
    return user


def test_an_approved_script_trains_and_its_progress_plot_and_result_reach_the_thread(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    user = finished_wizard(make_bot, fake, gpu_host.base_url)
    user.click("Approve and run")
    runs = runs_of(user)
    [run] = runs.runs.for_thread(user.key)
    assert run.job_id is not None and run.card_ts is not None
    assert user.bot.service.records.approvals(user.key)[0].approved_by == USER_ID

    follow_until_finished(user)

    texts = [m.text for m in user.bot_messages()]
    assert any(t.startswith(":rocket: Training started") for t in texts)
    # Validations go on the status card (updated in place), not into posts of their own.
    posts = [m.text for m in user.bot_messages() if m.ts != run.card_ts]
    assert not any("Validation at step" in t for t in posts)
    final = next(t for t in texts if "Training finished at step 4" in t)
    assert (
        f"<@{USER_ID}>" in final
        and "m1@4" in final
        and "curl http://127.0.0.1:8000/v1/chat/completions" in final
    )
    card = fake.message(user.channel, run.card_ts)
    assert card is not None and "succeeded" in card.text and "val/reward 0.200" in card.text
    assert not any(b.get("type") == "actions" for b in card.blocks or [])  # no Cancel once finished
    plots = [u for u in fake.uploaded_files() if u.name.endswith("-rewards.png")]
    assert len(plots) == 1 and plots[0].content.startswith(b"\x89PNG")  # once, at the end
    [job] = [runs.client.job(run.job_id)]
    assert job.state.value == "succeeded"


def logged_validations(run_dir: Path) -> dict[int, dict[str, float]]:
    """What the job logged to ART's history.jsonl for each validated step."""
    [history] = run_dir.glob(".art/*/models/*/history.jsonl")
    rows = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    return {row["step"]: row for row in rows if "val/reward" in row}


def before_after_cells(message: str) -> list[list[str]]:
    """The before-and-after table of a message, as the words of each line."""
    table = message.split("*Before and after*", 1)[1].split("```")[1]
    return [line.split() for line in table.splitlines()]


def test_the_result_compares_the_base_model_with_the_best_and_last_checkpoints(
    make_bot: BotFactory, fake: FakeSlack, gpu_host: Runner
) -> None:
    user = finished_wizard(make_bot, fake, gpu_host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    [run] = runs_of(user).runs.for_thread(user.key)
    assert run.job_id is not None
    logged = logged_validations(gpu_host.run_dir(run.job_id))
    assert sorted(logged) == [0, 2, 4]  # the base model, then every second step

    final = next(m.text for m in user.bot_messages() if "Training finished" in m.text)
    base, best_and_last = logged[0], logged[4]

    def row(key: str) -> list[str]:
        before, after = base[key], best_and_last[key]
        return [key.removeprefix("val/"), f"{before:.3f}", *[f"{after:.3f}"] * 2]

    def change(key: str) -> list[str]:
        return ["vs", "base", *[f"{best_and_last[key] - base[key]:+.3f}"] * 2]

    # val/reward, then the rollouts' own metrics (ART's bookkeeping left out), each with its
    # change from the base model.
    assert before_after_cells(final) == [
        ["val", "base", "best@4", "last@4"],
        row("val/reward"),
        change("val/reward"),
        row("val/turns"),
        change("val/turns"),
    ]


def test_a_resumed_run_keeps_the_base_validation_of_the_run_it_resumes(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode fail-then-resume {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    failure = next(m for m in user.bot_messages() if "Training failed" in m.text)
    assert "Before and after" in failure.text  # base and step 2 were validated
    user.click("Resume from the last checkpoint")
    follow_until_finished(user)
    first, resumed = runs_of(user).runs.for_thread(user.key)
    assert first.state == "failed" and resumed.state == "succeeded"
    assert resumed.resume_from_job == first.job_id and resumed.job_id is not None
    # The same folder: the base model was validated once, by the first job.
    logged = logged_validations(host.run_dir(first.job_id))
    assert sorted(logged) == [0, 2, 4, 6]
    final = next(m.text for m in user.bot_messages() if "Training finished" in m.text)
    cells = before_after_cells(final)
    assert cells[0] == ["val", "base", "best@6", "last@6"]
    assert cells[1][:2] == ["reward", f"{logged[0]['val/reward']:.3f}"]


def test_a_cuda_oom_offers_a_retry_with_lower_gpu_memory_that_then_succeeds(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode oom-then-ok {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    failure = next(m for m in user.bot_messages() if "Training failed" in m.text)
    assert (
        f"<@{USER_ID}>" in failure.text
        and "gpu_memory_utilization" in failure.text.lower().replace("-", "_")
    )
    user.click("Retry with lower GPU memory")
    follow_until_finished(user)
    first, retried = runs_of(user).runs.for_thread(user.key)
    assert first.state == "failed" and retried.state == "succeeded"
    assert retried.args == ["--gpu-memory-utilization", "0.55"]


def test_the_runner_down_then_up_loses_no_approval(
    make_bot: BotFactory, fake: FakeSlack, tmp_path: Path
) -> None:
    port = free_port()
    user = finished_wizard(make_bot, fake, f"http://127.0.0.1:{port}")
    user.click("Approve and run")
    runs = runs_of(user)
    [run] = runs.runs.for_thread(user.key)
    assert run.state == "waiting_for_runner" and run.job_id is None
    assert sum("unreachable" in m.text for m in user.bot_messages()) == 1
    runs.runs.update(run.id, next_attempt_at=runs.runs.now())
    runs.poll_once(user.bot.app.client_for)
    user.settle()
    assert sum("unreachable" in m.text for m in user.bot_messages()) == 1  # told once
    settings = load_settings(
        runner_env(tmp_path / "gpu-host", command=f"{{python}} {STAND_IN} {{script}}")
    )
    service = build_service(settings, environ=job_environ(OPENAI_API_KEY="sk-test-not-real"))
    with RunnerServer(service, TOKEN, port=port):  # the runner comes up where the bot expects it
        runs.runs.update(run.id, next_attempt_at=runs.runs.now())
        follow_until_finished(user)
    [run] = runs.runs.for_thread(user.key)
    assert run.state == "succeeded" and run.job_id is not None
    assert any("Training finished" in m.text for m in user.bot_messages())


def test_cancel_from_the_status_card_stops_the_job(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode slow {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    [run] = runs_of(user).runs.for_thread(user.key)
    assert run.card_ts is not None and run.job_id is not None
    intruder = SlackUser(user.bot, user="U0OTHER", thread=user.thread)
    intruder.click("Cancel", wait=False)
    fake.wait_for(
        lambda f: any("Only <@" in m.text for m in f.ephemerals() if m.ephemeral_to == "U0OTHER")
    )
    user.click("Cancel", wait=False)  # the status card is the latest message with a button
    fake.wait_for(
        lambda f: any(
            "Cancelling job" in m.text for m in f.ephemerals() if m.ephemeral_to == USER_ID
        )
    )
    follow_until_finished(user)
    [run] = runs_of(user).runs.for_thread(user.key)
    assert run.state == "cancelled"
    assert any("was cancelled" in m.text and f"<@{USER_ID}>" in m.text for m in user.bot_messages())
    assert runs_of(user).client.job(run.job_id).state.value == "cancelled"


def test_a_bot_restart_mid_run_resumes_from_its_cursor_without_repeating(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode slow {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    user.click("Approve and run")
    runs = runs_of(user)
    deadline = time.monotonic() + 30
    while not any(m.text.startswith(":rocket:") for m in user.bot_messages()):
        assert time.monotonic() < deadline, "the job never started"
        runs.poll_once(user.bot.app.client_for)
        time.sleep(0.1)
    [before] = runs.runs.for_thread(user.key)
    assert before.cursor > 0
    restarted = SlackUser(
        make_bot(ARTBOT_RUNNER_URL=host.base_url, ARTBOT_RUNNER_TOKEN=TOKEN), thread=user.thread
    )
    follow_until_finished(restarted)
    texts = [m.text for m in restarted.bot_messages()]
    assert sum(t.startswith(":rocket: Training started") for t in texts) == 1
    assert sum("Training finished" in t for t in texts) == 1

    restarted.reply("status")
    assert "Run 1:" in restarted.last_text() and "succeeded" in restarted.last_text()
    from tests.fakes.slack_requests import slash_command

    restarted.bot.dispatch(
        slash_command(text="runs", user_id=USER_ID, response_url=fake.response_url())
    )
    fake.wait_for(lambda f: any("Your training runs (1)" in str(r) for r in f.responses()))


def test_a_double_click_on_approve_starts_one_job(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    host = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-not-real"),
        command=f"{{python}} {STAND_IN} --mode slow {{script}}",
    )
    user = finished_wizard(make_bot, fake, host.base_url)
    message = user.result_cards()[-1]
    element = next(
        e
        for b in message.blocks or []
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == "result_approve"
    )
    from tests.fakes.slack_requests import block_actions

    clicks = [
        block_actions(
            "result_approve",
            element["value"],
            message_ts=message.ts,
            user_id=USER_ID,
            channel_id=user.channel,
            message=message.to_slack(),
        )
        for _ in range(2)
    ]
    for click in clicks:
        assert user.bot.dispatch(click) == 200
    fake.wait_for(lambda f: any("already approved" in m.text for m in f.ephemerals()))
    runs = runs_of(user).runs.for_thread(user.key)
    assert len(runs) == 1 and runs[0].job_id is not None
    runs_of(user).client.cancel(runs[0].job_id)
