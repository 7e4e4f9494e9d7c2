"""How many messages a wizard takes, counted on what the fake Slack received: about one bot
message per question asked, and every answered question shows its answer in place."""

from __future__ import annotations

from pathlib import Path

from bot.slack.blocks import RESULT_STEP
from checks.dryrun import DryrunReport
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_slack_wizard import answer_single_turn_ruler
from tests.fakes.slack_api import FakeSlack, Message

BEYOND_THE_QUESTIONS = 1
"""Bot posts a wizard may make besides its questions: the result card. Everything else folds
into a question (its intro note, a problem with the last reply, a menu's new value) or into an
answered question ("That's every question"), and the dry run's verdict updates the card. The
parent message is the thread itself and is not counted."""


def passing_dryrun(path: Path) -> DryrunReport:
    return DryrunReport(
        script=path,
        exit_code=0,
        rollouts=2,
        rollout_exceptions=0,
        reward_min=0.0,
        reward_max=1.0,
        steps_trained=1,
        validations=1,
        last_val_reward=0.5,
        first_error=None,
        problems=(),
        output_tail="",
    )


def questions_asked(user: SlackUser) -> list[tuple[str, str]]:
    """(step, ts) of every question message the bot posted in the thread, in order."""
    return [
        (row.step_id or "", row.ts or "")
        for row in user.bot.service.outbox.rows(user.key)
        if row.kind == "question" and row.step_id != RESULT_STEP and row.ts
    ]


def has_buttons(message: Message) -> bool:
    return any(block.get("type") == "actions" for block in message.blocks or [])


def test_a_typical_wizard_takes_one_message_per_question_plus_the_result_card(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot(dryrun=passing_dryrun))
    user.command()
    answer_single_turn_ruler(user)
    fake.wait_for(lambda f: "Dry run passed" in user.result_cards()[-1].text, timeout=60)
    user.settle()

    asked = questions_asked(user)
    posts = user.bot_messages()
    print(f"{len(asked)} questions asked, {len(posts)} bot messages")
    assert len(posts) <= len(asked) + BEYOND_THE_QUESTIONS
    assert posts[-1] == user.result_cards()[-1]  # one card: file, summary, verdict, buttons
    assert "Dry run passed" in posts[-1].text and has_buttons(posts[-1])
    # Every question message that was answered shows its answer, without buttons.
    stored = user.bot.service.store.get(user.key)
    assert stored is not None
    last_asked = {step: ts for step, ts in asked}
    for step, ts in last_asked.items():
        shown = fake.message(user.channel, ts)
        assert shown is not None and step in stored.session.answers
        assert ":white_check_mark:" in shown.text and not has_buttons(shown), step
    # A note is part of the question it introduces, and stays there once it is answered.
    assert not any(
        m.text.startswith("*About RULER:*") for m in posts if m.ts != last_asked["reward"]
    )
    reward = fake.message(user.channel, last_asked["reward"])
    assert reward is not None and reward.text.startswith("*About RULER:*")
    assert ":white_check_mark: *RULER" in reward.text
    # The closing words sit under the last answer rather than in a post of their own.
    assert not any(m.text.startswith("That's every question") for m in posts)
    closing = fake.message(user.channel, asked[-1][1])
    assert closing is not None and "That's every question" in closing.text


def test_a_note_a_problem_and_a_new_value_each_come_with_their_question(
    make_bot: BotFactory,
) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the final number.")
    before = len(user.bot_messages())

    user.reply("no idea")  # not one of the options of "where do the scenarios come from"

    said = user.bot_messages()[before:]
    assert len(said) == 1  # the problem and the question asked again, together
    assert said[0].text.startswith(":warning:") and has_buttons(said[0])
