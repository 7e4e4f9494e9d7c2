"""Which of the script's own functions ran, and how often, counted without the script's help.

The bootstrap compiles the script itself and, before it runs, puts a counter at the top of
every module-level function, and of every function defined directly in a `user_*` function (the
generated scripts place each piece of the user's code in one: flows/code/user_code.py): one call to
count the entry, and a `try`/`except Exception` that counts an exception and raises it again.
Nothing else changes: the same names, the same line numbers in tracebacks, the same behaviour.
The report then asks whether the user's code (the reward, the environment, the tools, the
generator) ran at all, and whether it ever returned.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, Protocol

COUNTER_NAME = "__artbot_dryrun_calls__"
"""The global the instrumented functions report to (set in the script's namespace)."""

ENTRY_POINTS = frozenset(
    {
        "compute_reward",
        "create_game",
        "render_observation",
        "apply_action",
        "is_finished",
        "generate_scenario",
        "generate_prompt",
    }
)
"""Functions an ART script calls into the user's code by (this project's and ART's examples')
convention; with the functions named like the tools the policy was offered, they must run."""


GAME_FUNCTIONS = frozenset({"render_observation", "apply_action"})
"""The environment's functions whose arguments (the game, the action) the counter passes on to
its observer: how the dry run's stand-in player sees the game
(`checks.dryrun.standins.move_search`)."""


class CallObserver(Protocol):
    """Told of each counted call of a `GAME_FUNCTIONS` function, with its arguments."""

    def entered(self, name: str, arguments: tuple[Any, ...]) -> None: ...

    def raised(self, name: str) -> None: ...


class CallCounter:
    """Entries and exceptions per function name (read by the recorder when it writes)."""

    def __init__(self) -> None:
        self.defined: list[str] = []
        self.entered: Counter[str] = Counter()
        self.raised: Counter[str] = Counter()
        self.observer: CallObserver | None = None
        self._lock = threading.Lock()
        self._paused = threading.local()

    def enter(self, name: str, *arguments: Any) -> None:
        if getattr(self._paused, "on", False):
            return
        with self._lock:
            self.entered[name] += 1
        if self.observer is not None and name in GAME_FUNCTIONS:
            self.observer.entered(name, arguments)

    def exception(self, name: str) -> None:
        if getattr(self._paused, "on", False):
            return
        with self._lock:
            self.raised[name] += 1
        if self.observer is not None and name in GAME_FUNCTIONS:
            self.observer.raised(name)

    @contextlib.contextmanager
    def uncounted(self) -> Iterator[None]:
        """Calls on this thread meanwhile are the dry run's own (trying a move on a copy of the
        game), not the script's: they are not counted and not observed."""
        before = getattr(self._paused, "on", False)
        self._paused.on = True
        try:
            yield
        finally:
            self._paused.on = before

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self.entered), dict(self.raised)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _counter_call(method: str, name: str, arguments: list[str] | None = None) -> ast.Expr:
    target = ast.Attribute(ast.Name(COUNTER_NAME, ast.Load()), method, ast.Load())
    passed = [ast.Name(argument, ast.Load()) for argument in arguments or []]
    return ast.Expr(ast.Call(target, [ast.Constant(name), *passed], []))


def _positional_parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args)]


def _count_calls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    docstring = function.body[:1] if _is_docstring(function.body[0]) else []
    body = function.body[len(docstring) :]
    if not body:
        return  # a docstring alone: nothing runs
    observed = _positional_parameters(function) if function.name in GAME_FUNCTIONS else []
    handler = ast.ExceptHandler(
        type=ast.Name("Exception", ast.Load()),
        name=None,
        body=[_counter_call("exception", function.name), ast.Raise()],
    )
    counted: list[ast.stmt] = [
        _counter_call("enter", function.name, observed),
        ast.Try(body=body, handlers=[handler], orelse=[], finalbody=[]),
    ]
    for statement in counted:
        # The counting code takes the line of the first statement, so tracebacks stay true.
        for node in ast.walk(statement):
            if "lineno" in node._attributes and not hasattr(node, "lineno"):
                ast.copy_location(node, body[0])
    function.body = [*docstring, *counted]


USER_SCOPE_PREFIX = "user_"
"""The functions a generated script wraps the user's code in (`user_reward`, `user_tools`...)."""


def _counted_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level functions, and the user's own top-level functions in their scopes."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        found.append(node)
        if node.name.startswith(USER_SCOPE_PREFIX):
            found.extend(
                inner
                for inner in node.body
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return found


def instrument(source: str, filename: str) -> tuple[CodeType, list[str]]:
    """The script compiled with counters in its functions (`_counted_functions`), and their
    names."""
    tree = ast.parse(source, filename)
    defined: list[str] = []
    for function in _counted_functions(tree):
        _count_calls(function)
        defined.append(function.name)
    ast.fix_missing_locations(tree)
    # dont_inherit: the script's own `from __future__` imports apply, not the bootstrap's.
    return compile(tree, filename, "exec", dont_inherit=True), defined


def must_run(defined: list[str], tools_offered: list[str]) -> list[str]:
    """The defined functions that are the user's entry points: the conventional ones, and
    those named like a tool the policy was offered."""
    return [name for name in defined if name in ENTRY_POINTS or name in tools_offered]


def run_counted(script: Path, counter: CallCounter) -> None:
    """Run `script` as `__main__`, as `runpy.run_path` would, with its functions counted."""
    code, counter.defined = instrument(script.read_text(encoding="utf-8"), str(script))
    module = ModuleType("__main__")
    module.__dict__.update(
        __file__=str(script),
        __cached__=None,
        __loader__=None,
        __package__=None,
        __spec__=None,
        __builtins__=builtins,
    )
    module.__dict__[COUNTER_NAME] = counter
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module  # pickling and dataclasses look the module up here
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
