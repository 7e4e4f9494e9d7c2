"""The Ray executor against a real local Ray head (fake GPUs, loopback): the same runner API,
events and failure classes as the local executor, with jobs submitted through Ray's job API.

Skipped only where the head cannot start (Ray not installed, or it fails to come up here).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.jobs.ray.job_api import RECREATED_ENTRYPOINT, RayJobs, RayJobSpec, RayStatus
from runner.progress.output_lines import PROGRESS_PREFIX
from runner.schemas import EventType, FailureKind, JobEvent, JobState
from tests.runner.conftest import Runner, RunnerFactory, job_environ, processes_with_env
from tests.runner.ray_head import RayHead, start_ray_head

pytestmark = [pytest.mark.ray, pytest.mark.xdist_group("ray_head")]
"""One worker runs them all, on one Ray head (a session fixture)."""

RAY_TIMEOUT_S = 120.0
"""Submit to end on a loaded 2-core machine (a Ray job takes 2 to 20 s here)."""
SECRET = "sk-ray-test-secret-value-0123456789"
WANDB_SECRET = "wandb-test-secret-value-abcdef"


RAY_REFUSED: list[str] = []
"""Why the Ray head did not start, once it did not: the tests after the first skip at once
instead of trying again (pytest does not keep a session fixture's skip; each try costs minutes
on a loaded host)."""


@pytest.fixture(scope="session")
def ray_head() -> Iterator[RayHead]:
    if RAY_REFUSED:
        pytest.skip(RAY_REFUSED[0])
    try:
        head = start_ray_head()
    except RuntimeError as error:
        RAY_REFUSED.append(f"Ray cannot start here: {error}")
        pytest.skip(RAY_REFUSED[0])
    yield head
    head.stop()


@pytest.fixture
def ray_jobs(ray_head: RayHead) -> RayJobs:
    return RayJobs(ray_head.address)


def ray_runner(
    make_runner: RunnerFactory, head: RayHead, root: Path | None = None, **settings: str
) -> Runner:
    return make_runner(
        root=root,
        environ=job_environ(OPENAI_API_KEY=SECRET, WANDB_API_KEY=WANDB_SECRET),
        executor="ray",
        ray_address=head.address,
        ray_python=sys.executable,
        poll_interval_s="0.1",
        **settings,
    )


def wait_for(condition: Callable[[], object], what: str, timeout: float = RAY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout}s")
        time.sleep(0.1)


def of_type(events: list[JobEvent], kind: EventType) -> list[dict[str, Any]]:
    return [event.data for event in events if event.type is kind]


def test_a_job_runs_on_ray_its_progress_read_from_its_output(
    make_runner: RunnerFactory, ray_head: RayHead, ray_jobs: RayJobs
) -> None:
    runner = ray_runner(make_runner, ray_head)
    job_id = runner.submit(
        "train_ok.py", args=["--no-history", "--steps", "3"], required_env=["OPENAI_API_KEY"]
    )
    events = runner.follow(job_id, timeout=RAY_TIMEOUT_S)

    kinds = [event.type for event in events]
    assert kinds[0] is EventType.queued and kinds[1] is EventType.started
    assert kinds[-1] is EventType.succeeded
    steps = of_type(events, EventType.step)
    assert [data["step"] for data in steps] == [1, 2, 3]
    assert steps[0]["train/reward"] == 0.1 and steps[0]["loss/train"] == 1.0
    assert of_type(events, EventType.validation) == [{"step": 2, "val/reward": 0.1}]
    assert of_type(events, EventType.succeeded)[0]["model"] == "m1@3"
    job = runner.client.job(job_id)
    assert job.state is JobState.succeeded and job.exit_code == 0
    # Ray gave the job one (fake) GPU; the output came back through the runner's log API.
    tail = runner.client.log(job_id, tail_bytes=65536).text
    assert "cuda visible: 0" in tail or "cuda visible: 1" in tail
    assert PROGRESS_PREFIX.decode() in tail
    # Ray ran it under the runner's job id, and its job API does not show the secret.
    info = ray_jobs._client.get_job_info(job_id)  # what anyone with the job API can read
    assert info.submission_id == job_id
    assert SECRET not in json.dumps(info.model_dump(), default=str)
    assert "env_vars" not in (info.runtime_env or {})


def test_a_secret_the_job_prints_is_redacted_and_the_failure_classified(
    make_runner: RunnerFactory, ray_head: RayHead
) -> None:
    runner = ray_runner(make_runner, ray_head)
    leaking = runner.submit("leak_secrets.py", required_env=["OPENAI_API_KEY"])
    missing_module = runner.submit("import_error.py")

    leaked = runner.follow(leaking, timeout=RAY_TIMEOUT_S)
    imported = runner.follow(missing_module, timeout=RAY_TIMEOUT_S)

    # The secret reached the job (it printed it), and nothing the runner serves shows it.
    failure = runner.client.job(leaking).failure
    assert failure is not None and failure.kind is FailureKind.user_code
    served = json.dumps([e.model_dump(mode="json") for e in leaked])
    served += runner.client.log(leaking, tail_bytes=65536).text + failure.model_dump_json()
    assert "debug: OPENAI_API_KEY=[REDACTED" in served
    assert SECRET not in served and WANDB_SECRET not in served
    import_failure = runner.client.job(missing_module).failure
    assert import_failure is not None and import_failure.kind is FailureKind.import_error
    assert "surely_not_installed_module" in import_failure.summary
    assert imported[-1].type is EventType.failed


def test_cancel_stops_every_process_of_the_job_children_and_sigterm_ignorers_included(
    make_runner: RunnerFactory, ray_head: RayHead
) -> None:
    runner = ray_runner(make_runner, ray_head)
    with_children = runner.submit("spawn_children.py")
    stubborn = runner.submit("ignore_sigterm.py")
    for job_id, said in ((with_children, "children started"), (stubborn, "ignoring SIGTERM")):
        runner.wait_state(job_id, JobState.running, timeout=RAY_TIMEOUT_S)
        wait_for(
            lambda job_id=job_id, said=said: said in runner.client.log(job_id, 65536).text,
            f"job {job_id} printed {said!r}",
        )
        assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}")

    runner.client.cancel(with_children)
    runner.client.cancel(stubborn)

    for job_id in (with_children, stubborn):
        events = runner.follow(job_id, timeout=RAY_TIMEOUT_S)
        assert events[-1].type is EventType.cancelled
        # Ray says STOPPED once its stop is done; a process killed just before may take a
        # moment to disappear from /proc.
        marker = f"ARTBOT_RUNNER_JOB_ID={job_id}"
        wait_for(lambda marker=marker: not processes_with_env(marker), "no process left", 15)
    assert of_type(runner.follow(stubborn), EventType.cancelled)[0]["forced"] is True
    assert of_type(runner.follow(with_children), EventType.cancelled)[0]["forced"] is False


def test_a_ray_job_that_goes_quiet_is_reported_stalled_and_a_cancel_stops_it(
    make_runner: RunnerFactory, ray_head: RayHead
) -> None:
    runner = ray_runner(
        make_runner, ray_head, stall_after_s="1", stall_floor_s="1", stall_step_factor="1"
    )
    job_id = runner.submit("stalls.py", required_env=["OPENAI_API_KEY"])

    def stalls() -> list[dict[str, Any]]:
        return of_type(runner.client.events(job_id, wait=1).events, EventType.stalled)

    # With a 1 s threshold, Ray's start of the process may count as a stall already (before the
    # job printed anything); the one that matters comes after step 1.
    wait_for(lambda: any(s["last_step"] == 1 for s in stalls()), "a stall after step 1")
    stalled = next(s for s in stalls() if s["last_step"] == 1)
    assert stalled["phase"] == "rollouts"
    assert stalled["resumable"] is False  # its checkpoints stay on the Ray node
    assert stalled["log_tail"].endswith("gather: rollouts of step 2")
    assert SECRET not in str(stalled)  # the job printed its key: redacted in the event
    runner.client.cancel(job_id)  # what the bot's "Restart from the last checkpoint" does first
    assert runner.follow(job_id, timeout=RAY_TIMEOUT_S)[-1].type is EventType.cancelled
    marker = f"ARTBOT_RUNNER_JOB_ID={job_id}"
    wait_for(lambda: not processes_with_env(marker), "no process left", 15)


def test_submitting_the_same_job_again_does_not_start_a_second_ray_job(
    ray_jobs: RayJobs,
) -> None:
    job_id = f"idem-{time.time_ns()}"
    spec = RayJobSpec(
        job_id=job_id,
        script_name="hello.py",
        script="print('hello once')\n",
        command=[sys.executable, "hello.py"],
        num_gpus=0,
        secrets={},
        grace_s=1.0,
        python=sys.executable,
    )

    assert ray_jobs.submit(spec) is True
    assert ray_jobs.submit(spec) is False

    assert ray_jobs.job_ids().count(job_id) == 1
    wait_for(lambda: ray_jobs.info(job_id).status.terminal, "the job ended")  # type: ignore[union-attr]
    assert ray_jobs.info(job_id).status is RayStatus.SUCCEEDED  # type: ignore[union-attr]
    assert ray_jobs.logs(job_id).count("hello once") == 1


class AnsweringClient:
    """Ray's JobSubmissionClient as far as `RayJobs.info` uses it: `get_job_info` returns the
    JobDetails it is given (Ray's own model)."""

    def __init__(self, details: object) -> None:
        self.details = details

    def get_job_info(self, job_id: str) -> object:
        return self.details


def test_a_record_ray_wrote_back_after_the_job_was_deleted_means_ray_lost_it() -> None:
    models = pytest.importorskip("ray.dashboard.modules.job.pydantic_models")
    from ray.job_submission import JobStatus

    # As Ray's job monitor writes it when a deleted job's supervisor actor exits
    # (JobInfoStorageClient.put_status with no record left).
    written_back = models.JobDetails(
        type=models.JobType.SUBMISSION,
        entrypoint=RECREATED_ENTRYPOINT,
        status=JobStatus.FAILED,
        message="Job supervisor actor died: the actor died unexpectedly",
        submission_id="job-1",
    )
    jobs = RayJobs("http://127.0.0.1:9")  # never contacted: the client below answers
    jobs._connected = AnsweringClient(written_back)
    assert jobs.info("job-1") is None

    submitted = written_back.model_copy(update={"entrypoint": "exec python artbot_ray_entry.py"})
    jobs._connected = AnsweringClient(submitted)
    info = jobs.info("job-1")
    assert info is not None and info.status is RayStatus.FAILED


def test_a_restarted_runner_follows_its_ray_jobs_again_and_marks_forgotten_ones_lost(
    make_runner: RunnerFactory, ray_head: RayHead, ray_jobs: RayJobs, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    first = ray_runner(make_runner, ray_head)
    followed = first.submit(
        "train_ok.py",
        args=["--no-history", "--steps", "3", "--pause-after", "1", "--wait-for", str(gate)],
    )
    forgotten = first.submit("ignore_sigterm.py")
    wait_for(
        lambda: of_type(first.client.events(followed).events, EventType.step),
        "the first step was reported",
    )
    first.wait_state(forgotten, JobState.running, timeout=RAY_TIMEOUT_S)
    first.stop(cancel_jobs=False)
    # While no runner watches: Ray forgets one job (as when its head is replaced) ...
    ray_jobs.stop(forgotten)
    wait_for(lambda: ray_jobs.info(forgotten).status.terminal, "Ray stopped the job")  # type: ignore[union-attr]
    ray_jobs._client.delete_job(forgotten)
    # ... and the other one goes on.
    gate.write_text("go")

    second = ray_runner(make_runner, ray_head)

    events = second.follow(followed, timeout=RAY_TIMEOUT_S)
    assert [data["step"] for data in of_type(events, EventType.step)] == [1, 2, 3]
    assert len(of_type(events, EventType.started)) == 1
    assert events[-1].type is EventType.succeeded
    assert ray_jobs.job_ids().count(followed) == 1
    lost = second.follow(forgotten, timeout=RAY_TIMEOUT_S)
    assert lost[-1].type is EventType.lost
    assert "Ray no longer knows the job" in lost[-1].data["reason"]
    assert second.client.job(forgotten).state is JobState.lost
