"""A runner that restarts finds its jobs again: alive ones are re-attached, dead ones are lost,
ones that ended meanwhile are settled from the exit status their supervisor recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.api.server import RunnerServer, build_service
from runner.client import RunnerClient
from runner.jobs.local.job_process import JobProcess
from runner.records.migrations import RUNNER_DATABASE
from runner.records.store import JobStore
from runner.schemas import EventType, JobState, JobSubmission
from runner.settings import load_settings
from storage import migrations
from tests.runner.conftest import (
    TOKEN,
    Runner,
    RunnerFactory,
    alive,
    job_environ,
    processes_with_env,
    runner_env,
    script_text,
    submission,
)
from tests.runner.dies_after_launch import DIED

REPO_ROOT = Path(__file__).resolve().parents[2]


def _restart(make_runner: RunnerFactory, old: Runner) -> Runner:
    old.stop(cancel_jobs=False)  # as when the runner's process stops: its jobs go on
    return make_runner(root=old.root)


def _events_until(runner: Runner, job_id: str, kind: EventType, step: int) -> None:
    deadline = time.monotonic() + 20
    after = 0
    while time.monotonic() < deadline:
        page = runner.client.events(job_id, after=after, wait=2)
        after = page.next_after
        if any(e.type is kind and e.data.get("step") == step for e in page.events):
            return
    raise AssertionError(f"no {kind.value} event for step {step}")


def test_a_running_job_is_reattached_and_followed_to_its_end(make_runner: RunnerFactory) -> None:
    first = make_runner()
    job_id = first.submit(
        "train_ok.py",
        args=["--steps", "4", "--pause-after", "2", "--wait-for", "go", "--delay", "0.01"],
    )
    _events_until(first, job_id, EventType.checkpoint, 2)
    supervisor = first.client.events(job_id).events[1].data["pid"]

    second = _restart(make_runner, first)
    assert alive(supervisor), "stopping the runner must not stop its jobs"
    assert second.client.job(job_id).state is JobState.running
    (second.run_dir(job_id) / "go").touch()
    events = second.follow(job_id)

    steps = [e.data["step"] for e in events if e.type is EventType.step]
    assert steps == [1, 2, 3, 4]  # each step once: the new runner did not repeat 1 and 2
    assert [e.data["step"] for e in events if e.type is EventType.checkpoint] == [1, 2, 3, 4]
    assert [e.data["step"] for e in events if e.type is EventType.rollouts] == [2, 4]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].type is EventType.succeeded
    assert events[-1].data["model"] == "m1@4"
    job = second.client.job(job_id)
    assert job.state is JobState.succeeded
    assert job.exit_code == 0  # recorded by the supervisor, read by the new runner


def test_a_reattached_job_can_be_cancelled_with_everything_it_started(
    make_runner: RunnerFactory,
) -> None:
    first = make_runner()
    job_id = first.submit("spawn_children.py")
    first.wait_file(first.run_dir(job_id) / "pids.txt")
    time.sleep(0.1)
    pids = [int(p) for p in (first.run_dir(job_id) / "pids.txt").read_text().split()]

    second = _restart(make_runner, first)
    second.client.cancel(job_id)
    assert second.wait_state(job_id, JobState.cancelled) is JobState.cancelled
    assert not any(alive(pid) for pid in pids)
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []


def test_a_job_whose_processes_died_with_the_runner_is_lost(make_runner: RunnerFactory) -> None:
    first = make_runner()
    job_id = first.submit("gate.py")
    first.wait_file(first.run_dir(job_id) / "env.json")
    supervisor = first.client.events(job_id).events[1].data["pid"]
    first.stop(cancel_jobs=False)
    os.killpg(supervisor, signal.SIGKILL)  # the host rebooted, or someone killed it
    deadline = time.monotonic() + 5
    while alive(supervisor) and time.monotonic() < deadline:
        time.sleep(0.02)

    second = make_runner(root=first.root)
    job = second.client.job(job_id)
    assert job.state is JobState.lost
    assert job.finished_at is not None
    last = second.client.events(job_id).events[-1]
    assert last.type is EventType.lost
    assert f"pid {supervisor}" in last.data["reason"]
    assert second.client.health().free_slots == 2


def test_a_stored_pid_now_used_by_another_process_is_not_mistaken_for_the_job(
    make_runner: RunnerFactory,
) -> None:
    first = make_runner()
    job_id = first.submit("gate.py")
    first.wait_file(first.run_dir(job_id) / "env.json")
    first.stop(cancel_jobs=False)
    store = JobStore.open(first.settings.resolved_database_url)
    record = store.get(job_id)
    assert record is not None and record.pid is not None
    # The pid exists (this test process) but it started at another time: not the job's.
    with store._transaction() as orm:
        from runner.records.rows import JobRow

        row = orm.get(JobRow, job_id)
        assert row is not None
        row.pid = os.getpid()
    store.close()

    second = make_runner(root=first.root)
    assert second.client.job(job_id).state is JobState.lost
    assert alive(os.getpid())
    # The job's own processes carry its marker and were stopped too.
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []


def test_a_job_that_ended_while_the_runner_was_down_is_settled_from_its_exit_status(
    make_runner: RunnerFactory,
) -> None:
    first = make_runner()
    job_id = first.submit("gate.py")
    first.wait_file(first.run_dir(job_id) / "env.json")
    first.stop(cancel_jobs=False)
    (first.run_dir(job_id) / "release").touch()
    exit_file = first.settings.resolved_workdir / job_id / ".runner" / "exit.json"
    first.wait_file(exit_file)

    second = make_runner(root=first.root)
    events = second.follow(job_id)
    assert events[-1].type is EventType.succeeded
    assert second.client.job(job_id).exit_code == 0


def test_queued_jobs_and_jobs_never_launched_start_after_a_restart(
    make_runner: RunnerFactory, tmp_path
) -> None:
    settings_root = tmp_path
    url = f"sqlite:///{settings_root / 'runner.db'}"
    migrations.upgrade(RUNNER_DATABASE, url)  # what the previous runner did at its start-up
    store = JobStore.open(url)
    workdir = settings_root / "jobs"
    queued, _ = store.create(
        "queuedjob",
        JobSubmission(script=script_text("train_ok.py"), idempotency_key="key-queued-0001"),
        str(workdir / "queuedjob"),
    )
    taken, _ = store.create(
        "takenjob",
        JobSubmission(script=script_text("train_ok.py"), idempotency_key="key-taken-0001"),
        str(workdir / "takenjob"),
    )
    # The previous runner took this one (starting) and stopped before launching it.
    assert store.transition("takenjob", [JobState.queued], JobState.starting, gpus=[0]) is not None
    store.close()

    runner = make_runner(root=settings_root)
    assert runner.follow(queued.id)[-1].type is EventType.succeeded
    assert runner.follow(taken.id)[-1].type is EventType.succeeded


def _kill_supervisor_of_reattached(
    make_runner: RunnerFactory, args: list[str], wait_for_text: str
) -> tuple[Runner, str]:
    """A job re-attached by a second runner whose supervisor is then SIGKILLed (no exit.json)."""
    first = make_runner()
    job_id = first.submit("train_ok.py", args=args)
    # Until the script prints, its supervisor may not have been released yet (`running` is
    # recorded first): a restart then would queue the job again and launch it a second time.
    deadline = time.monotonic() + 20
    while wait_for_text not in first.client.log(job_id, 100_000).text:
        assert time.monotonic() < deadline, f"{wait_for_text!r} never printed"
        time.sleep(0.02)
    supervisor = first.client.events(job_id).events[1].data["pid"]
    second = _restart(make_runner, first)
    started = [e for e in second.client.events(job_id).events if e.type is EventType.started]
    assert len(started) == 1, "re-attached, not launched again"
    os.kill(supervisor, signal.SIGKILL)  # only the supervisor: it cannot record the exit
    return second, job_id


def test_a_reattached_job_whose_supervisor_died_after_the_banner_succeeded(
    make_runner: RunnerFactory,
) -> None:
    runner, job_id = _kill_supervisor_of_reattached(
        make_runner, ["--steps", "2", "--delay", "0.01", "--linger", "30"], "cuda visible"
    )
    events = runner.follow(job_id)
    assert events[-1].type is EventType.succeeded
    assert events[-1].data == {
        "model": "m1@2",
        "inference_url": "http://127.0.0.1:8000/v1/",
        "step": 2,
    }
    job = runner.client.job(job_id)
    assert job.exit_code is None  # unknowable: nobody recorded it
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []  # the lingering script too


def test_a_reattached_job_whose_supervisor_died_mid_run_failed(make_runner: RunnerFactory) -> None:
    runner, job_id = _kill_supervisor_of_reattached(
        make_runner,
        ["--steps", "3", "--delay", "0.01", "--pause-after", "1", "--wait-for", "go"],
        "step 1",
    )
    events = runner.follow(job_id)
    assert events[-1].type is EventType.failed
    assert "without recording an exit status" in events[-1].data["summary"]
    assert "last step reported was 1" in events[-1].data["summary"]
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []


@pytest.mark.parametrize("recorded", [False, True], ids=["before-the-record", "after-the-record"])
def test_a_runner_that_dies_during_a_launch_does_not_run_the_job_twice(
    make_runner: RunnerFactory, tmp_path: Path, recorded: bool
) -> None:
    # A real runner process launches the job's supervisor and is killed (os._exit) before it
    # records the pid, or after recording it but before releasing the supervisor.
    env = {
        **os.environ,
        **runner_env(tmp_path),
        "TEST_JOB_ENVIRON": json.dumps(job_environ()),
    }
    dying = subprocess.run(
        [sys.executable, "-m", "tests.runner.dies_after_launch", *(["--recorded"] * recorded)],
        input=submission("count_starts.py").model_dump_json(),
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert dying.returncode == DIED, dying.stderr
    job_id, supervisor = dying.stdout.split()
    marker = f"ARTBOT_RUNNER_JOB_ID={job_id}"

    # The orphaned supervisor saw its runner go (EOF on its stdin) and ended having run nothing.
    deadline = time.monotonic() + 20
    # (An exiting process's environ reads empty before it is gone: both are waited for.)
    while processes_with_env(marker) or alive(int(supervisor)):
        assert time.monotonic() < deadline, "the orphaned supervisor is still running"
        time.sleep(0.02)
    starts = tmp_path / "jobs" / job_id / "starts.txt"
    assert not starts.exists()

    runner = make_runner()
    events = runner.follow(job_id)
    assert events[-1].type is EventType.succeeded
    assert len(starts.read_text().split()) == 1  # one copy ran, started by the new runner


def test_a_launch_that_cannot_be_recorded_runs_nothing(tmp_path: Path) -> None:
    def record_fails(process: JobProcess) -> None:
        raise RuntimeError("database is locked")

    settings = load_settings(runner_env(tmp_path))
    service = build_service(settings, environ=job_environ(), after_launch=record_fails)
    with RunnerServer(service, TOKEN) as server:
        runner = Runner(server, RunnerClient(server.base_url, TOKEN), settings, tmp_path)
        job_id = runner.submit("count_starts.py")
        events = runner.follow(job_id)
        runner.client.close()
    service.store.close()
    assert events[-1].type is EventType.failed
    assert "database is locked" in events[-1].data["summary"]
    assert not (tmp_path / "jobs" / job_id / "starts.txt").exists()
    assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []
