"""Tool code given at the tools question: where it is in a reply, and the schemas read from it
shown back in a line per tool."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from flows import MAX_ATTACHMENT_BYTES, Reply


def tool_code_in(reply: Reply) -> str | None:
    """The Python code a reply carries (a `.py` file, or pasted code with a function), or None."""
    if reply.attachments:
        if len(reply.attachments) != 1 or not reply.attachments[0].name.endswith(".py"):
            return None
        content = reply.attachments[0].content
        if len(content) > MAX_ATTACHMENT_BYTES:
            return None
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError:
            return None
    text = unfenced(reply.text)
    try:
        module = ast.parse(text)
    except SyntaxError:
        return None
    defines = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in module.body)
    return text if defines else None


def tools_summary(schemas: Sequence[dict[str, Any]]) -> str:
    """`name(param: type, optional: type = optional)`: description, one line per tool."""
    lines = ["Tool schemas read from your functions (signatures, type hints, docstrings):"]
    for tool in schemas:
        function = tool["function"]
        parameters = function["parameters"]
        required = set(parameters.get("required", []))
        shown = ", ".join(
            f"{name}: {_type_name(schema)}" + ("" if name in required else " (optional)")
            for name, schema in parameters.get("properties", {}).items()
        )
        lines.append(f"• {function['name']}({shown}): {function['description']}")
    return "\n".join(lines)


def _type_name(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type_name(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {_type_name(schema['items'])}"
    return str(kind)


def unfenced(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        first, _, rest = stripped[3:-3].partition("\n")
        return rest if rest and first.strip().isidentifier() else stripped[3:-3]
    return stripped
