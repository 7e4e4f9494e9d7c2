"""The routes, each a thin call into the JobService that `create_app` put in `app.state`:
/health and /metrics without a token; /jobs... and /openapi.json behind it. A finished job's
model (checkpoints, export, downloads) has its own: runner.api.model_routes."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from runner.api.auth import require_token
from runner.api.metrics import CONTENT_TYPE, RunnerMetrics
from runner.api.serving_proxy import pass_on
from runner.jobs.service import EVENTS_PAGE_LIMIT, JOBS_PAGE_LIMIT, MAX_LOG_TAIL_BYTES, JobService
from runner.schemas import (
    EventsPage,
    Health,
    Job,
    JobsPage,
    JobState,
    JobSubmission,
    LogTail,
    RolloutsPage,
    Serving,
)

MAX_WAIT_S = 30.0
DEFAULT_LOG_TAIL_BYTES = 64 * 1024
MAX_SEQ = 2**31 - 1
"""The largest seq a job can have: events are numbered in a 32-bit column (PostgreSQL INTEGER)."""
JOB_ID = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")


def get_service(request: Request) -> JobService:
    """The app's job service."""
    return request.app.state.service


def get_metrics(request: Request) -> RunnerMetrics:
    """The app's Prometheus metrics."""
    return request.app.state.metrics


Service = Annotated[JobService, Depends(get_service)]
Metrics = Annotated[RunnerMetrics, Depends(get_metrics)]
JobId = Annotated[str, JOB_ID]

public = APIRouter()
protected = APIRouter(dependencies=[Depends(require_token)])
jobs = APIRouter(prefix="/jobs", tags=["jobs"], dependencies=[Depends(require_token)])


@public.get("/health", response_model=Health, tags=["runner"])
def health(service: Service) -> Health:
    """Liveness and capacity, without a token: version, GPUs, slots, queue."""
    return service.health()


@public.get("/metrics", tags=["runner"], response_class=PlainTextResponse)
def metrics_text(metrics: Metrics) -> PlainTextResponse:
    """Prometheus metrics, without a token like /health (counts only, no job ids): the queue,
    jobs by state, GPU slots in use, long-polls waiting and the event lag."""
    return PlainTextResponse(metrics.exposition(), media_type=CONTENT_TYPE)


@protected.get("/openapi.json", include_in_schema=False)
def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()


@jobs.post(
    "",
    response_model=Job,
    status_code=202,
    responses={200: {"model": Job, "description": "the job this idempotency key already made"}},
)
def submit(submission: JobSubmission, response: Response, service: Service) -> Job:
    """Queue a script: 202 with the new job; 200 with the same job for a repeated
    idempotency key; 409 when that key was used for a different submission."""
    job, created = service.submit(submission)
    if not created:
        response.status_code = 200
    return job


@jobs.get("", response_model=JobsPage)
def list_jobs(
    service: Service,
    state: Annotated[list[JobState] | None, Query(description="repeat for several")] = None,
    before: Annotated[
        str | None, Query(max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="a job id")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=JOBS_PAGE_LIMIT)] = 50,
) -> JobsPage:
    """Jobs newest first; `state` filters, `before` pages on (the previous page's
    `next_before`)."""
    return service.jobs(state or [], before, limit)


@jobs.get("/{job_id}", response_model=Job)
def get_job(job_id: JobId, service: Service) -> Job:
    return service.job(job_id)


@jobs.get("/{job_id}/events", response_model=EventsPage)
async def events(
    job_id: JobId,
    service: Service,
    metrics: Metrics,
    after: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_S,
            allow_inf_nan=False,
            description=f"seconds to wait for an event (at most {MAX_WAIT_S:g})",
        ),
    ] = 0.0,
    limit: Annotated[int, Query(ge=1, le=EVENTS_PAGE_LIMIT)] = EVENTS_PAGE_LIMIT,
) -> EventsPage:
    """Events after `after`; with `wait` (the long-poll), waits for the next one when there are
    none yet and the job is not finished: the answer comes as soon as the runner records one."""
    page = await _next_events(service, job_id, after, limit, wait)
    if wait > 0:  # a follower's long-poll: how late it learns of the events
        metrics.delivered(page)
    return page


@jobs.get("/{job_id}/rollouts", response_model=RolloutsPage)
def rollouts(
    job_id: JobId,
    service: Service,
    step: Annotated[int | None, Query(ge=0, le=MAX_SEQ, description="default: the latest")] = None,
) -> RolloutsPage:
    """The best and worst validation rollouts of a step, and the steps that have them."""
    return service.rollouts(job_id, step)


async def _next_events(
    service: JobService, job_id: str, after: int, limit: int, wait: float
) -> EventsPage:
    page = await run_in_threadpool(service.events, job_id, after, limit)
    if page.events or page.finished or wait <= 0:
        return page
    with service.wakeups.subscribe(job_id) as arrived:
        # Read again once subscribed: an event stored in between is not missed.
        page = await run_in_threadpool(service.events, job_id, after, limit)
        if page.events or page.finished:
            return page
        try:
            await asyncio.wait_for(arrived.wait(), timeout=wait)
        except TimeoutError:
            return page
    return await run_in_threadpool(service.events, job_id, after, limit)


@jobs.post("/{job_id}/cancel", response_model=Job)
def cancel(job_id: JobId, service: Service) -> Job:
    """A queued job is cancelled at once; a running one gets SIGTERM, then SIGKILL after
    the grace period (follow the events for `cancelled`). A finished job is returned as is."""
    return service.cancel(job_id)


@jobs.get("/{job_id}/log", response_model=LogTail)
def log_tail(
    job_id: JobId,
    service: Service,
    tail_bytes: Annotated[int, Query(ge=0, le=MAX_LOG_TAIL_BYTES)] = DEFAULT_LOG_TAIL_BYTES,
) -> LogTail:
    """The end of the job's output (stdout and stderr together)."""
    return service.log_tail(job_id, tail_bytes)


@jobs.post(
    "/{job_id}/serve",
    response_model=Serving,
    status_code=202,
    responses={200: {"model": Serving, "description": "the job's serving job, already there"}},
)
def serve(job_id: JobId, response: Response, service: Service) -> Serving:
    """Serve a succeeded LocalBackend job's model for a while: its chosen checkpoint, else its
    best (see `/jobs/{id}/checkpoints`) (202; 200 with the one already there). Follow the job's
    events for `serving`, then call `/jobs/{id}/serve/v1/chat/completions`. 409 for a job whose
    model cannot be served here."""
    serving, created = service.serve(job_id)
    if not created:
        response.status_code = 200
    return serving


@jobs.get("/{job_id}/serve", response_model=Serving)
def serving_status(job_id: JobId, service: Service) -> Serving:
    """The job's serving job (its last one when stopped); 404 when it never had one."""
    return service.serving.status(job_id)


@jobs.delete("/{job_id}/serve", response_model=Serving)
def stop_serving(job_id: JobId, service: Service) -> Serving:
    """Stop the job's serving job (the `stopped` event follows); 404 when it has none."""
    return service.serving.stop(job_id)


@jobs.api_route("/{job_id}/serve/v1/{path:path}", methods=["GET", "POST"], include_in_schema=False)
async def serving_api(job_id: JobId, path: str, request: Request, service: Service) -> Response:
    """The serving job's OpenAI-compatible API (chat/completions, completions, models)."""
    return await pass_on(service, job_id, path, request)
