"""OpenAI function-calling schemas read from Python tool functions: their signatures, type hints
and docstrings, by parsing the code (never running it).

    tool_schemas_from_code('def search(query: str) -> list[str]:\n    "Search the docs."\n')
    # [{"type": "function", "function": {"name": "search", "description": "Search the docs.",
    #   "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
    #                  "required": ["query"], "additionalProperties": False}}}]
"""

from __future__ import annotations

import ast
import re
from typing import Any

from flows.definition.steps import InvalidAnswer

JsonSchema = dict[str, Any]

_SCALARS: dict[str, JsonSchema] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "None": {"type": "null"},
    "Any": {},
    "object": {},
}
_ARRAYS = frozenset({"list", "List", "Sequence", "Iterable", "tuple", "Tuple", "set", "frozenset"})
_OBJECTS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})
_OPTIONAL = frozenset({"Optional"})
_UNION = frozenset({"Union"})
_LITERAL = frozenset({"Literal"})
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?):\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[\w\[\], |]+\s+)?(\w+)\s*:\s*(.*)$")


def tool_schemas_from_code(code: str) -> list[JsonSchema]:
    """One schema per public top-level function of `code` (names not starting with `_`), in
    order. Raises InvalidAnswer when the code does not parse or defines no such function."""
    try:
        module = ast.parse(code)
    except SyntaxError as error:
        where = f"line {error.lineno}: {error.msg}"
        raise InvalidAnswer(f"The tool code does not parse: {where}.") from None
    functions = [
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    ]
    if not functions:
        raise InvalidAnswer("The code defines no public top-level function to offer as a tool.")
    return [_schema(function) for function in functions]


def _schema(function: ast.FunctionDef | ast.AsyncFunctionDef) -> JsonSchema:
    summary, parameter_notes = _read_docstring(ast.get_docstring(function) or "")
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    # Defaults line up with the last positional parameters; keyword-only ones have their own.
    defaults: dict[str, bool] = {a.arg: False for a in positional}
    for argument in positional[len(positional) - len(arguments.defaults) :]:
        defaults[argument.arg] = True
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        defaults[argument.arg] = default is not None
    properties: dict[str, JsonSchema] = {}
    required: list[str] = []
    for argument in (*positional, *arguments.kwonlyargs):
        if argument.arg in ("self", "cls"):
            continue
        schema = _type_schema(argument.annotation)
        note = parameter_notes.get(argument.arg)
        if note:
            schema = {**schema, "description": note}
        properties[argument.arg] = schema
        if not defaults[argument.arg]:
            required.append(argument.arg)
    description = summary or function.name.replace("_", " ").strip().capitalize() + "."
    return {
        "type": "function",
        "function": {
            "name": function.name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def _type_schema(annotation: ast.expr | None) -> JsonSchema:
    """The JSON Schema of a type hint, as far as the hint says; {} (anything) when it does not."""
    if annotation is None:
        return {}
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:  # a string annotation ("list[str]") or `from __future__ import annotations`
            return _type_schema(ast.parse(annotation.value, mode="eval").body)
        except SyntaxError:
            return {}
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return {"type": "null"}
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _union([*_union_members(annotation.left), *_union_members(annotation.right)])
    name = _name(annotation)
    if name in _SCALARS:
        return dict(_SCALARS[name])
    if name in _ARRAYS:
        return {"type": "array"}
    if name in _OBJECTS:
        return {"type": "object"}
    if isinstance(annotation, ast.Subscript):
        outer = _name(annotation.value)
        inner = annotation.slice
        members = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if outer in _ARRAYS:
            items = _type_schema(members[0]) if members else {}
            return {"type": "array", "items": items} if items else {"type": "array"}
        if outer in _OBJECTS:
            values = _type_schema(members[1]) if len(members) == 2 else {}
            return (
                {"type": "object", "additionalProperties": values} if values else {"type": "object"}
            )
        if outer in _OPTIONAL:
            return _union([*members, ast.Constant(None)])
        if outer in _UNION:
            return _union(members)
        if outer in _LITERAL:
            values = [m.value for m in members if isinstance(m, ast.Constant)]
            return _literal(values)
        if outer == "Annotated" and members:
            return _type_schema(members[0])
    return {}


def _union_members(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_union_members(node.left), *_union_members(node.right)]
    return [node]


def _union(members: list[ast.expr]) -> JsonSchema:
    """`X | None` is X (the parameter is optional by its default); other unions are anyOf."""
    schemas = [_type_schema(m) for m in members if not _is_none(m)]
    if not schemas or any(s == {} for s in schemas):
        return {}
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def _is_none(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or _name(node) == "None"


def _literal(values: list[Any]) -> JsonSchema:
    kinds = {type(v) for v in values}
    schema: JsonSchema = {"enum": values}
    if kinds == {str}:
        schema = {"type": "string", "enum": values}
    elif kinds == {int}:
        schema = {"type": "integer", "enum": values}
    return schema


def _name(node: ast.expr) -> str | None:
    """`list` for `list` and `typing.List` alike."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _read_docstring(docstring: str) -> tuple[str, dict[str, str]]:
    """The summary (the first paragraph) and each parameter's note, from a Google-style `Args:`
    section or Sphinx `:param name:` lines."""
    lines = docstring.strip().splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line) or _SPHINX_PARAM.match(line):
            break
        summary_lines.append(line.strip())
    notes: dict[str, str] = {}
    section = ""
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section = header.group(1).lower()
            current = None
            continue
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = str(sphinx.group(1))
            notes[current] = str(sphinx.group(2)).strip()
            continue
        if section in ("args", "arguments", "parameters", "params"):
            argument = _ARG_LINE.match(line)
            if argument and (current is None or _indent(line) <= _indent_of(lines, current)):
                current = str(argument.group(1))
                notes[current] = str(argument.group(2)).strip()
            elif current and line.strip():
                notes[current] = f"{notes[current]} {line.strip()}".strip()
        elif current and line.strip() and not line.lstrip().startswith(":"):
            notes[current] = f"{notes[current]} {line.strip()}".strip()
        else:
            current = None
    return " ".join(summary_lines), {k: v for k, v in notes.items() if v}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indent_of(lines: list[str], argument: str) -> int:
    """The indentation of the line that introduced `argument` in an Args section."""
    for line in lines:
        match = _ARG_LINE.match(line)
        if match and match.group(1) == argument:
            return _indent(line)
    return 0
