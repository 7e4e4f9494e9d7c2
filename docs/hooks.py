"""MkDocs hooks: the pages that must follow the code are generated from it at build time.

A page asks for a generated part with a marker line, `<!-- generated: NAME -->`, replaced by
GENERATED[NAME]() when the page is built:
- `configuration`: one table of every setting, from the pydantic-settings classes found in the
  source (a field without a description stops the build);
- `commands`: every `artbot` subcommand and its options, from the command line's parser;
- `questions`, `questions-sft`: a wizard's questions in order, from its flow (train-rl,
  train-sft), and the answers it is given without a question;
- `layers`: what each part may import, from the rules `tests/test_layers.py` enforces;
- `layout`: every package, subpackage and module with its docstring's first sentence, walked
  from the source tree (a module without a docstring stops the build).
Settings classes and modules are found by walking the tree, never named, so the pages follow
modules that move; the only names used are the command line's parser (`artbot.cli`), the flows
(`flows.FLOWS`, by id) and the layer rules (`tests/test_layers.py`).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PACKAGES = (
    "flows",
    "config",
    "isolation",
    "storage",
    "checks",
    "runner",
    "assistant",
    "bot",
    "artbot",
)
"""Our packages, bottom layer first (the order of tests/test_layers.py)."""

PROGRAMS = {
    "bot": "`artbot serve`",
    "assistant": "`artbot chat`, `artbot serve`",
    "runner": "`artbot runner serve`",
}
"""Which program reads the settings classes of each package, in the table's order."""

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


class GeneratedPageError(Exception):
    """The code lacks what a generated page needs (a description, a docstring)."""


# ---- markdown ---------------------------------------------------------------------------------


def cell(text: str) -> str:
    """`text` safe in a table cell: one line, pipes escaped, and outside code spans the
    characters Markdown would read as HTML or emphasis."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    escaped = [
        part
        if part.startswith("`")
        else part.replace("\\", "\\\\")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("*", "\\*")
        .replace("_", "\\_")
        for part in parts
    ]
    return "".join(escaped).replace("|", "\\|")


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# ---- walking the source tree -------------------------------------------------------------------


def source_files(package: str) -> list[Path]:
    """Every module of `package`, packages' `__init__.py` first within each folder."""
    return sorted(
        (ROOT / package).rglob("*.py"),
        key=lambda path: (path.parent.parts, path.name != "__init__.py", path.name),
    )


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def docstring(path: Path) -> str | None:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


def summary(text: str) -> str:
    """The first sentence of a docstring's first paragraph, its lines joined."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    depth, code = 0, False
    for index, char in enumerate(paragraph):
        if char == "`":
            code = not code
        elif not code and char in "([":
            depth += 1
        elif not code and char in ")]":
            depth -= 1
        elif (
            not code
            and depth <= 0
            and char in ".!?"
            and re.match(r"\s+[A-Z`(]", paragraph[index + 1 :])
            and not re.search(r"\b(e\.g|i\.e|etc)$", paragraph[:index])
        ):
            return paragraph[: index + 1]
    return paragraph


def module_summary(path: Path) -> str:
    """What a module is, by its docstring; GeneratedPageError when it has none."""
    found = docstring(path)
    if not found:
        relative = path.relative_to(ROOT)
        raise GeneratedPageError(f"{relative} has no docstring: give it one (what it is)")
    return summary(found)


# ---- configuration -------------------------------------------------------------------------------


def settings_classes() -> list[tuple[str, type[Any]]]:
    """(package, class) for every pydantic-settings class a program reads whole: found by
    walking the source for subclasses of BaseSettings, less those another one extends."""
    from pydantic_settings import BaseSettings

    found: dict[type[Any], str] = {}
    for package in PACKAGES:
        for path in source_files(package):
            text = path.read_text(encoding="utf-8")
            if "Settings" not in text or "class " not in text:
                continue
            names = [
                node.name
                for node in ast.parse(text).body
                if isinstance(node, ast.ClassDef)
                and any(_base_name(base).endswith("Settings") for base in node.bases)
            ]
            if not names:
                continue
            module = importlib.import_module(module_name(path))
            for name in names:
                candidate = getattr(module, name)
                if isinstance(candidate, type) and issubclass(candidate, BaseSettings):
                    found[candidate] = package
    extended = {base for cls in found for base in cls.__mro__[1:]}
    return [(package, cls) for cls, package in found.items() if cls not in extended]


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def variable_name(cls: type[Any], field: str) -> str:
    return (str(cls.model_config.get("env_prefix", "")) + field).upper()


def shown_default(info: Any) -> str:
    from pydantic_core import PydanticUndefined

    if info.is_required():
        # A field a program may leave unset (its description says what unset means) is required
        # only by its class: the assistant's model, whose absence turns the assistant off.
        return "unset" if "unset" in (info.description or "") else "required"
    value = info.default_factory() if info.default is PydanticUndefined else info.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value == "":
        return "empty"
    return f"`{value}`"


def allowed_values(info: Any) -> str:
    """What the field's type and constraints allow, in words ('' when nothing to add)."""
    annotation = info.annotation
    options = [arg for arg in get_args(annotation) if get_origin(arg) is Literal]
    if get_origin(annotation) is Literal:
        options = [annotation]
    if options:
        return "one of " + ", ".join(f"`{value}`" for value in get_args(options[0]))
    bounds = []
    for constraint in info.metadata:
        for name, words in (("ge", "at least"), ("gt", "over"), ("le", "at most"), ("lt", "under")):
            limit = getattr(constraint, name, None)
            if limit is not None:
                limit = int(limit) if isinstance(limit, float) and limit.is_integer() else limit
                bounds.append(f"{words} {limit}")
    return ", ".join(bounds)


def setting_rows() -> Iterator[tuple[str, str, str, str]]:
    """(variable, meaning, default, read by) for every setting; GeneratedPageError for a field
    with no description."""
    for package, cls in settings_classes():
        for field, info in cls.model_fields.items():
            name = variable_name(cls, field)
            if not info.description:
                raise GeneratedPageError(
                    f"{cls.__module__}.{cls.__name__}.{field} ({name}) has no description: "
                    "give its Field(description=...) what it means"
                )
            meaning = info.description
            limits = allowed_values(info)
            if limits:
                meaning += f" ({limits})"
            if package not in PROGRAMS:
                raise GeneratedPageError(f"{cls.__name__}: say in PROGRAMS which program reads it")
            yield f"`{name}`", cell(meaning), shown_default(info), PROGRAMS[package]


def configuration() -> str:
    order = list(PROGRAMS.values())
    rows = sorted(setting_rows(), key=lambda row: (order.index(row[3]), row[0]))
    return table(("variable", "meaning", "default", "read by"), rows)


# ---- commands ------------------------------------------------------------------------------------


def commands() -> str:
    from artbot.cli import build_parser

    # A default read from the environment (--database-url's) would show the builder's own.
    saved = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith("ARTBOT_")}
    try:
        root = build_parser()
    finally:
        os.environ.update(saved)
    sections: list[str] = []
    for name, parser in _subcommands(root, "artbot"):
        usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
        lines = [f"### `{name}`", "", parser.description or "", "", f"```text\n{usage}\n```"]
        rows = _option_rows(parser)
        if rows:
            lines += ["", table(("argument", "what", "default"), rows)]
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def _subcommands(
    parser: argparse.ArgumentParser, name: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable command under `parser`: a command with actions (`artbot db`) gives each."""
    choices = [
        action.choices
        for action in parser._actions  # argparse has no public walk
        if isinstance(action, argparse._SubParsersAction)
    ]
    if not choices:
        yield name, parser
        return
    for sub_name, sub in choices[0].items():
        yield from _subcommands(sub, f"{name} {sub_name}")


def _option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    formatter = parser._get_formatter()  # expands %(default)s as --help does
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(
            action, argparse._HelpAction | argparse._SubParsersAction
        ):
            continue
        shown = formatter._format_action_invocation(action)
        default = action.default
        quiet = default in (None, False, True, argparse.SUPPRESS) or not action.option_strings
        rows.append(
            (
                f"`{shown}`",
                cell(formatter._expand_help(action)),
                "" if quiet else f"`{default}`",
            )
        )
    return rows


# ---- the wizard's questions ----------------------------------------------------------------------


def questions(flow_id: str = "train-rl") -> str:
    """Every question of the flow `flow_id` in order, by part: the id an answers file uses, the
    question, what it takes, and when it is asked (its `when=` guard in words); then the answers
    it is given with no question (a run that continues another)."""
    from flows import FLOWS

    flow = FLOWS[flow_id]
    sections = []
    for number, part in enumerate(flow.parts, start=1):
        rows = [
            (
                f"`{step.id}`",
                f"**{cell(step.title)}**: {cell(step.prompt)}",
                cell(answer(step)),
                cell(outermost(asked_when(step.when))),
            )
            for step in flow.steps_of(part)
        ]
        sections.append(
            f"### Part {number} of {len(flow.parts)}: {part.title}\n\n"
            + table(("id", "question", "answer", "asked when"), rows)
        )
    given = [f"`{entry.id}` (**{cell(entry.title)}**)" for entry in flow.given]
    if given:
        sections.append(
            f"Given, never asked: {', '.join(given)}. Set when the session is made (an answers "
            "file may carry it); the questions it settles are then answered already."
        )
    return "\n\n".join(sections)


def answer(step: Any) -> str:
    kind = type(step).__name__
    if kind == "Choice":
        if not step.options:
            return "one of the options shown (they come from earlier answers)"
        values = ", ".join(f"`{option.value}`" for option in step.options)
        return f"one of {values}" + (
            " or another value (as the question says)" if step.other else ""
        )
    if kind == "ValuesMenu":
        return "an object of any of " + ", ".join(
            f"`{field.id}` ({field.default})" for field in step.fields
        )
    words = {"json": "JSON", "code": "Python code", "path": "a path", "number": "a number"}
    shown = words.get(step.kind, "text")
    if step.default_label:
        shown += f" (default: {step.default_label})"
    return shown


def outermost(words: str) -> str:
    """Words of a condition without the parentheses around the whole."""
    if words.startswith("(") and words.endswith(")") and words.count("(") == 1:
        return words[1:-1]
    return words


def asked_when(condition: Any) -> str:
    """A `when=` guard in words: the declarative conditions of flows, and a `Holds` by the
    docstring of its predicate."""
    kind = type(condition).__name__
    if condition is None:
        return "always"
    if kind == "Is":
        values = " or ".join(f"`{value}`" for value in sorted(condition.values))
        return f"`{condition.step}` is {values}"
    if kind == "Not" and type(condition.condition).__name__ == "Is":
        inner = condition.condition
        values = " or ".join(f"`{value}`" for value in sorted(inner.values))
        return f"`{inner.step}` is not {values}"
    if kind == "Not":
        return f"not ({asked_when(condition.condition)})"
    if kind in ("All", "Any_"):
        joined = (" and " if kind == "All" else " or ").join(
            asked_when(part) for part in condition.conditions
        )
        return joined if kind == "All" else f"({joined})"
    if kind == "Holds":
        predicate = condition.predicate
        if not predicate.__doc__:
            raise GeneratedPageError(
                f"the guard on {condition.steps} has no docstring to say when it holds"
            )
        said = " ".join(predicate.__doc__.split()).rstrip(".")
        return said[0].lower() + said[1:]
    raise GeneratedPageError(f"no words for the condition {condition!r}")


# ---- layers and layout ---------------------------------------------------------------------------


def layers() -> str:
    # By its path: a `tests` package of some installed distribution may come first on sys.path.
    spec = importlib.util.spec_from_file_location("layer_rules", ROOT / "tests" / "test_layers.py")
    assert spec is not None and spec.loader is not None
    rules = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rules)
    allowed: dict[str, tuple[str, ...]] = rules.ALLOWED
    rows = []
    for part, below in reversed(allowed.items()):
        may = ", ".join(f"`{name}`" for name in below) or "nothing of ours"
        if tuple(below) == PACKAGES:
            may = "everything"
        rows.append((f"`{part}`", may))
    return table(("part", "may import (besides itself)"), rows)


def layout() -> str:
    sections = []
    for package in reversed(PACKAGES):
        files = source_files(package)
        intro = module_summary(ROOT / package / "__init__.py")
        rows = []
        for path in files:
            relative = path.relative_to(ROOT / package)
            if relative == Path("__init__.py"):
                continue
            shown = f"{relative.parent}/" if path.name == "__init__.py" else str(relative)
            rows.append((f"`{shown}`", cell(module_summary(path))))
        sections.append(f"## `{package}/`\n\n{cell(intro)}\n\n" + table(("module", "what"), rows))
    return "\n\n".join(sections)


GENERATED: dict[str, Callable[[], str]] = {
    "configuration": configuration,
    "commands": commands,
    "layers": layers,
    "questions": questions,
    "questions-sft": lambda: questions("train-sft"),
    "layout": layout,
}


def render_markers(markdown: str) -> str:
    """`markdown` with every generated marker replaced; KeyError names an unknown marker."""
    return MARKER.sub(lambda match: GENERATED[match.group(1)](), markdown)


# ---- MkDocs ------------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- generated:" not in markdown:
        return markdown
    try:
        return render_markers(markdown)
    except (GeneratedPageError, KeyError) as error:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_path}: {error}") from error
