"""What a run will take, on the card before approval: figures checked against hand-computed ones
for both backends, ART's own price table for ServerlessBackend, and every assumption said."""

from __future__ import annotations

from typing import Any

from checks.run_estimate import Prices, art_prices, estimate_rl, estimate_sft
from flows import TRAIN_RL, TRAIN_SFT, replay
from tests.flows.matrix import answers_for
from tests.flows.sft_matrix import VARIANTS

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def rl_answers(*variant: Any, **changes: Any) -> dict[str, Any]:
    return TRAIN_RL.active_answers(replay(TRAIN_RL, answers_for(*variant, **changes)).answers)


def test_an_open_ended_serverless_run_is_priced_from_arts_own_table() -> None:
    answers = rl_answers(
        "single", "programmatic", "open_ended", "serverless", True, base_model=LLAMA
    )

    lines = estimate_rl(answers).lines

    # 50 steps x 2 groups x 4 rollouts; validations at steps 0, 2, ..., 50 (26) x 2 groups x 4.
    assert "= 400 training rollouts, plus about 208 validation rollouts" in lines[0]
    # (400 + 208) rollouts x 1,024 tokens, the reply limit of one turn.
    assert "at most 622,592 completion tokens (1,024 a rollout" in lines[0]
    assert "prompts not counted" in lines[0]
    # art.costs: Llama-3.1-8B-Instruct samples at $0.40/M and trains at $0.40/M.
    assert art_prices(LLAMA) == Prices(prefill=0.13, sample=0.40, train=0.40)
    assert "sampling at most $0.25 and training at most $0.16" in lines[1]  # 622,592 / 409,600


def test_a_dataset_run_counts_its_epochs_of_the_scenarios_it_trains_on() -> None:
    answers = rl_answers("single", "ruler", "dataset", "local", True)
    assert len(answers["scenario_rows"]) == 8 and answers["val_fraction"] == 0.25

    estimate = estimate_rl(answers).text()

    # 6 training rows (2 held out): 3 steps an epoch x 3 epochs; 9 x 2 x 4 = 72 rollouts;
    # validations at steps 0, 2, 4, 6, 8 (5) x 2 groups x 4 = 40.
    assert "9 steps (3 epochs of 6 scenarios)" in estimate and "= 72 training rollouts" in estimate
    assert "about 40 validation rollouts" in estimate
    assert "LocalBackend: no price per token" in estimate
    # 9 x 2 training groups and 5 x 2 validation groups are judged.
    assert "is called once per group: about 28 calls" in estimate


def test_the_rows_trained_on_are_split_as_the_script_splits_them() -> None:
    answers = rl_answers("single", "ruler", "dataset", "local", True)
    # 8 scenarios, 0.1 held out: the script holds out max(1, round(0.8)) = 1, trains on 7.
    assert "(3 epochs of 7 scenarios)" in estimate_rl({**answers, "val_fraction": 0.1}).text()
    # A training fraction is a share of all 8 scenarios, taken from those left: round(4) = 4.
    fraction = {**answers, "train_split": "fraction", "train_fraction": 0.5}
    assert "(3 epochs of 4 scenarios)" in estimate_rl(fraction).text()


def test_a_model_without_a_price_and_rows_read_at_start_are_said_plainly() -> None:
    answers = rl_answers("single", "programmatic", "open_ended", "serverless", True)
    assert "has no price for `OpenPipe/Qwen3-14B-Instruct`" in estimate_rl(answers).text()
    on_runner = {**rl_answers("single", "programmatic", "dataset", "local", True)}
    on_runner.pop("scenario_rows")
    said = estimate_rl(on_runner).text()
    assert "the steps depend on the scenarios the script reads when it starts" in said


def test_a_fine_tuning_run_is_its_training_rows_tokens_times_its_epochs() -> None:
    answers = TRAIN_SFT.active_answers(
        replay(TRAIN_SFT, VARIANTS["file-serverless-upload-val"]).answers
    )
    fixed = Prices(prefill=1.0, sample=1.0, train=100.0)

    lines = estimate_sft(answers, prices=lambda model: fixed).lines

    assert lines[0].startswith("Estimate: 11 training rows x 10 epochs")
    tokens = int(lines[0].split("≈ ")[1].split(" ")[0].replace(",", ""))
    assert lines[1].endswith(f"about ${tokens * 100 / 1_000_000:,.2f}.")
    runner_file = TRAIN_SFT.active_answers(
        replay(TRAIN_SFT, VARIANTS["file-serverless-runner"]).answers
    )
    assert "counted when the script starts" in estimate_sft(runner_file).text()
