"""Errors as HTTP answers, in one place: the service's domain errors become 401, 403, 404, 409,
410, 413 or 422, and invalid requests 422 (413 for a script over the limit), all as
`{"detail": "<message>"}`."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from runner.api.auth import Unauthorized, unauthorized
from runner.errors import (
    CheckpointNotFound,
    CheckpointRefused,
    DownloadLinkExpired,
    DownloadLinkForged,
    DownloadLinkInvalid,
    IdempotencyConflict,
    InvalidQuery,
    InvalidSubmission,
    JobNotFound,
    JobRequestError,
    NoExport,
    NotServing,
    ResumeConflict,
    RunsAsRoot,
    ServeRefused,
    ServingNotReady,
    SubmissionTooLarge,
)

STATUS_BY_ERROR: tuple[tuple[type[JobRequestError], int], ...] = (
    (JobNotFound, 404),
    (SubmissionTooLarge, 413),  # before InvalidSubmission, its base
    (InvalidSubmission, 422),
    (InvalidQuery, 422),
    (IdempotencyConflict, 409),
    (ResumeConflict, 409),
    (RunsAsRoot, 403),
    (ServeRefused, 409),
    (NotServing, 404),
    (ServingNotReady, 503),
    (CheckpointRefused, 409),
    (CheckpointNotFound, 404),
    (NoExport, 404),
    (DownloadLinkInvalid, 401),
    (DownloadLinkForged, 403),
    (DownloadLinkExpired, 410),
)


def add_error_handlers(app: FastAPI) -> None:
    """Answer the runner's errors (auth, domain, validation) as the API documents them."""
    app.add_exception_handler(Unauthorized, unauthorized)
    app.add_exception_handler(JobRequestError, _domain_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)


async def _domain_error(request: Request, error: Exception) -> JSONResponse:
    status = next((code for kind, code in STATUS_BY_ERROR if isinstance(error, kind)), 400)
    return JSONResponse({"detail": str(error)}, status_code=status)


async def _invalid_request(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = error.errors()
    return JSONResponse(
        {
            "detail": "; ".join(_describe(problem) for problem in problems) or "invalid request",
            "errors": _plain(problems),
        },
        status_code=413 if any(_script_too_long(problem) for problem in problems) else 422,
    )


def _describe(problem: dict[str, Any]) -> str:
    where = ".".join(
        str(part) for part in problem.get("loc", ()) if part not in ("body", "query", "path")
    )
    return f"{where}: {problem.get('msg', 'invalid')}" if where else str(problem.get("msg"))


def _script_too_long(problem: dict[str, Any]) -> bool:
    return problem.get("type") == "string_too_long" and tuple(problem.get("loc", ()))[-1:] == (
        "script",
    )


def _plain(value: Any) -> Any:
    # Validation errors may carry exceptions in `ctx`; JSON needs plain values.
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if k != "input"}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
