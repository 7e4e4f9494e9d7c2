"""The calls the generated script makes to the code given at a code question (reward, environment,
tools, generator), as data: what a sandbox runs to try that code on a few scenarios before it is
offered (assistant.sandbox). Read from the code's syntax tree, never by running it; the same
calls the script makes (flows.code.entry_points), without `await` (the sandbox awaits what
returns an awaitable).

    calls = code_calls("reward_logic", answers, code)   # None: not a code question
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Literal

from flows.code.entry_points import (
    Call,
    entry_point,
    environment_calls,
    generator_call,
    reward_function_call,
    takes_scenario,
)
from flows.definition.steps import Answers
from flows.wizards.rl.branches import FROM_GENERATOR, rollout_pattern

CODE_STEPS = ("scenario_generator", "tool_code", "environment", "reward_logic")
"""The questions whose answer is Python code the script runs."""
SAMPLE_VALUES: dict[str, Any] = {
    "string": "test",
    "integer": 1,
    "number": 1.0,
    "boolean": True,
    "array": [],
    "object": {},
}

Expect = Literal["number", "text", "dict", "any"]


@dataclass(frozen=True)
class CodeCall:
    """One call, evaluated where `source`'s code is loaded, with `scenario`, `answer` and
    `trajectory` bound; `setup` binds more names first: name -> (source, call)."""

    source: str
    call: str
    expect: Expect
    what: str
    setup: dict[str, tuple[str, str]] = field(default_factory=dict)
    errors_ok: bool = False
    """An exception is an answer here (a tool's error goes to the agent)."""


@dataclass(frozen=True)
class CodeCalls:
    """The code to load by name (the answer as `draft`, and earlier answers it needs), the calls
    to try on each scenario, the scenarios the answers hold, and the generator's call when
    scenarios are generated instead."""

    sources: dict[str, str]
    calls: tuple[CodeCall, ...]
    scenarios: tuple[Any, ...] = ()
    generate: str | None = None


def code_calls(step_id: str, answers: Answers, code: str) -> CodeCalls | None:
    """What to run to try `code`, the answer `step_id` accepted (it parses and its entry points
    match: the step's own validator said so). None for a question that takes no code."""
    if step_id not in CODE_STEPS:
        return None
    sources: dict[str, str] = {}
    calls: tuple[CodeCall, ...]
    if step_id == "scenario_generator":
        generate = generator_call(ast.parse(code))
        return CodeCalls(
            {"generator": code},
            (CodeCall("generator", "scenario", "dict", "generate_scenario"),),
            generate=_plain(generate),
        )
    if step_id == "environment":
        calls = _environment_calls("draft", code)
    elif step_id == "tool_code":
        calls = _tool_calls(code, answers)
    else:
        calls = _reward_calls(code, answers, sources)
    sources["draft"] = code
    scenarios, generate = _scenarios(answers, sources)
    return CodeCalls(sources, calls, scenarios, generate)


def _plain(call: Call) -> str:
    return f"{call.function}({', '.join(call.arguments)})"


def _environment_calls(source: str, code: str) -> tuple[CodeCall, ...]:
    found = environment_calls(ast.parse(code))
    game = {"game": (source, _plain(found["create_game"]))}
    calls = [
        CodeCall(source, _plain(found["render_observation"]), "text", "render_observation", game),
        CodeCall(source, _plain(found["is_finished"]), "any", "is_finished", game),
    ]
    if "compute_reward" in found:
        calls.append(
            CodeCall(source, _plain(found["compute_reward"]), "number", "compute_reward", game)
        )
    return tuple(calls)


def _tool_calls(code: str, answers: Answers) -> tuple[CodeCall, ...]:
    module = ast.parse(code)
    calls: list[CodeCall] = []
    for tool in answers.get("tools", []):
        spec = tool["function"]
        name = str(spec["name"])
        function = entry_point(module, name, "tool code")
        if function is None:
            continue  # the final-answer tool may be left out
        parameters = spec.get("parameters") or {}
        required = parameters.get("required") or []
        properties = parameters.get("properties") or {}
        arguments = ", ".join(
            f"{p}={SAMPLE_VALUES.get(str(properties.get(p, {}).get('type')), 'test')!r}"
            for p in required
        )
        if takes_scenario(function, tool):  # the episode's scenario, as the script passes it
            arguments = ", ".join(a for a in (arguments, "scenario=scenario") if a)
        calls.append(
            CodeCall("draft", f"{name}({arguments})", "any", f"the tool `{name}`", errors_ok=True)
        )
    return tuple(calls)


def _reward_calls(code: str, answers: Answers, sources: dict[str, str]) -> tuple[CodeCall, ...]:
    pattern = rollout_pattern(answers)
    setup: dict[str, tuple[str, str]] = {}
    environment = answers.get("environment")
    if pattern == "game" and isinstance(environment, str):
        sources["environment"] = environment
        create = environment_calls(ast.parse(environment))["create_game"]
        setup = {"game": ("environment", _plain(create))}
    try:
        expression = ast.parse(code.strip(), mode="eval")
    except SyntaxError:
        expression = None
    if expression is not None:
        return (CodeCall("draft", f"float({code.strip()})", "number", "the reward", setup),)
    call = reward_function_call(ast.parse(code), pattern, "reward code")
    return (CodeCall("draft", _plain(call), "number", "compute_reward", setup),)


def _scenarios(answers: Answers, sources: dict[str, str]) -> tuple[tuple[Any, ...], str | None]:
    rows = answers.get("scenario_rows")
    if isinstance(rows, list) and rows:
        return tuple(rows[:3]), None
    generator = answers.get("scenario_generator")
    if FROM_GENERATOR(answers) and isinstance(generator, str):
        sources["generator"] = generator
        return (), _plain(generator_call(ast.parse(generator)))
    return (), None
