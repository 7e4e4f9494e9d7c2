"""The result card after the checks, in Slack: style in the user's pasted code is a note and the
script is dry-run; an error in it skips the dry run and the card says why. The wizard answered
as a person would (tests/bot/test_realistic_inputs.py), the real check and dry run."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.dryrun import DryrunReport, dryrun_script
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_realistic_inputs import as_reply, walk_the_wizard
from tests.fakes.slack_api import FakeSlack
from tests.flows.realistic_agents import GAME_2048_CALLS_UNDEFINED, game_2048


def dryrun(path: Path) -> DryrunReport:
    return dryrun_script(path, workdir=path.parent / "dryrun")


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_style_in_pasted_code_is_a_note_on_the_card_and_an_undefined_name_skips_the_dry_run(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    user = SlackUser(make_bot(dryrun=dryrun))
    user.command()

    walk_the_wizard(user, game_2048())

    user.wait_for_result()
    fake.wait_for(lambda f: "Dry run passed" in user.result_cards()[-1].text, timeout=120)
    card = user.result_cards()[-1].text
    fake.wait_for(lambda f: f.status(user.channel, user.thread) == "")  # the dry run is over
    assert "is dry-running your script on a CPU…" in fake.statuses(user.channel, user.thread)
    assert ":white_check_mark: `artbot check`: compiles, no errors from ruff" in card
    assert ":memo: 2 note(s) on your own code, matters of style that stop nothing:" in card
    assert "ruff SIM905: Consider using a list literal" in card
    assert "ruff B905: `zip()` without an explicit `strict=` parameter" in card

    user.reply("edit environment")
    assert user.asked() == "environment"
    user.reply(as_reply(GAME_2048_CALLS_UNDEFINED))

    card = user.wait_for_result(count=2).text
    assert ":x: `artbot check` found 2 problem(s):" in card
    assert "ruff F821: Undefined name `spawn_bonus_tile`" in card
    assert ":memo: 2 note(s) on your own code" in card
    assert ":x: Not dry-run, because of the errors above" in card
    assert "Dry run" not in card and "Dry-running" not in card
