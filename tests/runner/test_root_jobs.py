"""A runner that is root with no job user runs no job (a job would be root on the GPU host),
unless ARTBOT_RUNNER_ALLOW_ROOT_JOBS says so; it says which at start-up. The real runner on
loopback (and `artbot runner serve` as a process), real jobs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.client import RunnerClient, RunnerRejected, RunnerUnavailable
from runner.schemas import FailureKind, JobState
from runner.settings import load_settings
from tests.runner.conftest import TOKEN, RunnerFactory, runner_env, submission
from tests.runner.test_serving_jobs import GENEROUS_S, serving_runner, succeeded_job

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for a runner run as root")


def test_only_a_root_runner_with_no_job_user_and_no_opt_out_refuses(tmp_path: Path) -> None:
    env = runner_env(tmp_path, allow_root_jobs="false")
    refusing = load_settings(env)
    assert "ARTBOT_RUNNER_JOB_USER" in (refusing.root_jobs_refusal(euid=0) or "")
    assert refusing.root_jobs_refusal(euid=1000) is None  # not root: jobs run as its user
    allowed = load_settings({**env, "ARTBOT_RUNNER_ALLOW_ROOT_JOBS": "true"})
    assert allowed.root_jobs_refusal(euid=0) is None
    on_ray = load_settings(
        {**env, "ARTBOT_RUNNER_EXECUTOR": "ray", "ARTBOT_RUNNER_RAY_ADDRESS": "http://127.0.0.1:1"}
    )
    assert on_ray.root_jobs_refusal(euid=0) is None  # Ray runs jobs as its nodes' user
    assert load_settings({"ARTBOT_RUNNER_TOKEN": TOKEN}).allow_root_jobs is False


@as_root
def test_a_root_runner_with_no_job_user_refuses_jobs_and_serving_unless_told(
    make_runner: RunnerFactory, tmp_path: Path
) -> None:
    # Told to (the opt-out): a job runs as root, and one more waits in the queue.
    allowed = serving_runner(make_runner, allow_root_jobs="true")
    trained = succeeded_job(allowed)
    holding = allowed.submit("gate.py")
    allowed.wait_state(holding, JobState.running)
    queued = allowed.submit("train_ok.py")
    allowed.stop()  # the running job is cancelled; the queued one stays queued

    refusing = serving_runner(make_runner, root=tmp_path, allow_root_jobs="false")

    with pytest.raises(RunnerRejected) as submitted:
        refusing.submit("train_ok.py")
    assert submitted.value.status == 403
    assert "runs as root with no ARTBOT_RUNNER_JOB_USER" in submitted.value.message
    assert "ARTBOT_RUNNER_ALLOW_ROOT_JOBS=true" in submitted.value.message
    with pytest.raises(RunnerRejected) as served:
        refusing.client.serve(trained)
    assert served.value.status == 409 and "ARTBOT_RUNNER_JOB_USER" in served.value.message
    # What the earlier runner queued fails before it runs: nothing of it starts as root.
    assert refusing.wait_state(queued, JobState.failed, timeout=GENEROUS_S) is JobState.failed
    job = refusing.client.job(queued)
    assert job.failure is not None and job.failure.kind is FailureKind.preflight
    assert "root" in job.failure.summary and "ARTBOT_RUNNER_JOB_USER" in job.failure.fix
    assert not (refusing.run_dir(queued) / ".art").exists()  # its script never ran


@as_root
def test_serve_says_at_start_up_that_it_refuses_jobs_as_root(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTBOT_RUNNER_")}
    env.update(runner_env(tmp_path, allow_root_jobs="false"), XDG_DATA_HOME=str(tmp_path))
    server = subprocess.Popen(
        [sys.executable, "-m", "artbot.cli", "runner", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with RunnerClient(f"http://127.0.0.1:{port}", TOKEN, timeout=5) as client:
            deadline = time.monotonic() + GENEROUS_S
            while True:
                try:
                    client.health()
                    break
                except RunnerUnavailable:
                    assert server.poll() is None, server.communicate()[0]
                    assert time.monotonic() < deadline, "the runner did not answer"
                    time.sleep(0.1)
            with pytest.raises(RunnerRejected):
                client.submit(submission("gate.py"))
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=GENEROUS_S)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert (
        b"ERROR runner.api.server refusing every job and serving job: the runner runs as root"
        in (output)
    )
