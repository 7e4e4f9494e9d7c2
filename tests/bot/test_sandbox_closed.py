"""Fail closed: where the host cannot sandbox users' code, the bot runs none of it. The script is
still generated, checked and offered, and the thread and /healthz say why it was not dry-run."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from bot.process.serve import BotServer, web_for
from checks.dryrun import DryrunReport
from isolation.sandbox import Sandbox
from tests.bot.conftest import BotFactory, SlackUser
from tests.bot.test_slack_wizard import answer_single_turn_ruler
from tests.fakes.slack_api import FakeSlack

NO_SANDBOX = Sandbox(confined=False, reason="bubblewrap is not installed", may_run=False)


def test_without_a_sandbox_the_script_is_offered_checked_and_not_run(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    bot = make_bot(sandbox=NO_SANDBOX, ARTBOT_DRYRUN="true")
    user = SlackUser(bot)
    user.command()

    answer_single_turn_ruler(user)

    card = user.wait_for_result().text
    assert "`artbot check`: compiles, ruff-clean" in card  # the static check ran
    assert (
        ":lock: Not dry-run: this host cannot sandbox untrusted code (bubblewrap is not "
        "installed), so artbot does not run it." in card
    )
    user.settle()
    assert "Dry run" not in user.result_cards()[-1].text  # and no dry run came after


def test_healthz_says_whether_users_code_is_sandboxed(make_bot: BotFactory) -> None:
    closed = make_bot(sandbox=NO_SANDBOX)
    confined = make_bot()
    for bot, expected in (
        (closed, "sandbox: unavailable, so users' code is not run: bubblewrap is not installed"),
        (confined, "sandbox: untrusted code runs in bubblewrap namespaces"),
    ):
        with (
            BotServer(web_for(bot.app, bot.service)) as server,
            urllib.request.urlopen(f"{server.base_url}/healthz", timeout=10) as answer,
        ):
            assert answer.status == 200  # healthy either way: without a sandbox, no code runs
            assert expected in answer.read().decode()


def test_the_opt_out_runs_the_dry_run_unconfined_and_says_so(
    make_bot: BotFactory, fake: FakeSlack
) -> None:
    ran: list[Path] = []

    def dryrun(path: Path) -> DryrunReport:
        ran.append(path)
        raise RuntimeError("stop here: only whether it was called matters")

    opted_out = Sandbox(confined=False, reason="bubblewrap is not installed", may_run=True)
    bot = make_bot(sandbox=opted_out, dryrun=dryrun)
    user = SlackUser(bot)
    user.command()

    answer_single_turn_ruler(user)

    user.wait_for_result()
    fake.wait_for(lambda f: bool(ran), 30)
    assert ran[0].name == "math-solver-001.py"
