"""What one SFT row must be, how long it is, which split it falls in, and the default
hyperparameters of ART's `train-sft` skill: plain Python, standard library only.

The wizard checks pasted and uploaded rows with these functions. A dataset on the runner host is
out of the wizard's reach, so the generated script carries a copy of SCRIPT_DEFINITIONS (see
`script_source`) and checks that file with them, streaming, when it starts: both places apply
one set of rules.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

ROLES = ("system", "user", "assistant", "developer", "tool", "function")
"""The roles ART's SFT skill accepts (`ROLES` in its row checker)."""
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""An OpenAI function name: letters, digits, `_` and `-`, at most 64 characters."""
CHARS_PER_TOKEN = 4
"""A character estimate of tokens (no tokenizer is at hand offline): about 4 characters a token
in English prose, fewer in code, JSON or other languages, so it can be off by a third."""
MAX_SEQ_TOKENS = 32_768
"""LocalBackend's default `max_seq_length` in ART 0.5.18: it drops a longer row untrained."""
LONG_ROW_TOKENS = MAX_SEQ_TOKENS * 3 // 4
"""A row estimated above this may well be over MAX_SEQ_TOKENS (the estimate can be off by a
third): it is flagged, not refused."""


def row_problems(row: Any) -> list[str]:
    """What is wrong with one parsed row, as ART's SFT skill checks it and a little more; empty
    when ART can train on it."""
    if not isinstance(row, dict):
        return [f"a row must be a JSON object, not {_json_type(row)}"]
    messages = row.get("messages")
    if messages is None and "input" in row:
        # The skill's checker accepts `{"input": {"messages": [...]}}` rows, but ART 0.5.18's
        # train_sft_from_file reads only `messages`: such a row would train on nothing.
        return ["has `input` but no `messages`: ART 0.5.18 trains only on a row's `messages`"]
    if not isinstance(messages, list) or not messages:
        return ["`messages` must be a non-empty list of chat messages"]
    problems: list[str] = []
    for index, message in enumerate(messages):
        problems += [f"messages[{index}]: {p}" for p in message_problems(message)]
    last = messages[-1]
    if isinstance(last, dict) and last.get("role") != "assistant":
        problems.append("the last message must be the assistant's: it is what the model learns")
    tools = row.get("tools")
    if tools is not None:
        problems += tools_problems(tools)
    return problems


def message_problems(message: Any) -> list[str]:
    if not isinstance(message, dict):
        return [f"a message must be a JSON object, not {_json_type(message)}"]
    role = message.get("role")
    if role not in ROLES:
        return [f"invalid role {json.dumps(role)[:40]} (known: {', '.join(ROLES)})"]
    content = message.get("content")
    calls = message.get("tool_calls")
    if content is not None and not isinstance(content, str | list):
        return [f"content must be text or a list of content parts, not {_json_type(content)}"]
    if not content and not calls and not message.get("function_call"):
        return ["no content and no tool calls"]
    if calls is None:
        return []
    if role != "assistant":
        return [f"only the assistant's messages make tool calls, not the {role}'s"]
    if not isinstance(calls, list):
        return ["`tool_calls` must be a list"]
    return [f"tool_calls[{i}]: {p}" for i, call in enumerate(calls) for p in _call_problems(call)]


def _call_problems(call: Any) -> list[str]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return ['must be {"type": "function", "function": {"name": ..., "arguments": ...}}']
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        return []
    if not isinstance(arguments, str):
        return ["`arguments` must be a JSON object, or one encoded as a string"]
    try:
        decoded = json.loads(arguments)
    except ValueError:
        return [f"the arguments of {function['name'][:40]!r} are not valid JSON"]
    return [] if isinstance(decoded, dict) else ["`arguments` must encode a JSON object"]


def tools_problems(tools: Any) -> list[str]:
    if not isinstance(tools, list):
        return ["`tools` must be a list of function schemas"]
    problems: list[str] = []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function":
            problems.append(f'tools[{index}]: must be {{"type": "function", "function": {{...}}}}')
        elif not isinstance(function, dict):
            problems.append(f'tools[{index}]: "function" must be an object')
        elif not isinstance(function.get("name"), str) or not TOOL_NAME.match(function["name"]):
            problems.append(f"tools[{index}]: the name must be 1 to 64 letters, digits, _ or -")
        else:
            parameters = function.get("parameters", {"type": "object"})
            if not isinstance(parameters, dict) or parameters.get("type") != "object":
                problems.append(f'tools[{index}]: "parameters" must be {{"type": "object", ...}}')
    return problems


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def estimated_tokens(characters: int) -> int:
    """Tokens a row of this many characters takes, estimated (CHARS_PER_TOKEN)."""
    return math.ceil(characters / CHARS_PER_TOKEN)


def held_out(line: str, fraction: float) -> bool:
    """Whether a row (its JSON line) is held out for validation: by a hash of its text, so the
    split needs no count of the rows, streams, and keeps duplicates on one side."""
    if fraction <= 0:
        return False
    digest = hashlib.sha256(line.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def skill_defaults(rows: int, epochs: int | None = None, batch_size: int = 2) -> dict[str, Any]:
    """ART's `train-sft` skill's hyperparameters for `rows` training rows: epochs
    clamp(round(10000 / rows), 1, 10), batch size 2, peak learning rate 2e-4, a linear schedule,
    and warmup from 5% of an epoch's steps clamped to 10..1000, as a ratio of all steps (at
    most 1). With `epochs` or `batch_size` given, the warmup follows them."""
    rows = max(rows, 1)
    if epochs is None:
        epochs = max(1, min(10, round(10000 / rows)))
    total_steps = math.ceil(rows * epochs / batch_size)
    steps_per_epoch = math.ceil(rows / batch_size)
    warmup_steps = max(10, min(1000, round(steps_per_epoch * 0.05)))
    return {
        "epochs": epochs,
        "batch_size": batch_size,
        "learning_rate": 2e-4,
        "schedule": "linear",
        "warmup_ratio": min(1.0, round(warmup_steps / total_steps, 4)),
    }


SCRIPT_DEFINITIONS = (
    "ROLES",
    "TOOL_NAME",
    "CHARS_PER_TOKEN",
    "MAX_SEQ_TOKENS",
    "LONG_ROW_TOKENS",
    "row_problems",
    "message_problems",
    "_call_problems",
    "tools_problems",
    "_json_type",
    "estimated_tokens",
    "held_out",
    "skill_defaults",
)
"""What a generated script carries of this module, in this order (it imports `hashlib`, `json`,
`math` and `re` itself, and `Any` from typing)."""


def script_source() -> str:
    """The source of SCRIPT_DEFINITIONS as this file has it (without the constants' docstrings),
    laid out as ruff formats a module: the constants together, the functions apart."""
    source = Path(__file__).read_text(encoding="utf-8")
    found: dict[str, str] = {}
    previous_constant = False
    for node in ast.parse(source).body:
        names = _defined_names(node)
        for name in names & set(SCRIPT_DEFINITIONS):
            segment = ast.get_source_segment(source, node)
            assert segment is not None
            found[name] = segment
    missing = [name for name in SCRIPT_DEFINITIONS if name not in found]
    if missing:
        raise RuntimeError(f"flows/wizards/sft/rows.py no longer defines {', '.join(missing)}")
    text = ""
    for name in SCRIPT_DEFINITIONS:
        constant = not found[name].startswith("def ")
        if text:
            text += "\n" if constant and previous_constant else "\n\n\n"
        text += found[name]
        previous_constant = constant
    return text + "\n"


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()
