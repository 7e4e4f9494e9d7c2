"""The parsers that only the `train-rl` wizard's questions use: its code answers checked against the
tools and the entry points, the extra packages, the validation fraction and the iteration."""

from __future__ import annotations

from flows.code.entry_points import check_tool_functions, environment_calls, generator_call
from flows.code.third_party import requirements, suggested_requirements
from flows.conversation import validators as v
from flows.definition.steps import Answers, InvalidAnswer
from flows.wizards.rl.branches import FROM_GENERATOR, final_answer_tool, third_party_imports


def tool_code(value: str, answers: Answers) -> str:
    """One function per tool, each accepting the tool's parameters by name. The final-answer
    tool needs none: when the code defines it, it is called as a check of the answer."""
    module = v.user_module(value, "tool code")
    final = final_answer_tool(answers)
    check_tool_functions(
        module, answers.get("tools", []), optional=final["function"]["name"] if final else None
    )
    return v.normalized_source(value)


def environment_code(value: str, answers: Answers) -> str:
    environment_calls(v.user_module(value, "environment code"))
    return v.normalized_source(value)


def generator_code(value: str, answers: Answers) -> str:
    generator_call(v.user_module(value, "generator"))
    return v.normalized_source(value)


def extra_packages(value: str, answers: Answers) -> dict[str, list[str]]:
    return {"imports": third_party_imports(answers), "requirements": requirements(value)}


def suggested_packages(answers: Answers) -> dict[str, list[str]]:
    imports = third_party_imports(answers)
    return {"imports": imports, "requirements": suggested_requirements(imports)}


def check_val_fraction(value: float, answers: Answers) -> float:
    train = answers.get("train_fraction", 0.0) if answers.get("train_split") == "fraction" else 0.0
    if train + value > 1.0 + 1e-9:
        raise InvalidAnswer(
            f"Training ({train:g}) and validation ({value:g}) together take more than all "
            "scenarios: lower one of them."
        )
    rows = answers.get("scenario_rows")
    if isinstance(rows, list) and answers.get("train_split") == "all":
        held_out = max(1, round(value * len(rows)))
        if held_out >= len(rows):
            raise InvalidAnswer(
                f"With {len(rows)} scenarios, holding out {value:g} leaves none to train on."
            )
    return value


def val_fraction(value: str, answers: Answers) -> float:
    return check_val_fraction(
        v.float_in(0.0, 1.0, low_open=True, high_open=True)(value, answers), answers
    )


def check_iteration(value: str, answers: Answers) -> None:
    if value == "dataset" and FROM_GENERATOR(answers):
        raise InvalidAnswer(
            "A generator has no fixed dataset to iterate over: choose the open-ended loop."
        )
