"""The files a script reads on the runner host are the answers to the questions of kind path:
the bot does not dry-run such a script where it is generated, the terminal lets its dry run
read them."""

from __future__ import annotations

from flows import TRAIN_RL, TRAIN_SFT, replay
from tests.flows.matrix import answers_for
from tests.flows.sft_matrix import VARIANTS as SFT_VARIANTS


def test_the_files_on_the_runner_host_are_the_answers_to_the_path_questions() -> None:
    files = answers_for("single", "ruler", "dataset", "serverless", False)
    files.update(
        scenario_source="runner_file",
        scenarios_path="/data/scenarios.jsonl",
        train_split="separate",
        train_source="/data/train.jsonl",
        val_split="separate",
        val_source="/data/val.jsonl",
    )
    files.pop("scenario_rows")
    answers = TRAIN_RL.active_answers(replay(TRAIN_RL, files).answers)
    assert TRAIN_RL.runner_paths(answers) == [
        "/data/scenarios.jsonl",
        "/data/train.jsonl",
        "/data/val.jsonl",
    ]
    inline = answers_for("single", "ruler", "dataset", "serverless", False)
    assert TRAIN_RL.runner_paths(TRAIN_RL.active_answers(replay(TRAIN_RL, inline).answers)) == []
    runner_file = SFT_VARIANTS["file-serverless-runner"]
    sft = TRAIN_SFT.active_answers(replay(TRAIN_SFT, runner_file).answers)
    assert TRAIN_SFT.runner_paths(sft) == ["/data/pii/train.jsonl"]
