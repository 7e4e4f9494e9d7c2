"""The runner's HTTP API (FastAPI): thin handlers over JobService, errors mapped to statuses.

Every route but /health needs `Authorization: Bearer <token>`, /openapi.json included.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from runner.errors import (
    IdempotencyConflict,
    InvalidSubmission,
    JobNotFound,
    JobRequestError,
    ResumeConflict,
    SubmissionTooLarge,
)
from runner.schemas import EventsPage, Health, Job, JobSubmission, LogTail
from runner.service import JobService

log = logging.getLogger(__name__)

MAX_WAIT_S = 30.0
DEFAULT_LOG_TAIL_BYTES = 64 * 1024
# A 2 MB script, JSON-escaped (a newline is two bytes, a quote two), plus the other fields.
MAX_BODY_BYTES = 10 * 1024 * 1024
JOB_ID = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")

STATUS_BY_ERROR: tuple[tuple[type[JobRequestError], int], ...] = (
    (JobNotFound, 404),
    (SubmissionTooLarge, 413),
    (InvalidSubmission, 422),
    (IdempotencyConflict, 409),
    (ResumeConflict, 409),
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Unauthorized(Exception):
    pass


class BodyLimit:
    """Refuses request bodies over `limit` bytes (413) before they are read into memory.

    The declared Content-Length is checked (the server holds the body to it); a body without
    one (chunked) is refused with 411, so nothing unbounded is ever read.
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            headers = dict(scope.get("headers") or [])
            declared = headers.get(b"content-length")
            if declared is None and b"transfer-encoding" in headers:
                await _refuse(send, 411, "send the body with a Content-Length")
                return
            if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
                await _refuse(send, 413, f"request body over {self.limit} bytes")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def create_app(service: JobService, token: str) -> FastAPI:
    """The API over `service`; requests must bear `token`."""
    expected = token.encode()

    def require_token(request: Request) -> None:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        # compare_digest: the time taken does not tell how much of the token was right.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            raise Unauthorized

    authorized = [Depends(require_token)]
    app = FastAPI(
        title="artbot runner",
        summary="Runs approved ART training scripts on this GPU host and reports their progress.",
        version=service.health().version,
        openapi_url=None,  # served below, behind the token
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(Unauthorized)
    async def _unauthorized(request: Request, error: Unauthorized) -> JSONResponse:
        return JSONResponse(
            {"detail": "missing or wrong bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.exception_handler(JobRequestError)
    async def _domain_error(request: Request, error: JobRequestError) -> JSONResponse:
        status = next((code for kind, code in STATUS_BY_ERROR if isinstance(error, kind)), 400)
        return JSONResponse({"detail": str(error)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = []
        for problem in error.errors():
            where = ".".join(
                str(part)
                for part in problem.get("loc", ())
                if part not in ("body", "query", "path")
            )
            problems.append(
                f"{where}: {problem.get('msg', 'invalid')}" if where else str(problem.get("msg"))
            )
        oversized = any(
            problem.get("type") == "string_too_long"
            and tuple(problem.get("loc", ()))[-1:] == ("script",)
            for problem in error.errors()
        )
        return JSONResponse(
            {"detail": "; ".join(problems) or "invalid request", "errors": _plain(error.errors())},
            status_code=413 if oversized else 422,
        )

    @app.get("/health", response_model=Health, tags=["runner"])
    def health() -> Health:
        """Liveness and capacity, without a token: version, GPUs, slots, queue."""
        return service.health()

    @app.get("/openapi.json", include_in_schema=False, dependencies=authorized)
    def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.post(
        "/jobs",
        response_model=Job,
        status_code=202,
        dependencies=authorized,
        tags=["jobs"],
        responses={200: {"model": Job, "description": "the job this idempotency key already made"}},
    )
    def submit(submission: JobSubmission, response: Response) -> Job:
        """Queue a script: 202 with the new job; 200 with the same job for a repeated
        idempotency key; 409 when that key was used for a different submission."""
        job, created = service.submit(submission)
        if not created:
            response.status_code = 200
        return job

    @app.get("/jobs/{job_id}", response_model=Job, dependencies=authorized, tags=["jobs"])
    def get_job(job_id: Annotated[str, JOB_ID]) -> Job:
        return service.job(job_id)

    @app.get(
        "/jobs/{job_id}/events", response_model=EventsPage, dependencies=authorized, tags=["jobs"]
    )
    async def events(
        job_id: Annotated[str, JOB_ID],
        after: Annotated[int, Query(ge=0)] = 0,
        wait: Annotated[
            float, Query(ge=0, description=f"seconds to wait for an event (at most {MAX_WAIT_S:g})")
        ] = 0.0,
        limit: Annotated[int, Query(ge=1, le=500)] = 500,
    ) -> EventsPage:
        """Events after `after`; with `wait`, waits for the next one when there are none yet."""
        page = await run_in_threadpool(service.events, job_id, after, limit)
        wait = min(wait, MAX_WAIT_S)
        if page.events or page.finished or wait <= 0:
            return page
        with service.notifier.subscribe(job_id) as arrived:
            # Read again once subscribed: an event stored in between is not missed.
            page = await run_in_threadpool(service.events, job_id, after, limit)
            if page.events or page.finished:
                return page
            try:
                await asyncio.wait_for(arrived.wait(), timeout=wait)
            except TimeoutError:
                return page
        return await run_in_threadpool(service.events, job_id, after, limit)

    @app.post("/jobs/{job_id}/cancel", response_model=Job, dependencies=authorized, tags=["jobs"])
    def cancel(job_id: Annotated[str, JOB_ID]) -> Job:
        """A queued job is cancelled at once; a running one gets SIGTERM, then SIGKILL after
        the grace period (follow the events for `cancelled`). A finished job is returned as is."""
        return service.cancel(job_id)

    @app.get("/jobs/{job_id}/log", response_model=LogTail, dependencies=authorized, tags=["jobs"])
    def log_tail(
        job_id: Annotated[str, JOB_ID],
        tail_bytes: Annotated[int, Query(ge=0, le=1024 * 1024)] = DEFAULT_LOG_TAIL_BYTES,
    ) -> LogTail:
        """The end of the job's output (stdout and stderr together)."""
        return service.log_tail(job_id, tail_bytes)

    return app


def _plain(value: Any) -> Any:
    # Validation errors may carry exceptions in `ctx`; JSON needs plain values.
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k != "input"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def wrap(app: FastAPI) -> ASGIApp:
    """The app as served: behind the body size limit."""
    return BodyLimit(app)
