"""What a run will take, on the card before approval: figures checked against hand-computed ones
for both backends, ART's own price table for ServerlessBackend, and every assumption said."""

from __future__ import annotations

import dataclasses
from typing import Any

from checks.preflight.numbers import PreflightNumbers
from checks.run_estimate import (
    SCRIPT_MAX_CONCURRENT,
    Prices,
    art_prices,
    estimate_rl,
    estimate_sft,
    litellm_judge_prices,
)
from flows import TRAIN_RL, TRAIN_SFT, render_script, replay
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


def measured(**changes: Any) -> PreflightNumbers:
    numbers = PreflightNumbers(
        model=LLAMA,
        base_model=True,
        verdict="ok",
        rollouts=16,
        groups=4,
        mean_reward=0.5,
        zero_variance_share=0.25,
        prompt_tokens_per_rollout=300.0,
        completion_tokens_per_rollout=100.0,
        turns_per_rollout=1.0,
        wall_s_per_rollout=6.0,
        truncated_share=0.0,
    )
    return dataclasses.replace(numbers, **changes)


def test_a_preflights_numbers_price_a_serverless_run_with_its_prompts() -> None:
    answers = rl_answers(
        "single", "programmatic", "open_ended", "serverless", True, base_model=LLAMA
    )
    fixed = Prices(prefill=1.0, sample=2.0, train=10.0)

    lines = estimate_rl(answers, prices=lambda model: fixed, measured=measured()).lines

    # (400 + 208) rollouts x 300 prompt and x 100 completion tokens.
    assert lines[0].startswith(f"Estimate from the preflight (16 rollouts on `{LLAMA}`)")
    assert "about 182,400 prompt and 60,800 completion tokens in all" in lines[0]
    # Sampling: 182,400 x $1/M + 60,800 x $2/M = $0.3040; training: 400 rollouts x 75% of the
    # groups with a spread x (300 + 100) tokens = 120,000 x $10/M = $1.20.
    assert "sampling about $0.30 (prompts and completions) and training about $1.20" in lines[1]
    assert "75% of the groups had a reward spread" in lines[1]


def test_a_preflights_times_give_a_local_runs_gpu_time_said_as_a_stand_ins() -> None:
    answers = rl_answers("single", "ruler", "dataset", "local", True)

    said = estimate_rl(answers, measured=measured(base_model=False, model="gpt-x")).text()

    # 9 steps x 2 groups x 4 rollouts = 8 rollouts a step, one wave of 32 at most: 9 x 6 s.
    assert "(16 rollouts on `gpt-x`, a stand-in for the base model)" in said
    assert "a median 6.0 s on a stand-in model, not the base model on the runner's GPU" in said
    assert "take about 1 minute of the GPU" in said
    hours = estimate_rl(answers, measured=measured(wall_s_per_rollout=4_000.0)).text()
    assert "on the base model at the preflight's endpoint" in hours
    assert "take about 10.0 hours of the GPU" in hours  # 9 x 4,000 s
    assert "The RULER judge" in said  # still said


def test_the_script_runs_as_many_rollouts_at_once_as_the_estimate_assumes() -> None:
    answers = rl_answers("single", "programmatic", "open_ended", "local", True)
    script = render_script(answers, "rl_train.py", TRAIN_RL)
    assert f"MAX_CONCURRENT = {SCRIPT_MAX_CONCURRENT}\n" in script


def test_the_judges_price_comes_from_the_preflights_trajectories_and_litellms_map() -> None:
    answers = rl_answers("single", "ruler", "dataset", "local", True)
    fixed = Prices(prefill=1.0, sample=10.0, train=0.0)

    said = estimate_rl(answers, measured=measured(), judge_prices=lambda model: fixed).text()

    # 28 calls x (600 + 4 trajectories x (300 + 100)) = 61,600 prompt tokens at $1/M, and
    # 28 x 4 scores x 80 = 8,960 reply tokens at $10/M: $0.0616 + $0.0896.
    assert "is called once per group: about 28 calls" in said
    assert "; about $0.15 at LiteLLM's prices for it" in said
    unpriced = estimate_rl(answers, measured=measured(), judge_prices=lambda model: None).text()
    assert "LiteLLM's price map has no price for" in unpriced
    # Without a preflight the calls are counted, not priced: their size is not known.
    assert estimate_rl(answers).text().count("$") == 0


def test_litellms_own_price_map_prices_a_judge_it_knows() -> None:
    price = litellm_judge_prices("openai/gpt-5")
    assert price is not None and price.prefill > 0 and price.sample > price.prefill
    assert litellm_judge_prices("no-such-provider/no-such-model") is None
