"""The use cases of a job's trained model, as the routes call them (through JobService's
`checkpoints`): list the checkpoints, choose the model, export it to the Hub, download an
adapter with the token or with a signed link.

Only a LocalBackend job's checkpoints are on the runner, and only on the local executor (a Ray
job's stay on the Ray node that ran it; a ServerlessBackend job's are W&B artifacts): anything
else is refused (409), as serving is. A job still queued or running lists what it has so far;
choosing, exporting and downloading wait for its end. Domain errors only: nothing here knows
about HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from runner.checkpoints.archive import tar_gz
from runner.checkpoints.download_links import DownloadSigner
from runner.checkpoints.export_hub import ExportTarget, HubExports
from runner.checkpoints.listing import ModelFolder, list_checkpoints, model_folder
from runner.errors import CheckpointNotFound, CheckpointRefused, NoExport
from runner.records.recorder import JobRecorder
from runner.records.rows import JobRow
from runner.schemas import (
    Checkpoints,
    DownloadLink,
    EventType,
    Export,
    ExportRequest,
    ExportState,
)
from runner.settings import RunnerSettings

DOWNLOADS_PATH = "/downloads"
SHOWN_STEPS = 20
"""The steps a refusal names (the latest ones)."""
FILENAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
"""What may not go into the download's file name (model.json's name is the job's to write)."""


@dataclass(frozen=True)
class Archive:
    """A checkpoint's adapter as a download: its file name and its .tar.gz, in pieces."""

    filename: str
    chunks: Iterator[bytes]


class CheckpointService:
    """A job's checkpoints on this runner: listed, chosen, exported, downloaded."""

    def __init__(
        self,
        settings: RunnerSettings,
        workdir: Path,
        recorder: JobRecorder,
        environ: Mapping[str, str],
    ) -> None:
        self._settings = settings
        self._recorder = recorder
        self._store = recorder.store
        self.exports = HubExports(settings, workdir, recorder, environ)
        self._signer = DownloadSigner(settings.token.get_secret_value())

    # -- listing and the choice --

    def listing(self, job_id: str) -> Checkpoints:
        """The job's checkpoints with their rewards, the best, the chosen and the model's step."""
        return list_checkpoints(self._local_job(job_id))

    def choose(self, job_id: str, step: int) -> Checkpoints:
        """Make checkpoint `step` the finished job's model (kept in the job store)."""
        job = self._local_job(job_id, finished=True)
        self._folder(job, step, CheckpointRefused)
        chosen = self._store.choose_step(job.id, step)
        if chosen is None:  # pragma: no cover - finished jobs stay finished
            raise CheckpointRefused(f"job {job.id} is {job.state.value}")
        return list_checkpoints(chosen)

    # -- export to the Hub --

    def export(self, job_id: str, request: ExportRequest) -> tuple[Export, bool]:
        """Push the checkpoint (the model's by default) to the Hub: (export, created)."""
        job = self._local_job(job_id, finished=True)
        step = request.step if request.step is not None else list_checkpoints(job).model_step
        if step is None:
            raise CheckpointRefused(f"job {job.id} left no checkpoint to export")
        found = self._folder(job, step, CheckpointRefused)
        target = ExportTarget(
            job_id=job.id,
            step=step,
            repo_id=request.repo_id,
            private=request.private,
            folder=found.checkpoint(step),
            model=found.name,
            base_model=found.base_model,
        )
        return self.exports.start(target, after_seq=job.last_event_seq)

    def export_status(self, job_id: str) -> Export:
        """The job's latest export: this runner's, else the last one its events tell."""
        self._store.require(job_id)
        latest = self.exports.latest(job_id)
        if latest is not None:
            return latest
        told = self._store.events_of_types(job_id, [EventType.exported, EventType.export_failed])
        if not told:
            raise NoExport(f"job {job_id} was never exported: POST /jobs/{job_id}/exports first")
        event = told[-1]
        done = event.type is EventType.exported
        return Export(
            job_id=job_id,
            step=int(event.data.get("step", 0)),
            repo_id=str(event.data.get("repo_id", "")),
            private=bool(event.data.get("private", True)),
            state=ExportState.done if done else ExportState.failed,
            url=event.data.get("url") if done else None,
            commit=event.data.get("commit") if done else None,
            error=None if done else str(event.data.get("reason", "")),
            after_seq=event.seq - 1,
        )

    # -- downloads --

    def archive(self, job_id: str, step: int) -> Archive:
        """Checkpoint `step`'s adapter as a .tar.gz (for a caller with the runner's token)."""
        job = self._local_job(job_id, finished=True)
        found = self._folder(job, step, CheckpointNotFound)
        name = FILENAME_UNSAFE.sub("-", f"{found.name}-step{step}-adapter.tar.gz")
        return Archive(name, tar_gz(found.checkpoint(step)))

    def download_link(self, job_id: str, step: int) -> DownloadLink:
        """A signed path that downloads checkpoint `step`'s adapter without the token, for
        `download_link_lifetime_s`."""
        job = self._local_job(job_id, finished=True)
        self._folder(job, step, CheckpointNotFound)
        signed, expires_at = self._signer.sign(
            job.id, step, self._settings.download_link_lifetime_s
        )
        return DownloadLink(
            job_id=job.id, step=step, path=f"{DOWNLOADS_PATH}/{signed}", expires_at=expires_at
        )

    def download(self, signed: str) -> Archive:
        """What a download link opens (DownloadLinkRefused's kinds when it does not)."""
        opened = self._signer.open(signed)
        return self.archive(opened.job_id, opened.step)

    # -- lifecycle --

    def recover(self) -> None:
        self.exports.recover()

    def stop_all(self, timeout_s: float) -> None:
        self.exports.stop_all(timeout_s)

    # -- checks --

    def _local_job(self, job_id: str, *, finished: bool = False) -> JobRow:
        """The job, when its checkpoints are on this runner (and it has ended, if `finished`)."""
        job = self._store.require(job_id)
        if self._settings.executor == "ray":
            raise CheckpointRefused(
                "checkpoints are not available on the Ray executor: a job's checkpoints stay on "
                "the Ray node that ran it"
            )
        if job.backend != "local":
            raise CheckpointRefused(
                f"job {job.id} trained with ServerlessBackend: its checkpoints are W&B artifacts "
                "(type `lora`) of its project, not on the runner"
            )
        if finished and not job.state.finished:
            raise CheckpointRefused(
                f"job {job.id} is {job.state.value}: its checkpoints can be chosen, exported and "
                "downloaded once it has ended"
            )
        return job

    @staticmethod
    def _folder(
        job: JobRow, step: int, missing: type[CheckpointRefused] | type[CheckpointNotFound]
    ) -> ModelFolder:
        found = model_folder(Path(job.run_dir))
        if found is None or step not in found.steps:
            steps = found.steps if found else []
            said = ", ".join(map(str, steps[-SHOWN_STEPS:])) or "none"
            more = "..., " if len(steps) > SHOWN_STEPS else ""
            raise missing(f"job {job.id} has no checkpoint of step {step} (it has: {more}{said})")
        return found
