"""A run's fix and final messages read the run as it is: the script's own GPU memory default,
and no step number where the run logged none."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.runs.display.cards import success_message
from bot.runs.flags import with_lower_gpu_memory
from bot.runs.store import Run

CUSTOMIZED = {
    "hyperparameters": "customize",
    "hyperparameter_values": {"gpu_memory_utilization": 0.5},
}


def test_retrying_with_less_gpu_memory_starts_from_the_scripts_own_default() -> None:
    assert with_lower_gpu_memory([], {}) == ["--gpu-memory-utilization", "0.55"]  # from 0.7
    assert with_lower_gpu_memory([], CUSTOMIZED) == ["--gpu-memory-utilization", "0.35"]


def test_a_second_retry_lowers_the_value_the_first_one_set_and_stops_at_the_floor() -> None:
    once = with_lower_gpu_memory(["--num-steps", "3"], CUSTOMIZED)
    assert once == ["--num-steps", "3", "--gpu-memory-utilization", "0.35"]
    twice = with_lower_gpu_memory(once, CUSTOMIZED)
    assert twice == ["--num-steps", "3", "--gpu-memory-utilization", "0.2"]
    assert with_lower_gpu_memory(twice, CUSTOMIZED) == twice


def a_run() -> Run:
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
    )


def test_the_final_message_names_the_step_only_when_the_run_logged_one() -> None:
    assert "Training finished at step 7." in success_message(a_run(), {"step": 7}).text
    without_step = success_message(a_run(), {"model": "math-solver-001"}).text
    assert "Training finished." in without_step and "None" not in without_step
    assert "Training finished." in success_message(a_run(), {"step": None}).text
