"""Parsers for answers: each reads reply text into a value, or raises InvalidAnswer saying what is
wrong."""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from flows.code.entry_points import reward_function_call
from flows.code.third_party import shadowed_module
from flows.code.user_code import check_compiles, scoped_body
from flows.definition.steps import Answers, InvalidAnswer, Parse

MAX_TEXT_CHARS = 8_000
MAX_CODE_CHARS = 100_000
MAX_ROWS = 5_000
MAX_ROWS_JSON_CHARS = 5_000_000
MAX_TOOLS = 64
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LITELLM_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.:@/-]*$")


# ---- plain values ------------------------------------------------------------------------


def text(min_len: int = 1, max_len: int = MAX_TEXT_CHARS) -> Parse:
    """Free text between `min_len` and `max_len` characters (after trimming)."""

    def parse(value: str, answers: Answers) -> str:
        value = value.strip()
        if "\x00" in value:
            raise InvalidAnswer("The text contains a NUL character.")
        if len(value) < min_len:
            raise InvalidAnswer(
                f"That is too short ({len(value)} characters): say it in at least {min_len}."
            )
        if len(value) > max_len:
            raise InvalidAnswer(f"That is {len(value):,} characters; keep it under {max_len:,}.")
        return value

    return parse


def slug(max_len: int = 64) -> Parse:
    """A safe name: letters, digits, '.', '_' and '-', starting with a letter or digit."""

    def parse(value: str, answers: Answers) -> str:
        value = value.strip().strip("`")
        if not value:
            raise InvalidAnswer("The name is empty.")
        if len(value) > max_len:
            raise InvalidAnswer(f"That name is {len(value)} characters; keep it to {max_len}.")
        if not SLUG.match(value) or ".." in value:
            raise InvalidAnswer(
                f"“{value[:60]}” is not a safe name: use letters, digits, '.', '_' and '-' only, "
                "starting with a letter or digit (e.g. `math-solver-001`)."
            )
        return value

    return parse


def script_name(imports: Callable[[Answers], Iterable[str]], max_len: int = 64) -> Parse:
    """A safe name (`slug`) that can also name the generated script, `<name>.py`: not the name
    of a module the script imports (`flows.code.third_party.shadowed_module`; `imports` gives the
    user's code's own imports), which that file would stand in for."""
    safe = slug(max_len)

    def parse(value: str, answers: Answers) -> str:
        name = safe(value, answers)
        shadowed = shadowed_module(name, imports(answers))
        if shadowed is not None:
            raise InvalidAnswer(
                f"`{name}` is {shadowed}: the script is saved as `{name}.py`, and Python would "
                f"import that file instead of the module, so the script could not start. "
                f"Add to the name, e.g. `{name}-run-001`."
            )
        return name

    return parse


def _number(value: str) -> float:
    cleaned = value.strip().strip("`").replace("_", "")
    if len(cleaned) > 40:
        raise InvalidAnswer("That is not a number.")
    try:
        number = float(cleaned)
    except ValueError:
        raise InvalidAnswer(f"“{cleaned[:40]}” is not a number.") from None
    if not math.isfinite(number):
        raise InvalidAnswer("The number must be finite.")
    return number


def int_in(low: int, high: int) -> Parse:
    """A whole number in [low, high]."""

    def parse(value: str, answers: Answers) -> int:
        number = _number(value)
        if number != int(number):
            raise InvalidAnswer(f"{value.strip()} is not a whole number.")
        if not low <= number <= high:
            raise InvalidAnswer(
                f"{int(number)} is out of range: give a number from {low} to {high}."
            )
        return int(number)

    return parse


def float_in(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Parse:
    """A number in the range, each end open or closed."""

    def parse(value: str, answers: Answers) -> float:
        number = _number(value)
        too_low = number <= low if low_open else number < low
        too_high = number >= high if high_open else number > high
        if too_low or too_high:
            left = "(" if low_open else "["
            right = ")" if high_open else "]"
            raise InvalidAnswer(
                f"{number:g} is out of range: it must be in {left}{low:g}, {high:g}{right}."
            )
        return number

    return parse


def litellm_model_id(value: str, answers: Answers) -> str:
    """Another judge model, as a LiteLLM id `provider/model`."""
    value = value.strip().strip("`")
    if len(value) > 100 or not LITELLM_MODEL.match(value):
        raise InvalidAnswer(
            f"“{value[:60]}” is not a LiteLLM model id: write it as `provider/model`, "
            "e.g. `openai/gpt-5.4` or `anthropic/claude-sonnet-4-5`."
        )
    return value


def runner_path(suffixes: tuple[str, ...] = (".jsonl",)) -> Parse:
    """A path to a file on the runner host (not read here: it lives there)."""

    def parse(value: str, answers: Answers) -> str:
        value = value.strip().strip("`").strip()
        if not value:
            raise InvalidAnswer("The path is empty.")
        if len(value) > 1024 or any(c in value for c in "\x00\n\r"):
            raise InvalidAnswer("That is not a usable file path.")
        if not value.lower().endswith(suffixes):
            raise InvalidAnswer(f"The file must end with {' or '.join(suffixes)}.")
        return value

    return parse


def http_url(value: str) -> str:
    value = value.strip().strip("<>`")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in value):
        raise InvalidAnswer(f"“{value[:80]}” is not an http(s) URL.")
    if len(value) > 2000:
        raise InvalidAnswer("That URL is too long.")
    return value


# ---- JSON data ---------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise InvalidAnswer(f"{name} is not valid JSON: use a finite number or null.")


def load_json(value: str, what: str = "JSON") -> Any:
    """json.loads with clear errors for bad syntax, NaN/Infinity, deep nesting and huge numbers."""
    try:
        return json.loads(value, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InvalidAnswer(
            f"That is not valid {what}: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from None
    except RecursionError:
        raise InvalidAnswer(f"That {what} is nested too deeply.") from None
    except ValueError as error:  # e.g. an integer with too many digits
        raise InvalidAnswer(f"That is not usable {what}: {error}.") from None


def parse_rows(value: str) -> list[dict[str, Any]]:
    """Scenario rows from a JSON array of objects or from JSONL (one object per line)."""
    if len(value) > MAX_ROWS_JSON_CHARS:
        raise InvalidAnswer(
            f"That data is {len(value):,} characters; "
            "the limit for pasted or uploaded scenarios is "
            f"{MAX_ROWS_JSON_CHARS:,}. Put bigger datasets on the runner host and give the path."
        )
    stripped = value.strip().lstrip("\ufeff")
    if not stripped:
        raise InvalidAnswer("There are no scenarios in that.")
    rows: list[Any]
    if stripped.startswith("["):
        loaded = load_json(stripped, "JSON")
        if not isinstance(loaded, list):
            raise InvalidAnswer("Expected a JSON array of objects.")
        rows = loaded
        where = "Item"
    else:
        rows = []
        for number, line in enumerate(stripped.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(load_json(line, "JSON"))
            except InvalidAnswer as error:
                raise InvalidAnswer(f"Line {number} of the JSONL: {error}") from None
            if len(rows) > MAX_ROWS:
                break
        where = "Line"
    if not rows:
        raise InvalidAnswer("There are no scenarios in that.")
    if len(rows) > MAX_ROWS:
        raise InvalidAnswer(
            f"That is more than {MAX_ROWS:,} scenarios: "
            "put the file on the runner host and give its path."
        )
    for index, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise InvalidAnswer(f"{where} {index} is {type(row).__name__}, not a JSON object.")
    return rows


def scenario_rows(value: str, answers: Answers) -> list[dict[str, Any]]:
    """Scenario rows; which of their fields the agent is shown is a question of its own
    (flows.wizards.rl.agent_prompt)."""
    return parse_rows(value)


def tool_schemas(value: str, answers: Answers) -> list[dict[str, Any]]:
    """A list of OpenAI function-calling tools, each normalized to
    {"type": "function", "function": {...}}."""
    loaded = load_json(value.strip(), "JSON")
    if isinstance(loaded, dict):
        loaded = [loaded]
    if not isinstance(loaded, list) or not loaded:
        raise InvalidAnswer("Expected a JSON list of tool schemas (at least one).")
    if len(loaded) > MAX_TOOLS:
        raise InvalidAnswer(f"That is {len(loaded)} tools; the limit is {MAX_TOOLS}.")
    tools: list[dict[str, Any]] = []
    names: set[str] = set()
    for index, raw in enumerate(loaded, 1):
        if not isinstance(raw, dict):
            raise InvalidAnswer(f"Tool {index} is not a JSON object.")
        function = raw.get("function", raw) if raw.get("type", "function") == "function" else None
        if not isinstance(function, dict):
            raise InvalidAnswer(
                f'Tool {index}: "type" must be "function" with a "function" object.'
            )
        name = function.get("name")
        if (
            not isinstance(name, str)
            or not IDENTIFIER.match(name)
            or keyword.iskeyword(name)
            or name.startswith("__")
            or len(name) > 64
        ):
            raise InvalidAnswer(
                f"Tool {index}: the name {json.dumps(name)[:70]} must be a Python identifier "
                "(letters, digits, underscores; not a keyword; at most 64 characters)."
            )
        if name in names:
            raise InvalidAnswer(f"Tool {index}: the name “{name}” is used twice.")
        names.add(name)
        description = function.get("description")
        if not isinstance(description, str) or not description.strip():
            raise InvalidAnswer(
                f'Tool “{name}” needs a non-empty "description": the model reads it.'
            )
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        _check_parameters(name, parameters)
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": description.strip(),
                    "parameters": parameters,
                },
            }
        )
    return tools


def _check_parameters(name: str, parameters: Any) -> None:
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise InvalidAnswer(
            f'Tool “{name}”: "parameters" must be a JSON-Schema object ({{"type": "object", ...}}).'
        )
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict):
        raise InvalidAnswer(f'Tool “{name}”: "properties" must be an object.')
    for prop, schema in properties.items():
        if not IDENTIFIER.match(prop) or keyword.iskeyword(prop):
            raise InvalidAnswer(
                f"Tool “{name}”: parameter “{prop[:40]}” must be a Python identifier."
            )
        if not isinstance(schema, dict):
            raise InvalidAnswer(f"Tool “{name}”: parameter “{prop}” needs a schema object.")
    required = parameters.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        raise InvalidAnswer(f'Tool “{name}”: "required" must list names from "properties".')


# ---- code --------------------------------------------------------------------------------


def python_module(value: str, what: str = "code") -> ast.Module:
    """Parse user code that is meant to be code; errors say where."""
    if len(value) > MAX_CODE_CHARS:
        raise InvalidAnswer(
            f"That {what} is {len(value):,} characters; the limit is {MAX_CODE_CHARS:,}."
        )
    if "\x00" in value:
        raise InvalidAnswer(f"That {what} contains a NUL character.")
    try:
        return ast.parse(value, mode="exec")
    except SyntaxError as error:
        raise InvalidAnswer(
            f"That {what} does not parse: {error.msg} (line {error.lineno}, column {error.offset})."
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise InvalidAnswer(f"That {what} cannot be parsed (too deeply nested).") from None


def user_module(value: str, what: str) -> ast.Module:
    """User code that parses, compiles and can be placed in the script in a scope of its own
    (flows.code.user_code), so its names never meet the script's."""
    module = python_module(value, what)
    check_compiles(value, what)
    scoped_body(normalized_source(value), what)
    return module


def normalized_source(value: str) -> str:
    lines = [line.rstrip() for line in value.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


def reward_logic(pattern: Callable[[Answers], str]) -> Parse:
    """A reward expression or a `compute_reward` function; it must parse and read known names."""

    def parse(value: str, answers: Answers) -> dict[str, str]:
        source = value.strip()
        try:
            expression = ast.parse(source, mode="eval") if len(source) <= MAX_CODE_CHARS else None
        except SyntaxError:
            expression = None
        except (RecursionError, ValueError):
            raise InvalidAnswer("That expression is too deeply nested.") from None
        if expression is not None:
            _check_scenario_fields(expression, answers)
            # Unparsing gives one canonical line: no comments, no layout that could reach outside.
            return {"kind": "expression", "code": ast.unparse(expression)}
        module = user_module(source, "reward code")
        reward_function_call(module, pattern(answers), "reward code")
        _check_scenario_fields(module, answers)
        return {"kind": "function", "code": normalized_source(source)}

    return parse


def subscripted_fields(tree: ast.AST) -> Iterator[str]:
    """Each `scenario["field"]` the code reads by a constant key, in walk order."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "scenario"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            yield node.slice.value


def _check_scenario_fields(tree: ast.AST, answers: Answers) -> None:
    """Every scenario["field"] the reward reads must exist in each inline scenario."""
    rows = answers.get("scenario_rows")
    if not isinstance(rows, list):
        return
    for field in subscripted_fields(tree):
        for index, row in enumerate(rows, 1):
            if field not in row:
                raise InvalidAnswer(
                    f"The reward reads scenario[{field!r}], "
                    f"but scenario {index} has no “{field}” "
                    "field. Use scenario.get(...) or add the field to every scenario."
                )
