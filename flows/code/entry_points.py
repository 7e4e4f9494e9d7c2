"""The user's entry points (reward, environment, tools, generator): their signatures, read from
the code, and the call the script makes to each, so a mismatch is an answer's error, not a
TypeError in the middle of training."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from flows.definition.steps import InvalidAnswer

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Call:
    """How the script calls one entry point: `await`ed or not, and its argument list as source."""

    function: str
    arguments: tuple[str, ...]
    awaited: bool = False

    def source(self) -> str:
        call = f"{self.function}({', '.join(self.arguments)})"
        return f"await {call}" if self.awaited else call


def entry_point(module: ast.Module, name: str, what: str) -> FunctionNode | None:
    """The top-level function `name`, None when the code does not bind the name at all, and an
    error when it binds it to something else (the script would call it)."""
    found: FunctionNode | None = None
    for node in module.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            found = node
        elif name in _bound_names(node):
            raise InvalidAnswer(
                f"The {what} binds `{name}` to something other than a function (line "
                f"{node.lineno}), but the script calls `{name}`: define it with `def {name}(...)`, "
                "or give that other thing another name."
            )
    return found


@lru_cache(maxsize=64)
def _top_level_functions(source: str) -> frozenset[str]:
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    return frozenset(
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def defines_function(source: str, name: str) -> bool:
    """Whether the code defines a top-level function `name` (answers are re-read often: cached)."""
    return name in _top_level_functions(source)


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _signature(function: FunctionNode) -> str:
    return f"{function.name}({ast.unparse(function.args)})"


def _positional(function: FunctionNode) -> list[ast.arg]:
    return function.args.posonlyargs + function.args.args


def _required_positional(function: FunctionNode) -> list[ast.arg]:
    positional = _positional(function)
    return positional[: len(positional) - len(function.args.defaults)]


def _required_keyword_only(function: FunctionNode) -> list[ast.arg]:
    args = function.args
    return [
        arg
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        if default is None
    ]


def require_plain(function: FunctionNode, why: str) -> None:
    if isinstance(function, ast.AsyncFunctionDef):
        raise InvalidAnswer(f"`{function.name}` must be a plain function, not async: {why}.")


def positional_call(
    function: FunctionNode, arguments: Sequence[str], *, may_omit: bool = False
) -> Call:
    """The script passes `arguments` by position (their names mean nothing to the user's code);
    with `may_omit`, a function that takes none of them is called with none (`create_game()`)."""
    accepts = len(_positional(function)) >= len(arguments) or function.args.vararg is not None
    required = _required_positional(function)
    keyword_only = _required_keyword_only(function)
    wanted = f"{function.name}({', '.join(arguments)})"
    if keyword_only:
        raise InvalidAnswer(
            f"`{_signature(function)}` requires the keyword-only argument "
            f"`{keyword_only[0].arg}`, which the script does not pass: it calls `{wanted}`. "
            "Give it a default."
        )
    if accepts and len(required) <= len(arguments):
        return Call(function.name, tuple(arguments))
    if may_omit and not required:
        return Call(function.name, ())
    count = f"{len(arguments)} argument{'s' if len(arguments) != 1 else ''}"
    raise InvalidAnswer(
        f"`{_signature(function)}` does not match how the script calls it: `{wanted}`, with "
        f"{count}{' (or none)' if may_omit else ''}. Change its parameters to match."
    )


def named_call(function: FunctionNode, available: Sequence[str], role: str) -> Call:
    """The script passes what the function asks for by name, from `available` (e.g. `scenario`,
    `game`, `trajectory`), in the function's own order; a function whose parameters are all
    unnamed positions taking exactly `available` gets them in that documented order."""
    names = ", ".join(f"`{name}`" for name in available)
    try:
        arguments = _by_name(function, set(available))
    except _Unmatched as unmatched:
        positional = _positional(function)
        if (
            len(positional) == len(available)
            and not function.args.defaults
            and not function.args.posonlyargs
            and not _required_keyword_only(function)
        ):
            arguments = tuple(available)  # the documented order: unchanged from earlier answers
        else:
            example = ", ".join(available)
            raise InvalidAnswer(
                f"`{_signature(function)}` cannot be called as {role}: {unmatched} The script "
                f"passes {names} by name (any of them, in any order): rename the parameters to "
                f"those, e.g. `def {function.name}({example}):`, or give the others defaults."
            ) from None
    return Call(function.name, arguments, awaited=isinstance(function, ast.AsyncFunctionDef))


class _Unmatched(Exception):
    pass


def _by_name(function: FunctionNode, available: set[str]) -> tuple[str, ...]:
    args = function.args
    arguments: list[str] = []
    passed: set[str] = set()
    by_keyword = False  # after a skipped optional position, the rest go by keyword
    positional = _positional(function)
    required = len(positional) - len(args.defaults)
    for index, arg in enumerate(positional):
        known = arg.arg in available
        if not known:
            if index < required:
                raise _Unmatched(f"the script has nothing to pass as `{arg.arg}`.")
            by_keyword = True
            continue
        if by_keyword:
            if arg in args.posonlyargs:
                raise _Unmatched(f"`{arg.arg}` comes after a position the script skips.")
            arguments.append(f"{arg.arg}={arg.arg}")
        else:
            arguments.append(arg.arg)
        passed.add(arg.arg)
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        if arg.arg in available:
            arguments.append(f"{arg.arg}={arg.arg}")
            passed.add(arg.arg)
        elif default is None:
            raise _Unmatched(f"the script has nothing to pass as `{arg.arg}`.")
    if args.kwarg is not None:
        arguments.extend(f"{name}={name}" for name in sorted(available - passed))
    return tuple(arguments)


# A tool function's parameter of this name that its schema does not have gets the episode's
# scenario from the script (ART-E's inbox and date, a customer's orders), never from the model.
SCENARIO_PARAMETER = "scenario"


def takes_scenario(function: FunctionNode, tool: dict[str, object]) -> bool:
    """Whether the script passes the episode's scenario to this tool function."""
    spec = tool["function"]
    assert isinstance(spec, dict)
    properties = (spec.get("parameters") or {}).get("properties") or {}
    named = {a.arg for a in function.args.args + function.args.kwonlyargs}
    return SCENARIO_PARAMETER in named and SCENARIO_PARAMETER not in properties


def check_tool_function(function: FunctionNode, tool: dict[str, object]) -> None:
    """A tool's function gets the model's arguments by name, as its schema describes them: every
    parameter it requires must be a property the schema requires, and every property a parameter
    (or `**kwargs`). A `scenario` parameter outside the schema gets the episode's scenario."""
    spec = tool["function"]
    assert isinstance(spec, dict)
    parameters = spec.get("parameters") or {}
    assert isinstance(parameters, dict)
    properties = set(parameters.get("properties") or {})
    schema_required = set(parameters.get("required") or [])
    name = function.name
    args = function.args
    if args.posonlyargs:
        raise InvalidAnswer(
            f"`{_signature(function)}`: the script passes the tool's arguments by name, so "
            "remove the `/` (positional-only parameters)."
        )
    accepted = {a.arg for a in args.args + args.kwonlyargs}
    if args.kwarg is None and not properties <= accepted:
        missing = ", ".join(sorted(properties - accepted))
        raise InvalidAnswer(
            f"`{name}` must accept the tool's parameters by name; missing: {missing}."
        )
    required = [a.arg for a in _required_positional(function) + _required_keyword_only(function)]
    if takes_scenario(function, tool):
        required = [parameter for parameter in required if parameter != SCENARIO_PARAMETER]
    for parameter in required:
        if parameter not in properties:
            raise InvalidAnswer(
                f"`{_signature(function)}` requires `{parameter}`, which the tool's schema does "
                f"not have, so no call can pass it: give `{parameter}` a default or add it to the "
                "schema's properties."
            )
        if parameter not in schema_required:
            raise InvalidAnswer(
                f"`{_signature(function)}` requires `{parameter}`, but the tool's schema lets the "
                f'model leave it out: list it in the schema\'s "required" or give `{parameter}` '
                "a default."
            )


# What the script passes to a reward function, by rollout pattern (by name, any subset).
REWARD_ARGUMENTS = {
    "single": ("scenario", "answer", "trajectory"),
    "tools": ("scenario", "answer", "trajectory"),
    "game": ("scenario", "game", "trajectory"),
}
# The environment's functions and what the script passes them, by position.
GAME_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "create_game": ("scenario",),
    "render_observation": ("game",),
    "apply_action": ("game", "action"),
    "is_finished": ("game",),
}


def reward_call(function: FunctionNode, pattern: str) -> Call:
    """How the rollout calls the user's `compute_reward`."""
    return named_call(function, REWARD_ARGUMENTS[pattern], "the reward")


def reward_function_call(module: ast.Module, pattern: str, what: str) -> Call:
    """The call to the reward code's `compute_reward`, which it must define."""
    function = entry_point(module, "compute_reward", what)
    if function is None:
        raise InvalidAnswer(f"The {what} must define a top-level function `compute_reward`.")
    return reward_call(function, pattern)


def environment_calls(module: ast.Module, what: str = "environment code") -> dict[str, Call]:
    """The calls to the environment's functions; `compute_reward` too when it defines one, which
    is then the reward (it must take what the script passes a game's reward)."""
    calls: dict[str, Call] = {}
    for name, arguments in GAME_FUNCTIONS.items():
        function = entry_point(module, name, what)
        if function is None:
            raise InvalidAnswer(f"The {what} must define a top-level function `{name}`.")
        require_plain(function, "the game loop calls it without await")
        calls[name] = positional_call(function, arguments, may_omit=name == "create_game")
    reward = entry_point(module, "compute_reward", what)
    if reward is not None:
        try:
            calls["compute_reward"] = reward_call(reward, "game")
        except InvalidAnswer as error:
            raise InvalidAnswer(
                f"Your environment defines `compute_reward`, the name of the reward, so with a "
                f"programmatic reward it is the reward; but {error} If it is not your reward, "
                "rename it."
            ) from None
    return calls


def generator_call(module: ast.Module, what: str = "generator") -> Call:
    """The call to `generate_scenario`, with the seeded `random.Random` (or nothing)."""
    function = entry_point(module, "generate_scenario", what)
    if function is None:
        raise InvalidAnswer(f"The {what} must define a top-level function `generate_scenario`.")
    require_plain(function, "the script calls it without await")
    return positional_call(function, ("rng",), may_omit=True)


def check_tool_functions(
    module: ast.Module, tools: Sequence[dict[str, object]], *, optional: str | None = None
) -> None:
    """Every tool has its function, callable with the model's arguments as the schema says; the
    `optional` one (the final-answer tool) may be left out."""
    for tool in tools:
        spec = tool["function"]
        assert isinstance(spec, dict)
        name = str(spec["name"])
        function = entry_point(module, name, "tool code")
        if function is None and name == optional:
            continue
        if function is None:
            raise InvalidAnswer(
                f"The tool code must define a top-level function `{name}` (one per tool)."
            )
        check_tool_function(function, tool)
