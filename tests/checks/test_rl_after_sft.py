"""RL after SFT, checked and run: the scripts that fork an SFT model pass `artbot check` against
the real `art`, and on the dry run's stand-in backends they fork the SFT model's newest
checkpoint from the art path, count their steps after it, resume without forking again, and
stop with a clear message when there is no SFT model to start from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checks.dryrun import DryrunReport, dryrun_script
from checks.script_check import check_scripts
from checks.script_format import formatted_script
from flows import TRAIN_RL, TRAIN_SFT, replay
from tests.flows.matrix import after_sft, answers_for
from tests.flows.sft_matrix import VARIANTS as SFT_VARIANTS

# A train-rl cell, and the train-sft variant it continues (of the same backend).
FORKED = {
    "local-open-ended": (
        ("single", "programmatic", "open_ended", "local", True),
        "file-local-paste",
    ),
    "local-dataset-noval": (
        ("game", "programmatic", "dataset", "local", False),
        "file-local-paste",
    ),
    "serverless-dataset": (
        ("tools", "ruler", "dataset", "serverless", True),
        "file-serverless-upload-val",
    ),
    "serverless-open-ended-noval": (
        ("single", "custom", "open_ended", "serverless", False),
        "file-serverless-runner",
    ),
}


def forked_answers(name: str) -> dict[str, Any]:
    cell, sft = FORKED[name]
    answers = after_sft(answers_for(*cell), SFT_VARIANTS[sft])
    return TRAIN_RL.active_answers(replay(TRAIN_RL, answers).answers)


def write_script(folder: Path, name: str) -> Path:
    answers = forked_answers(name)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{answers['run_name']}.py"
    path.write_text(formatted_script(answers, path.name))
    return path


def dryrun(script: Path, workdir: Path, *script_args: str) -> DryrunReport:
    report = dryrun_script(script, script_args=script_args, workdir=workdir, environment="project")
    print(report.format())  # shown by pytest when an assertion fails
    return report


def history(model_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (model_dir / "history.jsonl").read_text().splitlines()]


def test_every_forked_script_passes_check(tmp_path: Path) -> None:
    scripts = [write_script(tmp_path / name, name) for name in FORKED]
    reports = check_scripts(scripts)
    failures = [report.format() for report in reports if not report.ok or report.notes]
    assert not failures, "\n".join(failures)


def test_rl_forks_the_sft_model_left_by_its_run_then_resumes_without_forking(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    sft_answers = TRAIN_SFT.active_answers(
        replay(TRAIN_SFT, SFT_VARIANTS["file-local-paste"]).answers
    )
    sft_script = tmp_path / "sft" / "capitals-001.py"
    sft_script.parent.mkdir()
    sft_script.write_text(formatted_script(sft_answers, sft_script.name, TRAIN_SFT))
    # The SFT run, on the stand-in trainer, leaves capitals-001 at step 3 in <run>/.art.
    assert dryrun(sft_script, run).ok
    script = write_script(tmp_path / "rl", "local-open-ended")

    first = dryrun(script, run, "--num-steps", "2")
    assert first.ok, first.problems
    assert first.steps_trained == 2
    assert (
        "LocalBackend._experimental_fork_checkpoint copied checkpoint 3 of "
        "sft-project/capitals-001 into matrix/single-programmatic-open_ended-local-val."
    ) in first.notes
    model_dir = run / ".art" / "matrix" / "models" / "single-programmatic-open_ended-local-val"
    state = json.loads((model_dir / "state.json").read_text())
    assert state["artbot_fork"] == {"model": "capitals-001", "project": "sft-project", "step": 3}
    rows = history(model_dir)
    assert [r["step"] for r in rows if "train/reward" in r] == [4, 5]
    # The SFT model is scored at its step before the first RL step: the "before".
    assert next(r["step"] for r in rows if "val/reward" in r) == 3

    again = dryrun(script, run, "--num-steps", "3")
    assert again.ok, again.problems
    assert again.steps_trained == 1  # RL step 3 of 3: ART's step 6
    assert not any("_experimental_fork_checkpoint" in note for note in again.notes)
    assert [r["step"] for r in history(model_dir) if "train/reward" in r] == [4, 5, 6]


def test_without_the_sft_model_the_run_stops_saying_why(tmp_path: Path) -> None:
    report = dryrun(write_script(tmp_path / "rl", "local-open-ended"), tmp_path / "run")
    assert not report.ok
    assert report.steps_trained == 0 and report.exit_code == 1
    assert (
        "Cannot start from the SFT model 'capitals-001' of project 'sft-project': No checkpoints "
        "found for model capitals-001 in project sft-project"
    ) in report.output_tail
    assert "give the --art-path it was trained with" in report.output_tail


@pytest.mark.parametrize("name", ["serverless-dataset", "local-dataset-noval"])
def test_a_dataset_loop_counts_its_epochs_after_the_sft_models_steps(
    name: str, tmp_path: Path
) -> None:
    answers = forked_answers(name)
    start = answers["start_from"]
    # The SFT model as ART leaves it: model.json and its newest checkpoints.
    sft_dir = tmp_path / "run" / ".art" / start["project"] / "models" / start["model"]
    for step in (6, 7):
        checkpoint = sft_dir / "checkpoints" / f"{step:04d}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "adapter_config.json").write_text("{}")
    (sft_dir / "model.json").write_text(
        json.dumps({"name": start["model"], "base_model": start["base_model"]})
    )
    report = dryrun(write_script(tmp_path / "rl", name), tmp_path / "run")
    assert report.ok, report.problems
    assert report.steps_trained >= 1
    backend = "ServerlessBackend" if start["backend"] == "serverless" else "LocalBackend"
    assert any(
        note.startswith(f"{backend}._experimental_fork_checkpoint copied checkpoint 7 of ")
        for note in report.notes
    )
    model_dir = tmp_path / "run" / ".art" / "matrix" / "models" / answers["run_name"]
    trained = [r["step"] for r in history(model_dir) if "train/reward" in r]
    assert trained == list(range(8, 8 + report.steps_trained))
