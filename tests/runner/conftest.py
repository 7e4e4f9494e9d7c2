"""A real runner on loopback: the HTTP service in a thread, jobs as real subprocesses on this CPU.

Two fake GPU slots ("0,1") from the configuration, scripts run as `{python} {script}`, a short
cancel grace and a fast poll so that the suite stays quick.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from runner.api.server import RunnerServer, build_service
from runner.client import RunnerClient
from runner.schemas import JobEvent, JobState, JobSubmission
from runner.settings import RunnerSettings, load_settings
from storage.database import create_database_engine
from tests.databases import BACKENDS, POSTGRES_URL

SCRIPTS = Path(__file__).resolve().parent / "scripts"
TOKEN = "test-token-0123456789abcdef"


def script_text(name: str) -> str:
    return (SCRIPTS / name).read_text(encoding="utf-8")


def submission(name: str, **fields: object) -> JobSubmission:
    """A submission of tests/runner/scripts/<name> under a fresh idempotency key."""
    values: dict[str, object] = {
        "script": script_text(name),
        "script_name": "rl_train.py",
        "idempotency_key": f"test-{uuid.uuid4().hex}",
    }
    values.update(fields)
    return JobSubmission.model_validate(values)


@dataclass
class Runner:
    """One running runner and a client for it."""

    server: RunnerServer
    client: RunnerClient
    settings: RunnerSettings
    root: Path
    stopped: bool = False
    jobs: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def submit(self, name: str, **fields: object) -> str:
        job = self.client.submit(submission(name, **fields))
        self.jobs.append(job.id)
        return job.id

    def run_dir(self, job_id: str) -> Path:
        return self.settings.resolved_workdir / job_id

    def wait_state(self, job_id: str, *states: JobState, timeout: float = 20.0) -> JobState:
        deadline = time.monotonic() + timeout
        while True:
            job = self.client.job(job_id)
            if job.state in states:
                return job.state
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {job_id} is {job.state.value}, not {[s.value for s in states]}"
                )
            time.sleep(0.02)

    def wait_file(self, path: Path, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} never appeared")
            time.sleep(0.02)

    def follow(self, job_id: str, timeout: float = 30.0) -> list[JobEvent]:
        """Every event of the job until it is finished, read through the long-poll API."""
        events: list[JobEvent] = []
        after = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            page = self.client.events(job_id, after=after, wait=5)
            events.extend(page.events)
            after = page.next_after
            if page.finished:
                return events
        raise AssertionError(
            f"job {job_id} did not finish in {timeout}s: {[e.type.value for e in events]}"
        )

    def stop(self, *, cancel_jobs: bool = True) -> None:
        if not self.stopped:
            self.stopped = True
            self.client.close()  # first: uvicorn waits for open connections when it stops
            self.server.stop(cancel_jobs=cancel_jobs)
            self.server.service.store.close()


def runner_env(root: Path, **overrides: str) -> dict[str, str]:
    env = {
        "ARTBOT_RUNNER_TOKEN": TOKEN,
        "ARTBOT_RUNNER_DATABASE_URL": f"sqlite:///{root / 'runner.db'}",
        "ARTBOT_RUNNER_WORKDIR": str(root / "jobs"),
        "ARTBOT_RUNNER_GPU_SLOTS": "0,1",
        "ARTBOT_RUNNER_COMMAND": "{python} {script}",
        "ARTBOT_RUNNER_CANCEL_GRACE_S": "1.5",
        "ARTBOT_RUNNER_POLL_INTERVAL_S": "0.05",
        "ARTBOT_RUNNER_LOG_MAX_BYTES": str(1024 * 1024),
        "ARTBOT_RUNNER_JOB_SECRETS": "OPENAI_API_KEY,WANDB_API_KEY",
        # Never a real GPU in tests, even on a GPU machine: no NVML, no real nvidia-smi.
        "ARTBOT_RUNNER_NVML": "false",
        "ARTBOT_RUNNER_NVIDIA_SMI": str(root / "no-nvidia-smi"),
        # The tests' jobs run as the test's user, root in CI's containers: said, not assumed.
        "ARTBOT_RUNNER_ALLOW_ROOT_JOBS": "true",
    }
    env.update({f"ARTBOT_RUNNER_{key.upper()}": value for key, value in overrides.items()})
    return env


def job_environ(**extra: str) -> dict[str, str]:
    """The runner process's environment as jobs may see it (secrets are picked from here)."""
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    env["RUNNER_PRIVATE_SETTING"] = "must-not-reach-jobs"
    env.update(extra)
    return env


RunnerFactory = Callable[..., Runner]


@pytest.fixture(params=BACKENDS)
def store_settings(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """`make_runner` settings for the job store: none (SQLite, the tests' default), or a
    PostgreSQL database of its own (`database_url`), made for the test and dropped after: pass
    them to each runner of the test, a restarted one included."""
    if request.param == "sqlite":
        yield {}
        return
    assert POSTGRES_URL is not None
    name = f"artbot_runner_{uuid.uuid4().hex[:12]}"
    admin = create_database_engine(POSTGRES_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield {
            "database_url": make_url(POSTGRES_URL)
            .set(database=name)
            .render_as_string(hide_password=False)
        }
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def make_runner(tmp_path: Path) -> Iterator[RunnerFactory]:
    """Start a runner: `make_runner(cancel_grace_s="1")`, settings as keyword overrides."""
    started: list[Runner] = []

    def make(
        *, environ: dict[str, str] | None = None, root: Path | None = None, **overrides: str
    ) -> Runner:
        base = root or tmp_path
        settings = load_settings(runner_env(base, **overrides))
        service = build_service(settings, environ=environ if environ is not None else job_environ())
        server = RunnerServer(service, TOKEN).start()
        runner = Runner(server, RunnerClient(server.base_url, TOKEN, timeout=10), settings, base)
        started.append(runner)
        return runner

    yield make
    for runner in started:
        runner.stop()


@pytest.fixture
def runner(make_runner: RunnerFactory) -> Runner:
    return make_runner()


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not count: it runs nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def processes_with_env(marker: str) -> list[int]:
    """Live processes whose environment holds `marker` (a /proc scan, no psutil)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ.split(b"\0") and alive(int(name)):
            found.append(int(name))
    return found
