"""Realistic user code (tests/flows/realistic.py) goes through the wizard, renders, passes
`artbot check` and the dry run, and the dry run shows the user's own code ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from checks.dryrun import dryrun_script
from checks.script_check import check_scripts
from checks.script_format import formatted_script
from flows import TRAIN_RL, replay
from tests.flows.realistic import REALISTIC


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("realistic")
    paths: dict[str, Path] = {}
    for name, answers in REALISTIC.items():
        path = folder / f"{name.replace('-', '_')}.py"
        path.write_text(formatted_script(replay(TRAIN_RL, answers).answers))
        paths[name] = path
    return paths


def test_realistic_user_code_passes_check(scripts: dict[str, Path]) -> None:
    reports = check_scripts(list(scripts.values()))
    failures = [report.format() for report in reports if not report.ok]
    assert not failures, "\n".join(failures)


# Rewards that only the user's code gives, so a dry run that saw one ran that code:
# - the games: the script gives -1 for an invalid move; 0 and up come from compute_reward(game)
#   (mixed half and half with RULER's 0.1..0.9, 0 and up still needs more than -1 of its own);
# - math, yaml: their rewards subtract a length penalty, so below 0 means they ran (the script's
#   own starting reward is 0);
# - tools: 0.5 and up only when the tool's own JSON came back (the reward reads the tool message).
def user_code_ran(name: str, reward_min: float, reward_max: float) -> bool:
    if name in ("tic-tac-toe", "tic-tac-toe-mix", "guessing-game"):
        return reward_max >= 0.0
    if name == "tools":
        return reward_max >= 0.5
    return reward_min < 0.0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REALISTIC))
def test_realistic_user_code_passes_the_dry_run(
    scripts: dict[str, Path], name: str, tmp_path: Path
) -> None:
    report = dryrun_script(scripts[name], workdir=tmp_path)
    assert report.ok, report.format()
    assert report.rollout_exceptions == 0, report.format()
    assert report.reward_min is not None and report.reward_max is not None
    assert report.reward_max > report.reward_min
    assert user_code_ran(name, report.reward_min, report.reward_max), report.format()
