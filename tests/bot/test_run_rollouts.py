"""Sample rollouts in a run's thread: the best and worst validation rollouts (from ART's trajectory
files, read by the real runner on loopback) at the first and the last validation, and on
request with `show rollouts [step]`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from bot.runs.display.rollout_samples import (
    CARD_ANSWER_CHARS,
    RolloutsRequest,
    rollouts_request,
    samples_line,
    with_samples,
)
from runner.schemas import Rollout, RolloutMessage, ValidationRollouts
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_runs_end_to_end import STAND_IN, finished_wizard, follow_until_finished
from tests.fakes.slack_api import FakeSlack
from tests.runner.conftest import Runner, RunnerFactory, job_environ
from tests.runner.conftest import (
    make_runner as make_runner,  # the fixture: a real runner on loopback
)

OPENAI_KEY = "sk-test-rollout-key-0123456789"
HEADING = ":mag: *Validation rollouts at"


def gpu_host(make_runner: RunnerFactory, mode: str = "ok") -> Runner:
    return make_runner(
        environ=job_environ(OPENAI_API_KEY=OPENAI_KEY),
        command=f"{{python}} {STAND_IN} --mode {mode} {{script}}",
    )


@pytest.fixture
def trained(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> Iterator[SlackUser]:
    user = finished_wizard(make_bot, fake, gpu_host(make_runner).base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    yield user


def rollout_posts(user: SlackUser) -> list[str]:
    return [m.text for m in user.bot_messages() if m.text.startswith(HEADING)]


def test_the_first_and_last_validations_best_and_worst_rollouts_are_posted(
    trained: SlackUser,
) -> None:
    # The stand-in validates the base model (step 0), then at steps 2 and 4; its rollouts score
    # step/20 + (0, 0.3, -0.2, 0.1).
    first, last = rollout_posts(trained)

    assert first.startswith(
        f"{HEADING} step 0 (the base model)* (the first validation): best and worst of 4"
    )
    assert "*Best: reward 0.3* (correct 1)" in first and "*Worst: reward -0.2* (correct 0)" in first
    best, worst = first.split("*Worst:")
    assert "> Answer 1 of step 0." in best and "> Answer 2 of step 0." in worst
    assert "> *user*\n> Question 1?" in best
    assert ':hammer_and_wrench: `lookup` {"q": 1}' in best
    assert last.startswith(f"{HEADING} step 4* (the last validation)")
    assert "*Best: reward 0.5*" in last and "*Worst: reward 0*" in last
    # After the result: the last validation's rollouts follow the run's final message.
    texts = [m.text for m in trained.bot_messages()]
    final = next(i for i, t in enumerate(texts) if "Training finished at step 4" in t)
    assert texts.index(last) > final


def test_the_status_card_ends_on_the_last_validations_best_and_worst(
    trained: SlackUser, fake: FakeSlack
) -> None:
    card = [c.params["text"] for c in fake.calls("chat.update") if "job `" in c.params["text"]]
    last_card = card[-1]

    # The stand-in's step 4 scores 4/20 + 0.3 and 4/20 - 0.2.
    assert (
        ":mag: Validation at step 4 (4 rollouts): best 0.5 _Answer 1 of step 4._; "
        "worst 0 _Answer 2 of step 4._ · `show rollouts 4` for the whole"
    ) in last_card


def sampled(step: int, best: float, worst: float, answer: str = "") -> ValidationRollouts:
    def rollout(reward: float) -> Rollout:
        said = [RolloutMessage(role="assistant", content=answer, trainable=True)] if answer else []
        return Rollout(reward=reward, messages=said)

    return ValidationRollouts(step=step, count=8, best=rollout(best), worst=rollout(worst))


def test_each_validation_replaces_the_gist_the_card_shows() -> None:
    points: list[dict[str, Any]] = [{"step": 0, "train": None, "val": 0.1}]
    assert samples_line(points) == ""

    points = with_samples(points, sampled(0, 0.4, -0.1, "It is *4*  <script>"))
    assert samples_line(points) == (
        ":mag: Validation at step 0 (8 rollouts): best 0.4 _It is *4*  &lt;script&gt;_; "
        "worst -0.1 _It is *4*  &lt;script&gt;_ · `show rollouts 0` for the whole"
    )
    points = with_samples(points, sampled(3, 0.9, 0.2, "x" * 500))
    assert points[0]["samples"]["best"]["reward"] == 0.4  # kept with its own step
    assert samples_line(points).startswith(":mag: Validation at step 3 (8 rollouts): best 0.9 _x")
    assert len(points[1]["samples"]["best"]["answer"]) <= CARD_ANSWER_CHARS
    assert with_samples(points, sampled(3, 0.7, 0.1))[1]["samples"]["best"]["reward"] == 0.7


def test_show_rollouts_posts_a_validation_step_or_the_latest(trained: SlackUser) -> None:
    trained.reply("show rollouts 2")
    assert rollout_posts(trained)[-1].startswith(f"{HEADING} step 2*: best and worst of 4")

    someone_else = dataclasses.replace(trained, user="U0OTHER")
    someone_else.reply("Show rollouts")
    assert rollout_posts(trained)[-1].startswith(f"{HEADING} step 4*:")

    trained.reply("show rollouts 3")
    assert trained.bot_messages()[-1].text == (
        "No validation rollouts at step 3. Steps with some: 0, 2, 4."
    )
    assert len(rollout_posts(trained)) == 4  # first, last, and the two asked for


def test_a_huge_rollout_goes_into_the_thread_as_a_file(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    user = finished_wizard(make_bot, fake, gpu_host(make_runner, "huge-rollout").base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    fake.wait_for(lambda f: len([u for u in f.uploaded_files() if "-rollouts-" in u.name]) == 2)

    first, last = [u for u in fake.uploaded_files() if "-rollouts-" in u.name]
    assert first.name.endswith("-rollouts-step-0.txt") and first.thread_ts == user.thread
    content = first.content.decode()
    assert "===== BEST: reward 0.3 (correct 1) =====" in content
    assert "The long answer: word word" in content and "characters cut" in content
    assert "===== WORST: reward -0.2" in content and "Answer 2 of step 0." in content
    assert first.initial_comment is not None
    assert first.initial_comment.startswith(
        f"{HEADING} step 0 (the base model)* (the first validation)"
    )
    assert "The full rollouts are in the file." in first.initial_comment
    assert len(first.initial_comment) < 1_500
    assert last.name.endswith("-rollouts-step-4.txt")
    assert not rollout_posts(user)  # no excerpt as a message as well


def test_a_secret_said_in_a_rollout_is_redacted(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    user = finished_wizard(make_bot, fake, gpu_host(make_runner, "secret-rollout").base_url)
    user.click("Approve and run")
    follow_until_finished(user)

    first, _last = rollout_posts(user)
    assert "My key is [REDACTED:OPENAI_API_KEY]." in first
    assert not any(OPENAI_KEY in m.text for m in fake.messages(user.channel))
    assert not any(OPENAI_KEY in m.text for m in fake.thread(user.channel, user.thread))


@pytest.mark.parametrize(
    ("text", "step"),
    [("show rollouts", None), ("Show Rollouts 12", 12), ("show rollout step 3", 3)],
)
def test_show_rollouts_is_read_with_or_without_a_step(text: str, step: int | None) -> None:
    assert rollouts_request(text) == RolloutsRequest(step)


@pytest.mark.parametrize("text", ["show rollouts please", "rollouts 2", "show rollouts -1", ""])
def test_other_text_is_not_a_rollouts_request(text: str) -> None:
    assert rollouts_request(text) is None


def test_a_job_whose_trajectory_files_the_runner_cannot_see_says_so_when_asked(
    make_bot: BotFactory, fake: FakeSlack, make_runner: RunnerFactory
) -> None:
    user = finished_wizard(make_bot, fake, gpu_host(make_runner, "progress-lines-only").base_url)
    user.click("Approve and run")
    follow_until_finished(user)
    assert any("Training finished at step 4" in m.text for m in user.bot_messages())
    assert not rollout_posts(user)

    user.reply("show rollouts")

    assert user.bot_messages()[-1].text.startswith("No validation rollouts yet.")
    assert "a job on Ray keeps them on its own host" in user.bot_messages()[-1].text
