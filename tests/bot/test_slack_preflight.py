"""*Preflight* on an RL result card, where the operator configured an endpoint: the script's own
rollouts and reward against that model (a loopback OpenAI-compatible fake here), the report in
the thread, for the owner only, and nothing of the endpoint's key in any post."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from bot.runs.preflight_records import PreflightRecords
from bot.slack.records import script_digest
from checks.preflight.numbers import PreflightNumbers
from flows import TRAIN_RL, replay
from runner.schemas import EventsPage, EventType, JobEvent
from storage.sessions import SessionKey
from tests.bot.conftest import Bot, BotFactory, SlackUser
from tests.bot.test_run_followups import a_bot, an_approved_run, runs_of
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import CHANNEL_ID, TEAM_ID, USER_ID
from tests.flows.matrix import answers_for

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

KEY = "sk-preflight-canary-5e2b7c"


def a_finished_wizard(bot: Bot) -> SlackUser:
    """A thread whose wizard took a single-turn programmatic RL script's answers, its result
    card posted (2 groups of 4 rollouts a step)."""
    client = bot.app.client_for(TEAM_ID)
    parent = client.chat_postMessage(channel=CHANNEL_ID, text=f"<@{USER_ID}> started a wizard.")
    key = SessionKey(TEAM_ID, CHANNEL_ID, str(parent["ts"]))
    answers = answers_for("single", "programmatic", "dataset", "local", False)
    bot.service.store.create(key, USER_ID, replay(TRAIN_RL, answers))
    bot.service.result_buttons.generate(client, key)
    user = SlackUser(bot, thread=key.thread)
    user.wait_for_result()
    return user


def everything_said(user: SlackUser, fake: FakeSlack) -> str:
    posts = [m.text for m in user.bot_messages()] + [e.text for e in fake.ephemerals(CHANNEL_ID)]
    files = [u.content.decode(errors="replace") for u in fake.uploaded_files()]
    return "\n".join(posts + files)


def test_without_an_endpoint_the_card_offers_no_preflight(make_bot: BotFactory) -> None:
    user = a_finished_wizard(make_bot())
    labels = str(user.result_cards()[-1].blocks)
    assert "Approve and run" in labels and "Preflight" not in labels


def test_preflight_runs_the_scripts_rollouts_against_the_endpoint_and_reports_in_the_thread(
    make_bot: BotFactory, fake: FakeSlack, tmp_path: Path
) -> None:
    with FakeOpenAI(key=KEY) as model:
        # Answers of 1..8 words: the reward (correct, minus a little per word) varies in a group.
        model.script(*(Scripted.text(" ".join(["4"] * n)) for n in range(1, 9)))
        bot = make_bot(
            ARTBOT_PREFLIGHT_BASE_URL=model.base_url,
            ARTBOT_PREFLIGHT_MODEL="stand-in-model",
            ARTBOT_PREFLIGHT_API_KEY=KEY,
        )
        user = a_finished_wizard(bot)

        stranger = SlackUser(bot, user="U0STRANGER", thread=user.thread)
        stranger.click("Preflight", on=user.result_cards()[-1], wait=False)
        fake.wait_for(lambda f: bool(f.ephemerals(CHANNEL_ID)))
        user.click("Preflight", on=user.result_cards()[-1])
        fake.wait_for(
            lambda f: any("Preflight ok" in m.text for m in user.bot_messages()), timeout=240
        )
        user.settle()
        assert model.refused == []
        assert len(model.requests) == 8  # 2 groups x 4 rollouts, nothing for the stranger

    said = everything_said(user, fake)
    report = next(m.text for m in user.bot_messages() if "Preflight ok" in m.text)
    assert "groups with zero reward variance: 0 of 2 (0%)" in report
    assert "stand-in-model" in report
    # The run priced from what the rollouts took, said as a stand-in's numbers.
    assert "Estimate from the preflight (8 rollouts on `stand-in-model`, a stand-in" in report
    assert "LocalBackend: a rollout took a median" in report
    # What it measured is kept with the script, for the run approved from it.
    stored = bot.service.store.get(user.key)
    assert stored is not None
    latest = bot.service.results.latest_script(user.key, stored.session.answers)
    assert latest is not None
    script = latest[1]
    records = PreflightRecords.open(make_bot.database.url, schema=make_bot.database.schema)
    kept = records.latest(user.key, script_digest(script))
    assert kept is not None and kept.rollouts == 8 and kept.groups == 2
    assert kept.model == "stand-in-model" and not kept.base_model
    # The thread's status line said it was working, and was cleared once the report was in.
    shown = fake.statuses(CHANNEL_ID, user.thread)
    assert "is running the preflight against the model…" in shown and shown[-1] == ""
    assert KEY not in said and str(tmp_path) not in report
    assert any("only" in e.text.lower() for e in fake.ephemerals(CHANNEL_ID))


def test_what_the_preflight_measured_is_shown_again_when_the_run_succeeds(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    key, run = an_approved_run(bot)
    assert bot.service.runs is not None and bot.service.runs.preflights is not None
    measured = PreflightNumbers(
        model="stand-in-model",
        base_model=False,
        verdict="ok",
        rollouts=8,
        groups=2,
        mean_reward=0.25,
        zero_variance_share=0.5,
        prompt_tokens_per_rollout=120.0,
        completion_tokens_per_rollout=30.0,
        turns_per_rollout=1.0,
        wall_s_per_rollout=0.4,
        truncated_share=0.0,
    )
    bot.service.runs.preflights.keep(key, run.script_sha256, measured)
    runs = runs_of(bot)
    runs.runs.update(run.id, job_id="job-1", state="running")
    at = datetime.now(UTC)
    told = [
        JobEvent(seq=1, job_id="job-1", type=EventType.validation, at=at, data=VALIDATED),
        JobEvent(seq=2, job_id="job-1", type=EventType.succeeded, at=at, data=SUCCEEDED),
    ]
    runs.apply(run.id, EventsPage(job_id="job-1", events=told, next_after=2, finished=True))
    user = SlackUser(bot, thread=key.thread)
    user.settle()

    [then] = [m.text for m in user.bot_messages() if m.text.startswith(":stethoscope: Before")]
    assert "the preflight on `stand-in-model` (a stand-in model) measured a mean reward of " in then
    assert "0.250 over 8 rollouts (50% of its groups with zero variance)" in then
    assert "the last validation (step 4) reached 0.750" in then


VALIDATED = {"step": 4, "val/reward": 0.75}
SUCCEEDED = {"model": "m@4", "inference_url": "http://runner/v1/", "step": 4}
