"""Stopping jobs leaves nothing running: cancel, SIGKILL after the grace period, max runtime,
and the leftovers of a script that exits without stopping its children."""

from __future__ import annotations

import os
import re
import time

from runner.jobs.local.memory import memory_bytes, process_memory_bytes
from runner.schemas import EventType, FailureKind, FixAction, JobState
from tests.runner.conftest import Runner, RunnerFactory, alive, processes_with_env


def _pids(runner: Runner, job_id: str) -> list[int]:
    path = runner.run_dir(job_id) / "pids.txt"
    runner.wait_file(path)
    for _ in range(100):
        text = path.read_text().split()
        if len(text) == 3:
            return [int(pid) for pid in text]
        time.sleep(0.01)
    raise AssertionError("pids.txt incomplete")


def _wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.02)
    return [pid for pid in pids if alive(pid)]


def test_cancel_stops_the_job_with_its_children_and_grandchildren(runner: Runner) -> None:
    job_id = runner.submit("spawn_children.py")
    pids = _pids(runner, job_id)
    supervisor = runner.client.events(job_id).events[1].data["pid"]
    assert all(alive(pid) for pid in [supervisor, *pids])

    job = runner.client.cancel(job_id)
    assert job.cancel_requested_at is not None
    assert runner.wait_state(job_id, JobState.cancelled) is JobState.cancelled
    # Nothing is left: not the script, not its children, not the one that left the process
    # group with a session of its own.
    assert _wait_gone([supervisor, *pids], timeout=1.0) == []
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []
    last = runner.client.events(job_id).events[-1]
    assert last.type is EventType.cancelled
    assert last.data == {"reason": "cancel requested", "forced": False}
    assert runner.client.cancel(job_id).state is JobState.cancelled  # cancelling again is harmless


def test_a_job_ignoring_sigterm_is_killed_after_the_grace_period(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner(cancel_grace_s="1.0")
    job_id = runner.submit("ignore_sigterm.py")
    runner.wait_file(runner.run_dir(job_id) / "ready")
    time.sleep(0.1)  # the handler is installed right after `ready` is written
    began = time.monotonic()
    runner.client.cancel(job_id)
    runner.wait_state(job_id, JobState.cancelled, timeout=10)
    took = time.monotonic() - began
    assert 1.0 <= took < 4.0, f"cancel took {took:.2f}s with a 1s grace period"
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []
    assert runner.client.job(job_id).exit_code is None  # SIGKILL: the supervisor recorded nothing
    assert runner.client.events(job_id).events[-1].data["forced"] is True


def test_a_job_past_the_max_runtime_is_stopped_and_fails_with_timeout(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner(max_runtime_s="1.0")
    job_id = runner.submit("train_ok.py", args=["--steps", "1000", "--delay", "0.05"])
    events = runner.follow(job_id, timeout=15)
    job = runner.client.job(job_id)
    assert job.state is JobState.failed
    assert job.failure is not None and job.failure.kind is FailureKind.timeout
    assert "maximum runtime of 1 s" in job.failure.summary
    assert job.failure.fix_action is FixAction.resume  # it left checkpoints
    assert events[-1].type is EventType.failed
    assert events[-1].data["kind"] == "timeout"
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []


def test_children_a_finished_script_leaves_behind_are_stopped(runner: Runner) -> None:
    job_id = runner.submit("spawn_children.py", args=["--exit"])
    pids = _pids(runner, job_id)
    assert runner.wait_state(job_id, JobState.succeeded) is JobState.succeeded
    assert _wait_gone(pids, timeout=1.0) == []
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []


def test_a_job_over_the_memory_limit_is_stopped_and_says_why(make_runner: RunnerFactory) -> None:
    runner = make_runner(job_memory_max="128M")
    job_id = runner.submit("hold_memory.py", args=["--mib", "300"])
    events = runner.follow(job_id, timeout=60)
    assert events[-1].type is EventType.failed
    failure = runner.client.job(job_id).failure
    assert failure is not None and failure.kind is FailureKind.memory_limit
    assert "over the runner's per-job limit of 0.1 GiB" in failure.summary
    assert "ARTBOT_RUNNER_JOB_MEMORY_MAX" in failure.fix
    # Stopped for what it held, as measured: at least the limit (the watchdog polls, so it may
    # stop the job while it still touches its 300 MiB, before it writes `holding`).
    held = re.search(r"held (\d+\.\d) GiB of host memory", failure.summary)
    assert held is not None and float(held.group(1)) >= 0.1
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []


def test_memory_is_summed_over_a_jobs_processes() -> None:
    # This process holds at least the bytes it just touched.
    held = bytearray(64 * 1024 * 1024)
    for offset in range(0, len(held), 4096):
        held[offset] = 1
    assert memory_bytes([os.getpid()]) >= len(held)
    assert process_memory_bytes(2**22 + 7) == 0  # no such process (pid_max is at most 2**22)
