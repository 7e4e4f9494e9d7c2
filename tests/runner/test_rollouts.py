"""The best and worst validation rollouts of a step, from ART's trajectories files, as events."""

from __future__ import annotations

import asyncio
from pathlib import Path

from art.trajectories import Trajectory, TrajectoryGroup
from art.utils.trajectory_logging import write_trajectory_groups_parquet
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message import ChatCompletionMessage

from runner.progress.art_records import ArtProgress, Baseline
from runner.progress.validation_rollouts import MAX_CONTENT_CHARS, read_rollouts
from runner.schemas import EventType, ValidationRollouts
from tests.runner.conftest import Runner, RunnerFactory, job_environ

OPENAI_KEY = "sk-proj-" + "R0llout5ecret" * 3


def _trajectory(reward: float, question: str, answer: str, *, tool: bool = False) -> Trajectory:
    calls = (
        [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q": "capital"}'},
            }
        ]
        if tool
        else None
    )
    choice = Choice(
        finish_reason="tool_calls" if tool else "stop",
        index=0,
        message=ChatCompletionMessage.model_validate(
            {"role": "assistant", "content": answer, "tool_calls": calls}
        ),
    )
    return Trajectory(
        messages_and_choices=[{"role": "user", "content": question}, choice],
        reward=reward,
        metrics={"correct": reward > 0},
    )


def _write_with_art(path: Path, groups: list[TrajectoryGroup]) -> None:
    """ART's own writer, as `Model.log` calls it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_trajectory_groups_parquet(groups, path)


def _groups() -> list[TrajectoryGroup]:
    async def build() -> list[TrajectoryGroup]:
        return [
            TrajectoryGroup(
                [_trajectory(0.5, "2+2?", "4"), _trajectory(-1.0, "Capital of France?", "Rome")]
            ),
            TrajectoryGroup(
                [_trajectory(0.9, "Capital of Peru?", "Lima", tool=True), _trajectory(0.1, "?", "")]
            ),
        ]

    return asyncio.run(build())


def test_the_best_and_worst_rollouts_of_a_file_written_by_art_itself(tmp_path: Path) -> None:
    path = tmp_path / "0003.parquet"
    _write_with_art(path, _groups())

    rollouts = read_rollouts(path, 3)

    assert rollouts is not None
    assert (rollouts.step, rollouts.count) == (3, 4)
    assert rollouts.best.reward == 0.9
    assert [(m.role, m.content, m.trainable) for m in rollouts.best.messages] == [
        ("user", "Capital of Peru?", False),
        ("assistant", "Lima", True),
    ]
    assert rollouts.best.messages[1].tool_calls == [
        {"function": {"name": "search", "arguments": '{"q": "capital"}'}}
    ]
    assert rollouts.best.metrics == {"correct": 1.0}
    assert rollouts.worst.reward == -1.0
    assert rollouts.worst.messages[1].content == "Rome"
    assert not rollouts.best.cut


def test_a_huge_rollout_is_cut_to_a_bounded_size(tmp_path: Path) -> None:
    path = tmp_path / "0001.parquet"

    async def build() -> list[TrajectoryGroup]:
        long = Trajectory(
            messages_and_choices=[{"role": "user", "content": "x" * 100_000}] * 300, reward=1.0
        )
        return [TrajectoryGroup([long, _trajectory(0.0, "q", "a")])]

    _write_with_art(path, asyncio.run(build()))

    rollouts = read_rollouts(path, 1)

    assert rollouts is not None and rollouts.best.cut
    assert len(rollouts.best.messages) == 40
    assert all(len(m.content) < MAX_CONTENT_CHARS + 100 for m in rollouts.best.messages)
    assert len(rollouts.model_dump_json()) < 300_000


def test_a_half_written_file_waits_and_a_resumed_runs_earlier_files_are_not_news(
    tmp_path: Path,
) -> None:
    model = tmp_path / ".art" / "proj" / "models" / "m1"
    _write_with_art(model / "trajectories" / "val" / "0002.parquet", _groups())
    baseline = Baseline.capture(tmp_path)
    progress = ArtProgress(tmp_path, Baseline.from_json(baseline.to_json()))
    assert progress.poll() == []

    whole = tmp_path / "whole.parquet"
    _write_with_art(whole, _groups())
    data = whole.read_bytes()
    path = model / "trajectories" / "val" / "0004.parquet"
    path.write_bytes(data[: len(data) // 2])  # ART's writer is mid-file
    assert progress.poll() == []
    path.write_bytes(data)

    events = progress.poll()

    assert [(kind, data["step"]) for kind, data in events] == [(EventType.rollouts, 4)]
    assert ValidationRollouts.model_validate(events[0][1]).best.reward == 0.9
    assert progress.poll() == []


def test_a_job_reports_the_best_and_worst_rollouts_of_each_validation(runner: Runner) -> None:
    job_id = runner.submit("train_ok.py", args=["--steps", "4", "--val-every", "2"])
    events = runner.follow(job_id)

    reported = [
        ValidationRollouts.model_validate(e.data) for e in events if e.type is EventType.rollouts
    ]
    assert [(r.step, r.count, r.best.reward, r.worst.reward) for r in reported] == [
        (2, 4, 2 / 20 + 0.3, 2 / 20 - 0.2),
        (4, 4, 4 / 20 + 0.3, 4 / 20 - 0.2),
    ]
    assert reported[0].best.messages[-1].content == "Answer 1 of step 2."
    assert reported[0].best.messages[2].tool_calls[0]["function"]["name"] == "lookup"

    latest = runner.client.rollouts(job_id)
    assert latest.steps == [2, 4] and latest.rollouts == reported[1]
    assert runner.client.rollouts(job_id, 2).rollouts == reported[0]
    assert runner.client.rollouts(job_id, 3).rollouts is None


def test_a_secret_said_in_a_rollout_is_redacted(make_runner: RunnerFactory) -> None:
    runner = make_runner(environ=job_environ(OPENAI_API_KEY=OPENAI_KEY))
    job_id = runner.submit(
        "train_ok.py",
        args=["--steps", "2", "--rollout-text", f" My key is {OPENAI_KEY}."],
        required_env=["OPENAI_API_KEY"],
    )
    events = runner.follow(job_id)

    (rollouts,) = [e.data for e in events if e.type is EventType.rollouts]
    said = rollouts["best"]["messages"][-1]["content"]
    assert OPENAI_KEY not in said and "[REDACTED" in said
    assert OPENAI_KEY not in runner.client.rollouts(job_id).model_dump_json()
