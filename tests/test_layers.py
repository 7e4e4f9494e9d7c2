"""The layout's layers hold: no package imports a package above it.

Bottom to top: the pure wizard (`flows`), reading settings (`config`), the sandbox and the
redaction for untrusted code and secrets (`isolation`), and the database plumbing
(`storage.database`, `storage.sql_store`, `storage.migrations`) import nothing of ours; the
session store and the checks build on the wizard; the runner on the plumbing alone; the
assistant (a language model in front of the wizard) on the wizard and the settings; the Slack
bot on all of those (the runner only through its client and wire schemas); the command line
(`artbot`) on everything; all but the wizard, the settings and the plumbing use `isolation`.
Every import counts, also those inside functions. (That the documentation's Layout page names
every module, each by its docstring, is tests/docs/test_docs.py's to check: the page is generated
from the tree.)
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("flows", "config", "isolation", "storage", "checks", "runner", "assistant", "bot", "artbot")
PLUMBING = ("storage.database", "storage.sql_store", "storage.migrations")

# What each part may import of ours besides itself: a package, or one module of it.
ALLOWED: dict[str, tuple[str, ...]] = {
    "flows": (),
    "config": (),
    "isolation": (),
    "storage.database": (),
    "storage.sql_store": ("storage.database",),
    "storage.migrations": ("storage.database",),
    "storage.sessions": ("flows", *PLUMBING),
    "checks": ("flows", "isolation"),
    "runner": ("config", "isolation", *PLUMBING),
    "assistant": ("flows", "config", "isolation"),
    "bot": (
        "flows",
        "config",
        "isolation",
        "storage",
        "checks",
        "assistant",
        "runner.client",
        "runner.schemas",
        "runner.uvicorn_server",
    ),
    "artbot": OURS,
}


def within(module: str, part: str) -> bool:
    return module == part or module.startswith(part + ".")


def part_of(module: str) -> str:
    """The entry of ALLOWED that governs `module` (the longest matching prefix)."""
    return max((part for part in ALLOWED if within(module, part)), key=len)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of_ours(path: Path) -> set[str]:
    """The modules of ours that `path` imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                # `from storage import migrations` imports the module storage.migrations;
                # `from flows import replay` imports a name flows exports (the function, not
                # the module flows/conversation/replay.py).
                submodule = f"{node.module}.{alias.name}"
                exported = alias.name in package_exports(node.module)
                found.add(submodule if is_module(submodule) and not exported else node.module)
    return {name for name in found if name.split(".")[0] in OURS}


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@functools.cache
def package_exports(package: str) -> frozenset[str]:
    """The names in a package's `__all__`, read from its `__init__.py` (none when it has none)."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return frozenset()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def allowed(importer: str, imported: str) -> bool:
    """May `importer` import `imported`? Within one package yes (storage's modules are layers
    of their own); across packages only what ALLOWED lists."""
    own = part_of(importer)
    same_package = imported.split(".")[0] == own.split(".")[0]
    if within(imported, own) or (same_package and not own.startswith("storage")):
        return True
    return any(within(imported, lower) for lower in ALLOWED[own])


def source_files() -> list[Path]:
    return sorted(path for package in OURS for path in (ROOT / package).rglob("*.py"))


def test_no_package_imports_a_package_above_it() -> None:
    wrong = [
        f"{module_name(path)} imports {imported}"
        for path in source_files()
        for imported in sorted(imports_of_ours(path))
        if not allowed(module_name(path), imported)
    ]
    assert wrong == []


def test_adapters_use_the_wizard_through_its_public_api() -> None:
    """Outside flows/, the wizard is `from flows import ...`: its inner modules may move."""
    reaching_in = [
        f"{module_name(path)} imports {imported}"
        for path in source_files()
        if not module_name(path).startswith("flows")
        for imported in sorted(imports_of_ours(path))
        if imported.startswith("flows.")
    ]
    assert reaching_in == []


@pytest.mark.parametrize(
    ("entry", "must_not_load"),
    [
        (
            "flows",
            (
                "ruff",
                "sqlalchemy",
                "slack_sdk",
                "slack_bolt",
                "httpx",
                "fastapi",
                "openai",
                "storage",
                "assistant",
                "bot",
            ),
        ),
        ("assistant", ("storage", "bot", "artbot", "checks", "runner", "slack_sdk")),
        (
            "runner.api.server",
            ("flows", "bot", "artbot", "checks", "storage.sessions", "slack_sdk"),
        ),
        ("runner.api", ("flows", "bot", "artbot", "checks", "storage.sessions")),
        ("storage.migrations", ("flows", "bot", "runner", "artbot", "checks")),
        ("checks.script_check", ("bot", "runner", "artbot", "storage", "slack_sdk")),
    ],
)
def test_importing_a_layer_loads_nothing_above_it(
    entry: str, must_not_load: tuple[str, ...]
) -> None:
    probe = (
        f"import sys, {entry}\n"
        f"loaded = sorted(m for m in sys.modules if m.split('.')[0] in {must_not_load!r} "
        f"or m in {must_not_load!r})\n"
        "print('\\n'.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


def test_the_layer_rules_catch_an_upward_import() -> None:
    assert not allowed("runner.records.store", "flows")
    assert not allowed("runner.jobs.service", "storage.sessions")
    assert not allowed("flows.conversation.engine", "storage.database")
    assert not allowed("bot.app", "artbot.cli")
    assert not allowed("bot.runs.service", "runner.jobs.service")
    assert not allowed("storage.database", "storage.sessions")
    assert not allowed("checks.dryrun.launch", "bot.app")
    assert not allowed("config.from_environment", "runner.settings")
    assert not allowed("flows.conversation.engine", "assistant")
    assert not allowed("assistant.conversation", "storage.sessions")
    assert not allowed("assistant.conversation", "bot.wizard.turns")
    assert allowed("bot.services", "runner.client")
    assert allowed("storage.sessions", "flows")
    assert allowed("artbot.cli", "bot.process.serve")
    assert allowed("bot.wizard.turns", "assistant")
    assert allowed("artbot.terminal.chat", "assistant")
