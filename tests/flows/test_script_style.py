"""Every rendered variant reads like a careful engineer wrote it: in ruff's format."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ruff import find_ruff_bin

from flows import render_script
from flows.script_format import ScriptFormatError, ruff_formatted
from tests.checks.test_generated_scripts import extra_variants
from tests.flows.matrix import answers_for, matrix, variant_id


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("scripts")
    variants = {variant_id(cell): answers_for(*cell) for cell in matrix()}
    variants.update(extra_variants(tmp_path_factory.mktemp("data")))
    paths = []
    for name, answers in variants.items():
        path = folder / f"{name.replace('-', '_')}.py"
        path.write_text(render_script(answers))
        paths.append(path)
    return paths


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_ruff_bin(), *args], capture_output=True, text=True, check=False, timeout=120
    )


def test_every_variant_is_in_ruffs_format(scripts: list[Path]) -> None:
    assert len(scripts) == 72 + 4
    done = ruff("format", "--isolated", "--check", "--target-version", "py311", *map(str, scripts))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_formatter_refuses_what_does_not_parse() -> None:
    with pytest.raises(ScriptFormatError, match="ruff format failed"):
        ruff_formatted("def broken(:\n")
    assert ruff_formatted("x = {'a':1}\n") == 'x = {"a": 1}\n'
