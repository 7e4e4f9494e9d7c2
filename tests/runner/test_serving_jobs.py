"""Serving jobs: a succeeded LocalBackend job's last checkpoint served behind the runner's token.

The real runner on loopback; the training job is tests/runner/scripts/train_ok.py (what ART
leaves on disk) and the serving process the stand-in vLLM (tests/runner/scripts/stand_in_vllm.py),
a real OpenAI-compatible server in a subprocess, called with the `openai` client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from runner.api.server import build_service
from runner.client import RunnerRejected
from runner.jobs.local.supervisor import write_whole_json
from runner.schemas import EventType, JobEvent, JobState, ServingState
from tests.runner.conftest import (
    SCRIPTS,
    TOKEN,
    Runner,
    RunnerFactory,
    alive,
    job_environ,
    submission,
)

STAND_IN_VLLM = SCRIPTS / "stand_in_vllm.py"
SERVE_COMMAND = (
    f"{{python}} {STAND_IN_VLLM} {{base_model}} --lora-modules {{model}}={{lora_path}} "
    "--host 127.0.0.1 --port {port}"
)
GENEROUS_S = 60.0  # a hang guard on a loaded machine, never a measurement


def serving_runner(
    make_runner: RunnerFactory, root: Path | None = None, **overrides: str
) -> Runner:
    """A runner with one GPU slot whose serving jobs are the stand-in vLLM."""
    values = {"serve_command": SERVE_COMMAND, "gpu_slots": "0", **overrides}
    return make_runner(root=root, **values)


def succeeded_job(runner: Runner) -> str:
    job_id = runner.submit("train_ok.py")
    runner.wait_state(job_id, JobState.succeeded, timeout=GENEROUS_S)
    return job_id


def events_until(runner: Runner, job_id: str, after: int, wanted: EventType) -> list[JobEvent]:
    """The job's events after `after` up to the first `wanted`, through the long-poll."""
    seen: list[JobEvent] = []
    deadline = time.monotonic() + GENEROUS_S
    while time.monotonic() < deadline:
        page = runner.client.events(job_id, after=after, wait=5)
        seen.extend(page.events)
        after = page.next_after
        if any(event.type is wanted for event in page.events):
            return seen
        assert not page.finished, f"the events ended without {wanted.value}: {seen}"
    raise AssertionError(f"no {wanted.value} event: {[e.type.value for e in seen]}")


def model_client(runner: Runner, job_id: str, token: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=runner.client.serving_api_url(job_id), api_key=token, max_retries=0
    )


def serving_pid(runner: Runner, job_id: str) -> int:
    marker = runner.settings.resolved_workdir / job_id / ".runner" / "serving.json"
    return int(json.loads(marker.read_text())["pgid"])


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + GENEROUS_S
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.05)


def test_a_succeeded_local_job_is_served_answered_and_stopped_on_request(
    make_runner: RunnerFactory,
) -> None:
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)

    serving = runner.client.serve(job_id)
    assert serving.state in (ServingState.queued, ServingState.starting)
    assert (serving.model, serving.step) == ("m1@4", 4)  # ART's served name of the last step
    events = events_until(runner, job_id, serving.after_seq, EventType.serving)
    assert events[-1].data["model"] == "m1@4" and events[-1].data["gpus"] == [0]
    assert runner.client.serving(job_id).state is ServingState.serving
    assert runner.client.health().free_slots == 0  # it holds the GPU slot

    model = model_client(runner, job_id)
    reply = model.chat.completions.create(
        model="m1@4", messages=[{"role": "user", "content": "What is 2 + 2?"}]
    )
    assert reply.choices[0].message.content == "m1@4 heard: What is 2 + 2?"
    with pytest.raises(openai.NotFoundError):  # the stand-in is as strict as vLLM
        model.chat.completions.create(model="m1@3", messages=[{"role": "user", "content": "hi"}])
    assert [m.id for m in model.models.list()] == ["Qwen/Qwen2.5-0.5B-Instruct", "m1@4"]

    pid = serving_pid(runner, job_id)
    stopped = runner.client.stop_serving(job_id)
    events = events_until(runner, job_id, serving.after_seq, EventType.stopped)
    assert events[-1].data == {"reason": "stopped on request"}
    assert stopped.model == "m1@4"
    wait_gone(pid)
    assert runner.client.serving(job_id).state is ServingState.stopped
    assert runner.client.health().free_slots == 1
    with pytest.raises(openai.NotFoundError):
        model.chat.completions.create(model="m1@4", messages=[{"role": "user", "content": "hi"}])
    # Once stopped, the job's events end again.
    page = runner.client.events(job_id, after=events[-1].seq, wait=5)
    assert page.finished and page.events == []


def test_a_serving_job_stops_after_its_idle_timeout(make_runner: RunnerFactory) -> None:
    runner = serving_runner(make_runner, serve_idle_s="1")
    job_id = succeeded_job(runner)
    serving = runner.client.serve(job_id)
    events_until(runner, job_id, serving.after_seq, EventType.serving)
    pid = serving_pid(runner, job_id)

    events = events_until(runner, job_id, serving.after_seq, EventType.stopped)

    assert events[-1].data == {"reason": "idle for 1 s"}
    wait_gone(pid)
    assert runner.client.health().free_slots == 1


def test_one_serving_job_per_job_a_second_request_gets_the_same(
    make_runner: RunnerFactory,
) -> None:
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)

    first = runner.client.serve(job_id)
    response = httpx.post(
        f"{runner.base_url}/jobs/{job_id}/serve", headers={"Authorization": f"Bearer {TOKEN}"}
    )

    assert response.status_code == 200  # not 202: nothing new was started
    assert response.json()["after_seq"] == first.after_seq
    events = events_until(runner, job_id, first.after_seq, EventType.serving)
    assert [e.type for e in events].count(EventType.serving) == 1
    assert runner.client.serve(job_id).state is ServingState.serving


def test_a_serving_job_waits_for_a_free_gpu_slot(make_runner: RunnerFactory) -> None:
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)
    busy = runner.submit("gate.py")  # holds the only slot until released
    runner.wait_state(busy, JobState.running)

    serving = runner.client.serve(job_id)
    assert serving.state is ServingState.queued
    assert runner.client.serving(job_id).state is ServingState.queued  # the slot is taken

    (runner.run_dir(busy) / "release").touch()
    events = events_until(runner, job_id, serving.after_seq, EventType.serving)
    assert events[-1].data["gpus"] == [0]


def test_cancelling_a_finished_job_stops_its_serving_job(make_runner: RunnerFactory) -> None:
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)
    serving = runner.client.serve(job_id)
    events_until(runner, job_id, serving.after_seq, EventType.serving)

    assert runner.client.cancel(job_id).state is JobState.succeeded  # the job stays as it was

    events = events_until(runner, job_id, serving.after_seq, EventType.stopped)
    assert events[-1].data == {"reason": "its job was cancelled"}


def test_only_a_succeeded_local_job_is_served(make_runner: RunnerFactory) -> None:
    runner = serving_runner(make_runner)
    failed = runner.submit("import_error.py")
    runner.wait_state(failed, JobState.failed)
    serverless = runner.submit("train_ok.py", backend="serverless")
    runner.wait_state(serverless, JobState.succeeded, timeout=GENEROUS_S)

    with pytest.raises(RunnerRejected) as not_succeeded:
        runner.client.serve(failed)
    with pytest.raises(RunnerRejected) as not_local:
        runner.client.serve(serverless)
    with pytest.raises(RunnerRejected) as unknown:
        runner.client.serve("no-such-job")
    with pytest.raises(RunnerRejected) as never_served:
        runner.client.stop_serving(failed)

    assert not_succeeded.value.status == 409 and "is failed" in not_succeeded.value.message
    assert not_local.value.status == 409 and "ServerlessBackend" in not_local.value.message
    assert unknown.value.status == 404
    assert never_served.value.status == 404


def test_a_serving_process_that_dies_before_it_answers_is_reported_stopped(
    make_runner: RunnerFactory,
) -> None:
    runner = serving_runner(make_runner, serve_command=SERVE_COMMAND + " --exit-after-start")
    job_id = succeeded_job(runner)
    serving = runner.client.serve(job_id)

    events = events_until(runner, job_id, serving.after_seq, EventType.stopped)

    reason = events[-1].data["reason"]
    assert reason.startswith("the serving process exited with status 1 before it answered")
    assert "no kernel image is available" in reason  # the end of its output, to act on
    assert EventType.serving not in [e.type for e in events]
    assert runner.client.health().free_slots == 1


def test_the_serving_api_and_its_controls_need_the_runners_token(
    make_runner: RunnerFactory,
) -> None:
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)
    serving = runner.client.serve(job_id)
    events_until(runner, job_id, serving.after_seq, EventType.serving)
    base = f"{runner.base_url}/jobs/{job_id}/serve"

    for method, url in [
        ("POST", base),
        ("GET", base),
        ("DELETE", base),
        ("GET", f"{base}/v1/models"),
        ("POST", f"{base}/v1/chat/completions"),
    ]:
        assert httpx.request(method, url, json={}).status_code == 401, (method, url)
    with pytest.raises(openai.AuthenticationError):
        model_client(runner, job_id, token="not-the-token").models.list()
    assert runner.client.serving(job_id).state is ServingState.serving  # nothing was stopped


def test_a_runner_that_stops_stops_its_serving_jobs_and_says_so_at_its_next_start(
    make_runner: RunnerFactory, tmp_path: Path
) -> None:
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)
    serving = runner.client.serve(job_id)
    events_until(runner, job_id, serving.after_seq, EventType.serving)
    pid = serving_pid(runner, job_id)

    runner.stop(cancel_jobs=False)

    wait_gone(pid)
    again = serving_runner(make_runner, root=tmp_path)
    events = again.client.events(job_id, after=serving.after_seq).events
    assert [e.data for e in events if e.type is EventType.stopped] == [
        {"reason": "the runner stopped"}
    ]
    with pytest.raises(RunnerRejected):
        again.client.stop_serving(job_id)  # the new runner serves nothing of it


def test_a_serving_process_left_by_a_killed_runner_is_stopped_at_the_next_start(
    make_runner: RunnerFactory, tmp_path: Path
) -> None:
    """The runner died without stopping it (its marker file is still there)."""
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)
    runner.stop(cancel_jobs=False)
    folder = runner.settings.resolved_workdir / job_id / ".runner"

    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={"ARTBOT_RUNNER_JOB_ID": f"serve-{job_id}"},
        start_new_session=True,
    )
    (folder / "serving.json").write_text(json.dumps({"pgid": left.pid}))

    again = serving_runner(make_runner, root=tmp_path)

    assert left.wait(timeout=GENEROUS_S) is not None
    events = again.client.events(job_id).events
    assert events[-1].type is EventType.stopped
    assert events[-1].data == {"reason": "the runner restarted"}
    assert not (folder / "serving.json").exists()


def test_the_serving_marker_is_replaced_whole_never_rewritten_in_place(tmp_path: Path) -> None:
    """A runner killed mid-write must not leave half a marker (the next start would skip it and
    leave the serving process on the GPU): the marker is written aside, then renamed over."""
    marker = tmp_path / "serving.json"
    write_whole_json(marker, {"pgid": 1})
    first = marker.stat().st_ino
    write_whole_json(marker, {"pgid": 2})
    assert marker.stat().st_ino != first  # a new file renamed over it, not the old one rewritten
    assert json.loads(marker.read_text()) == {"pgid": 2}
    assert list(tmp_path.iterdir()) == [marker]


def test_serving_jobs_beyond_the_cap_are_refused_until_one_stops(
    make_runner: RunnerFactory,
) -> None:
    runner = serving_runner(make_runner, gpu_slots="0,1", serve_max_jobs="1")
    first, second = succeeded_job(runner), succeeded_job(runner)
    serving = runner.client.serve(first)

    with pytest.raises(RunnerRejected) as refused:
        runner.client.serve(second)

    assert refused.value.status == 409
    assert "1 serving job already runs" in refused.value.message
    assert "ARTBOT_RUNNER_SERVE_MAX_JOBS" in refused.value.message
    assert runner.client.health().free_slots == 1  # the refused one took nothing
    assert runner.client.serve(first).after_seq == serving.after_seq  # its own: not one more
    runner.client.stop_serving(first)
    events_until(runner, first, serving.after_seq, EventType.stopped)
    again = runner.client.serve(second)
    events_until(runner, second, again.after_seq, EventType.serving)


def test_a_serving_job_past_its_lifetime_is_stopped_however_busy(
    make_runner: RunnerFactory,
) -> None:
    """Prompts keep coming, far faster than the idle timeout: only the lifetime can stop it."""
    runner = serving_runner(make_runner, serve_max_lifetime_s="3", serve_idle_s="600")
    job_id = succeeded_job(runner)
    serving = runner.client.serve(job_id)
    assert serving.max_lifetime_s == 3 and serving.idle_timeout_s == 600
    model = model_client(runner, job_id)
    deadline = time.monotonic() + GENEROUS_S
    while runner.client.serving(job_id).state is not ServingState.stopped:
        assert time.monotonic() < deadline, "the serving job outlived its lifetime"
        try:
            model.chat.completions.create(
                model="m1@4", messages=[{"role": "user", "content": "hi"}]
            )
        except (openai.APIStatusError, openai.APIConnectionError):  # starting, or just stopped
            time.sleep(0.05)

    events = events_until(runner, job_id, serving.after_seq, EventType.stopped)
    assert events[-1].data == {"reason": "served for its maximum lifetime of 3 s"}
    assert runner.client.health().free_slots == 1
    served = [e for e in events if e.type is EventType.serving]
    if served:  # on a slow machine its start may take the whole lifetime
        assert served[0].data["max_lifetime_s"] == 3


def test_a_serving_job_waits_while_a_training_job_is_queued(
    make_runner: RunnerFactory, tmp_path: Path
) -> None:
    """Training goes first: a free slot is not taken for `try` while a training job waits.
    Here no scheduler runs (a service not started), so the training job stays queued."""
    runner = serving_runner(make_runner)
    job_id = succeeded_job(runner)
    runner.stop()
    service = build_service(runner.settings, environ=job_environ())
    try:
        waiting, _ = service.submit(submission("gate.py"))
        serving, created = service.serve(job_id)
        assert created and serving.state is ServingState.queued

        time.sleep(1.0)  # four looks at the free slot (WAKE_S): each saw the training job
        assert service.serving.status(job_id).state is ServingState.queued
        assert service.slots.free == 1

        service.cancel(waiting.id)
        deadline = time.monotonic() + GENEROUS_S
        while service.serving.status(job_id).state is not ServingState.serving:
            assert time.monotonic() < deadline, "the serving job never took the freed slot"
            time.sleep(0.05)
    finally:
        service.stop(cancel_jobs=True)
        service.store.close()
