"""The before-and-after table: the base model (step 0) against the best checkpoint (highest
val/reward) and the last one, as the run's validation points recorded them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.runs.display.cards import before_after_table, failure_message, success_message
from bot.runs.store import Run
from runner.schemas import Failure


def point(step: int, reward: float, **metrics: float) -> dict[str, Any]:
    val_metrics = {"val/reward": reward, **{f"val/{k}": v for k, v in metrics.items()}}
    return {"step": step, "train": None, "val": reward, "val_metrics": val_metrics}


def a_run(points: list[dict[str, Any]]) -> Run:
    return Run(
        approval_id=1,
        team="T0001",
        channel="C0001",
        thread="1712345678.000100",
        owner="U0OWNER",
        script_name="math-solver-001.py",
        script_sha256="0" * 64,
        backend="local",
        state="succeeded",
        created_at=datetime.now(UTC),
        points=points,
    )


def cells(table: str) -> list[list[str]]:
    return [line.split() for line in table.split("```")[1].splitlines()]


TRAINED = [
    point(0, 0.25, correct=0.5, trajectories=8, exception_rate=0.0),
    {"step": 1, "train": 0.3, "val": None},
    point(2, 0.75, correct=0.875),
    point(4, 0.5, correct=1.0, reward_std_dev=0.2),
]


def test_the_best_checkpoint_is_the_highest_val_reward_and_the_last_is_the_latest_step() -> None:
    assert cells(before_after_table(TRAINED)) == [
        ["val", "base", "best@2", "last@4"],
        ["reward", "0.250", "0.750", "0.500"],
        ["vs", "base", "+0.500", "+0.250"],
        ["correct", "0.500", "0.875", "1.000"],
        ["vs", "base", "+0.375", "+0.500"],
    ]


def test_a_run_without_the_base_validation_shows_no_change_and_a_failure_no_table() -> None:
    without_base = TRAINED[1:]
    assert cells(before_after_table(without_base))[:3] == [
        ["val", "base", "best@2", "last@4"],
        ["reward", "-", "0.750", "0.500"],
        ["correct", "-", "0.875", "1.000"],
    ]
    failure = Failure(kind="unknown", summary="The job failed.")  # type: ignore[arg-type]
    assert "Before and after" not in failure_message(a_run(without_base), failure).text
    assert "Before and after" in failure_message(a_run(TRAINED), failure).text


def test_no_table_before_a_trained_checkpoint_was_validated() -> None:
    assert before_after_table([]) == ""
    assert before_after_table([point(0, 0.25)]) == ""
    assert "Before and after" not in success_message(a_run([point(0, 0.25)]), {"step": 1}).text


def test_the_table_sits_in_the_success_message_before_the_usage_snippets() -> None:
    text = success_message(a_run(TRAINED), {"step": 4}).text
    assert text.index("*Before and after*") < text.index("*Python*")
    # Narrow enough for a phone: no line of the table wider than 40 characters.
    assert max(len(line) for line in before_after_table(TRAINED).split("```")[1].splitlines()) <= 40
