"""The stall watchdog: a job that goes quiet is reported stalled once per stall, with what it was
doing and its last lines (secrets out); one that keeps moving never is. The rule and the
once-per-stall bookkeeping on a driven clock; a real job on a real runner with a 1 s threshold."""

from __future__ import annotations

import time

from runner.progress.stall import StallRule, StallWatch, last_lines, phase_of
from runner.schemas import EventType, JobEvent, JobState
from tests.runner.conftest import RunnerFactory, job_environ

SECRET = "sk-stall-test-secret-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def step(n: int) -> tuple[EventType, dict[str, object]]:
    return (EventType.step, {"step": n})


def test_a_job_that_keeps_printing_is_never_stalled() -> None:
    clock = Clock()
    watch = StallWatch(StallRule(after_s=10, floor_s=1, step_factor=3), clock)
    for _ in range(100):
        clock.now += 9
        watch.saw([], output_bytes=1)
        assert watch.check(lambda: "") is None


def test_a_stall_is_told_once_and_again_only_after_progress() -> None:
    clock = Clock()
    watch = StallWatch(StallRule(after_s=10, floor_s=1, step_factor=3), clock)
    clock.now = 9.9
    watch.saw([], 0)
    assert watch.check(lambda: "") is None
    clock.now = 10
    watch.saw([], 0)
    stalled = watch.check(lambda: "loading\ngather: 3/8\r gather: 5/8\n")
    assert stalled == {
        "idle_s": 10.0,
        "threshold_s": 10.0,
        "phase": "rollouts",
        "last_step": None,
        "log_tail": "loading\n gather: 5/8",
    }
    clock.now = 1_000
    watch.saw([], 0)
    assert watch.check(lambda: "") is None  # the same stall: said once
    watch.saw([step(1)], 0)
    clock.now = 1_009
    assert watch.check(lambda: "") is None
    clock.now = 1_010
    again = watch.check(lambda: "")
    assert again is not None and again["last_step"] == 1 and again["idle_s"] == 10.0


def test_the_threshold_follows_the_slowest_step_with_a_floor() -> None:
    clock = Clock()
    watch = StallWatch(StallRule(after_s=1_800, floor_s=60, step_factor=3), clock)
    watch.saw([step(1)], 0)
    assert watch.threshold_s == 1_800  # no step timed yet
    clock.now = 10
    watch.saw([step(2)], 0)
    assert watch.threshold_s == 60  # 3 x 10 s, under the floor
    clock.now = 110
    watch.saw([step(3)], 0)
    clock.now = 130
    watch.saw([step(4)], 0)
    assert watch.threshold_s == 300  # 3 x the slowest (100 s)
    watch.saw([step(4)], 0)  # a step told twice times nothing
    assert watch.threshold_s == 300


def test_the_phase_comes_from_the_last_lines_after_the_last_progress_line() -> None:
    assert phase_of(["gather: 2/8", "train: 10%|#"], None) == "training"
    assert phase_of(["Running validation on 16 scenarios"], None) == "validation"
    assert phase_of(["Scenarios: 8 for training, 4 for validation.", "gather"], None) == "rollouts"
    assert phase_of(["Scenarios: 8 for training, 4 for validation."], None) is None
    assert phase_of(["train: 100%", 'ARTBOT_PROGRESS {"step": 1}'], EventType.step) is None
    assert phase_of(['ARTBOT_PROGRESS {"step": 1}'], EventType.validation) == "rollouts"
    assert last_lines("\x1b[32mok\x1b[0m\n\n" + "x" * 500) == ["ok", "x" * 300]


def test_a_real_job_that_goes_quiet_is_reported_stalled_once_per_stall(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner(
        environ=job_environ(OPENAI_API_KEY=SECRET),
        stall_after_s="1",
        stall_floor_s="1",
        stall_step_factor="1",
    )
    job_id = runner.submit("stalls.py")
    events: list[JobEvent] = []

    def until_stalled(count: int) -> None:
        deadline = time.monotonic() + 20
        while sum(e.type is EventType.stalled for e in events) < count:
            assert time.monotonic() < deadline, [e.type.value for e in events]
            after = events[-1].seq if events else 0
            events.extend(runner.client.events(job_id, after=after, wait=2).events)

    until_stalled(1)
    first = next(e for e in events if e.type is EventType.stalled)
    assert first.data["idle_s"] >= 1
    assert first.data["phase"] == "rollouts"
    assert first.data["last_step"] == 1
    assert first.data["log_tail"].endswith("gather: rollouts of step 2")
    assert "key is [REDACTED" in first.data["log_tail"]
    assert SECRET not in str(first.data)
    # Still quiet for twice its threshold: not said again.
    time.sleep(1.5)
    (runner.run_dir(job_id) / "release").touch()
    until_stalled(2)
    (runner.run_dir(job_id) / "release2").touch()
    assert runner.wait_state(job_id, JobState.succeeded) is JobState.succeeded
    told = [e.type for e in runner.follow(job_id) if e.type in (EventType.step, EventType.stalled)]
    assert told == [EventType.step, EventType.stalled] * 2
    second = [e for e in events if e.type is EventType.stalled][1]
    assert second.data["last_step"] == 2


def test_a_real_job_that_keeps_printing_is_never_stalled(make_runner: RunnerFactory) -> None:
    runner = make_runner(stall_after_s="1")
    job_id = runner.submit("keeps_printing.py")
    events = runner.follow(job_id)
    assert events[-1].type is EventType.succeeded
    assert EventType.stalled not in [e.type for e in events]
