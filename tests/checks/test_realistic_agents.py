"""Agents written after ART's examples go through render, `artbot check` and the dry run, and
the dry run shows the user's code ran: or fails, saying so, when it could not have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.dryrun import DryrunReport, dryrun_script
from checks.script_check import check_scripts
from checks.script_format import formatted_script
from tests.flows.realistic_agents import (
    game_2048_free_text,
    invalid_moves_game,
    tic_tac_toe_letters_on_top,
)
from tests.flows.realistic_tasks import (
    art_e,
    codenames,
    support_agent_with_a_customer,
    temporal_clue,
)


def rendered_and_checked(answers: dict[str, Any], folder: Path) -> Path:
    script = folder / "rl_train.py"
    script.write_text(formatted_script(answers))
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
def test_art_e_searches_each_scenarios_inbox_and_ends_on_its_final_answer_tool(
    tmp_path: Path,
) -> None:
    report = dryrun(rendered_and_checked(art_e(), tmp_path), tmp_path)

    assert report.ok, report.format()
    called = dict(report.tools_called)
    assert called["return_final_answer"] > 0 and called["search_inbox"] > 0
    runs = runs_of(report)
    # The tools took the episode's scenario (its inbox, its date) and ran without raising.
    assert set(runs) == {"search_inbox", "read_email", "compute_reward"}
    assert "raised" not in runs["search_inbox"] and "raised" not in runs["read_email"]
    assert runs["compute_reward"] == f"compute_reward {report.rollouts}x"
    # Some episodes ended on the final-answer tool, some ran out of turns unanswered.
    assert 0 < dict(report.metric_means)["answered"] < 1


@pytest.mark.slow
def test_a_support_agent_with_http_tools_talks_with_its_simulated_customer(
    tmp_path: Path,
) -> None:
    answers = support_agent_with_a_customer("https://crm.internal")
    report = dryrun(rendered_and_checked(answers, tmp_path), tmp_path)

    assert report.ok, report.format()
    means = dict(report.metric_means)
    # The CRM is not reachable from the dry run's sandbox: every tool call fails and is told to
    # the agent; the key's variable was given a placeholder, so the script started at all.
    assert means["tool_errors"] > 0
    # The stand-in played the customer too (through LiteLLM, as in training).
    assert means["user_turns"] > 0
    assert report.judge_requests > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["codenames", "temporal-clue"])
def test_a_generated_and_a_custom_mix_task_pass_with_their_code_run(
    name: str, tmp_path: Path
) -> None:
    answers = codenames() if name == "codenames" else temporal_clue()
    report = dryrun(rendered_and_checked(answers, tmp_path), tmp_path)

    assert report.ok, report.format()
    runs = runs_of(report)
    assert runs["compute_reward"] == f"compute_reward {report.rollouts}x"
    if name == "codenames":
        assert "generate_scenario" in runs
    else:  # the custom mix: RULER judged every group, and the user's own reward is logged
        assert report.judge_requests > 0 and "ruler_score" in dict(report.metric_means)


@pytest.mark.slow
def test_tic_tac_toe_drawn_with_letters_across_the_top_is_played_to_the_end(
    tmp_path: Path,
) -> None:
    report = dryrun(rendered_and_checked(tic_tac_toe_letters_on_top(), tmp_path), tmp_path)

    assert report.ok, report.format()
    runs = runs_of(report)
    assert set(runs) == {
        "create_game",
        "render_observation",
        "apply_action",
        "is_finished",
        "compute_reward",
    }
    # Every move the stand-in played was a free cell (`B2`: column, then row), and every game
    # went on to its end and its reward.
    assert "raised" not in runs["apply_action"]
    assert runs["compute_reward"] == f"compute_reward {report.rollouts}x"
    assert dict(report.metric_means)["finished"] == 1
    assert report.reward_min is not None and report.reward_max is not None
    assert report.reward_min < report.reward_max
    assert any(note.endswith("played one the game accepted at every one") for note in report.notes)


@pytest.mark.slow
def test_2048_with_moves_in_free_text_is_capped_in_turns_and_reaches_its_reward(
    tmp_path: Path,
) -> None:
    report = dryrun(rendered_and_checked(game_2048_free_text(), tmp_path), tmp_path)

    # Passing at all says the Anthropic judge's key was there: a placeholder, the judge stood in.
    assert report.ok, report.format()
    assert "capped --max-turns 150 -> 20" in report.notes
    runs = runs_of(report)
    # "up, down, left or right", unquoted, were played: never a move the board refused...
    assert "raised" not in runs["apply_action"]
    # ...and every game, cut at 20 moves, reached the reward; RULER judged every group.
    assert runs["compute_reward"] == f"compute_reward {report.rollouts}x"
    assert 10 < dict(report.metric_means)["turns"] <= 20
    assert report.judge_requests > 0


@pytest.mark.slow
def test_a_game_whose_moves_the_standin_cannot_find_is_inconclusive_not_blamed_on_the_code(
    tmp_path: Path,
) -> None:
    report = dryrun(rendered_and_checked(invalid_moves_game(), tmp_path), tmp_path)

    assert (report.verdict, report.problems) == ("inconclusive", ())
    assert report.exit_code == 0  # the script itself worked
    stuck, never_ran = report.inconclusive
    assert stuck.startswith("the stand-in player could not play this game: at 32 of 32 positions")
    assert "(its first refusal: ValueError: not a direction: " in stuck
    assert stuck.endswith("It was stuck at:\nYou are at 0. Which way?")
    # Coverage stays strict: the reward never ran, and the run does not pass.
    assert never_ran.startswith("your `compute_reward` never ran in 32 rollouts")
    assert not report.ok
    assert "apply_action 32x, 32 raised" in runs_of(report)["apply_action"]
    assert "every move was invalid" not in report.format()
