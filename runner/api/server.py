"""The runner's HTTP service under uvicorn: `serve()` for `artbot runner serve`, and
`RunnerServer` to run one in a thread (tests, benchmarks)."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import uvicorn
from sqlalchemy.exc import SQLAlchemyError

from isolation.inspection import forbid_inspection
from isolation.log_filters import filter_log_handlers
from runner.api import create_app, wrap
from runner.jobs.gpu import GpuProbe, system_nvml
from runner.jobs.local.job_process import JobProcess
from runner.jobs.ray.job_api import RayUnavailable
from runner.jobs.service import JobService
from runner.records.instance_lock import DatabaseInUse, RunnerLock
from runner.records.migrations import RUNNER_DATABASE
from runner.records.store import JobStore
from runner.settings import RunnerSettings, SettingsError, load_settings
from runner.uvicorn_server import GracefulServer
from storage import migrations
from storage.database import DatabaseUrlError, database_problem

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_USAGE = 2


def build_service(
    settings: RunnerSettings,
    *,
    environ: Mapping[str, str] | None = None,
    after_launch: Callable[[JobProcess], None] | None = None,
) -> JobService:
    """The job service for `settings`, on its database brought to the newest schema first;
    SettingsError for a database that is unusable."""
    url = settings.resolved_database_url
    try:
        migrations.upgrade(RUNNER_DATABASE, url)
        lock = RunnerLock.acquire(url)
        store = JobStore.open(url)
    except (DatabaseUrlError, migrations.SchemaMismatch, DatabaseInUse) as error:
        raise SettingsError(
            f"Cannot start the runner:\n  ARTBOT_RUNNER_DATABASE_URL: {error}"
        ) from None
    except SQLAlchemyError as error:
        raise SettingsError(
            f"Cannot start the runner:\n  ARTBOT_RUNNER_DATABASE_URL: {database_problem(error)}"
        ) from None
    try:
        return JobService(
            settings,
            store,
            gpu_probe=GpuProbe(settings.nvidia_smi, nvml=system_nvml() if settings.nvml else None),
            environ=environ,
            after_launch=after_launch,
            on_stop=lock.release,
        )
    except RayUnavailable as error:  # the Ray extra is missing
        store.close()
        lock.release()
        raise SettingsError(
            f"Cannot start the runner:\n  ARTBOT_RUNNER_EXECUTOR: {error}"
        ) from None


def serve(host: str | None = None, port: int | None = None) -> int:
    """Serve until interrupted. Jobs keep running when the runner stops; the next one
    re-attaches them."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # Before anything else: jobs of this user must not read the token from /proc/<pid>/environ.
    if not forbid_inspection():
        log.warning("cannot make the runner non-dumpable: its user's processes can read its memory")
    try:
        settings = load_settings()
        service = build_service(settings)
    except SettingsError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE
    filter_log_handlers(service.redactor.text)
    # The service holds its copies now (HF_TOKEN for exports to the Hub). Out of os.environ they
    # do not reach the runner's own child processes (nvidia-smi); /proc/<pid>/environ still shows
    # them: the flag above hides it.
    for name in ("ARTBOT_RUNNER_TOKEN", "HF_TOKEN", *settings.secret_names):
        os.environ.pop(name, None)
    host = host or settings.host
    port = settings.port if port is None else port
    if host not in ("127.0.0.1", "::1", "localhost"):
        log.warning(
            "listening on %s: put TLS in front of the runner (the token travels in every request)",
            host,
        )
    service.start()
    log.info(
        "runner up: slots=%s workdir=%s database=%s serving: at most %d, each for %g s",
        [list(slot) for slot in service.slots.slots],
        service.workdir,
        _safe_url(settings.resolved_database_url),
        settings.serve_max_jobs,
        settings.serve_max_lifetime_s,
    )
    _say_who_runs_jobs(service, settings)
    try:
        config = uvicorn.Config(
            wrap(create_app(service, settings.token.get_secret_value())),
            host=host,
            port=port,
            log_level="info",
            log_config=None,  # uvicorn's records go to the root handler and its filters
            timeout_graceful_shutdown=5,
        )
        GracefulServer(config).run()
    finally:
        service.stop()
        service.store.close()
    return EXIT_OK


def _say_who_runs_jobs(service: JobService, settings: RunnerSettings) -> None:
    """At start-up: a runner that refuses every job says so, and so does one that runs them as
    root because it was told to."""
    if service.refusal is not None:
        log.error("refusing every job and serving job: %s", service.refusal)
    elif settings.job_user:
        log.info("jobs run as %s", settings.job_user)
    elif os.geteuid() == 0 and settings.executor == "local":
        log.warning(
            "jobs run as root (ARTBOT_RUNNER_ALLOW_ROOT_JOBS=true): set ARTBOT_RUNNER_JOB_USER"
        )


def _safe_url(url: str) -> str:
    # Never log a database password.
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<unparsable>"


class RunnerServer:
    """A runner served by uvicorn on a thread (port 0: a free one); `with` starts and stops it."""

    def __init__(
        self, service: JobService, token: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.service = service
        config = uvicorn.Config(
            wrap(create_app(service, token)),
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=1,
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="runner-http", daemon=True)
        self.base_url = ""

    def start(self) -> RunnerServer:
        self.service.start()
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the runner's HTTP server did not start")
            time.sleep(0.01)
        servers: list[Any] = list(self._server.servers)
        host, port = servers[0].sockets[0].getsockname()[:2]
        self.base_url = f"http://{host}:{port}"
        return self

    def stop(self, *, cancel_jobs: bool = False) -> None:
        """Stop serving; jobs keep running unless `cancel_jobs`."""
        self._server.should_exit = True
        self._thread.join(10)
        self.service.stop(cancel_jobs=cancel_jobs)

    def __enter__(self) -> RunnerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop(cancel_jobs=True)
