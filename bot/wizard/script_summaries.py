"""A few lines on a result card that say what was generated, one way per flow. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bot.slack.text import clip, escape
from flows import (
    BACKEND_NAMES,
    TRAIN_RL,
    TRAIN_SFT,
    hyperparameters,
    sft_hyperparameters,
    training_rows,
)


def rl_summary(answers: Mapping[str, Any]) -> str:
    """The RL script: turns, reward, base model and backend, the loop, the hyperparameters."""
    hp = hyperparameters(answers)
    turns = "single-turn" if answers.get("turns") == "single" else "multi-turn"
    if answers.get("turns") == "multi":
        turns += " with tools" if answers.get("uses_tools") == "yes" else " game loop"
    reward = {"ruler": "RULER", "programmatic": "programmatic", "custom": "custom (RULER + code)"}[
        answers["reward"]
    ]
    if answers.get("judge_model"):
        reward += f", judge `{escape(str(answers['judge_model']))}`"
    loop = (
        "epochs over the dataset" if answers["iteration"] == "dataset" else "open-ended step loop"
    )
    return "\n".join(
        [
            f"*{escape(answers['run_name'])}* ({escape(answers['project'])}): "
            f"{turns}, reward {reward}",
            f"Base model `{escape(str(answers['base_model']))}` on "
            f"{BACKEND_NAMES[answers['backend']]}; {loop}",
            f"learning rate {hp['learning_rate']:g}, "
            f"{hp['rollouts_per_group']} rollouts per group, "
            f"{hp['groups_per_step']} groups per step",
        ]
    )


def sft_summary(answers: Mapping[str, Any]) -> str:
    """The SFT script: what it learns from, base model and backend, the hyperparameters (those
    the script computes from the rows it counts at start said so)."""
    hp = sft_hyperparameters(answers)
    rows = training_rows(answers)
    if answers["scenario"] == "distillation":
        source = f"distilled from `{escape(clip(str(answers['teacher_model']), 100))}`"
    elif answers.get("dataset_source") == "runner_file":
        source = f"from `{escape(clip(str(answers['dataset_path']), 200))}` on the runner host"
    else:
        source = "from the rows given here"
    if rows is not None:
        source += f", {rows:,} training {'row' if rows == 1 else 'rows'}"
    if answers.get("val_split") == "held_out":
        source += f", {float(answers.get('val_fraction') or 0):.0%} held out"
    epochs = (
        "epochs from the row count at start" if hp["epochs"] is None else f"{hp['epochs']} epochs"
    )
    return "\n".join(
        [
            f"*{escape(answers['run_name'])}* ({escape(answers['project'])}): fine-tuning (SFT) "
            f"{source}",
            f"Base model `{escape(str(answers['base_model']))}` on "
            f"{BACKEND_NAMES[answers['backend']]}",
            f"{epochs}, batch size {hp['batch_size']}, peak learning rate "
            f"{float(hp['learning_rate']):g}, {hp['schedule']} schedule",
        ]
    )


SUMMARIES: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    TRAIN_RL.id: rl_summary,
    TRAIN_SFT.id: sft_summary,
}
"""Each flow's summary, by flow id."""
