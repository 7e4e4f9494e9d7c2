"""What the train-sft template is given: the answers as literals, the rows or prompts as JSONL
lines, the user's prompt generator as scoped code, and the row checks of flows.wizards.sft.rows."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from flows.code.entry_points import entry_point, positional_call
from flows.code.user_code import scoped_body
from flows.definition.steps import InvalidAnswer
from flows.script.literals import code, file_name, function_body, inline_code, py_literal
from flows.script.script_answers import RenderError, script_answers
from flows.wizards.sft.branches import (
    DISTILLATION,
    HELD_OUT,
    PROMPT_GENERATOR,
    ROWS_ON_RUNNER,
    embedded_lines,
)
from flows.wizards.sft.rows import script_source
from flows.wizards.sft.train_sft import TRAIN_SFT, hyperparameters


def sft_script_context(
    answers: Mapping[str, Any],
    script_names: frozenset[str] = frozenset(),
    script_file: str | None = None,
) -> dict[str, Any]:
    """Everything the train-sft template needs; user text only as literals, user code parsed.

    `script_names`: what the script binds at its top level (see flows.code.user_code.scoped_body).
    """
    answers = script_answers(TRAIN_SFT, answers)
    hp = hyperparameters(answers)
    backend = answers["backend"]
    distillation = DISTILLATION(answers)
    data = (
        "runner_file"
        if ROWS_ON_RUNNER(answers)
        else "generator"
        if PROMPT_GENERATOR(answers)
        else "embedded"
    )
    rows = [py_literal(line) for line in embedded_lines(answers)] if data == "embedded" else []
    context: dict[str, Any] = {
        "sft": True,
        "scenario": "distillation" if distillation else "file",
        "backend": backend,
        "data": data,
        "base_model": py_literal(answers["base_model"]),
        "project": py_literal(answers["project"]),
        "run_name": py_literal(answers["run_name"]),
        "script_file": file_name(script_file or f"{answers['run_name']}.py"),
        "dataset_path": py_literal(answers.get("dataset_path", "")),
        "rows": rows,
        "row_count": len(rows),
        "teacher_model": py_literal(answers.get("teacher_model", "")),
        "teacher_base_url": py_literal(answers.get("teacher_base_url", "")),
        "teacher_key_env": py_literal(answers.get("teacher_key_env", "")),
        "prompt_count": int(answers.get("prompt_count") or 0),
        "generator_code": None,
        "generator_call": None,
        "generator_takes_rng": False,
        "validation": HELD_OUT(answers),
        "val_fraction": float(answers.get("val_fraction") or 0.0),
        "val_samples": int(hp.get("val_samples") or 0),
        "epochs": None if hp["epochs"] is None else int(hp["epochs"]),
        "batch_size": int(hp["batch_size"]),
        "learning_rate": float(hp["learning_rate"]),
        "schedule": py_literal(str(hp["schedule"])),
        "warmup_ratio": None if hp["warmup_ratio"] is None else float(hp["warmup_ratio"]),
        "checkpoints": int(hp["checkpoints"]),
        "gpu_memory_utilization": float(hp.get("gpu_memory_utilization") or 0.0),
        "checks_environment": distillation or backend == "serverless",
        "row_checks": code(script_source()),
    }
    if data == "generator":
        try:
            context.update(_generator_context(answers["prompt_generator"], script_names))
        except InvalidAnswer as error:
            raise RenderError(str(error)) from None
    return context


def _generator_context(source: str, script_names: frozenset[str]) -> dict[str, Any]:
    function = entry_point(ast.parse(source), "generate_prompt", "prompt generator")
    if function is None:
        raise InvalidAnswer("The prompt generator must define `generate_prompt`.")
    call = positional_call(function, ("rng",), may_omit=True)
    return {
        "generator_code": function_body(scoped_body(source, "prompt generator", script_names)),
        "generator_call": inline_code(call.source()),
        "generator_takes_rng": bool(call.arguments),
    }
