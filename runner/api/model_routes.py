"""The routes of a finished job's model, each a thin call into the JobService's `checkpoints`:
its checkpoints and the chosen one, its export to the Hugging Face Hub, and its adapter as a
.tar.gz, behind the token or through a signed link (`/downloads/<signed>`, without the token:
the link is the key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response
from fastapi.responses import StreamingResponse

from runner.api.auth import require_token
from runner.api.routes import MAX_SEQ, JobId, Service
from runner.checkpoints.service import Archive
from runner.schemas import Checkpoints, ChooseCheckpoint, DownloadLink, Export, ExportRequest

Step = Annotated[int, Path(ge=0, le=MAX_SEQ)]
Signed = Annotated[str, Path(min_length=1, max_length=200)]

models = APIRouter(prefix="/jobs", tags=["models"], dependencies=[Depends(require_token)])
downloads = APIRouter(tags=["models"])


@models.get("/{job_id}/checkpoints", response_model=Checkpoints)
def checkpoints(job_id: JobId, service: Service) -> Checkpoints:
    """A LocalBackend job's checkpoints, ascending, with the val/reward and train/reward logged
    at each step, the best, the chosen and the model's step (what serve, export and download use
    by default). 409 on the Ray executor and for a ServerlessBackend job."""
    return service.checkpoints.listing(job_id)


@models.put("/{job_id}/model", response_model=Checkpoints)
def choose(job_id: JobId, choice: ChooseCheckpoint, service: Service) -> Checkpoints:
    """Make a checkpoint the job's model (kept across restarts). 409 while the job is queued or
    running, and for a step it has no checkpoint of."""
    return service.checkpoints.choose(job_id, choice.step)


@models.post(
    "/{job_id}/exports",
    response_model=Export,
    status_code=202,
    responses={200: {"model": Export, "description": "the same export, already under way"}},
)
def export(job_id: JobId, request: ExportRequest, response: Response, service: Service) -> Export:
    """Push a checkpoint's LoRA adapter (the model's by default) to a Hugging Face Hub repository,
    created private unless asked otherwise (202; 200 with the same export already under way).
    Follow the job's events for `exported` or `export_failed`. 409 without HF_TOKEN on the
    runner, while another export of the job is under way, or as for the checkpoints."""
    started, created = service.checkpoints.export(job_id, request)
    if not created:
        response.status_code = 200
    return started


@models.get("/{job_id}/exports", response_model=Export)
def export_status(job_id: JobId, service: Service) -> Export:
    """The job's latest export; 404 when it never had one."""
    return service.checkpoints.export_status(job_id)


@models.get(
    "/{job_id}/checkpoints/{step}/adapter.tar.gz",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/gzip": {}}}},
)
def adapter(job_id: JobId, step: Step, service: Service) -> StreamingResponse:
    """The checkpoint's folder (the LoRA adapter) as a .tar.gz, its files at the archive's root:
    regular files only, no symlink followed. 404 for a step the job has no checkpoint of."""
    return _streamed(service.checkpoints.archive(job_id, step))


@models.post("/{job_id}/checkpoints/{step}/download-link", response_model=DownloadLink)
def download_link(job_id: JobId, step: Step, service: Service) -> DownloadLink:
    """A signed `path` on this runner that downloads the checkpoint's adapter without the token
    until `expires_at` (ARTBOT_RUNNER_DOWNLOAD_LINK_LIFETIME_S): whoever has it can use it."""
    return service.checkpoints.download_link(job_id, step)


@downloads.get(
    "/downloads/{signed}",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/gzip": {}}}},
)
def download(signed: Signed, service: Service) -> StreamingResponse:
    """A download link's adapter, without the token: 401 for what is not a link of this runner,
    403 for a signature that does not match it, 410 for an expired link."""
    return _streamed(service.checkpoints.download(signed))


def _streamed(archive: Archive) -> StreamingResponse:
    return StreamingResponse(
        archive.chunks,
        media_type="application/gzip",
        headers={
            "Content-Disposition": f'attachment; filename="{archive.filename}"',
            "Cache-Control": "no-store",
        },
    )
