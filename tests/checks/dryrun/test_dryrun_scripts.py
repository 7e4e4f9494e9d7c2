"""`dryrun_script` on real ART scripts: a child process, the real `art`, the stand-ins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checks.dryrun import DryrunReport, dryrun_script

SCRIPTS = Path(__file__).parent / "scripts"


def line_of(name: str, needle: str) -> int:
    """The 1-based line of the only line of fixture `name` that contains `needle`."""
    lines = (SCRIPTS / f"{name}.py").read_text().splitlines()
    [number] = [n for n, text in enumerate(lines, 1) if needle in text]
    return number


def dryrun(name: str, **kwargs: object) -> DryrunReport:
    report = dryrun_script(SCRIPTS / f"{name}.py", **kwargs)  # type: ignore[arg-type]
    print(report.format())  # shown by pytest when an assertion fails
    return report


def test_a_single_turn_script_trains_and_validates_every_step(tmp_path: Path) -> None:
    report = dryrun("single_turn", workdir=tmp_path)

    assert report.ok, report.problems
    assert report.exit_code == 0
    assert report.steps_trained == 3
    # 3 steps x 2 groups x 4 rollouts for training, the same again for validation.
    assert (report.rollouts, report.rollout_exceptions) == (48, 0)
    assert (report.reward_min, report.reward_max) == (0.0, 1.0)
    assert report.validations == 3
    assert report.last_val_reward is not None
    assert report.first_error is None
    assert set(report.notes) >= {
        "capped --num-epochs 5 -> 1",
        "capped --groups-per-step 4 -> 2",
        "capped --rollouts-per-group 6 -> 4",
        "capped --dataset-size None -> 8",
    }
    assert "Trained first-word-001 to step 3: first-word-001@3" in report.output_tail
    model_dir = tmp_path / ".art" / "dryrun-fixtures" / "models" / "first-word-001"
    assert json.loads((model_dir / "model.json").read_text())["name"] == "first-word-001"
    # delete_checkpoints kept the newest and the best step, as LocalBackend does.
    kept = sorted(p.name for p in (model_dir / "checkpoints").iterdir())
    assert kept[-1] == "0003" and len(kept) <= 2
    rows = [json.loads(line) for line in (model_dir / "history.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train/reward" in r] == [1, 2, 3]
    assert all(r["loss/train"] >= 0 for r in rows if "loss/train" in r)


def test_a_tool_calling_script_with_ruler_and_serverless_backend_is_ok(tmp_path: Path) -> None:
    report = dryrun("tool_calling_ruler", workdir=tmp_path)

    assert report.ok, report.problems
    assert report.steps_trained == 3
    assert report.notes == ("capped --num-steps 50 -> 3",)
    assert report.rollouts == 24
    # One judge call per group; the judge scores differ inside every group.
    assert report.judge_requests == 6
    assert report.tool_call_replies > 0
    assert report.reward_min is not None and report.reward_max is not None
    assert 0 < report.reward_min < report.reward_max < 1
    assert report.validations == 0 and report.last_val_reward is None
    model_dir = tmp_path / ".art" / "dryrun-fixtures" / "models" / "librarian-001"
    assert (model_dir / "checkpoints" / "0003").is_dir()
    assert "Done: librarian-001@3" in report.output_tail


def test_a_reward_that_raises_in_every_rollout_fails_with_its_traceback() -> None:
    report = dryrun("reward_raises_always")

    assert not report.ok
    assert report.exit_code == 0  # max_exceptions swallowed everything: the script "worked"
    assert (report.rollouts, report.rollout_exceptions) == (0, 16)
    assert "every rollout raised (16 of 16): there was nothing to train on" in report.problems
    assert report.first_error is not None
    # Both prompts' rollouts raise; which is recorded first is the order they ran in.
    assert any(
        f"KeyError: {prompt.upper()!r}" in report.first_error
        for prompt in ("Name a colour: red or blue?", "Pick a number: 3 or 7?")
    ), report.first_error
    assert "reward_raises_always.py" in report.first_error


def test_a_reward_that_raises_in_some_rollouts_is_a_warning_not_a_failure() -> None:
    report = dryrun("reward_raises_sometimes")

    assert report.ok, report.problems
    assert (report.rollouts, report.rollout_exceptions) == (12, 4)
    assert report.warnings[0].startswith("4 of 16 rollouts raised and were swallowed")
    assert report.first_error is not None
    assert "ValueError: flaky grader could not parse" in report.first_error
    formatted = report.format()
    assert "dry run ok" in formatted
    assert "warning, not a failure" in formatted
    assert "flaky grader" in formatted


def test_a_constant_reward_succeeds_with_nothing_trainable() -> None:
    report = dryrun("constant_reward")

    assert report.exit_code == 0
    assert report.steps_trained == 2
    assert (report.reward_min, report.reward_max) == (1.0, 1.0)
    assert not report.ok
    [problem] = report.problems
    assert problem.startswith("it succeeds with nothing trainable")
    assert "(every reward was 1)" in problem


def test_a_dict_in_place_of_the_choice_is_reported() -> None:
    report = dryrun("dict_not_choice")

    assert report.exit_code == 0
    assert not report.ok
    [problem] = report.problems
    assert problem.startswith("a trajectory has no Choice objects (step 1, group 1, trajectory 1)")
    assert "append response.choices[0] itself" in problem
    assert problem.endswith("[16 times]")


def test_a_crash_at_import_is_reported_with_its_traceback_and_a_hint() -> None:
    report = dryrun("import_crash")

    assert report.exit_code == 1
    assert report.steps_trained == 0
    assert not report.ok
    assert report.problems[0].startswith(
        "the script raised ImportError: cannot import name 'LocalBackend' from 'art'"
    )
    assert "hint: art.LocalBackend is listed in art.__all__ but never defined" in report.problems[0]
    assert "it trained zero steps: backend.train(...) never completed" in report.problems
    assert report.first_error is not None
    assert report.first_error.startswith("Traceback (most recent call last):")
    line = line_of("import_crash", "from art import LocalBackend")
    assert f'import_crash.py", line {line}, in <module>' in report.first_error
    assert "bootstrap.py" not in report.first_error
    assert "ImportError" in report.output_tail


def test_a_loop_without_size_flags_is_stopped_cleanly_by_the_trainers_hard_cap() -> None:
    report = dryrun("no_flags_long_loop", max_steps=1)

    assert report.ok, report.problems
    assert report.exit_code == 0
    assert report.steps_trained == 2  # the hard cap is twice --max-steps
    assert report.notes == (
        "the stand-in trainer stopped the run after 2 steps (its hard cap); code after the "
        "training loop did not run",
    )
    assert "never printed" not in report.output_tail


@pytest.mark.slow
def test_a_script_that_loops_forever_is_killed_at_the_timeout() -> None:
    # Long enough for a loaded CI host to start ART and train the first step before the loop.
    report = dryrun("loops_forever", timeout_s=45)

    assert report.exit_code is None
    assert not report.ok
    assert report.problems[0] == "it timed out after 45 s and was killed: after 1 trained step"
    assert report.steps_trained == 1
    assert report.stuck_at is not None
    line = line_of("loops_forever", "response = await")
    assert f'loops_forever.py", line {line}, in rollout' in report.stuck_at
    assert "timed out" in report.format()
