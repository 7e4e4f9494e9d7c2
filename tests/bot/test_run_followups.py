"""After a run: *Run again with changes* opens a new wizard on a copy of its answers, and two runs
are compared with one plot and a table of the answers that differ.

The runs are rows of the bot's own run store, told their job's events the way the follower
passes them on (RunService.apply): what the runner sends is its wire schema, nothing more."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from bot.runs.compare import differing_answers
from bot.runs.rerun import rerun_turn
from bot.runs.service import RunService
from bot.runs.store import Run
from flows import TRAIN_RL, TRAIN_SFT, Flow, Question, Reply, advance, replay
from runner.schemas import EventsPage, EventType, JobEvent
from storage.sessions import AlsoWrite, SessionKey
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_wizard_words import select_in
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_requests import slash_command
from tests.fakes.workspace import CHANNEL_ID, TEAM_ID, USER_ID
from tests.flows.matrix import answers_for
from tests.flows.sft_matrix import VARIANTS as SFT_VARIANTS

OTHER_USER = "U0OTHER"
NOBODY_LISTENS = "http://127.0.0.1:9"  # no runner is asked anything in these tests
TOKEN = "runner-token-for-tests"
BASELINE = answers_for("single", "ruler", "dataset", "local", True, run_name="baseline")
CHANGED = answers_for(
    "single",
    "ruler",
    "dataset",
    "local",
    True,
    run_name="bigger-model",
    base_model="Qwen/Qwen3-30B-A3B-Instruct-2507",
    hyperparameters="customize",
    hyperparameter_values={"learning_rate": 2e-5},
)


def a_bot(make_bot: BotFactory) -> Bot:
    return make_bot(ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN)


def runs_of(bot: Bot) -> RunService:
    assert bot.service.runs is not None
    return bot.service.runs


def an_approved_run(
    bot: Bot, answers: dict[str, Any] | None = None, flow: Flow = TRAIN_RL
) -> tuple[SessionKey, Run]:
    """A new thread in the channel with a run of an approved script, not yet given to a runner;
    with `answers`, the thread holds a wizard session of `flow` that took them."""
    client = bot.app.client_for(TEAM_ID)
    parent = client.chat_postMessage(channel=CHANNEL_ID, text=f"<@{USER_ID}> started a wizard.")
    key = SessionKey(TEAM_ID, CHANNEL_ID, str(parent["ts"]))
    if answers is not None:
        bot.service.store.create(key, USER_ID, replay(flow, answers))
    runs = runs_of(bot)
    approval = runs.records.record_approval(key, USER_ID, "print('train')\n", "train.py")
    run = runs.runs.create(
        approval_id=approval.id,
        key=key,
        owner=USER_ID,
        script_name="train.py",
        script_sha256=approval.script_sha256,
        backend="local",
    )
    return key, run


def trained_then_ended(
    job: str, rewards: list[float], *, succeeded: bool = True, metric: str = "train/reward"
) -> EventsPage:
    """The runner's page of a job that logged `rewards` (one a step; a fine-tuning job's loss
    with `metric="loss/train"`) and then succeeded (or failed)."""
    at = datetime.now(UTC)
    events = [
        JobEvent(seq=i, job_id=job, type=EventType.step, at=at, data={"step": i, metric: r})
        for i, r in enumerate(rewards, 1)
    ]
    end = (
        JobEvent(seq=len(rewards) + 1, job_id=job, type=EventType.succeeded, at=at, data={})
        if succeeded
        else JobEvent(
            seq=len(rewards) + 1,
            job_id=job,
            type=EventType.failed,
            at=at,
            data={"kind": "unknown", "summary": "The script exited with status 1."},
        )
    )
    return EventsPage(job_id=job, events=[*events, end], next_after=end.seq, finished=True)


def a_finished_run(
    bot: Bot,
    answers: dict[str, Any],
    *,
    rewards: list[float],
    succeeded: bool = True,
    flow: Flow = TRAIN_RL,
) -> tuple[SlackUser, Run]:
    """A wizard thread with `answers` of `flow` whose approved run trained with `rewards` (one a
    step; a fine-tuning run's losses) and then succeeded (or failed), as the runner tells it."""
    key, run = an_approved_run(bot, answers, flow)
    runs = runs_of(bot)
    job = f"job-{run.id}"
    runs.runs.update(run.id, job_id=job, state="running")
    metric = "loss/train" if flow is TRAIN_SFT else "train/reward"
    runs.apply(run.id, trained_then_ended(job, rewards, succeeded=succeeded, metric=metric))
    user = SlackUser(bot, thread=key.thread)
    user.settle()
    finished = runs.runs.get(run.id)
    assert finished is not None and not finished.active
    return user, finished


def new_threads(fake: FakeSlack, before: set[str]) -> list[str]:
    return [
        m.ts
        for m in fake.messages(CHANNEL_ID)
        if not m.is_reply and m.ts not in before and ":repeat:" in json.dumps(m.blocks)
    ]


def parents(fake: FakeSlack) -> set[str]:
    return {m.ts for m in fake.messages(CHANNEL_ID) if not m.is_reply}


# -- run again with changes --


def test_run_again_with_changes_opens_a_new_wizard_on_a_copy_of_the_answers(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    old, run = a_finished_run(bot, BASELINE, rewards=[0.1, 0.3])
    before = parents(fake)

    old.click("Run again with changes")

    [thread] = new_threads(fake, before)
    new = SlackUser(bot, thread=thread)
    new.settle()
    stored = bot.service.store.get(new.key)
    assert stored is not None and stored.owner == USER_ID
    assert dict(stored.session.answers) == TRAIN_RL.active_answers(BASELINE)
    assert stored.session.status == "complete"  # nothing asked: the edit point
    [menu] = new.bot_messages()
    assert (
        "Which answer do you want to change?" in menu.text and f"run #{run.public_id}" in menu.text
    )
    # The old thread says where the copy went, and keeps its own answers.
    assert any("reopened these answers in" in m.text for m in old.bot_messages())
    original = bot.service.store.get(old.key)
    assert original is not None and dict(original.session.answers) == dict(stored.session.answers)

    select_in(new, "Run name")  # the Edit menu works on the copy as on any wizard
    assert TRAIN_RL.step("run_name").prompt in new.bot_messages()[-1].text
    reopened = bot.service.store.get(new.key)
    assert reopened is not None and reopened.session.status == "active"
    assert "run_name" not in reopened.session.answers


def test_a_failed_run_offers_to_run_again_and_only_its_owner_may(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    owner, _ = a_finished_run(bot, BASELINE, rewards=[0.1], succeeded=False)
    failure = owner.open_question()
    labels = [
        e["text"]["text"]
        for b in failure.blocks or []
        if b.get("type") == "actions"
        for e in b["elements"]
    ]
    assert "Run again with changes" in labels
    assert not any(label.startswith("Compare") for label in labels)  # nothing trained to compare
    before = parents(fake)

    stranger = SlackUser(bot, user=OTHER_USER, thread=owner.thread)
    stranger.click("Run again with changes", wait=False)
    fake.wait_for(lambda f: any("can run this again" in m.text for m in f.ephemerals(CHANNEL_ID)))

    assert new_threads(fake, before) == []


def test_a_copy_of_answers_with_one_taken_back_opens_on_that_question() -> None:
    complete = replay(TRAIN_RL, BASELINE)
    reopened = advance(TRAIN_RL, complete, Reply(text="edit run name")).session

    turn = rerun_turn(TRAIN_RL, reopened, "k3jd9xq2m4pz")

    assert turn.session.status == "active" and "run_name" not in turn.session.answers
    asked = turn.messages[-1]
    assert isinstance(asked, Question) and asked.step_id == "run_name"
    assert "run #k3jd9xq2m4pz" in turn.messages[0].text


# -- comparing runs --


def test_the_answers_that_differ_are_exactly_those_changed_by_their_labels() -> None:
    differences = differing_answers(TRAIN_RL, BASELINE, CHANGED)

    assert [(d.label, d.first, d.second) for d in differences] == [
        ("Base model", "OpenPipe/Qwen3-14B-Instruct", "Qwen/Qwen3-30B-A3B-Instruct-2507"),
        ("Run name", "baseline", "bigger-model"),
        ("Hyperparameters", differences[2].first, differences[2].second),
        ("Custom hyperparameters: Learning rate", "-", "2e-05"),
    ]
    assert differences[2].first != differences[2].second
    assert differing_answers(TRAIN_RL, BASELINE, dict(BASELINE)) == []


def test_compare_with_the_previous_run_posts_one_plot_and_the_differing_answers(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    _, first = a_finished_run(bot, BASELINE, rewards=[0.1, 0.2, 0.3])
    other_project = answers_for("single", "ruler", "dataset", "local", True, project="elsewhere")
    a_finished_run(bot, other_project, rewards=[0.5])  # newer, but not this project's
    user, second = a_finished_run(bot, CHANGED, rewards=[0.2, 0.4, 0.6])

    user.click("Compare with the previous run of this project", wait=False)
    fake.wait_for(lambda f: any(u.name.startswith("compare-") for u in f.uploaded_files()))
    user.settle()

    [plot] = [u for u in fake.uploaded_files() if u.name.startswith("compare-")]
    assert plot.name == f"compare-run-{first.public_id}-run-{second.public_id}.png"
    assert plot.content.startswith(b"\x89PNG") and plot.thread_ts == user.thread
    table = plot.initial_comment or ""
    assert "4 answers differ" in table
    for label in ("Base model", "Run name", "Hyperparameters", "Learning rate"):
        assert label in table
    for same in ("Project", "Task", "Reward", "Backend"):
        assert f"\n{same} " not in table


def test_the_compare_command_takes_two_of_your_run_ids_and_refuses_others(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    _, first = a_finished_run(bot, BASELINE, rewards=[0.1, 0.2])
    user, second = a_finished_run(bot, CHANGED, rewards=[0.3, 0.4])

    bot.dispatch(slash_command(text="runs", response_url=fake.response_url()))
    fake.wait_for(lambda f: any(f"#{second.public_id}" in str(r) for r in f.responses()))

    bot.dispatch(
        slash_command(
            text=f"compare #{first.public_id} {second.public_id}",
            user_id=OTHER_USER,
            response_url=fake.response_url(),
        )
    )
    fake.wait_for(lambda f: any("among yours" in str(r) for r in f.responses()))
    assert not [u for u in fake.uploaded_files() if u.name.startswith("compare-")]

    bot.dispatch(
        slash_command(
            text=f"compare {second.public_id} {first.public_id}", response_url=fake.response_url()
        )
    )
    fake.wait_for(lambda f: any("Posted the comparison" in str(r) for r in f.responses()))
    [plot] = [u for u in fake.uploaded_files() if u.name.startswith("compare-")]
    assert plot.name == f"compare-run-{first.public_id}-run-{second.public_id}.png"
    assert plot.thread_ts == user.thread and "4 answers differ" in (plot.initial_comment or "")


def test_fine_tuning_runs_compare_by_their_loss_and_never_with_an_rl_run(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    _, rl = a_finished_run(bot, BASELINE, rewards=[0.1, 0.2])
    _, sft = a_finished_run(
        bot, SFT_VARIANTS["file-local-paste"], rewards=[2.0, 1.1], flow=TRAIN_SFT
    )
    user, sft_again = a_finished_run(
        bot, SFT_VARIANTS["file-serverless-runner"], rewards=[1.8, 0.9], flow=TRAIN_SFT
    )

    bot.dispatch(
        slash_command(
            text=f"compare {rl.public_id} {sft.public_id}", response_url=fake.response_url()
        )
    )
    fake.wait_for(lambda f: any("different wizards" in str(r) for r in f.responses()))
    assert not [u for u in fake.uploaded_files() if u.name.startswith("compare-")]

    bot.dispatch(
        slash_command(
            text=f"compare {sft.public_id} {sft_again.public_id}", response_url=fake.response_url()
        )
    )
    fake.wait_for(lambda f: any("Posted the comparison" in str(r) for r in f.responses()))
    [plot] = [u for u in fake.uploaded_files() if u.name.startswith("compare-")]
    assert plot.thread_ts == user.thread and plot.content.startswith(b"\x89PNG")
    assert "answers differ" in (plot.initial_comment or "")


# -- trying the model --


def a_served_run(
    bot: Bot, *, backend: str, model_url: str, succeeded: bool = True
) -> tuple[SlackUser, Run]:
    """A finished run whose `succeeded` event names its served model, as the script prints it."""
    user, run = a_finished_run(bot, BASELINE, rewards=[0.1], succeeded=False)
    runs = runs_of(bot)
    if succeeded:  # the same thread's retry succeeds, as the runner tells it
        retry = runs.runs.create(
            approval_id=run.approval_id,
            key=run.key,
            owner=USER_ID,
            script_name=run.script_name,
            script_sha256=run.script_sha256,
            backend=backend,
        )
        runs.runs.update(retry.id, job_id=f"job-{retry.id}", state="running")
        done = JobEvent(
            seq=1,
            job_id=f"job-{retry.id}",
            type=EventType.succeeded,
            at=datetime.now(UTC),
            data={"model": "math-solver@12", "inference_url": model_url, "step": 12},
        )
        page = EventsPage(job_id=done.job_id, events=[done], next_after=1, finished=True)
        runs.apply(retry.id, page)
        user.settle()
    return user, run


def test_try_sends_the_prompt_to_the_served_model_and_posts_its_reply(
    make_bot: BotFactory,
) -> None:
    with FakeOpenAI() as model:
        model.script(Scripted.text("4"))
        bot = make_bot(
            ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN, WANDB_API_KEY=model.key
        )
        user, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)

        final = next(m for m in user.bot_messages() if "Training finished" in m.text)
        assert "try <your prompt>" in json.dumps(final.blocks)  # the final message says how

        user.reply("try What is 2 + 2? <!channel>")

        [request] = model.requests
        assert request["model"] == "math-solver@12"
        assert request["messages"] == [{"role": "user", "content": "What is 2 + 2? <!channel>"}]
        said = user.bot_messages()[-1].text
        assert "math-solver@12" in said and "```4```" in said
        assert "<!channel>" not in said and "&lt;!channel&gt;" in said  # pings nobody
        assert model.refused == []


def test_try_refuses_before_a_run_succeeded_and_for_anyone_but_the_owner(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    with FakeOpenAI() as model:
        bot = make_bot(
            ARTBOT_RUNNER_URL=NOBODY_LISTENS, ARTBOT_RUNNER_TOKEN=TOKEN, WANDB_API_KEY=model.key
        )
        user, _ = a_served_run(bot, backend="serverless", model_url=model.base_url, succeeded=False)

        user.reply("try What is 2 + 2?")
        assert "once a run of this thread has succeeded" in user.bot_messages()[-1].text

        served, _ = a_served_run(bot, backend="serverless", model_url=model.base_url)
        stranger = SlackUser(bot, user=OTHER_USER, thread=served.thread)
        stranger.reply("try What is 2 + 2?", wait=False)
        fake.wait_for(lambda f: any("can try this model" in m.text for m in f.ephemerals()))
        assert model.requests == []


def test_try_in_a_wizard_still_asking_its_questions_is_an_answer(make_bot: BotFactory) -> None:
    user = SlackUser(a_bot(make_bot))
    user.command()
    asked = len(user.bot_messages())

    user.reply("try to add the numbers")

    assert len(user.bot_messages()) > asked  # the engine answered it, as a reply to its question
    assert not any("once a run of this thread" in m.text for m in user.bot_messages())


# -- an event is told once --


def test_an_event_whose_cursor_could_not_move_is_told_once_when_it_comes_again(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    """What an event says and the cursor past it are one transaction: a bot that failed to
    record the cursor (a crash, the database gone) has queued nothing, and the event, fetched
    again, is told once."""
    bot = a_bot(make_bot)
    key, run = an_approved_run(bot)
    runs = runs_of(bot)
    runs.runs.update(run.id, job_id="job-1", state="queued")
    started = JobEvent(seq=1, job_id="job-1", type=EventType.started, at=datetime.now(UTC), data={})
    page = EventsPage(job_id="job-1", events=[started], next_after=1, finished=False)

    moving_cursor = runs.runs.moving_cursor

    def failing_cursor(run_id: int, seq: int) -> AlsoWrite:
        def write(connection: Connection) -> None:
            moving_cursor(run_id, seq)(connection)
            raise OperationalError("UPDATE artbot_runs", {}, Exception("the database went away"))

        return write

    runs.runs.moving_cursor = failing_cursor  # type: ignore[method-assign]
    with pytest.raises(OperationalError):
        runs.apply(run.id, page)
    runs.runs.moving_cursor = moving_cursor  # type: ignore[method-assign]
    stuck = runs.runs.get(run.id)
    assert stuck is not None and stuck.cursor == 0
    assert bot.service.outbox.rows(key) == []  # nothing queued with it

    runs.apply(run.id, page)  # the follower fetches the page again
    runs.apply(run.id, page)  # and once more: the cursor is past it now
    SlackUser(bot, thread=key.thread).settle()

    told = [m for m in fake.thread(CHANNEL_ID, key.thread) if "Training started" in m.text]
    assert len(told) == 1
    moved = runs.runs.get(run.id)
    assert moved is not None and moved.cursor == 1
