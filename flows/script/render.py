"""Render a flow's answers into the training script with Jinja2.

The environment is strict (StrictUndefined) and prints marked values only (flows.script.literals).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import jinja2

from flows.code.entry_points import (
    REWARD_ARGUMENTS,
    Call,
    entry_point,
    environment_calls,
    generator_call,
    positional_call,
    reward_function_call,
    takes_scenario,
)
from flows.code.user_code import scoped_body
from flows.definition.flow import Flow
from flows.definition.steps import InvalidAnswer
from flows.script.literals import (
    Code,
    PyLiteral,
    file_name,
    finalize,
    function_body,
    ident,
    inline_code,
    py_literal,
    toml_string,
)
from flows.script.script_answers import RenderError, script_answers
from flows.script.sft_render import sft_script_context
from flows.script.template_files import templates_dir
from flows.wizards.rl.agent_prompt import RENDER_PROMPT, check_fields_known
from flows.wizards.rl.branches import (
    ENVIRONMENT_REWARD,
    NO_FINAL_ANSWER_TOOL,
    final_answer_tool,
    rollout_pattern,
    third_party_imports,
    uses_ruler,
)
from flows.wizards.rl.http_tools import split_endpoints
from flows.wizards.rl.simulated_user import has_simulated_user
from flows.wizards.rl.train_rl import TRAIN_RL, hyperparameters
from flows.wizards.sft.train_sft import TRAIN_SFT
from flows.wizards.start_from import SETTLED, START_FROM, parse_start_from, shown_start


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


def script_context(
    answers: Mapping[str, Any],
    script_names: frozenset[str] = frozenset(),
    script_file: str | None = None,
) -> dict[str, Any]:
    """Everything the template needs, with user text as literals and user code as parsed Code.

    `script_names`: what the script binds at its top level (see flows.code.user_code.scoped_body).
    `script_file`: the script's file name, which its docstring tells to run (`<run_name>.py`,
    as artbot saves it, unless told otherwise).
    """
    answers = script_answers(TRAIN_RL, answers)
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
        # JSONL files are read on the runner host: the scenarios, or a split's own file.
        "uses_jsonl": source == "runner_file"
        or answers.get("train_split") == "separate"
        or validation == "separate",
        "tool_execution": answers.get("tool_execution"),
        "task": py_literal(answers["task"]),
        "system_prompt": py_literal(answers.get("system_prompt", "")),
        "base_model": py_literal(answers["base_model"]),
        "project": py_literal(answers["project"]),
        "run_name": py_literal(answers["run_name"]),
        "script_file": file_name(script_file or f"{answers['run_name']}.py"),
        "judge_model": py_literal(answers.get("judge_model", "")),
        # Your own rubric for RULER's judge, or None for ART's DEFAULT_RUBRIC.
        "ruler_rubric": py_literal(rubric) if (rubric := answers.get("ruler_rubric")) else None,
        "reward_mix": float(answers.get("reward_mix", 0.5)),
        "episode_end": py_literal(answers.get("episode_end", "")),
        "max_turns": int(answers.get("max_turns", 10)),
        "invalid_action": answers.get("invalid_action", "end"),
        "learning_rate": float(hp["learning_rate"]),
        "rollouts_per_group": int(hp["rollouts_per_group"]),
        "groups_per_step": int(hp["groups_per_step"]),
        "num_steps": int(hp["num_steps"]),
        "num_epochs": int(hp["num_epochs"]),
        "gpu_memory_utilization": float(hp["gpu_memory_utilization"]),
        "max_completion_tokens": int(hp["max_completion_tokens"]),
        "val_every": int(answers.get("val_every", 10)),
        "val_max_groups": int(answers.get("val_max_groups", 8)),
        "train_fraction": float(answers.get("train_fraction", 1.0)),
        "val_fraction": float(answers.get("val_fraction", 0.1)),
        "scenarios": py_literal(answers.get("scenario_rows", [])),
        "scenarios_path": py_literal(answers.get("scenarios_path", "")),
        "train_source": py_literal(answers.get("train_source", "")),
        "val_source": py_literal(answers.get("val_source", "")),
        "tools": py_literal(answers.get("tools", []), indent=0),
        **_http_tools_context(answers),
        **_simulated_user_context(answers),
        "tool_names": [ident(t["function"]["name"]) for t in answers.get("tools", [])],
        "tools_given_the_scenario": py_literal([]),
        "reward_source": None,
        "final_answer_tool": None,
        "final_answer_parameter": None,
        "final_answer_checked": False,
        "reward_expression": None,
        "reward_function": None,
        "reward_call": None,
        "tool_code": None,
        "environment_code": None,
        "environment_entry_points": None,
        "create_game_call": None,
        "generator_code": None,
        "generator_call": None,
        "generator_takes_rng": False,
        "prompt_fields": None,
        "prompt_fields_count": 0,
        "prompt_code": None,
        "render_prompt_call": None,
        "extra_requirements": _extra_requirements(answers),
        "fork": _fork_context(answers),
    }
    context["checks_environment"] = (
        context["uses_ruler"]
        or context["backend"] == "serverless"
        or context["tool_auth"] is not None
        or context["simulated_user"] is not None
    )
    try:
        _add_user_code(context, answers, pattern, reward, script_names)
    except InvalidAnswer as error:
        raise RenderError(str(error)) from None
    return context


def _add_user_code(
    context: dict[str, Any],
    answers: Mapping[str, Any],
    pattern: str,
    reward: str,
    script_names: frozenset[str],
) -> None:
    """The user's code, each piece in a scope of its own (flows.code.user_code), and the calls the
    script makes to its entry points, matched to their signatures (flows.code.entry_points)."""
    if pattern == "game":
        source = answers["environment"]
        calls = environment_calls(ast.parse(source))
        entry_points = ["create_game", "render_observation", "apply_action", "is_finished"]
        if ENVIRONMENT_REWARD(answers) and reward in ("programmatic", "custom"):
            entry_points.append("compute_reward")
            context["reward_source"] = "environment"
            context["reward_call"] = _call(calls["compute_reward"])
        context["environment_code"] = function_body(
            scoped_body(source, "environment code", script_names)
        )
        context["environment_entry_points"] = inline_code(", ".join(ident(n) for n in entry_points))
        context["create_game_call"] = _call(calls["create_game"])
    if reward in ("programmatic", "custom") and context["reward_source"] is None:
        logic = answers["reward_logic"]
        if logic["kind"] == "expression":
            # Parsed in eval mode and unparsed to one line when answered; parse again to be sure.
            ast.parse(logic["code"], mode="eval")
            context["reward_source"] = "expression"
            context["reward_expression"] = Code(logic["code"])
            call = Call("compute_reward", REWARD_ARGUMENTS[pattern])
        else:
            context["reward_source"] = "function"
            call = reward_function_call(ast.parse(logic["code"]), pattern, "reward code")
            context["reward_function"] = function_body(
                scoped_body(logic["code"], "reward code", script_names)
            )
        context["reward_call"] = _call(call)
    if pattern == "tools" and answers.get("tool_execution") == "local":
        context["tool_code"] = function_body(
            scoped_body(answers["tool_code"], "tool code", script_names)
        )
        context["tools_given_the_scenario"] = py_literal(_tools_given_the_scenario(answers))
    if pattern == "tools":
        context.update(_final_answer_context(answers))
    if pattern != "game":
        context.update(_agent_prompt_context(answers, script_names))
    if answers["scenario_source"] == "generator":
        source = answers["scenario_generator"]
        call = generator_call(ast.parse(source))
        context["generator_code"] = function_body(scoped_body(source, "generator", script_names))
        context["generator_call"] = _call(call)
        context["generator_takes_rng"] = bool(call.arguments)


def _fork_context(answers: Mapping[str, Any]) -> dict[str, PyLiteral] | None:
    """The SFT model the script forks when the run continues one (flows.wizards.start_from), checked
    again: the base model and backend must still be the SFT run's, the run's model another."""
    if START_FROM not in answers:
        return None
    try:
        start = parse_start_from(answers[START_FROM])
    except InvalidAnswer as error:
        raise RenderError(f"{START_FROM}: {error}") from None
    for step_id in SETTLED:
        if answers[step_id] != start[step_id]:
            raise RenderError(
                f"{step_id}: this run continues {shown_start(start)}, whose {step_id} is "
                f"{start[step_id]!r}: answer it again"
            )
    if (answers["run_name"], answers["project"]) == (start["model"], start["project"]):
        raise RenderError(
            f"run_name: {answers['run_name']!r} is the SFT model's own name in this project: "
            "answer it again"
        )
    return {"model": py_literal(start["model"]), "project": py_literal(start["project"])}


def _http_tools_context(answers: Mapping[str, Any]) -> dict[str, Any]:
    """The tools' URLs and methods, and the header that authenticates their calls (if any)."""
    urls, methods = split_endpoints(answers.get("tool_urls", {}))
    auth = answers.get("tool_auth") or None
    return {
        "tool_urls": py_literal(urls),
        "tool_methods": py_literal(methods),
        "tool_auth": {key: py_literal(value) for key, value in auth.items()} if auth else None,
    }


def _simulated_user_context(answers: Mapping[str, Any]) -> dict[str, Any]:
    """The simulated user's instructions and model, or None: the agent's answer ends it."""
    if not has_simulated_user(answers):
        return {"simulated_user": None, "simulated_user_model": None}
    return {
        "simulated_user": py_literal(answers["simulated_user"]["instructions"]),
        "simulated_user_model": py_literal(answers["simulated_user_model"]),
    }


def _tools_given_the_scenario(answers: Mapping[str, Any]) -> list[str]:
    """The tools whose function takes the episode's `scenario` (flows.code.entry_points)."""
    module = ast.parse(answers["tool_code"])
    names = []
    for tool in answers.get("tools", []):
        name = tool["function"]["name"]
        function = entry_point(module, name, "tool code")
        if function is not None and takes_scenario(function, tool):
            names.append(name)
    return names


def _agent_prompt_context(
    answers: Mapping[str, Any], script_names: frozenset[str]
) -> dict[str, Any]:
    """What the agent is shown of a scenario: the chosen fields (still fields of the pasted
    rows: those may have been edited since), or the user's `render_prompt`."""
    chosen = answers["agent_prompt"]
    if "code" in chosen:
        source = chosen["code"]
        function = entry_point(ast.parse(source), RENDER_PROMPT, "prompt code")
        if function is None:
            raise InvalidAnswer(f"The prompt code must define `{RENDER_PROMPT}`.")
        return {
            "prompt_code": function_body(scoped_body(source, "prompt code", script_names)),
            "render_prompt_call": _call(positional_call(function, ("scenario",))),
        }
    fields = list(chosen["fields"])
    try:
        check_fields_known(fields, answers)
    except InvalidAnswer as error:
        raise InvalidAnswer(f"{error} Answer `edit what the agent sees` again.") from None
    return {"prompt_fields": py_literal(fields), "prompt_fields_count": len(fields)}


def _call(call: Call) -> Code:
    return inline_code(call.source())


def _extra_requirements(answers: Mapping[str, Any]) -> list[Any]:
    """The packages the user named for their code's third-party imports, as TOML strings; the
    answer must still match the imports (code edited since would leave one out)."""
    imports = third_party_imports(answers)
    if not imports:
        return []
    named = answers["extra_packages"]
    if named["imports"] != imports:
        raise RenderError(
            f"Your code now imports {', '.join(imports)}, but the extra packages were named for "
            f"{', '.join(named['imports']) or 'none'}: answer `edit extra packages` again."
        )
    return [toml_string(requirement) for requirement in named["requirements"]]


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
    defined = (
        answers.get("tool_execution") == "local"
        and entry_point(ast.parse(answers["tool_code"]), name, "tool code") is not None
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


ScriptContext = Callable[[Mapping[str, Any], frozenset[str], str | None], dict[str, Any]]
CONTEXTS: dict[str, ScriptContext] = {
    TRAIN_RL.id: script_context,
    TRAIN_SFT.id: sft_script_context,
}
"""What each flow's template is given, by the flow's id."""


def render_script(
    answers: Mapping[str, Any], script_file: str | None = None, flow: Flow = TRAIN_RL
) -> str:
    """The complete training script for these answers of `flow` as the templates print it;
    `script_file` is the name it is saved under (default `<run_name>.py`), which its docstring
    tells to run. What users get is this in ruff's format (`checks.script_format`)."""
    context = CONTEXTS[flow.id]
    template = environment().get_template(flow.template)
    script = template.render(context(answers, frozenset(), script_file))
    names = top_level_names(script)
    if names:
        # Rendered again once the script's own names are known: they decide a few lint waivers.
        script = template.render(context(answers, names, script_file))
    return script


def top_level_names(script: str) -> frozenset[str]:
    """The names a script binds at its top level (its user code, in functions, binds none)."""
    names: set[str] = set()
    for node in ast.parse(script).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


__all__ = ["PyLiteral", "RenderError", "render_script", "script_context", "templates_dir"]
