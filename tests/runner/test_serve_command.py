"""`artbot runner serve` as an operator starts it: a real process, settings from the environment."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from runner.client import RunnerClient, RunnerUnavailable
from tests.runner.conftest import TOKEN, runner_env, submission


def _environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTBOT_RUNNER_")}
    env.update(values)
    return env


def test_missing_settings_stop_startup_with_a_clear_message(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "artbot.cli", "runner", "serve"],
        env=_environment(XDG_DATA_HOME=str(tmp_path), ARTBOT_RUNNER_GPU_SLOTS="zero"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Cannot start the runner:" in result.stderr
    assert "ARTBOT_RUNNER_TOKEN: missing" in result.stderr
    assert "ARTBOT_RUNNER_GPU_SLOTS: 'zero' is not a GPU index" in result.stderr


STARTUP_GUARD_S = 120.0
"""A hang guard, never a measurement: a runner process started under `-n 4` on two busy cores
once took over 30 s to answer."""


def test_serve_answers_on_its_port_and_stops_on_sigterm(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _environment(
        **runner_env(tmp_path), XDG_DATA_HOME=str(tmp_path), OPENAI_API_KEY="sk-for-the-job-only"
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "artbot.cli", "runner", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with RunnerClient(f"http://127.0.0.1:{port}", TOKEN, timeout=5) as client:
            deadline = time.monotonic() + STARTUP_GUARD_S
            while True:
                try:
                    health = client.health()
                    break
                except RunnerUnavailable:
                    assert server.poll() is None, server.communicate()[0]
                    assert time.monotonic() < deadline, "the runner did not answer"
                    time.sleep(0.1)
            assert health.gpu_slots == 2 and health.free_slots == 2
            listed = client.jobs()  # logged by uvicorn's access log, query string and all?
            assert listed.jobs == []
            # The runner took its secrets out of os.environ once read: jobs still get theirs.
            job = client.submit(submission("gate.py", required_env=["OPENAI_API_KEY"]))
            env_file = tmp_path / "jobs" / job.id / "env.json"
            job_env: dict[str, str] = {}
            while not job_env:
                assert time.monotonic() < deadline + STARTUP_GUARD_S, "no env.json from the job"
                try:
                    job_env = json.loads(env_file.read_text())
                except (OSError, ValueError):  # not there yet, or half written
                    time.sleep(0.05)
            assert job_env["OPENAI_API_KEY"] == "sk-for-the-job-only"
            assert "ARTBOT_RUNNER_TOKEN" not in job_env
            (tmp_path / "jobs" / job.id / "release").touch()
        server.send_signal(signal.SIGTERM)
        output, _ = server.communicate(timeout=STARTUP_GUARD_S)
        assert server.returncode == 0
        assert TOKEN.encode() not in output  # the token is never logged
        assert b"runner up" in output
        if os.geteuid() == 0:  # told to by runner_env's ARTBOT_RUNNER_ALLOW_ROOT_JOBS, and says so
            assert b"jobs run as root (ARTBOT_RUNNER_ALLOW_ROOT_JOBS=true)" in output
        assert b'"GET /jobs HTTP/1.1" 200' in output  # the access log, without its query string
        assert b"limit=" not in output
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
