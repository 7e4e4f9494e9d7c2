"""Ray's Job Submission API, as the Ray executor uses it: one Ray job per runner job, named by the
runner's job id (`submission_id`), the script and the wrapper shipped in `runtime_env`
`working_dir`, the secrets in a file there (never in `env_vars`, which the job API shows).

Ray is an optional extra (`uv sync --extra ray`): it is imported when a RayJobs is made, and
its absence is a RayUnavailable that says how to install it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from runner.jobs.ray import entry as ray_entry

ENTRY_NAME = "artbot_ray_entry.py"
RAY_EXTRA_HINT = (
    "install the runner with Ray: `uv sync --extra ray` (or `pip install 'ray[default]'`)"
)


class RayUnavailable(RuntimeError):
    """Ray is not installed, or its job API cannot be reached."""


class RayRefused(RuntimeError):
    """Ray's job API refused the request itself (a 4xx answer): asking again will not help."""


_STATUS = re.compile(r"status code (\d{3})")
RECREATED_ENTRYPOINT = "Entrypoint not found."
"""The entrypoint of a job record Ray's job monitor wrote back after the job was deleted: when a
job's supervisor actor exits after its record is gone, the monitor puts a FAILED status, and
`JobInfoStorageClient.put_status` makes a new record with this entrypoint (ray/dashboard/
modules/job/common.py). Such a record is not the job that was submitted: Ray has lost it."""


def _refused(error: RuntimeError) -> bool:
    """Whether Ray answered 4xx (else: 5xx such as "No available agent", or no answer)."""
    match = _STATUS.search(str(error))
    return match is not None and 400 <= int(match.group(1)) < 500


class RayStatus(StrEnum):
    """Ray's JobStatus values."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def terminal(self) -> bool:
        return self in (RayStatus.STOPPED, RayStatus.SUCCEEDED, RayStatus.FAILED)


@dataclass(frozen=True)
class RayJobInfo:
    """What Ray says about a job."""

    status: RayStatus
    message: str
    exit_code: int | None
    """The entrypoint's exit code (None when it never ran, or Ray does not say)."""
    error_type: str | None = None


@dataclass(frozen=True)
class RayJobSpec:
    """A job as Ray runs it: the script, the command that runs it, and what it needs."""

    job_id: str
    script_name: str
    script: str
    command: Sequence[str]
    num_gpus: float
    secrets: Mapping[str, str]
    grace_s: float
    python: str


def import_ray_client() -> Any:
    """ray.job_submission.JobSubmissionClient, or RayUnavailable when the extra is missing."""
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as error:
        raise RayUnavailable(
            f"ARTBOT_RUNNER_EXECUTOR=ray needs Ray, which is not installed ({error}): "
            + RAY_EXTRA_HINT
        ) from None
    return JobSubmissionClient


def entrypoint(spec: RayJobSpec) -> str:
    """The shell line Ray runs: `exec` the wrapper, so that no shell stays between Ray and the
    job (a shell left in between leaked the job when a pending job was stopped)."""
    wrapper = [spec.python, ENTRY_NAME, "--job-id", spec.job_id, "--grace", str(spec.grace_s)]
    return "exec " + shlex.join([*wrapper, "--", *spec.command])


class RayJobs:
    """The Ray jobs of this runner, through the dashboard's job API at `address`."""

    def __init__(self, address: str) -> None:
        """RayUnavailable at once when Ray is not installed; the job API itself is contacted at
        the first call (and again after a failed one), so a runner may start before its Ray."""
        self._client_type = import_ray_client()
        self._connected: Any = None
        self._lock = threading.Lock()
        self.address = address

    @property
    def _client(self) -> Any:
        """Ray's JobSubmissionClient (its constructor checks the connection and Ray's version)."""
        with self._lock:
            if self._connected is None:
                try:
                    self._connected = self._client_type(self.address)
                except (ConnectionError, RuntimeError) as error:
                    raise RayUnavailable(
                        f"cannot reach Ray's job API at {self.address}: {error}"
                    ) from None
            return self._connected

    def info(self, job_id: str) -> RayJobInfo | None:
        """The job as Ray knows it; None when Ray does not know it (never submitted, the head
        that ran it is gone, or only a record Ray wrote back after deleting it is left: see
        RECREATED_ENTRYPOINT). Other errors (Ray unreachable) raise."""
        try:
            details = self._client.get_job_info(job_id)
        except RuntimeError as error:
            if "status code 404" in str(error) or "does not exist" in str(error):
                return None
            raise
        if getattr(details, "entrypoint", None) == RECREATED_ENTRYPOINT:
            return None
        return RayJobInfo(
            status=RayStatus(str(details.status)),
            message=details.message or "",
            exit_code=getattr(details, "driver_exit_code", None),
            error_type=getattr(details, "error_type", None),
        )

    def submit(self, spec: RayJobSpec) -> bool:
        """Submit the job unless Ray has it already (idempotent); True when this call did.

        RayRefused when Ray refuses it (4xx); other errors (Ray busy or unreachable) are worth
        asking again."""
        if self.info(spec.job_id) is not None:
            return False
        with tempfile.TemporaryDirectory(prefix="artbot-ray-") as folder:
            working_dir = Path(folder)
            _write_working_dir(working_dir, spec)
            try:
                self._client.submit_job(
                    entrypoint=entrypoint(spec),
                    submission_id=spec.job_id,
                    runtime_env={"working_dir": str(working_dir)},
                    entrypoint_num_gpus=spec.num_gpus,
                    metadata={"artbot_job_id": spec.job_id},
                )
            except RuntimeError as error:
                if "already exists" in str(error):
                    return False  # a submit of this job raced with ours: it is there once
                if _refused(error):
                    raise RayRefused(str(error)) from None
                raise
        return True

    def stop(self, job_id: str) -> None:
        """Ask Ray to stop the job (SIGTERM, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S)."""
        try:
            self._client.stop_job(job_id)
        except RuntimeError as error:
            if "status code 404" not in str(error) and "does not exist" not in str(error):
                raise

    def logs(self, job_id: str) -> str:
        """The job's whole output so far."""
        return str(self._client.get_job_logs(job_id))

    def tail(self, job_id: str) -> AsyncIterator[str]:
        """The job's output from its start, as it is printed, until the job ends."""
        return self._client.tail_job_logs(job_id)

    def job_ids(self) -> list[str]:
        """The submission ids of every job Ray knows."""
        return [job.submission_id for job in self._client.list_jobs() if job.submission_id]


def _write_working_dir(folder: Path, spec: RayJobSpec) -> None:
    """The script, the wrapper and the secrets file (readable by its owner only)."""
    (folder / spec.script_name).write_text(spec.script, encoding="utf-8")
    shutil.copyfile(ray_entry.__file__, folder / ENTRY_NAME)
    secrets = folder / ray_entry.SECRETS_FILE
    descriptor = os.open(secrets, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(dict(spec.secrets), file)
