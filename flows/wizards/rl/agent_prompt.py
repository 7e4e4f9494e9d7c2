"""What the agent is shown of a scenario: a decision, never an accident.

A scenario row holds what the agent is asked and, often, what only the reward may read (the
answer, the solution, the hidden card). The agent is given the fields the user names (recommended
from the data: `prompt`, `question`, `task`, ...) or the text of a `render_prompt(scenario)` the
user writes; the rest of the row stays out of its prompt. The wizard cautions when the reward reads
a field the agent is shown.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from typing import Any

from flows.code.entry_points import entry_point, positional_call, require_plain
from flows.conversation.validators import (
    load_json,
    normalized_source,
    subscripted_fields,
    user_module,
)
from flows.definition.steps import Answers, InvalidAnswer

RENDER_PROMPT = "render_prompt"
# The names a prompt field usually has, most telling first.
PROMPT_FIELD_NAMES = (
    "prompt",
    "question",
    "task",
    "query",
    "instruction",
    "instructions",
    "input",
    "request",
    "message",
    "problem",
    "text",
)
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\- ]{0,63}")
MAX_FIELDS = 16
MAX_OPTIONS_SHOWN = 12


def known_fields(answers: Answers) -> list[str] | None:
    """The fields every scenario has, in the first row's order; None when the rows are not known
    here (a file on the runner host; a generator that builds its dict in a way not read here)."""
    rows = answers.get("scenario_rows")
    source = answers.get("scenario_source")
    if source in ("inline", "upload") and isinstance(rows, list) and rows:
        first = [str(key) for key in rows[0]]
        return [key for key in first if all(isinstance(r, dict) and key in r for r in rows)]
    generator = answers.get("scenario_generator")
    if source == "generator" and isinstance(generator, str):
        return generated_fields(generator)
    return None


def generated_fields(source: str) -> list[str] | None:
    """The keys of the dict literals `generate_scenario` returns, when every return is one."""
    try:
        function = entry_point(ast.parse(source), "generate_scenario", "generator")
    except (InvalidAnswer, SyntaxError, ValueError, RecursionError):
        return None
    if function is None:
        return None
    returned = [node.value for node in ast.walk(function) if isinstance(node, ast.Return)]
    if not returned or not all(isinstance(value, ast.Dict) for value in returned):
        return None
    key_lists = [
        [key.value for key in value.keys if isinstance(key, ast.Constant)]
        for value in returned
        if isinstance(value, ast.Dict)
    ]
    if any(any(not isinstance(key, str) for key in keys) for keys in key_lists):
        return None
    common = [str(key) for key in key_lists[0] if all(key in keys for keys in key_lists)]
    return common or None


def _text_fields(answers: Answers) -> list[str] | None:
    """The known fields that hold non-empty text in every pasted row (all, for a generator)."""
    fields = known_fields(answers)
    rows = answers.get("scenario_rows")
    if fields is None or answers.get("scenario_source") not in ("inline", "upload"):
        return fields
    assert isinstance(rows, list)
    return [
        field
        for field in fields
        if all(isinstance(row[field], str) and row[field].strip() for row in rows)
    ]


def recommended_fields(answers: Answers) -> list[str] | None:
    """The usual prompt field the data has (`prompt` when the data is not known here), or None
    when the rows have none of the usual names: then the user must say."""
    fields = _text_fields(answers)
    if fields is None:
        return ["prompt"]
    by_name = {field.lower(): field for field in fields}
    found = next((by_name[name] for name in PROMPT_FIELD_NAMES if name in by_name), None)
    return [found] if found is not None else None


def default_agent_prompt(answers: Answers) -> dict[str, Any]:
    """The recommended answer, or a clear refusal when there is nothing to recommend."""
    fields = recommended_fields(answers)
    if fields is None:
        known = known_fields(answers) or []
        raise InvalidAnswer(
            "None of your scenarios' fields is named like a prompt "
            f"({', '.join(f'`{f}`' for f in known[:MAX_OPTIONS_SHOWN]) or 'none'}): name the "
            "field(s) the agent is given, or write `render_prompt(scenario)`."
        )
    return {"fields": fields}


def parse_agent_prompt(value: str, answers: Answers) -> dict[str, Any]:
    """Field names (`question`, or `question, context`), or code defining `render_prompt`."""
    text = value.strip()
    if text.startswith("{"):  # the stored answer itself (an answers file, an export)
        return _stored_answer(load_json(text, "JSON"), answers)
    if re.search(rf"\bdef\s+{RENDER_PROMPT}\s*\(", text):
        return {"code": _render_prompt_code(text)}
    names = [name.strip().strip("`\"'") for name in re.split(r"[,\n]", text) if name.strip()]
    return _fields_answer(names, answers)


def _stored_answer(loaded: Any, answers: Answers) -> dict[str, Any]:
    if isinstance(loaded, dict) and set(loaded) == {"code"} and isinstance(loaded["code"], str):
        return {"code": _render_prompt_code(loaded["code"])}
    if (
        isinstance(loaded, dict)
        and set(loaded) == {"fields"}
        and isinstance(loaded["fields"], list)
        and all(isinstance(name, str) for name in loaded["fields"])
    ):
        return _fields_answer(loaded["fields"], answers)
    raise InvalidAnswer(
        'Expected {"fields": ["name", ...]} or {"code": "def render_prompt(scenario): ..."}.'
    )


def _fields_answer(names: list[str], answers: Answers) -> dict[str, Any]:
    if not names:
        raise InvalidAnswer("Name at least one field of your scenarios.")
    if len(names) > MAX_FIELDS:
        raise InvalidAnswer(f"That is {len(names)} fields; the limit is {MAX_FIELDS}.")
    for name in names:
        if not FIELD_NAME.fullmatch(name):
            raise InvalidAnswer(
                f"“{name[:60]}” is not a field name. Name the fields the agent is given, "
                "separated by commas (e.g. `question`), or write `def render_prompt(scenario):`."
            )
    if len(set(names)) != len(names):
        raise InvalidAnswer("A field is named twice.")
    check_fields_known(names, answers)
    return {"fields": names}


def check_fields_known(names: Iterable[str], answers: Answers) -> None:
    """Every named field is in every pasted row (a file on the runner host is checked when the
    script loads it)."""
    fields = known_fields(answers)
    rows = answers.get("scenario_rows")
    if fields is None:
        return
    for name in names:
        if name not in fields:
            where = (
                f"scenario {next(i for i, r in enumerate(rows, 1) if name not in r)}"
                if isinstance(rows, list) and any(name in r for r in rows)
                else "your scenarios"
            )
            raise InvalidAnswer(
                f"“{name}” is not a field of {where}. The fields: "
                f"{', '.join(f'`{f}`' for f in fields[:MAX_OPTIONS_SHOWN]) or 'none'}."
            )


def _render_prompt_code(source: str) -> str:
    module = user_module(source, "prompt code")
    function = entry_point(module, RENDER_PROMPT, "prompt code")
    if function is None:
        raise InvalidAnswer(f"The prompt code must define a top-level `{RENDER_PROMPT}`.")
    require_plain(function, "the script calls it without await")
    positional_call(function, ("scenario",))
    return normalized_source(source)


def agent_prompt_display(value: Any) -> str:
    if isinstance(value, Mapping) and isinstance(value.get("fields"), list):
        fields = [str(f) for f in value["fields"]]
        noun = "field" if len(fields) == 1 else "fields"
        return f"the {noun} {', '.join(f'`{f}`' for f in fields)}"
    if isinstance(value, Mapping) and isinstance(value.get("code"), str):
        return f"`{RENDER_PROMPT}(scenario)`"
    return str(value)


def agent_prompt_details(answers: Answers) -> str:
    fields = known_fields(answers)
    recommended = recommended_fields(answers)
    lines = []
    if fields:
        shown = ", ".join(f"`{f}`" for f in fields[:MAX_OPTIONS_SHOWN])
        hidden = len(fields) - MAX_OPTIONS_SHOWN
        more = f" and {hidden} more" if hidden > 0 else ""
        lines.append(f"Your scenarios' fields: {shown}{more}.")
    if recommended is not None:
        lines.append(f"I recommend `{recommended[0]}`: reply `default` to take it.")
    return " ".join(lines)


# ---- what the reward reads -------------------------------------------------------------------


def fields_read(source: str) -> set[str]:
    """The scenario fields code reads by a constant key: `scenario["answer"]`,
    `scenario.get("answer")`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return set()
    read = set(subscripted_fields(tree))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "scenario"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            read.add(node.args[0].value)
    return read


def shown_fields(answers: Answers) -> set[str]:
    """The fields the agent is shown by name (what a `render_prompt` reads counts too)."""
    value = answers.get("agent_prompt")
    if isinstance(value, Mapping) and isinstance(value.get("fields"), list):
        return {str(f) for f in value["fields"]}
    if isinstance(value, Mapping) and isinstance(value.get("code"), str):
        return fields_read(value["code"])
    return set()


def reward_fields(answers: Answers) -> set[str]:
    """The scenario fields the reward code reads (empty without reward code)."""
    logic = answers.get("reward_logic")
    if isinstance(logic, Mapping) and isinstance(logic.get("code"), str):
        return fields_read(logic["code"])
    return set()


def answer_shown_caution(answers: Answers) -> str | None:
    """A caution when the agent is shown a field the reward reads (it may copy the answer)."""
    both = sorted(shown_fields(answers) & reward_fields(answers))
    if not both:
        return None
    named = ", ".join(f"`{f}`" for f in both)
    return (
        f":warning: Your reward reads {named}, and the agent is shown {named} in its prompt: "
        "it can copy what it is scored on. If that field is the answer, say `edit what the "
        "agent sees` and leave it out."
    )
