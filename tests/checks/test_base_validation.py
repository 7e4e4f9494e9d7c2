"""The generated script validates the base model once, at step 0, and not again on resume.

Dry-run twice in the same folder: the stand-in trainer keeps checkpoints the way LocalBackend
does (`get_step()` is the newest `checkpoints/NNNN`) and the real `art` client writes
history.jsonl, so the second run resumes as a real one would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checks.dryrun import dryrun_script
from checks.script_format import formatted_script
from tests.flows.matrix import answers_for


def history_rows(workdir: Path) -> list[dict[str, Any]]:
    [history] = workdir.glob(".art/*/models/*/history.jsonl")
    return [json.loads(line) for line in history.read_text().splitlines() if line.strip()]


def validation_rows(rows: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    return [row for row in rows if row["step"] == step and "val/reward" in row]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("pattern", "reward", "rollout_metrics"),
    [
        ("tools", "programmatic", {"val/turns", "val/tool_calls"}),
        ("game", "custom", {"val/turns", "val/finished"}),
    ],
)
def test_the_base_model_is_validated_at_step_0_once_and_not_again_on_resume(
    pattern: str, reward: str, rollout_metrics: set[str], tmp_path: Path
) -> None:
    # Open-ended, so that the resumed run has steps left (a dataset's one dry-run epoch is
    # done in the first run).
    answers = answers_for(pattern, reward, "open_ended", "local", True)
    script = tmp_path / "rl_train.py"
    script.write_text(formatted_script(answers))
    workdir = tmp_path / "run"

    first = dryrun_script(script, workdir=workdir, max_steps=2)
    assert first.ok, first.format()
    [base] = validation_rows(history_rows(workdir), 0)
    # ART's row for the base model: its reward and the rollouts' own metrics, averaged.
    assert isinstance(base["val/reward"], float)
    assert rollout_metrics <= set(base)

    resumed = dryrun_script(script, workdir=workdir, max_steps=4)
    assert resumed.ok, resumed.format()
    assert resumed.steps_trained >= 1
    rows = history_rows(workdir)
    assert len(validation_rows(rows, 0)) == 1  # not repeated
    assert max(row["step"] for row in rows) > 2  # the resumed run trained on
