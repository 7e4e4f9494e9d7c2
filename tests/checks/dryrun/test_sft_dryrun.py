"""`artbot dryrun` on train-sft scripts: the stand-in SFT trainer keeps LocalBackend's layout
(a checkpoint per train_sft call, history.jsonl), a distillation's teacher is the stand-in
policy on loopback, and a wrong row on the runner host stops the run naming its line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from checks.dryrun import DryrunReport, dryrun_script
from checks.dryrun.child.arg_caps import apply_caps, dryrun_caps
from checks.script_format import formatted_script
from flows import TRAIN_SFT, replay
from tests.flows.sft_data import ROWS
from tests.flows.sft_matrix import VARIANTS


def dryrun_variant(
    name: str, tmp_path: Path, *script_args: str, data: tuple[Path, ...] = ()
) -> DryrunReport:
    answers = TRAIN_SFT.active_answers(replay(TRAIN_SFT, VARIANTS[name]).answers)
    script = tmp_path / "script" / f"{answers['run_name']}.py"
    script.parent.mkdir()
    script.write_text(formatted_script(answers, script.name, TRAIN_SFT))
    report = dryrun_script(
        script,
        script_args=script_args,
        workdir=tmp_path / "run",
        environment="project",
        data_files=data,
    )
    print(report.format())  # shown by pytest when an assertion fails
    return report


def test_training_from_pasted_rows_saves_a_checkpoint_per_part(tmp_path: Path) -> None:
    report = dryrun_variant("file-local-paste", tmp_path)
    assert report.ok, report.problems
    assert report.sft_steps == report.steps_trained == 3
    assert report.sft_examples == 8  # --dataset-size capped at 8
    assert {"capped --epochs 10 -> 1", "capped --checkpoints 10 -> 3"} <= set(report.notes)
    model_dir = tmp_path / "run" / ".art" / "sft-project" / "models" / "capitals-001"
    checkpoints = sorted(p.name for p in (model_dir / "checkpoints").iterdir())
    assert checkpoints == ["0001", "0002", "0003"]
    rows = [json.loads(line) for line in (model_dir / "history.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "loss/train" in row] == [1, 2, 3]
    state = json.loads((model_dir / "state.json").read_text())
    assert state["artbot_sft"]["parts_done"] == 3
    progress = [
        json.loads(line.removeprefix("ARTBOT_PROGRESS "))
        for line in report.output_tail.splitlines()
        if line.startswith("ARTBOT_PROGRESS ")
    ]
    assert progress and all(p["split"] == "train" for p in progress)  # the tail: the last ones
    assert progress[-1]["step"] == 3 and "loss/train" in progress[-1]["metrics"]
    done = progress[-1]["metrics"]
    assert done["train/batches_done"] == done["train/batches_total"] == 4
    assert "SFT TRAINING COMPLETE" in report.output_tail
    assert "_experimental_fork_checkpoint" in report.output_tail


def test_a_file_on_the_runner_host_is_checked_then_trained_with_samples(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in ROWS) + "\n")
    report = dryrun_variant(
        "file-local-runner-val-custom", tmp_path, "--dataset", str(data), data=(data,)
    )
    assert report.ok, report.problems
    assert report.validations == 2  # the samples before and after training
    assert "Similarity to the references" in report.output_tail


def test_a_wrong_row_on_the_runner_host_stops_the_run_naming_its_line(tmp_path: Path) -> None:
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"messages": []}) + "\n")
    report = dryrun_variant(
        "file-local-runner-val-custom", tmp_path, "--dataset", str(data), data=(data,)
    )
    assert not report.ok
    assert any("line 2: `messages` must be a non-empty list" in p for p in report.problems)


@pytest.mark.parametrize("name", ["distill-serverless-paste-val", "distill-local-generator"])
def test_distillation_asks_the_stand_in_teacher_then_trains(name: str, tmp_path: Path) -> None:
    report = dryrun_variant(name, tmp_path)
    assert report.ok, report.problems
    assert report.sft_steps >= 1 and report.sft_examples > 0
    assert any(n.startswith("capped --teacher-base-url https://") for n in report.notes)
    kept = tmp_path / "run" / "sft-data"
    [replies] = kept.glob("*/*/teacher.jsonl")
    assert len(replies.read_text().splitlines()) > 0
    if VARIANTS[name]["prompts_source"] == "generator":
        assert report.user_code_runs == ("generate_prompt 8x",)


def test_the_caps_shorten_a_train_sft_script_and_point_its_teacher_at_loopback() -> None:
    namespace = argparse.Namespace(
        epochs=None,
        checkpoints=10,
        prompt_count=300,
        val_samples=5,
        dataset_size=None,
        teacher_base_url="https://openrouter.ai/api/v1",
    )
    changes = apply_caps(namespace, dryrun_caps(3, teacher_url="http://127.0.0.1:9/v1"))
    assert vars(namespace) == {
        "epochs": 1,
        "checkpoints": 3,
        "prompt_count": 8,
        "val_samples": 2,
        "dataset_size": 8,
        "teacher_base_url": "http://127.0.0.1:9/v1",
    }
    assert "--teacher-base-url https://openrouter.ai/api/v1 -> http://127.0.0.1:9/v1" in changes
