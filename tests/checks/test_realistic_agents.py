"""Agents written after ART's examples go through render, `artbot check` and the dry run, and
the dry run shows the user's code ran: or fails, saying so, when it could not have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.dryrun import DryrunReport, dryrun_script
from checks.script_check import check_scripts
from flows import render_script
from tests.flows.realistic_agents import email_agent, invalid_moves_game, tic_tac_toe


def rendered_and_checked(answers: dict[str, Any], folder: Path) -> Path:
    script = folder / "rl_train.py"
    script.write_text(render_script(answers))
    [report] = check_scripts([script])
    assert report.ok, report.format()
    return script


def dryrun(script: Path, folder: Path) -> DryrunReport:
    report = dryrun_script(script, workdir=folder / "run")
    print(report.format())  # shown when an assertion fails
    return report


def runs_of(report: DryrunReport) -> dict[str, str]:
    return {run.split()[0]: run for run in report.user_code_runs}


@pytest.mark.slow
def test_an_email_agent_ends_its_episodes_with_its_final_answer_tool(tmp_path: Path) -> None:
    report = dryrun(rendered_and_checked(email_agent(), tmp_path), tmp_path)

    assert report.ok, report.format()
    called = dict(report.tools_called)
    assert called["return_final_answer"] > 0 and called["search_inbox"] > 0
    runs = runs_of(report)
    assert set(runs) == {"search_inbox", "read_email", "compute_reward"}
    assert runs["compute_reward"] == f"compute_reward {report.rollouts}x"
    means = dict(report.metric_means)
    # Some episodes ended on the final-answer tool, some ran out of turns unanswered...
    assert 0 < means["answered"] < 1
    # ...and every answered one handed the reward the tool's arguments as JSON.
    assert means["gave_sources"] == means["answered"]


@pytest.mark.slow
def test_a_tic_tac_toe_game_gets_valid_moves_and_reaches_its_reward(tmp_path: Path) -> None:
    report = dryrun(rendered_and_checked(tic_tac_toe(), tmp_path), tmp_path)

    assert report.ok, report.format()
    runs = runs_of(report)
    assert set(runs) == {
        "create_game",
        "render_observation",
        "apply_action",
        "is_finished",
        "compute_reward",
    }
    calls = int(runs["compute_reward"].split()[1].removesuffix("x"))
    assert calls >= report.rollouts // 4  # games often end on the board, not on a bad move
    assert dict(report.metric_means)["finished"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("reward", ["programmatic", "ruler"])
def test_a_game_whose_every_move_is_invalid_fails_the_dry_run(reward: str, tmp_path: Path) -> None:
    report = dryrun(rendered_and_checked(invalid_moves_game(reward), tmp_path), tmp_path)

    assert not report.ok
    assert report.exit_code == 0  # the script itself "worked"
    assert report.problems[0].startswith(
        "every move was invalid: your `apply_action` raised in all "
    )
    if reward == "programmatic":
        assert report.problems[1].startswith("your `compute_reward` never ran in 32 rollouts")
    else:
        assert len(report.problems) == 1  # RULER's scores vary: only the game is at fault
