"""Values a template may print. Anything else (a plain str above all) is refused at render time.

User text only ever reaches a script as a Python literal made by `py_literal`, whose value equals
the input; names only as validated identifiers; code only when the user sent code on purpose and
it parsed.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from typing import Any


class PyLiteral(str):
    """Source text of a Python literal (str, number, bool, None, list, dict) of known value."""


class Code(str):
    """Python source the user provided on purpose, already parsed; inserted at module level only."""


class Ident(str):
    """A validated Python identifier (e.g. a tool name used as a function name)."""


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def ident(name: str) -> Ident:
    if not _IDENT.match(name) or keyword.iskeyword(name):
        raise ValueError(f"not a safe identifier: {name!r}")
    return Ident(name)


def code(source: str) -> Code:
    """Mark user code as insertable, after checking once more that it parses as a module."""
    ast.parse(source, mode="exec")
    return Code(source.rstrip("\n") + "\n")


def function_body(source: str) -> Code:
    """Mark user code placed as a function's body (indented: flows.code.user_code) as insertable,
    after checking that it parses in that place. It is fenced with `# fmt: off` / `# fmt: on`:
    the script's last step, `ruff format`, leaves it as the user wrote it (reformatted, a long
    line's `# noqa` would move inside the parentheses ruff adds, away from the line it waives)."""
    ast.parse("def user_code():\n" + source, mode="exec")
    return Code(f"    # fmt: off\n{source.rstrip(chr(10))}\n    # fmt: on\n")


def inline_code(source: str) -> Code:
    """Mark code the script builds from validated names (a call, a list of names) as insertable
    within a line, after checking that it parses."""
    ast.parse(source, mode="exec")
    if "\n" in source:
        raise ValueError("inline code must be one line")
    return Code(source)


class FileName(str):
    """A script's file name (`math-solver-001.py`) of letters, digits, `.`, `_` and `-` only, so it
    can sit in the script's docstring."""


_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.py$")


def file_name(name: str) -> FileName | None:
    """`name` marked as printable in the script's text, or None when it has any other character."""
    return FileName(name) if _FILE_NAME.match(name) else None


class TomlString(str):
    """Source text of a TOML basic string (in the script's PEP 723 block) of known value."""


def toml_string(value: str) -> TomlString:
    """A TOML basic string equal to `value`: JSON's escapes are TOML's, and no newline is left to
    end the comment line it sits on."""
    return TomlString(json.dumps(value, ensure_ascii=True))


def py_literal(value: Any, indent: int = 0) -> PyLiteral:
    """A Python literal equal to `value` (JSON-like data); lists of dicts print an item a line."""
    return PyLiteral(_literal(value, indent))


def _literal(value: Any, indent: int) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite floats have no literal")
        return repr(value)
    if isinstance(value, str):
        # repr() of a str is always a valid literal that evaluates to the same string.
        return repr(value)
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if any(isinstance(item, dict | list) for item in value):
            pad = " " * (indent + 4)
            items = ",\n".join(pad + _literal(item, indent + 4) for item in value)
            return "[\n" + items + ",\n" + " " * indent + "]"
        return "[" + ", ".join(_literal(item, indent) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        parts = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("dict keys must be strings")
            parts.append(f"{_literal(key, indent)}: {_literal(item, indent)}")
        return "{" + ", ".join(parts) + "}"
    raise ValueError(f"no literal for {type(value).__name__}")


def finalize(value: Any) -> str:
    """Jinja's finalize hook: what `{{ ... }}` may print. A plain str is a template bug."""
    if isinstance(value, PyLiteral | Code | Ident | TomlString | FileName):
        return str(value)
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int | float):
        return _literal(value, 0)
    raise TypeError(
        f"template printed an unmarked {type(value).__name__} ({str(value)[:40]!r}): wrap it with "
        "py_literal, ident or code"
    )
