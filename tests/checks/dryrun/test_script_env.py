"""The dry run in the script's own environment: built from its PEP 723 block, cached, used.

The build tests need the registry (PyPI or UV_INDEX_URL): they fail, never skip, without it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

from checks.dryrun import dryrun_script
from checks.dryrun.command import add_dryrun_arguments
from checks.dryrun.script_env import (
    ScriptEnvError,
    artbot_cache_dir,
    is_light,
    script_environment,
)
from checks.script_format import formatted_script
from checks.script_metadata import ScriptDependencies
from tests.flows.matrix import answers_for

WANDB_LINE = '#     "wandb==0.25.0",'


def block(*dependencies: str) -> ScriptDependencies:
    return ScriptDependencies(">=3.11", dependencies)


def test_only_blocks_without_the_gpu_stack_are_light() -> None:
    assert is_light(block("openpipe-art==0.5.18", "wandb==0.25.0", "httpx"))
    assert not is_light(block("openpipe-art[backend]==0.5.18", "numpy"))
    assert not is_light(block("OpenPipe_Art [plotting, backend] == 0.5.18"))
    assert is_light(block("openpipe-art[plotting]==0.5.18"))


@pytest.mark.registry
def test_the_environment_holds_exactly_the_block_and_is_built_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dependencies = block("python-dotenv")
    first = script_environment(dependencies, cache_dir=tmp_path)
    assert first.built
    imports = "import dotenv\ntry:\n    import jinja2\nexcept ImportError:\n    print('isolated')"
    done = subprocess.run(
        [str(first.python), "-c", imports], capture_output=True, text=True, check=True
    )
    # jinja2 is in artbot's environment, not in the block: the script's env does not see it.
    assert done.stdout.strip() == "isolated"
    marker = json.loads((first.folder / "artbot-script-env.json").read_text())
    assert marker["dependencies"] == ["python-dotenv"]

    monkeypatch.setenv("PATH", "")  # no uv: the cached environment needs none
    again = script_environment(dependencies, cache_dir=tmp_path)
    assert (again.python, again.built) == (first.python, False)


def test_a_block_that_cannot_be_installed_leaves_nothing_behind_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")  # no network: the package is in no cache
    with pytest.raises(ScriptEnvError, match="artbot-no-such-package"):
        script_environment(block("artbot-no-such-package==1.0"), cache_dir=tmp_path)
    assert [p.suffix for p in (tmp_path / "script-envs").iterdir()] == [".lock"]


def test_the_dry_run_reports_an_environment_it_could_not_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UV_OFFLINE", "1")
    script = tmp_path / "rl_train.py"
    script.write_text(
        '# /// script\n# dependencies = ["artbot-no-such-package==1.0"]\n# ///\nprint("hi")\n'
    )
    report = dryrun_script(script, env_cache_dir=tmp_path / "cache")
    assert not report.ok and not report.own_environment
    [problem] = report.problems
    assert problem.startswith("the script's own environment could not be built:")
    assert "artbot-no-such-package" in problem
    # Nothing to build for a script without a block; --env script says so.
    plain = tmp_path / "plain.py"
    plain.write_text('print("hi")\n')
    report = dryrun_script(plain, environment="script", env_cache_dir=tmp_path / "cache")
    assert report.problems == (
        "the script's own environment could not be built: the script has no `# /// script` "
        "block to build its environment",
    )


def test_the_environment_cache_lives_in_artbots_cache_folder() -> None:
    assert artbot_cache_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/artbot")


def test_the_command_takes_the_environment_before_the_script() -> None:
    parser = argparse.ArgumentParser()
    add_dryrun_arguments(parser)
    args = parser.parse_args(["--env", "project", "rl_train.py", "--num-steps", "2"])
    assert args.dryrun_environment == "project"
    assert parser.parse_args(["rl_train.py"]).dryrun_environment == "auto"


@pytest.mark.slow
@pytest.mark.registry
def test_a_serverless_script_whose_block_forgets_wandb_fails_the_dry_run(tmp_path: Path) -> None:
    script = formatted_script(answers_for("single", "programmatic", "dataset", "serverless", False))
    assert WANDB_LINE in script
    forgetful = tmp_path / "rl_train.py"
    forgetful.write_text(
        "\n".join(line for line in script.splitlines() if WANDB_LINE not in line) + "\n"
    )

    report = dryrun_script(forgetful, workdir=tmp_path / "own")

    assert report.own_environment and not report.ok
    assert report.problems[0].startswith(
        "the script raised ModuleNotFoundError: No module named 'wandb'"
    )
    assert "add the package that provides this module to its dependencies" in report.problems[0]
    # artbot's environment lacks wandb too, but there the stand-in never asks for it: only the
    # script's own environment catches the forgotten dependency.
    assert dryrun_script(forgetful, workdir=tmp_path / "project", environment="project").ok
