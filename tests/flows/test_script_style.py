"""Every rendered variant reads like a careful engineer wrote it: in ruff's format, no unused
`noqa`, no unused parameter in the code the template writes, no dead import."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ruff import find_ruff_bin

from checks.script_format import ScriptFormatError, formatted_script, ruff_formatted
from tests.checks.test_generated_scripts import extra_variants
from tests.flows.matrix import answers_for, matrix, variant_id

# The parameters of the user's reward are the user's (or, for a reward expression, the
# contract the expression is written against): the only function an unused one may stay in.
USERS_FUNCTIONS = {"compute_reward"}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("scripts")
    variants = {variant_id(cell): answers_for(*cell) for cell in matrix()}
    variants.update(extra_variants(tmp_path_factory.mktemp("data")))
    paths = []
    for name, answers in variants.items():
        path = folder / f"{name.replace('-', '_')}.py"
        path.write_text(formatted_script(answers))
        paths.append(path)
    return paths


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_ruff_bin(), *args], capture_output=True, text=True, check=False, timeout=120
    )


def test_every_variant_is_in_ruffs_format(scripts: list[Path]) -> None:
    assert len(scripts) == 72 + 5  # the matrix and the extra variants
    done = ruff("format", "--isolated", "--check", "--target-version", "py311", *map(str, scripts))
    assert done.returncode == 0, done.stdout + done.stderr


def function_at(path: Path, line: int) -> str:
    """The name of the `def` that the parameter on `line` belongs to."""
    lines = path.read_text().splitlines()
    for text in reversed(lines[:line]):
        stripped = text.lstrip()
        if stripped.startswith(("def ", "async def ")):
            return stripped.removeprefix("async ").removeprefix("def ").split("(")[0]
    raise AssertionError(f"{path}:{line}: no function above")


def test_no_variant_has_an_unused_noqa_parameter_or_import(scripts: list[Path]) -> None:
    done = ruff(
        "check",
        "--isolated",
        "--no-cache",
        "--select",
        "RUF100,ARG,F,E402",
        "--target-version",
        "py311",
        "--output-format",
        "json",
        *map(str, scripts),
    )
    findings = [
        f"{Path(f['filename']).name}:{f['location']['row']}: {f['code']} {f['message']}"
        for f in json.loads(done.stdout)
        if not (
            f["code"].startswith("ARG")
            and function_at(Path(f["filename"]), f["location"]["row"]) in USERS_FUNCTIONS
        )
    ]
    assert not findings, "\n".join(findings)


def test_environment_checks_exist_only_where_something_is_required(scripts: list[Path]) -> None:
    plain = formatted_script(answers_for("single", "programmatic", "dataset", "local", False))
    assert "def check_environment" not in plain and "required" not in plain
    serverless = formatted_script(
        answers_for("single", "programmatic", "dataset", "serverless", False)
    )
    assert "def check_environment() -> None:" in serverless
    assert 'required["WANDB_API_KEY"]' in serverless


def test_the_formatter_refuses_what_does_not_parse() -> None:
    with pytest.raises(ScriptFormatError, match="ruff format failed"):
        ruff_formatted("def broken(:\n")
    assert ruff_formatted("x = {'a':1}\n") == 'x = {"a": 1}\n'
