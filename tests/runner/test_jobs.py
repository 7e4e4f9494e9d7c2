"""Jobs from submit to end on a real runner: progress events, environment, queueing, long-poll."""

from __future__ import annotations

import json
import time

import pytest

from runner.client import RunnerRejected
from runner.schemas import EventType, JobState
from tests.runner.conftest import Runner, RunnerFactory, job_environ, submission


def test_a_training_run_reports_steps_validations_checkpoints_and_its_model(runner: Runner) -> None:
    job_id = runner.submit("train_ok.py", args=["--steps", "4", "--val-every", "2"])
    events = runner.follow(job_id)

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].type is EventType.queued
    assert events[1].type is EventType.started
    assert events[1].data["gpus"] == [0]
    steps = [e.data for e in events if e.type is EventType.step]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert steps[2]["train/reward"] == 0.3
    assert steps[2]["loss/train"] == 1 / 3
    assert all("val/reward" not in s for s in steps)
    assert [e.data for e in events if e.type is EventType.validation] == [
        {"step": 2, "val/reward": 0.1},
        {"step": 4, "val/reward": 0.2},
    ]
    assert [e.data["step"] for e in events if e.type is EventType.checkpoint] == [1, 2, 3, 4]
    assert events[-1].type is EventType.succeeded
    assert events[-1].data == {
        "model": "m1@4",
        "inference_url": "http://127.0.0.1:8000/v1/",
        "step": 4,
    }

    job = runner.client.job(job_id)
    assert job.state is JobState.succeeded
    assert job.exit_code == 0
    assert job.started_at is not None and job.finished_at is not None
    assert job.last_event_seq == events[-1].seq
    # --art-path was given to the script (it takes the flag): ART's files are in the job's folder.
    assert (runner.run_dir(job_id) / ".art/proj/models/m1/history.jsonl").is_file()
    assert "cuda visible: 0" in runner.client.log(job_id, 10_000).text


def test_a_job_gets_an_allow_listed_environment_plus_its_secrets(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner(
        environ=job_environ(OPENAI_API_KEY="sk-test-key", AWS_SECRET_ACCESS_KEY="nope")
    )
    job_id = runner.submit("gate.py")
    env_file = runner.run_dir(job_id) / "env.json"
    runner.wait_file(env_file)
    env = json.loads(env_file.read_text())
    (runner.run_dir(job_id) / "release").touch()
    runner.follow(job_id)

    assert env["OPENAI_API_KEY"] == "sk-test-key"  # listed in ARTBOT_RUNNER_JOB_SECRETS
    assert "AWS_SECRET_ACCESS_KEY" not in env  # not listed
    assert "RUNNER_PRIVATE_SETTING" not in env  # the runner's own environment stays out
    assert not any(
        name.startswith("ARTBOT_RUNNER_") and name != "ARTBOT_RUNNER_JOB_ID" for name in env
    )
    assert env["ARTBOT_RUNNER_JOB_ID"] == job_id
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["PYTHONUNBUFFERED"] == "1"
    assert "PATH" in env


def test_local_jobs_queue_for_gpu_slots_in_order_and_serverless_jobs_do_not_wait(
    runner: Runner,
) -> None:
    first = runner.submit("gate.py")
    second = runner.submit("gate.py")
    runner.wait_state(first, JobState.running)
    runner.wait_state(second, JobState.running)
    third = runner.submit("gate.py")
    fourth = runner.submit("gate.py")
    serverless = runner.submit("gate.py", backend="serverless")

    runner.wait_state(serverless, JobState.running)
    assert runner.client.job(third).state is JobState.queued
    assert runner.client.job(third).queue_position == 1
    assert runner.client.job(fourth).queue_position == 2
    gpus = {runner.client.job(first).gpus[0], runner.client.job(second).gpus[0]}
    assert gpus == {0, 1}
    assert runner.client.job(serverless).gpus == []
    serverless_env = json.loads(_wait_read(runner, serverless, "env.json"))
    assert serverless_env["CUDA_VISIBLE_DEVICES"] == ""  # no GPU for a serverless job

    (runner.run_dir(second) / "release").touch()
    runner.wait_state(second, JobState.succeeded)
    runner.wait_state(third, JobState.running)  # first in line gets the freed slot...
    assert runner.client.job(fourth).state is JobState.queued  # ...not the one behind it
    assert runner.client.job(third).gpus == runner.client.job(second).gpus
    assert runner.client.job(fourth).queue_position == 1

    cancelled = runner.client.cancel(fourth)  # a queued job is cancelled at once
    assert cancelled.state is JobState.cancelled
    assert [e.type for e in runner.client.events(fourth).events] == [
        EventType.queued,
        EventType.cancelled,
    ]


def _wait_read(runner: Runner, job_id: str, name: str) -> str:
    path = runner.run_dir(job_id) / name
    runner.wait_file(path)
    for _ in range(100):
        text = path.read_text()
        if text:
            return text
        time.sleep(0.01)
    return path.read_text()


def test_the_events_long_poll_returns_when_an_event_arrives_or_after_wait(runner: Runner) -> None:
    job_id = runner.submit("gate.py")
    runner.wait_file(runner.run_dir(job_id) / "env.json")
    page = runner.client.events(job_id)
    assert [e.type for e in page.events] == [EventType.queued, EventType.started]

    began = time.monotonic()
    empty = runner.client.events(job_id, after=page.next_after, wait=0.6)
    waited = time.monotonic() - began
    assert empty.events == [] and not empty.finished
    assert empty.next_after == page.next_after
    assert 0.55 <= waited < 3.0

    import threading

    threading.Timer(0.3, lambda: (runner.run_dir(job_id) / "release").touch()).start()
    began = time.monotonic()
    woken = runner.client.events(job_id, after=page.next_after, wait=20)
    elapsed = time.monotonic() - began
    assert woken.events, "the long-poll returned without events"
    assert elapsed < 3.0, f"an event took {elapsed:.2f}s to reach a waiting long-poll"

    rest = runner.follow(job_id)
    assert rest[-1].type is EventType.succeeded
    done = runner.client.events(job_id, after=rest[-1].seq, wait=10)
    assert done.finished and done.events == []  # a finished job's poll does not wait


def test_events_page_in_order_from_any_cursor(runner: Runner) -> None:
    job_id = runner.submit("train_ok.py", args=["--steps", "3", "--delay", "0.01"])
    everything = runner.follow(job_id)
    middle = runner.client.events(job_id, after=3)
    assert [e.seq for e in middle.events] == [e.seq for e in everything[3:]]
    assert middle.finished
    assert runner.client.events(job_id, after=everything[-1].seq).events == []


def test_a_run_can_resume_in_the_folder_of_an_earlier_job(runner: Runner) -> None:
    first = runner.submit(
        "train_ok.py", args=["--steps", "2", "--delay", "0.01", "--exit-code", "3"]
    )
    assert runner.follow(first)[-1].type is EventType.failed
    resume = submission(
        "train_ok.py",
        args=["--steps", "2", "--delay", "0.01", "--pause-after", "0", "--wait-for", "go"],
        resume_from_job=first,
    )
    again = runner.client.submit(resume).id
    assert runner.client.submit(resume).id == again  # a retry finds the job, not a conflict
    with pytest.raises(RunnerRejected) as busy:  # another resume while this one runs
        runner.client.submit(submission("train_ok.py", resume_from_job=first))
    assert busy.value.status == 409 and "already working" in busy.value.message
    (runner.run_dir(first) / "go").touch()
    events = runner.follow(again)
    # Only what the resumed run did is news: steps 3 and 4, not the first job's 1 and 2.
    assert [e.data["step"] for e in events if e.type is EventType.step] == [3, 4]
    assert [e.data["step"] for e in events if e.type is EventType.checkpoint] == [3, 4]
    # The first job's validation at step 2 is not news either; the resumed run's at 4 is.
    assert [e.data["step"] for e in events if e.type is EventType.rollouts] == [4]
    assert events[-1].data["step"] == 4
    assert not (runner.run_dir(again) / ".art").exists()


def test_progress_comes_from_the_scripts_progress_lines_when_art_writes_no_history_here(
    runner: Runner,
) -> None:
    job_id = runner.submit("train_ok.py", args=["--steps", "2", "--delay", "0.01", "--no-history"])
    events = runner.follow(job_id)

    steps = [e.data for e in events if e.type is EventType.step]
    assert [s["step"] for s in steps] == [1, 2] and steps[1]["train/reward"] == 0.2
    assert [e.data for e in events if e.type is EventType.validation] == [
        {"step": 2, "val/reward": 0.1}
    ]
    assert events[-1].type is EventType.succeeded and events[-1].data["step"] == 2
