"""Render a flow's answers into the training script with Jinja2.

The environment is strict (StrictUndefined) and prints marked values only (flows.literals).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from functools import cache
from typing import Any

import jinja2

from flows.literals import Code, PyLiteral, code, finalize, ident, py_literal
from flows.reserved import check_user_code
from flows.template_files import templates_dir
from flows.train_rl import (
    NO_FINAL_ANSWER_TOOL,
    TRAIN_RL,
    final_answer_tool,
    hyperparameters,
    rollout_pattern,
    uses_ruler,
)
from flows.validators import top_level_functions


class RenderError(ValueError):
    """The answers cannot make a script (missing or inconsistent); says which answer."""


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=finalize,
    )
    env.filters["py"] = py_literal
    return env


def script_context(answers: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the template needs, with user text as literals and user code as parsed Code."""
    answers = TRAIN_RL.active_answers(answers)
    missing = [s.id for s in TRAIN_RL.active_steps(answers) if s.id not in answers]
    if missing:
        raise RenderError(f"these questions are not answered yet: {', '.join(missing)}")
    pattern = rollout_pattern(answers)
    hp = hyperparameters(answers)
    source = answers["scenario_source"]
    validation = answers.get("val_split") or answers.get("val_generated") or "none"
    reward = answers["reward"]
    context: dict[str, Any] = {
        "pattern": pattern,
        "reward": reward,
        "uses_ruler": uses_ruler(answers),
        "loop": answers["iteration"],
        "backend": answers["backend"],
        "validation": validation,
        "source": "inline" if source in ("inline", "upload") else source,
        "train_split": answers.get("train_split"),
        # Shuffled splits and generators need `random`; two separate files need nothing of it.
        "uses_random": source == "generator"
        or answers.get("train_split") != "separate"
        or validation == "held_out",
        "tool_execution": answers.get("tool_execution"),
        "task": py_literal(answers["task"]),
        "system_prompt": py_literal(answers.get("system_prompt", "")),
        "base_model": py_literal(answers["base_model"]),
        "project": py_literal(answers["project"]),
        "run_name": py_literal(answers["run_name"]),
        "judge_model": py_literal(answers.get("judge_model", "")),
        "reward_mix": float(answers.get("reward_mix", 0.5)),
        "episode_end": py_literal(answers.get("episode_end", "")),
        "max_turns": int(answers.get("max_turns", 10)),
        "learning_rate": float(hp["learning_rate"]),
        "rollouts_per_group": int(hp["rollouts_per_group"]),
        "groups_per_step": int(hp["groups_per_step"]),
        "num_steps": int(hp["num_steps"]),
        "num_epochs": int(hp["num_epochs"]),
        "gpu_memory_utilization": float(hp["gpu_memory_utilization"]),
        "val_every": int(answers.get("val_every", 10)),
        "val_max_groups": int(answers.get("val_max_groups", 8)),
        "train_fraction": float(answers.get("train_fraction", 1.0)),
        "val_fraction": float(answers.get("val_fraction", 0.1)),
        "scenarios": py_literal(answers.get("scenario_rows", [])),
        "scenarios_path": py_literal(answers.get("scenarios_path", "")),
        "train_source": py_literal(answers.get("train_source", "")),
        "val_source": py_literal(answers.get("val_source", "")),
        "tools": py_literal(answers.get("tools", []), indent=0),
        "tool_urls": py_literal(answers.get("tool_urls", {})),
        "tool_names": [ident(t["function"]["name"]) for t in answers.get("tools", [])],
        "final_answer_tool": None,
        "final_answer_parameter": None,
        "final_answer_checked": False,
        "reward_expression": None,
        "reward_function": None,
        "tool_code": None,
        "environment_code": None,
        "generator_code": None,
    }
    if reward in ("programmatic", "custom"):
        logic = answers["reward_logic"]
        if logic["kind"] == "expression":
            # Parsed in eval mode and unparsed to one line when answered; parse again to be sure.
            ast.parse(logic["code"], mode="eval")
            context["reward_expression"] = Code(logic["code"])
        else:
            context["reward_function"] = _user_code(logic["code"], "reward code")
    if pattern == "tools" and answers.get("tool_execution") == "local":
        context["tool_code"] = _user_code(answers["tool_code"], "tool code")
    if pattern == "tools":
        context.update(_final_answer_context(answers))
    if pattern == "game":
        context["environment_code"] = _user_code(answers["environment"], "environment code")
    if source == "generator":
        context["generator_code"] = _user_code(answers["scenario_generator"], "generator")
    return context


def _final_answer_context(answers: Mapping[str, Any]) -> dict[str, Any]:
    """The final-answer tool: its name, its one parameter (the answer) if it has exactly one,
    and whether the tool code defines it (then the script calls it as a check of the answer)."""
    final = final_answer_tool(answers)
    if final is None:
        named = answers.get("final_answer_tool", NO_FINAL_ANSWER_TOOL)
        if named != NO_FINAL_ANSWER_TOOL:  # the tools were edited after it was chosen
            raise RenderError(
                f"final_answer_tool: {named!r} is no longer one of the tools: answer it again"
            )
        return {}
    name = final["function"]["name"]
    parameters = list(final["function"].get("parameters", {}).get("properties", {}))
    defined = answers.get("tool_execution") == "local" and name in top_level_functions(
        ast.parse(answers["tool_code"])
    )
    return {
        "final_answer_tool": py_literal(name),
        "final_answer_parameter": py_literal(parameters[0]) if len(parameters) == 1 else None,
        "final_answer_checked": defined,
        "tool_names": [
            ident(t["function"]["name"])
            for t in answers.get("tools", [])
            if t is not final or defined
        ],
    }


def _user_code(source: str, what: str) -> Code:
    problem = check_user_code(source, what)
    if problem:
        raise RenderError(problem)
    return code(source)


def render_script(answers: Mapping[str, Any]) -> str:
    """The complete training script for these answers."""
    template = environment().get_template(TRAIN_RL.template)
    return template.render(script_context(answers))


__all__ = ["PyLiteral", "RenderError", "render_script", "script_context", "templates_dir"]
