"""The branches of the `train-sft` wizard, named once, and what its answers say of the data: the
rows training sees, the defaults that follow from them, and the lines the script embeds."""

from __future__ import annotations

from typing import Any

from flows.definition.conditions import all_of, is_, not_
from flows.definition.steps import Answers
from flows.wizards.sft.dataset import row_line, split_counts
from flows.wizards.sft.rows import held_out, skill_defaults

FROM_FILE = is_("scenario", "file")
DISTILLATION = not_(FROM_FILE)
ROWS_HERE = all_of(FROM_FILE, is_("dataset_source", "paste", "upload"))
ROWS_ON_RUNNER = all_of(FROM_FILE, is_("dataset_source", "runner_file"))
PROMPTS_HERE = all_of(DISTILLATION, is_("prompts_source", "paste", "upload"))
PROMPT_GENERATOR = all_of(DISTILLATION, is_("prompts_source", "generator"))
HELD_OUT = is_("val_split", "held_out")
LOCAL = is_("backend", "local")
DEFAULT_PROMPT_COUNT = 100


def val_fraction(answers: Answers) -> float:
    return float(answers.get("val_fraction") or 0.0) if HELD_OUT(answers) else 0.0


def training_rows(answers: Answers) -> int | None:
    """How many rows (or distilled prompts) training sees, where the wizard can know it: the
    pasted or uploaded ones not held out, or a generator's count without a split. None for a
    file on the runner host (or a generator's split): the script counts them when it starts."""
    fraction = val_fraction(answers)
    if ROWS_HERE(answers) and isinstance(answers.get("dataset"), list):
        return split_counts(answers["dataset"], fraction)[0]
    if PROMPTS_HERE(answers) and isinstance(answers.get("prompts"), list):
        return split_counts(answers["prompts"], fraction)[0]
    if PROMPT_GENERATOR(answers) and not fraction:
        return int(answers.get("prompt_count") or DEFAULT_PROMPT_COUNT)
    return None


def drafted(answers: Answers) -> dict[str, Any]:
    """The hyperparameters changed so far (the menu's draft, or its answer)."""
    return dict(answers.get("hyperparameter_values") or {})


def skill_value(name: str) -> Any:
    """A hyperparameter's default for these answers: the skill's, from the training rows and
    any epochs or batch size already changed; None when the rows are counted only at start."""

    def default(answers: Answers) -> Any:
        rows = training_rows(answers)
        changed = drafted(answers)
        if rows is None:
            return None if name in ("epochs", "warmup_ratio") else skill_defaults(1)[name]
        return skill_defaults(
            rows, epochs=changed.get("epochs"), batch_size=changed.get("batch_size", 2)
        )[name]

    return default


def parts_default(answers: Answers) -> int:
    """Ten checkpoints, or one per batch when there are fewer batches than that."""
    rows = training_rows(answers)
    if rows is None:
        return 10
    values = skill_defaults(
        rows, drafted(answers).get("epochs"), drafted(answers).get("batch_size", 2)
    )
    total = -(-rows * values["epochs"] // values["batch_size"])
    return max(1, min(10, total))


def embedded_lines(answers: Answers) -> list[str]:
    """The rows (or prompts) the script carries, as JSONL lines."""
    rows = answers.get("dataset") if ROWS_HERE(answers) else answers.get("prompts")
    return [row_line(row) for row in rows or ()]


def held_out_count(answers: Answers) -> int | None:
    """How many embedded rows are held out (None when the script splits at start)."""
    fraction = val_fraction(answers)
    lines = embedded_lines(answers) if ROWS_HERE(answers) or PROMPTS_HERE(answers) else None
    return None if lines is None else sum(held_out(line, fraction) for line in lines)
