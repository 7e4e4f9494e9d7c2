"""A real local Ray head for the Ray executor's tests: `ray start --head --block` with fake GPUs,
on loopback, on free ports, in a temp folder of its own; stopped by its process group (never
`ray stop`, which stops every Ray on the machine)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

START_TIMEOUT_S = 90.0
STOP_WAIT_S = 20
"""RAY_JOB_STOP_WAIT_TIME_S on the head: longer than the runner's cancel grace in the tests, so
that the job's wrapper (not Ray's SIGKILL) stops what ignores SIGTERM."""


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class RayHead:
    address: str
    """The dashboard's job API, http://127.0.0.1:<port>."""
    temp_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        """SIGTERM the head's process group, then SIGKILL it and whatever of ours is left."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for pid in self.leftover_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def leftover_pids(self) -> list[int]:
        """Processes whose command line names this head's temp folder (Ray's own daemons)."""
        mine = str(self.temp_dir).encode()
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmdline = Path("/proc", entry, "cmdline").read_bytes()
                except OSError:
                    continue
                if mine in cmdline and int(entry) != os.getpid():
                    pids.append(int(entry))
        return pids


def _warm_up(address: str, deadline: float) -> bool:
    """Whether a first job could be submitted and ran to its end."""
    from ray.job_submission import JobSubmissionClient

    try:
        client = JobSubmissionClient(address)
        job = client.submit_job(entrypoint="echo ready")
        while time.monotonic() < deadline:
            if str(client.get_job_status(job)) in ("SUCCEEDED", "FAILED", "STOPPED"):
                return True
            time.sleep(0.2)
    except (ConnectionError, RuntimeError, OSError):
        return False
    return False


START_ATTEMPTS = 2
"""`ray start` gives its raylet 30 s to register, fixed: a loaded machine can miss that once."""


def start_ray_head() -> RayHead:
    """Start the head and wait until it runs jobs; RuntimeError (with the head's output and
    logs) when it does not come up in START_ATTEMPTS tries."""
    problems = []
    for _ in range(START_ATTEMPTS):
        try:
            return _start_ray_head()
        except RuntimeError as error:
            problems.append(str(error))
    raise RuntimeError("\n\n".join(problems))


def _start_ray_head() -> RayHead:
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    if ray is None:
        raise RuntimeError("the `ray` command is not installed (uv sync --extra ray)")
    temp_dir = Path(tempfile.mkdtemp(prefix="rayt", dir="/tmp"))
    (
        gcs,
        dashboard,
        client,
        node_manager,
        object_manager,
        metrics,
        agent_listen,
        agent_grpc,
        runtime_env_agent,
    ) = _free_ports(9)
    argv = [
        ray,
        "start",
        "--head",
        "--block",
        "--num-cpus=2",
        "--num-gpus=2",
        "--disable-usage-stats",
        "--include-dashboard=true",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",
        f"--port={gcs}",
        f"--dashboard-port={dashboard}",
        f"--ray-client-server-port={client}",
        f"--node-manager-port={node_manager}",
        f"--object-manager-port={object_manager}",
        f"--metrics-export-port={metrics}",
        f"--dashboard-agent-listen-port={agent_listen}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--runtime-env-agent-port={runtime_env_agent}",
        f"--temp-dir={temp_dir}",
    ]
    env = dict(os.environ)
    env.update(
        {
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # stays on 127.0.0.1 (see ray-notes)
            # Under `uv run pytest`, Ray would run its workers with `uv run` in a copy of the
            # project (a fresh environment, without the ray extra): they fail to start.
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "RAY_JOB_STOP_WAIT_TIME_S": str(STOP_WAIT_S),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}",
        }
    )
    env.pop("RAY_ADDRESS", None)
    log_path = temp_dir / "head.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    head = RayHead(f"http://127.0.0.1:{dashboard}", temp_dir, process, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{head.address}/api/jobs/", timeout=2).status_code == 200:
                break
        time.sleep(0.5)
    # The job API answers before it can run jobs ("No available agent to submit job" while the
    # head's node id is not in GCS yet): ready once a first job ran.
    while time.monotonic() < deadline and process.poll() is None:
        if _warm_up(head.address, deadline):
            return head
        time.sleep(0.5)
    output = log_path.read_text(errors="replace")[-3000:]
    for name in ("raylet.out", "raylet.err", "gcs_server.err", "gcs_server.out"):
        for path in sorted(temp_dir.glob(f"session_*/logs/{name}")):
            output += f"\n--- {name}\n" + path.read_text(errors="replace")[-1500:]
    head.stop()
    raise RuntimeError(f"the Ray head did not start:\n{output}")
