"""Exports to the Hugging Face Hub: a checkpoint's LoRA adapter folder, with a model card, pushed
to a repository its owner names (created when missing, private by default), in the background.

Each export runs on a thread of its own: the checkpoint's regular files are copied into the
job's runner folder (`.runner/export-<id>/`, read as runner.checkpoints.job_files reads a job's
files: a symlink the job planted is not followed, so nothing but the job's own files leaves), the
card is written beside them, then `HfApi.create_repo(..., exist_ok=True)` and `upload_folder`
push them in one commit. At most one export per job at a time, at most
`ARTBOT_RUNNER_EXPORT_MAX_UPLOADS` uploading at once (the others wait, `queued`), and at most
MAX_EXPORTS queued or uploading in all.

The Hub token is HF_TOKEN of the runner's environment and the Hub HF_ENDPOINT's (huggingface_hub's
default otherwise). The token goes nowhere but into huggingface_hub's requests: what is said of a
failure is redacted (the runner's Redactor knows its value) and says what to do. The outcome is an
`exported` or `export_failed` event in the job's events. A runner that stops mid-upload leaves
`.runner/export.json`; the next start records `export_failed` for it. The export itself lives in
this runner's memory; a later runner tells the last one from its event.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.checkpoints.job_files import JobPath, copy_folder
from runner.checkpoints.model_card import model_card
from runner.errors import CheckpointRefused
from runner.jobs.job_folder import runner_dir
from runner.jobs.local.supervisor import write_whole_json
from runner.records.recorder import JobRecorder
from runner.schemas import EventType, Export, ExportState
from runner.settings import RunnerSettings

log = logging.getLogger(__name__)

MARKER_FILE = "export.json"
STAGING_PREFIX = "export-"
MAX_EXPORTS = 16
CONNECT_TIMEOUT_S = 30.0
"""Exports queued or uploading on the runner at once; one more is refused (409)."""
WAKE_S = 0.25
MAX_REASON_CHARS = 1_500
NO_TOKEN = (
    "the runner has no Hugging Face token: set HF_TOKEN (a token with write access) in the "
    "runner's environment and restart it"
)


@dataclass(frozen=True)
class ExportTarget:
    """What to push where: a checkpoint's folder and what the card says of it."""

    job_id: str
    step: int
    repo_id: str
    private: bool
    folder: JobPath
    model: str
    base_model: str | None


@dataclass
class _Export:
    target: ExportTarget
    after_seq: int
    state: ExportState = ExportState.queued
    url: str | None = None
    commit: str | None = None
    error: str | None = None

    @property
    def active(self) -> bool:
        return self.state in (ExportState.queued, ExportState.uploading)

    def view(self) -> Export:
        target = self.target
        return Export(
            job_id=target.job_id,
            step=target.step,
            repo_id=target.repo_id,
            private=target.private,
            state=self.state,
            url=self.url,
            commit=self.commit,
            error=self.error,
            after_seq=self.after_seq,
        )


class HubExports:
    """This runner's exports: start one, read the latest of a job, stop them all."""

    def __init__(
        self,
        settings: RunnerSettings,
        workdir: Path,
        recorder: JobRecorder,
        environ: Mapping[str, str],
    ) -> None:
        self._workdir = workdir
        self._recorder = recorder
        self._token = environ.get("HF_TOKEN", "").strip() or None
        self._endpoint = environ.get("HF_ENDPOINT", "").strip().rstrip("/") or None
        self._uploads = threading.BoundedSemaphore(settings.export_max_uploads)
        self._timeout_s = settings.export_timeout_s
        self._lock = threading.Lock()
        self._exports: dict[str, _Export] = {}
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()

    def start(self, target: ExportTarget, after_seq: int) -> tuple[Export, bool]:
        """The job's export of `target`: the one under way when it is the same, or a new one:
        (export, created). CheckpointRefused without a token, while another export of the job
        is under way, and beyond MAX_EXPORTS."""
        if self._token is None:
            raise CheckpointRefused(NO_TOKEN)
        with self._lock:
            current = self._exports.get(target.job_id)
            if current is not None and current.active:
                if current.target == target:
                    return current.view(), False
                raise CheckpointRefused(
                    f"job {target.job_id} is already exporting step {current.target.step} to "
                    f"{current.target.repo_id}: wait for it to end "
                    f"(GET /jobs/{target.job_id}/exports)"
                )
            if self._closing.is_set():
                raise CheckpointRefused("the runner is stopping")
            under_way = sum(export.active for export in self._exports.values())
            if under_way >= MAX_EXPORTS:
                raise CheckpointRefused(
                    f"{under_way} exports are under way on this runner, the most it takes: "
                    "try again when one has ended"
                )
            export = _Export(target, after_seq)
            self._exports[target.job_id] = export
            thread = threading.Thread(
                target=self._run, args=(export,), name=f"export-{target.job_id}", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        log.info(
            "job %s: export of step %d to %s queued", target.job_id, target.step, target.repo_id
        )
        thread.start()
        return export.view(), True

    def latest(self, job_id: str) -> Export | None:
        """The job's latest export on this runner, if it had one."""
        with self._lock:
            export = self._exports.get(job_id)
        return export.view() if export is not None else None

    def active(self, job_id: str) -> bool:
        """Whether an export of the job is under way (its event is still to come)."""
        with self._lock:
            export = self._exports.get(job_id)
        return export is not None and export.active

    # -- lifecycle --

    def recover(self) -> None:
        """At start-up: an export a previous runner left mid-way failed; say so, and clean up."""
        for marker in sorted(self._workdir.glob(f"*/.runner/{MARKER_FILE}")):
            job_id = marker.parent.parent.name
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                left = json.loads(marker.read_text(encoding="utf-8"))
                if self._recorder.store.get(job_id) is not None:
                    self._recorder.emit(
                        job_id,
                        EventType.export_failed,
                        {
                            "step": int(left["step"]),
                            "repo_id": str(left["repo_id"]),
                            "private": bool(left.get("private", True)),
                            "reason": "the runner stopped during the upload: export again",
                        },
                    )
            marker.unlink(missing_ok=True)
            for staging in marker.parent.glob(f"{STAGING_PREFIX}*"):
                shutil.rmtree(staging, ignore_errors=True)
            log.info("job %s: an export the previous runner left was recorded failed", job_id)

    def stop_all(self, timeout_s: float) -> None:
        """The runner stops: queued exports end (failed), and uploads get `timeout_s` to end."""
        self._closing.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout_s)

    # -- the export's thread --

    def _run(self, export: _Export) -> None:
        while not self._uploads.acquire(timeout=WAKE_S):
            if self._closing.is_set():
                return self._end(
                    export, error="the runner stopped before the upload started: export again"
                )
        try:
            export.state = ExportState.uploading
            url, commit = self._push(export.target)
        except Exception as error:
            reason = self._recorder.redactor.text(
                failure_advice(error, export.target, self._endpoint)
            )
            log.warning(
                "job %s: export to %s failed: %s",
                export.target.job_id,
                export.target.repo_id,
                reason,
            )
            self._end(export, error=reason)
        else:
            self._end(export, url=url, commit=commit)
        finally:
            self._uploads.release()

    def _push(self, target: ExportTarget) -> tuple[str, str]:
        """Copy, card, create, upload: (the repository's URL, the commit's id)."""
        from huggingface_hub import HfApi
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()  # a server's log is no terminal
        with_timeouts(self._timeout_s)
        folder = runner_dir(self._workdir, target.job_id)
        folder.mkdir(parents=True, exist_ok=True)
        marker = folder / MARKER_FILE
        staging = folder / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        write_whole_json(
            marker, {"step": target.step, "repo_id": target.repo_id, "private": target.private}
        )
        try:
            staging.mkdir()
            try:
                copy_folder(target.folder, staging)
            except OSError as error:
                raise CheckpointUnreadable(target) from error
            (staging / "README.md").write_text(
                model_card(
                    repo_id=target.repo_id,
                    base_model=target.base_model,
                    model=target.model,
                    step=target.step,
                    job_id=target.job_id,
                ),
                encoding="utf-8",
            )
            api = HfApi(endpoint=self._endpoint, token=self._token)
            url = api.create_repo(
                target.repo_id, private=target.private, exist_ok=True, repo_type="model"
            )
            if target.private and not api.repo_info(target.repo_id, repo_type="model").private:
                raise PublicRepository(target)
            message = f"artbot: {target.model} step {target.step} from job {target.job_id}"
            commit = api.upload_folder(
                folder_path=staging,
                repo_id=target.repo_id,
                repo_type="model",
                commit_message=message,
            )
            return str(url), str(commit.oid)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            marker.unlink(missing_ok=True)

    def _end(
        self,
        export: _Export,
        *,
        url: str | None = None,
        commit: str | None = None,
        error: str | None = None,
    ) -> None:
        target = export.target
        base = {"step": target.step, "repo_id": target.repo_id, "private": target.private}
        # The event before the state: a long-poll that sees the job finished has read it.
        if error is None:
            self._recorder.emit(
                target.job_id, EventType.exported, {**base, "url": url, "commit": commit}
            )
            export.url, export.commit = url, commit
            export.state = ExportState.done
            log.info("job %s: step %d exported to %s", target.job_id, target.step, target.repo_id)
        else:
            self._recorder.emit(target.job_id, EventType.export_failed, {**base, "reason": error})
            export.error = error
            export.state = ExportState.failed


class CheckpointUnreadable(Exception):
    """The checkpoint's folder is gone, or is not a plain folder of the job's."""

    def __init__(self, target: ExportTarget) -> None:
        super().__init__(
            f"the runner could not read step {target.step}'s checkpoint folder (gone, or not a "
            "plain folder of the job's): list the checkpoints again and export one that is there"
        )


class PublicRepository(Exception):
    """A private export to a repository that exists and is public."""

    def __init__(self, target: ExportTarget) -> None:
        super().__init__(
            f"{target.repo_id} already exists on the Hub and is public, and this export is "
            "private: nothing was uploaded. Name a new repository, make that one private on the "
            "Hub, or export publicly"
        )


_timeouts_lock = threading.Lock()
_timeouts_set: list[float] = []


def with_timeouts(seconds: float) -> None:
    """Make huggingface_hub's shared HTTP client give up after `seconds` without an answer (or
    without taking the next bytes of an upload), and after 30 s without a connection: its own
    client has no timeout, so a Hub that takes the connection and never answers would hold an
    upload slot until the runner stops. Set once per process (the client is huggingface_hub's
    global; this runner is its only user here)."""
    import httpx2
    from huggingface_hub.utils import set_client_factory
    from huggingface_hub.utils._http import hf_request_event_hook

    with _timeouts_lock:
        if _timeouts_set == [seconds]:
            return

        def client() -> httpx2.Client:
            return httpx2.Client(
                event_hooks={"request": [hf_request_event_hook]},
                follow_redirects=True,
                timeout=httpx2.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT_S)),
            )

        set_client_factory(client)
        _timeouts_set[:] = [seconds]


def failure_advice(error: Exception, target: ExportTarget, endpoint: str | None) -> str:
    """What went wrong, and what to do, in words for the owner (redact before showing it)."""
    from huggingface_hub.errors import HfHubHTTPError

    namespace = target.repo_id.split("/", 1)[0]
    hub = endpoint or "the Hugging Face Hub"
    if isinstance(error, CheckpointUnreadable | PublicRepository):
        return str(error)
    if isinstance(error, HfHubHTTPError):
        status = error.response.status_code if error.response is not None else 0
        said = _first_line(error.server_message or "") or _first_line(error)
        if status == 401:
            return (
                f"the Hub refused the runner's HF_TOKEN (401: {said}): it is invalid, expired, "
                f"or has no write access. Give the runner a token with write access to "
                f"{namespace} and restart it"
            )
        if status in (403, 404):
            return (
                f"the runner's HF_TOKEN may not write to {namespace} ({status}: {said}): export "
                "to your own namespace or an organization the token can write to, or give the "
                "token write access there"
            )
        if status == 429 or status >= 500:
            return f"the Hub is busy or failing ({status}: {said}): try the export again later"
        return f"the Hub refused the upload ({status}: {said})"
    names = {kind.__name__ for kind in type(error).__mro__}
    if "ReadTimeout" in names or "WriteTimeout" in names:
        return (
            f"{hub} stopped answering ({type(error).__name__}): try the export again later "
            "(ARTBOT_RUNNER_EXPORT_TIMEOUT_S is how long the runner waits for it)"
        )
    if isinstance(error, OSError) or names & {"TransportError", "TimeoutException"}:
        return (
            f"the runner could not reach {hub} ({type(error).__name__}: {_first_line(error)}): "
            "check the GPU host's network (and HF_ENDPOINT), then export again"
        )
    return f"the export failed: {type(error).__name__}: {_first_line(error) or 'no message'}"


def _first_line(said: object) -> str:
    lines = [line.strip() for line in str(said).splitlines() if line.strip()]
    return lines[0][:MAX_REASON_CHARS] if lines else ""
