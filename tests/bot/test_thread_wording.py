"""What the thread says follows the state: buttons that can no longer act lose them, Cancel after a
script does not claim nothing was made, and the bot host's folders stay out of Slack."""

from __future__ import annotations

from pathlib import Path

from checks.dryrun import DryrunReport
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_slack_wizard import answer_single_turn_ruler
from tests.fakes.slack_api import FakeSlack, Message


def with_buttons(user: SlackUser) -> list[Message]:
    return [
        m
        for m in user.bot_messages()
        if any(block.get("type") == "actions" for block in m.blocks or [])
    ]


def test_regenerate_takes_the_buttons_off_the_older_script(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    answer_single_turn_ruler(user)

    user.click("Regenerate", wait=False)  # renders and checks again: seconds on a busy machine
    user.wait_for_result(count=2)

    older, newer = user.result_cards()
    assert with_buttons(user) == [newer]
    assert "Replaced by the newer script below" in older.text


def test_cancel_after_the_script_keeps_it_and_takes_every_button_away(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot())
    user.command()
    answer_single_turn_ruler(user)

    user.click("Cancel")

    said = user.last_text()
    assert "Nothing was generated" not in said
    assert "The script it generated is kept" in said
    assert with_buttons(user) == []
    stored = user.bot.service.store.get(user.key)
    assert stored is not None and stored.session.status == "cancelled"


def test_cancel_mid_wizard_takes_the_open_questions_buttons_away(make_bot: BotFactory) -> None:
    user = SlackUser(make_bot())
    user.command()
    user.click("Only logged or static scenarios")
    assert len(with_buttons(user)) == 1  # the next question's

    user.reply("cancel")

    assert "Nothing was generated" in user.last_text()
    assert with_buttons(user) == []


def test_the_dry_run_report_names_the_script_not_the_folder_it_is_in_on_the_host(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    def failing_dryrun(path: Path) -> DryrunReport:
        return DryrunReport(
            script=path,
            exit_code=1,
            rollouts=2,
            rollout_exceptions=2,
            reward_min=None,
            reward_max=None,
            steps_trained=0,
            validations=0,
            last_val_reward=None,
            first_error=(
                "Traceback (most recent call last):\n"
                f'  File "{path}", line 120, in rollout\n'
                "ZeroDivisionError: division by zero"
            ),
            problems=("every rollout raised",),
            output_tail="",
        )

    bot = make_bot(dryrun=failing_dryrun)
    user = SlackUser(bot)
    user.command()
    answer_single_turn_ruler(user)
    fake.wait_for(lambda f: "Dry run failed" in user.result_cards()[-1].text, 60)

    report = user.result_cards()[-1].text  # the verdict is on the card, updated in place
    assert 'File "math-solver-001.py", line 120' in report
    scripts_dir = bot.settings.artbot_scripts_dir
    assert scripts_dir and scripts_dir not in report
    assert all(scripts_dir not in m.text for m in fake.messages(user.channel))


def test_a_dry_run_whose_standin_could_not_play_is_inconclusive_on_the_card_not_failed(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    def inconclusive_dryrun(path: Path) -> DryrunReport:
        return DryrunReport(
            script=path,
            exit_code=0,
            rollouts=8,
            rollout_exceptions=0,
            reward_min=-1.0,
            reward_max=-1.0,
            steps_trained=2,
            validations=0,
            last_val_reward=None,
            first_error=None,
            problems=(),
            output_tail="",
            inconclusive=("the stand-in player could not play this game: ...",),
        )

    user = SlackUser(make_bot(dryrun=inconclusive_dryrun))
    user.command()
    answer_single_turn_ruler(user)
    fake.wait_for(lambda f: "Dry run inconclusive" in user.result_cards()[-1].text, 60)

    card = user.result_cards()[-1].text
    assert ":grey_question: Dry run inconclusive." in card
    assert "the stand-in player could not play this game" in card
    assert "failed" not in card.lower()
