"""Replaying a file of answers through the engine: the same parsers as a conversation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flows import MAX_REPLY_CHARS
from flows.conversation.replay import AnswersError, replay
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.matrix import MATH_ROWS, answers_for, matrix, variant_id


@pytest.mark.parametrize("cell", matrix(), ids=variant_id)
def test_every_answer_set_of_the_matrix_replays_to_the_same_answers(
    cell: tuple[str, str, str, str, bool],
) -> None:
    answers = answers_for(*cell)

    session = replay(TRAIN_RL, answers)

    assert session.status == "complete"
    assert TRAIN_RL.active_answers(session.answers) == answers


def test_missing_answers_with_a_default_take_it() -> None:
    answers = answers_for("game", "custom", "dataset", "local", True)
    for optional in (
        "system_prompt",
        "max_turns",
        "reward_mix",
        "val_fraction",
        "val_every",
        "project",
    ):
        del answers[optional]

    replayed = replay(TRAIN_RL, answers).answers

    assert [replayed[k] for k in ("system_prompt", "max_turns", "reward_mix", "project")] == [
        "",
        10,
        0.5,
        "rl-project",
    ]
    assert (replayed["val_fraction"], replayed["val_every"]) == (0.1, 10)


def test_custom_hyperparameters_are_menu_picks_then_done() -> None:
    answers = answers_for(
        "single",
        "ruler",
        "open_ended",
        "local",
        False,
        hyperparameters="customize",
        hyperparameter_values={
            "learning_rate": 2e-5,
            "num_steps": 7,
            "gpu_memory_utilization": 0.5,
        },
    )

    replayed = replay(TRAIN_RL, answers).answers

    assert replayed["hyperparameter_values"] == {
        "learning_rate": 2e-5,
        "num_steps": 7,
        "gpu_memory_utilization": 0.5,
    }


def test_customize_without_values_keeps_the_defaults() -> None:
    answers = answers_for("single", "ruler", "dataset", "local", False, hyperparameters="customize")
    assert replay(TRAIN_RL, answers).answers["hyperparameter_values"] == {}


def test_scenarios_too_long_to_type_go_as_a_file() -> None:
    rows = [{**row, "padding": "x" * 1_000} for row in MATH_ROWS * 40]
    assert len(json.dumps(rows)) > MAX_REPLY_CHARS
    answers = answers_for("single", "programmatic", "dataset", "local", False, scenario_rows=rows)

    assert replay(TRAIN_RL, answers).answers["scenario_rows"] == rows


def test_code_answers_may_be_plain_source() -> None:
    answers = answers_for(
        "single",
        "programmatic",
        "dataset",
        "local",
        False,
        reward_logic="float(answer == scenario['answer'])",
    )
    logic = replay(TRAIN_RL, answers).answers["reward_logic"]
    assert logic == {"kind": "expression", "code": "float(answer == scenario['answer'])"}


def test_another_judge_model_is_typed_as_the_wizard_allows() -> None:
    answers = answers_for(
        "single", "ruler", "dataset", "local", False, judge_model="anthropic/claude-sonnet-4-5"
    )
    assert replay(TRAIN_RL, answers).answers["judge_model"] == "anthropic/claude-sonnet-4-5"


# Each bad value: the step it must name, and words from the engine's own problem text.
BAD_VALUES: list[tuple[str, dict[str, Any], str, str]] = [
    ("unknown option", {"turns": "several"}, "turns", "'several' is not one of single, multi"),
    ("option that only explains", {"replayable": "unsure"}, "replayable", "only explains"),
    ("number for a choice", {"backend": 1}, "backend", "expected one of local, serverless"),
    ("short task", {"task": "math"}, "task", "too short"),
    ("bad JSON rows", {"scenario_rows": "[{"}, "scenario_rows", "not valid JSON"),
    (
        "rows without the field the agent is shown",
        {"scenario_rows": [{"question": "1+1"}]},
        "agent_prompt",
        "“prompt” is not a field of your scenarios",
    ),
    ("unsafe run name", {"run_name": "../etc"}, "run_name", "not a safe name"),
    ("out of range", {"val_fraction": 1.5}, "val_fraction", "out of range"),
    ("not a number", {"val_every": "often"}, "val_every", "is not a number"),
    ("bad judge id", {"judge_model": "gpt 5"}, "judge_model", "not a LiteLLM model id"),
    (
        "reward reads a missing field",
        {
            "reward": "programmatic",
            "judge_model": None,
            "reward_logic": "1.0 if scenario['gold'] else 0.0",
        },
        "reward_logic",
        "scenario['gold']",
    ),
    (
        "a secret",
        {"system_prompt": "Use key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD"},
        "system_prompt",
        "never stores",
    ),
    ("a command word", {"project": "status"}, "project", "one of the wizard's commands"),
    ("cancel", {"task": "cancel"}, "task", "command"),
    (
        "settings not an object",
        {"hyperparameters": "customize", "hyperparameter_values": [1]},
        "hyperparameter_values",
        "expected an object",
    ),
    (
        "unknown setting",
        {"hyperparameters": "customize", "hyperparameter_values": {"lr": 1}},
        "hyperparameter_values",
        "'lr' is not a setting",
    ),
    (
        "setting out of range",
        {"hyperparameters": "customize", "hyperparameter_values": {"rollouts_per_group": 1}},
        "hyperparameter_values",
        "rollouts_per_group: 1 is out of range",
    ),
    (
        "setting off this branch",
        {
            "backend": "serverless",
            "hyperparameters": "customize",
            "hyperparameter_values": {"gpu_memory_utilization": 0.5},
        },
        "hyperparameter_values",
        "does not apply",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "step_id", "words"),
    [case[1:] for case in BAD_VALUES],
    ids=[case[0] for case in BAD_VALUES],
)
def test_a_bad_value_names_its_step_and_what_is_wrong(
    overrides: dict[str, Any], step_id: str, words: str
) -> None:
    answers = {
        k: v
        for k, v in {
            **answers_for("single", "ruler", "dataset", "local", True),
            **overrides,
        }.items()
        if v is not None
    }

    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, answers)

    assert raised.value.step_id == step_id
    assert words in raised.value.message
    assert str(raised.value) == f"{step_id}: {raised.value.message}"


GENERATOR = "def generate_scenario(rng):\n    return {'prompt': 'What is 1 + 1?', 'answer': '2'}\n"


def test_a_cross_answer_check_names_the_later_step() -> None:
    answers = answers_for(
        "single", "ruler", "open_ended", "local", False, scenario_source="generator"
    )
    for inline_only in ("scenario_rows", "train_split", "val_split"):
        del answers[inline_only]
    answers |= {"scenario_generator": GENERATOR, "val_generated": "none"}
    assert replay(TRAIN_RL, answers).status == "complete"

    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, {**answers, "iteration": "dataset"})

    assert raised.value.step_id == "iteration"
    assert "generator has no fixed dataset" in raised.value.message


def test_answers_for_another_branch_are_not_asked() -> None:
    answers = answers_for(
        "single", "ruler", "open_ended", "local", False, scenario_source="generator"
    )
    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, answers)
    # The generator's code is asked next; the inline rows would never be.
    assert raised.value.step_id == "scenario_generator"
    assert raised.value.message.startswith("no answer")


def test_a_missing_answer_without_default_names_the_question() -> None:
    answers = answers_for("single", "ruler", "dataset", "local", False)
    del answers["run_name"]

    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, answers)

    assert raised.value.step_id == "run_name"
    assert (
        "no answer" in raised.value.message and "What is this run called?" in raised.value.message
    )


def test_unknown_keys_are_named() -> None:
    answers = {
        **answers_for("single", "ruler", "dataset", "local", False),
        "learning_rate": 1e-5,
        "zeta": 1,
    }

    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, answers)

    assert raised.value.step_id == "learning_rate"
    assert raised.value.message == "not a question of the train-rl flow (also unknown: zeta)"


def test_an_answer_to_a_question_that_is_not_asked_is_named() -> None:
    answers = answers_for("single", "ruler", "dataset", "local", False, max_turns=5)

    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, answers)

    assert raised.value.step_id == "max_turns"
    assert "not asked" in raised.value.message
