"""What a run says in its thread goes the way the wizard's questions go: through the outbox. Its
status card's updates, its reward curve, its long rollouts and a comparison's plot survive a
storm of 429s and a bot that stops before Slack took them: delayed, never lost, never doubled.

The runs are rows of the bot's own run store, told their job's events the way the follower
passes them on (RunService.apply)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.delivery.effects import Edit, Upload
from bot.delivery.outbox_rows import effect_row, row_effect
from bot.runs.display.cards import status_card
from bot.runs.store import Run
from bot.slack.blocks import text_message
from storage.sessions import SessionKey
from tests.bot.conftest import Bot, BotFactory
from tests.bot.test_durable_turns import SETTLED_WITHIN_S, delivered
from tests.bot.test_run_followups import (
    BASELINE,
    CHANGED,
    a_bot,
    a_finished_run,
    an_approved_run,
    runs_of,
    trained_then_ended,
)
from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import CHANNEL_ID, TEAM_ID

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STORM = 6
"""429s in a row: slack_sdk's own handler retries a 429 three times, six outlast it."""


def a_running_run_with_a_card(bot: Bot) -> tuple[SessionKey, Run]:
    """An approved run whose job runs on the runner, its status card already in its thread."""
    key, run = an_approved_run(bot, BASELINE)
    runs = runs_of(bot)
    job = f"job-{run.id}"
    run = runs.runs.update(run.id, job_id=job, state="running")
    shown = status_card(run)
    card = bot.app.client_for(TEAM_ID).chat_postMessage(
        channel=key.channel, thread_ts=key.thread, text=shown.text, blocks=shown.blocks
    )
    run = runs.runs.update(run.id, card_ts=str(card["ts"]), card_updated_at=runs.runs.now())
    return key, run


def card_text(fake: FakeSlack, key: SessionKey, ts: str) -> str:
    return next(m.text for m in fake.thread(key.channel, key.thread) if m.ts == ts)


def test_a_storm_of_429s_delays_the_runs_card_and_reward_curve_and_loses_neither(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    key, run = a_running_run_with_a_card(bot)
    fake.rate_limit("chat.update", times=STORM, retry_after=0)
    fake.rate_limit("files.getUploadURLExternal", times=STORM, retry_after=0)

    runs_of(bot).apply(run.id, trained_then_ended(str(run.job_id), [0.2, 0.5, 0.7]))
    delivered(bot)

    assert [c.status for c in fake.calls("chat.update")].count(429) == STORM
    assert [c.status for c in fake.calls("files.getUploadURLExternal")].count(429) == STORM
    assert bot.outbox.retried >= 2
    curves = [f for f in fake.uploaded_files() if f.name == "train-rewards.png"]
    assert len(curves) == 1
    assert curves[0].content.startswith(PNG_SIGNATURE)
    assert (curves[0].channel, curves[0].thread_ts) == (CHANNEL_ID, key.thread)
    finished = runs_of(bot).runs.get(run.id)
    assert finished is not None and finished.card_ts is not None
    assert card_text(fake, key, finished.card_ts) == status_card(finished).text  # the end shown


def test_a_bot_stopped_before_slack_took_the_reward_curve_uploads_it_once_after_a_restart(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    first = a_bot(make_bot)
    key, run = a_running_run_with_a_card(first)
    fake.fail("files.getUploadURLExternal", error="service_unavailable", times=2, status=503)

    runs_of(first).apply(run.id, trained_then_ended(str(run.job_id), [0.1, 0.4]))
    fake.wait_for(lambda f: len(f.calls("files.getUploadURLExternal")) >= 1, SETTLED_WITHIN_S)
    first.outbox.stop()  # the bot goes away with the curve still in its outbox
    assert [f for f in fake.uploaded_files() if f.name == "train-rewards.png"] == []

    restarted = a_bot(make_bot)  # a new bot on the same database
    delivered(restarted)
    curves = [f for f in fake.uploaded_files() if f.name == "train-rewards.png"]
    assert len(curves) == 1 and curves[0].content.startswith(PNG_SIGNATURE)
    # The events were told once: the cursor moved with what they said, in one transaction.
    runs_of(restarted).apply(run.id, trained_then_ended(str(run.job_id), [0.1, 0.4]))
    delivered(restarted)
    assert len([f for f in fake.uploaded_files() if f.name == "train-rewards.png"]) == 1
    ended = [m for m in fake.thread(key.channel, key.thread) if "Training finished" in m.text]
    assert len(ended) == 1


def test_a_comparison_refused_by_429s_at_first_still_reaches_the_thread_once(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = a_bot(make_bot)
    _, first = a_finished_run(bot, BASELINE, rewards=[0.1, 0.3])
    user, second = a_finished_run(bot, CHANGED, rewards=[0.2, 0.6])
    fake.rate_limit("files.getUploadURLExternal", times=STORM, retry_after=0)

    comparer = bot.service.comparer
    assert comparer is not None
    assert comparer.post(first, second) is None  # queued
    delivered(bot)

    plots = [f for f in fake.uploaded_files() if f.name.startswith("compare-run-")]
    assert len(plots) == 1
    assert plots[0].content.startswith(PNG_SIGNATURE)
    assert plots[0].thread_ts == user.thread
    assert plots[0].initial_comment and "answers differ" in plots[0].initial_comment


def test_files_and_card_edits_keep_every_byte_and_word_through_the_outbox_table() -> None:
    key = SessionKey(TEAM_ID, CHANNEL_ID, "1700000000.000100")
    now = datetime.now(UTC)
    binary = Upload("plot.png", "Reward curve", PNG_SIGNATURE + bytes(range(256)), "a comment")
    text = Upload("rollouts.txt", "Rollouts", "ünïcödé\x00 and <&> as typed", "")
    edit = Edit("1700000000.000200", text_message("Step 3 of 10 · reward 0.5"))

    for effect in (binary, text, edit):
        row = effect_row(key, effect, now)
        assert row_effect(_Row(**row)) == effect


class _Row:
    """An outbox row as the database gives it back: its values as attributes."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)
