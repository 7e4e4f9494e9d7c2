"""The questions every wizard asks in the same words: the base model, the project and the run's
name; whether to customize the hyperparameters, and the menu that does."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from flows.conversation import validators as v
from flows.definition.conditions import is_
from flows.definition.steps import Answers, Choice, MenuField, Option, Text, ValuesMenu

BASE_MODELS = (
    "OpenPipe/Qwen3-14B-Instruct",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "meta-llama/Llama-3.1-8B-Instruct",
)
"""The models ART's skills (train-rl and train-sft) recommend."""
CUSTOM_HYPERPARAMETERS = is_("hyperparameters", "customize")


def base_model_step(
    help: str = "",
    *,
    recommend: Callable[[Answers], str | None] | None = None,
    recommend_reads: tuple[str, ...] = (),
    check: Callable[[str, Answers], None] | None = None,
) -> Choice:
    return Choice(
        "base_model",
        "Which base model should training start from?",
        options=tuple(Option(m, m) for m in BASE_MODELS),
        help=help,
        title="Base model",
        recommend=recommend,
        recommend_reads=recommend_reads,
        check=check,
    )


def project_step(default: str) -> Text:
    return Text(
        "project",
        "What is the project called?",
        guide="A name of letters, digits, `.`, `_` and `-`; a project groups its runs.",
        parse=v.slug(),
        default=lambda a: default,
        default_label=f"`{default}`",
        example=default,
        title="Project",
    )


def run_name_step(imports: Callable[[Answers], Iterable[str]], example: str) -> Text:
    """The run's name, which names the script too: not a module the user's code imports."""
    return Text(
        "run_name",
        "What is this run called?",
        guide=(
            "A static, descriptive name of letters, digits, `.`, `_` and `-` (I won't make "
            "one up). It names the model, its checkpoints and the script (`<name>.py`, so "
            "not a module's name such as `random` or `art`); resuming uses it."
        ),
        parse=v.script_name(imports),
        help="It names the model and its checkpoints; resuming uses it, so keep it stable.",
        example=example,
        title="Run name",
    )


def hyperparameter_steps(
    fields: tuple[MenuField, ...],
    *,
    guide: str = "",
    details: Callable[[Answers], str] | None = None,
    example: str = "1",
) -> tuple[Choice, ValuesMenu]:
    """Use the defaults (said in `guide` or `details`) or customize them, then the menu of
    `fields` when customizing."""
    return (
        Choice(
            "hyperparameters",
            "Use the default hyperparameters, or customize them?",
            guide=guide,
            details=details,
            options=(
                Option("defaults", "Use defaults"),
                Option("customize", "Customize"),
            ),
            recommend=lambda a: "defaults",
            recommend_reads=(),
            title="Hyperparameters",
        ),
        ValuesMenu(
            "hyperparameter_values",
            "Which hyperparameter do you want to change?",
            guide="Pick one, then type its new value; Done keeps the values as shown.",
            when=CUSTOM_HYPERPARAMETERS,
            fields=fields,
            help=(
                "Pick a value to change by its number or name, then type the new value. Say `done` "
                "to keep the rest."
            ),
            example=example,
            title="Custom hyperparameters",
        ),
    )
