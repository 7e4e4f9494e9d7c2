"""Every variant of the spec's matrix renders, passes `artbot check`, and passes `artbot dryrun`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checks.dryrun import dryrun_script
from checks.script_check import check_scripts
from checks.script_format import formatted_script
from tests.flows.matrix import MATH_ROWS, TOOLS, answers_for, matrix, variant_id

GENERATOR = (
    "def generate_scenario(rng):\n"
    "    a, b = rng.randint(1, 9), rng.randint(1, 9)\n"
    "    return {'prompt': f'What is {a} + {b}?', 'answer': str(a + b)}\n"
)

SUBMIT_TOOL = {
    "type": "function",
    "function": {
        "name": "submit",
        "description": "Submit the sum; this ends the episode.",
        "parameters": {"type": "object", "properties": {"total": {"type": "string"}}},
    },
}


def extra_variants(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Branches outside the matrix: other data sources, splits, HTTP tools, customized values."""
    train_file, val_file = data_dir / "train.jsonl", data_dir / "val.jsonl"
    train_file.write_text("\n".join(json.dumps(r) for r in MATH_ROWS[:6]) + "\n")
    val_file.write_text("\n".join(json.dumps(r) for r in MATH_ROWS[6:]) + "\n")
    generator = answers_for("single", "programmatic", "open_ended", "local", False)
    generator.update(
        scenario_source="generator",
        scenario_generator=GENERATOR,
        val_generated="generated",
        val_every=2,
        val_max_groups=2,
    )
    for key in ("scenario_rows", "train_split", "val_split"):
        generator.pop(key)
    files = answers_for("single", "ruler", "dataset", "serverless", False)
    files.update(
        scenario_source="runner_file",
        scenarios_path=str(train_file),
        train_split="separate",
        train_source=str(train_file),
        val_split="separate",
        val_source=str(val_file),
        val_every=1,
        val_max_groups=2,
    )
    files.pop("scenario_rows")
    # A long game (over 100 turns) that tells the agent its invalid moves and plays on.
    fraction = answers_for("game", "programmatic", "open_ended", "local", True)
    fraction.update(
        train_split="fraction",
        train_fraction=0.5,
        invalid_action="continue",
        max_turns=150,
        hyperparameters="customize",
        hyperparameter_values={
            "rollouts_per_group": 3,
            "learning_rate": 2e-5,
            "gpu_memory_utilization": 0.5,
            "max_completion_tokens": 2048,
        },
    )
    http_tools = answers_for("tools", "ruler", "dataset", "local", True)
    http_tools.update(
        tool_execution="http",
        tool_urls={"add": "http://127.0.0.1:9/add"},
        ruler_rubric="- A correct sum scores 1.\n- Fewer tool calls score higher.",
    )
    http_tools.pop("tool_code")
    # HTTP tools with a final-answer tool of one parameter: the answer comes without HTTP.
    http_final = answers_for("tools", "programmatic", "open_ended", "serverless", False)
    http_final.update(
        tools=[*TOOLS, SUBMIT_TOOL],
        final_answer_tool="submit",
        tool_execution="http",
        tool_urls={"add": "http://127.0.0.1:9/add"},
    )
    http_final.pop("tool_code")
    return {
        "generator": generator,
        "runner-files": files,
        "fractions-custom-hp": fraction,
        "http-tools": http_tools,
        "http-final-answer": http_final,
    }


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("scripts")
    variants = {variant_id(cell): answers_for(*cell) for cell in matrix()}
    variants.update(extra_variants(tmp_path_factory.mktemp("data")))
    paths = {}
    for name, answers in variants.items():
        path = folder / f"{name.replace('-', '_')}.py"
        path.write_text(formatted_script(answers))
        paths[name] = path
    return paths


def test_every_variant_passes_check(rendered: dict[str, Path]) -> None:
    assert len(rendered) == 72 + 5
    reports = check_scripts(list(rendered.values()))
    # The matrix's user code is clean too, so not even a note: the template's code is held to
    # every rule whichever lines `artbot check` counts as the user's.
    failures = [report.format() for report in reports if not report.ok or report.notes]
    assert not failures, "\n".join(failures)


DRYRUN_NAMES = [variant_id(cell) for cell in matrix()] + [
    "generator",
    "runner-files",
    "fractions-custom-hp",
    "http-tools",
    "http-final-answer",
]
# ServerlessBackend scripts dry-run in their own environment, built from the registry once.
DRYRUN_VARIANTS = [
    pytest.param(name, marks=pytest.mark.registry)
    if "serverless" in name or name == "runner-files"
    else name
    for name in DRYRUN_NAMES
]


@pytest.mark.slow
@pytest.mark.parametrize("name", DRYRUN_VARIANTS)
def test_every_variant_passes_dryrun(rendered: dict[str, Path], name: str, tmp_path: Path) -> None:
    data_files = sorted(rendered[name].parent.parent.glob("data*/*.jsonl"))
    report = dryrun_script(rendered[name], workdir=tmp_path, data_files=data_files)
    assert report.ok, report.format()
    # ServerlessBackend scripts run in their own PEP 723 environment (built once, cached);
    # LocalBackend's block needs the GPU stack, so those run in artbot's.
    assert report.own_environment == (
        "serverless" in name or name in ("runner-files", "http-final-answer")
    )
    assert report.steps_trained >= 1
    assert report.rollouts > 0 and report.reward_min is not None and report.reward_max is not None
    assert report.reward_max > report.reward_min  # something to learn from
    no_validation = ("http-tools", "http-final-answer")
    if ("noval" not in name and name not in no_validation) or name in ("generator", "runner-files"):
        assert report.validations >= 1, report.format()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reward_code", "expected"),
    [
        ({"kind": "expression", "code": "1.0 / 0"}, "ZeroDivisionError"),
        (
            {
                "kind": "function",
                "code": "def compute_reward(scenario, answer, trajectory):\n"
                "    trajectory.metrics['verdict'] = 'right'\n    return 1.0\n",
            },
            "metrics must be numbers or bools",
        ),
    ],
)
def test_a_broken_reward_is_caught_by_the_dry_run(
    reward_code: dict[str, str], expected: str, tmp_path: Path
) -> None:
    answers = answers_for(
        "single", "programmatic", "dataset", "local", False, reward_logic=reward_code
    )
    script = tmp_path / "rl_train.py"
    script.write_text(formatted_script(answers))
    report = dryrun_script(script, workdir=tmp_path / "run")
    assert not report.ok
    assert report.first_error is not None and expected in report.first_error


@pytest.mark.slow
def test_the_dry_run_warns_when_checkpoints_are_ranked_by_a_metric_never_logged(
    tmp_path: Path,
) -> None:
    script = formatted_script(answers_for("single", "programmatic", "dataset", "local", False))
    ranked_by_train = tmp_path / "ranked.py"
    ranked_by_train.write_text(script)
    by_default = tmp_path / "default.py"
    by_default.write_text(
        script.replace(
            'delete_checkpoints(best_checkpoint_metric="train/reward")', "delete_checkpoints()"
        )
    )
    assert by_default.read_text() != script
    quiet = dryrun_script(ranked_by_train, workdir=tmp_path / "a")
    warned = dryrun_script(by_default, workdir=tmp_path / "b")
    assert quiet.ok and not any("ranks checkpoints by" in w for w in quiet.warnings)
    assert warned.ok and any("ranks checkpoints by" in w for w in warned.warnings)
