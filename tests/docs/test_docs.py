"""The documentation builds strictly, says only what is true of the tree, and shows nothing that
looks runnable without running it (tests/docs/test_examples.py runs what it shows).

The generated pages (configuration, commands, both wizards' questions, layers, layout) come from
docs/hooks.py; these tests hold the code to what they need: a description for every setting, a
docstring for every module.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.blocks import (
    LOOKS_RUNNABLE,
    REFUSED,
    ROOT,
    RUNNABLE,
    Block,
    all_blocks,
    blocks_of,
    documentation_files,
)

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
FOLDERS = (*PACKAGES, "templates", "manifests", "benchmarks", "tests", "docs", "shared")
HOWS = ("exit", "server", "runner", "skip")
README_LIMIT = 300
THE_TWO_COMMANDS = (
    "uv run artbot chat      # the train-rl wizard in your terminal, on embedded defaults "
    "(SQLite in your data dir)",
    "uv run --extra ray pytest   # every test, CPU only (the Ray executor's on a local Ray head; "
    "PostgreSQL tests too when ARTBOT_TEST_POSTGRES_URL is set)",
)


@functools.cache
def hooks() -> ModuleType:
    """docs/hooks.py, loaded as MkDocs loads it: by its path."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the site -------------------------------------------------------------------------------


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, a page outside the nav, or a generated
    part the code cannot give (a setting without a description) fails it."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    built = (tmp_path / "site" / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "ARTBOT_RUNNER_TOKEN" in built and "generated:" not in built
    assert not list((tmp_path / "site").rglob("*.py")), "the hooks are not a page"


def test_every_page_is_in_the_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")]
    assert [page for page in pages if page not in nav] == []


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < README_LIMIT
    for line in THE_TWO_COMMANDS:
        assert line in readme.splitlines()


# ---- blocks: runnable ones are run, or say why not --------------------------------------------


@pytest.mark.parametrize("block", all_blocks(), ids=lambda block: block.where)
def test_a_block_says_what_it_is_and_how_it_runs(block: Block) -> None:
    assert block.language, "a fenced block names its language (text, console, python, ...)"
    assert block.language not in REFUSED, "a shell session is `console`, a script `bash`"
    if block.marker is not None:
        how = block.marker.split()[0].rstrip(":")
        assert how in HOWS, f"unknown docs-test marker {block.marker!r}"
        assert block.language in RUNNABLE, "a docs-test marker stands before a runnable block"
        if how == "skip":
            assert block.skip_reason, "a skipped block says why"
        if how == "exit":
            assert re.fullmatch(r"exit \d+", block.marker)
            assert block.language == "console"
        if how == "server":
            assert re.fullmatch(r"server /\S*", block.marker)
            assert block.language == "console"
        if how == "runner":
            assert block.language == "python"
    if block.language == "console":
        assert block.commands(), "a console block holds `$ ` commands"
    elif block.language not in RUNNABLE:
        looks = [line for line in block.text.splitlines() if LOOKS_RUNNABLE.match(line)]
        assert looks == [], "these look like commands: make it a `console` block (run or skipped)"


@pytest.mark.parametrize(
    "path", documentation_files(), ids=lambda path: str(path.relative_to(ROOT))
)
def test_a_file_a_page_shows_is_used_by_a_later_block(path: Path) -> None:
    blocks = blocks_of(path)
    unused = [
        block.title
        for index, block in enumerate(blocks)
        if block.title is not None
        and not any(block.title in later.text for later in blocks[index + 1 :] if later.runnable)
    ]
    assert unused == []


def test_the_blocks_parse_as_the_tests_read_them() -> None:
    block = Block(
        path=ROOT / "README.md",
        line=1,
        language="console",
        text="$ uv run artbot chat \\\n  --session demo\nQuestion?\n> 2\nNext?\n$ ls\n",
    )
    first, second = block.commands()
    assert first.text == "uv run artbot chat \\\n  --session demo"
    assert first.typed == ("2",) and first.shown == ("Question?", "Next?")
    assert second.text == "ls" and second.typed == () and second.shown == ()


# ---- what the prose names exists --------------------------------------------------------------


def inline_code(path: Path) -> list[str]:
    """The inline code spans of a page, outside its fenced blocks."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^([ \t]*)(`{3,}|~{3,})[^\n]*\n.*?^\1\2[ \t]*$", "", text, flags=re.M | re.S)
    return re.findall(r"(?<!`)`([^`\n]+)`(?!`)", text)


def module_file(dotted: str) -> Path | None:
    path = ROOT.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def named_but_missing(span: str) -> str | None:
    """Why a path or a dotted name of ours that `span` names does not exist (None when it does,
    or when `span` names none)."""
    if re.fullmatch(rf"({'|'.join(FOLDERS)})/[\w./-]*", span):
        return None if (ROOT / span.rstrip("/")).exists() else f"no such file: {span}"
    match = re.fullmatch(rf"((?:{'|'.join(PACKAGES)})(?:\.\w+)+)(\(.*\))?", span)
    if match is None:
        return None
    parts = match[1].split(".")
    for cut in range(len(parts), 0, -1):
        found = module_file(".".join(parts[:cut]))
        if found is None:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        source = found.read_text(encoding="utf-8")
        defined = re.search(rf"^\s*(def|class|async def) {rest[0]}\b|^{rest[0]}\b", source, re.M)
        exported = re.search(rf"\b{rest[0]}\b", source)
        return None if defined or exported else f"{'.'.join(parts[:cut])} has no {rest[0]}"
    return f"no such module: {match[1]}"


@pytest.mark.parametrize(
    "path", documentation_files(), ids=lambda path: str(path.relative_to(ROOT))
)
def test_the_files_and_modules_a_page_names_exist(path: Path) -> None:
    missing = [why for span in inline_code(path) if (why := named_but_missing(span))]
    assert missing == []


def test_the_check_of_names_tells_a_moved_module() -> None:
    assert named_but_missing("flows/conversation/engine.py") is None
    assert named_but_missing("flows/no_such_module.py") == "no such file: flows/no_such_module.py"
    assert named_but_missing("runner.client.RunnerClient") is None
    assert named_but_missing("runner.no_such.Thing") == "runner has no no_such"
    assert named_but_missing("nowhere.at.all") is None  # not ours
    assert named_but_missing("flows.render_script(answers)") is None
    assert named_but_missing("uv run artbot chat") is None


# ---- generated pages --------------------------------------------------------------------------


def source_modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_the_layout_page_names_every_package_and_module() -> None:
    layout = hooks().layout()
    unnamed = []
    for path in source_modules():
        package, *inner = path.relative_to(ROOT).parts
        shown = "/".join(inner)
        if path.name == "__init__.py":
            shown = "/".join(inner[:-1]) + "/" if inner[:-1] else ""
            if not shown:
                if f"## `{package}/`" not in layout:
                    unnamed.append(package)
                continue
        section = layout.split(f"## `{package}/`", 1)[1].split("\n## ", 1)[0]
        if f"| `{shown}` |" not in section:
            unnamed.append(str(path.relative_to(ROOT)))
    assert unnamed == []


def test_every_module_has_a_docstring() -> None:
    """What the layout page says of a module is its docstring: a module without one has nothing
    to say there."""
    missing = [
        str(path.relative_to(ROOT))
        for path in source_modules()
        if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert missing == []
    for path in source_modules():
        hooks().module_summary(path)


def test_the_configuration_table_has_every_setting_with_its_meaning() -> None:
    generated = hooks()
    table = generated.configuration()
    classes = generated.settings_classes()
    assert len(classes) >= 3  # the bot's, the runner's, the assistant's
    for _, cls in classes:
        for name in cls.model_fields:
            variable = generated.variable_name(cls, name)
            row = next(line for line in table.splitlines() if line.startswith(f"| `{variable}` |"))
            meaning = row.split(" | ")[1]
            assert meaning.strip(), variable


def test_a_setting_without_a_description_stops_the_build() -> None:
    from pydantic import Field
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class Undescribed(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="ARTBOT_EXAMPLE_")
        limit: int = Field(default=3)

    generated = hooks()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(generated, "settings_classes", lambda: [("bot", Undescribed)])
        with pytest.raises(generated.GeneratedPageError, match="ARTBOT_EXAMPLE_LIMIT"):
            generated.configuration()


def test_the_variables_read_outside_the_settings_are_read() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    extra = page.split("A few more variables", 1)[1]
    names = re.findall(r"^\| `([A-Z_]+)` \|", extra, re.M)
    assert names
    source = "\n".join(path.read_text(encoding="utf-8") for path in source_modules())
    assert [name for name in names if f'"{name}"' not in source] == []


@pytest.mark.parametrize("marker", ["questions", "questions-sft"])
def test_the_questions_table_has_every_question(marker: str) -> None:
    from flows import TRAIN_RL, TRAIN_SFT

    flow = TRAIN_SFT if marker == "questions-sft" else TRAIN_RL
    table = hooks().GENERATED[marker]()
    assert [step.id for step in flow.steps if f"| `{step.id}` |" not in table] == []
    assert [entry.id for entry in flow.given if f"`{entry.id}`" not in table] == []
