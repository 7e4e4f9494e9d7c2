"""A serving job's OpenAI-compatible API, passed on behind the runner's token.

The serving process listens on 127.0.0.1 of the GPU host with no authentication of its own; the
bot reaches it only through `/jobs/{id}/serve/v1/...` here, with the runner's token (the `openai`
client sends it as its api_key). So no second port is exposed and no second secret is made, and
every request counts as activity for the serving job's idle timeout.
"""

from __future__ import annotations

import json

import httpx
from fastapi import Request, Response
from fastapi.responses import JSONResponse

from runner.jobs.service import JobService

PASSED_PATHS = frozenset({"chat/completions", "completions", "models"})
MODEL_CALL_TIMEOUT_S = 300.0
"""A generation of a long reply on a busy GPU; the bot's own timeout is usually shorter."""
HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding"})


async def pass_on(service: JobService, job_id: str, path: str, request: Request) -> Response:
    """The request to the job's serving process, and its answer back as it came."""
    if path not in PASSED_PATHS:
        return JSONResponse({"detail": f"/v1/{path} is not passed on"}, status_code=404)
    body = await request.body()
    if request.method == "POST" and _streams(body):
        return JSONResponse(
            {"detail": "stream: true is not passed on by the runner; ask with stream: false"},
            status_code=422,
        )
    base_url, _ = service.serving.use(job_id)  # NotServing / ServingNotReady: 404 / 503
    try:
        async with httpx.AsyncClient(base_url=base_url, timeout=MODEL_CALL_TIMEOUT_S) as http:
            answer = await http.request(
                request.method,
                f"/v1/{path}",
                content=body,
                headers={"Content-Type": request.headers.get("content-type", "application/json")},
            )
    except httpx.HTTPError as error:
        return JSONResponse(
            {"detail": f"the serving process did not answer: {type(error).__name__}"},
            status_code=502,
        )
    finally:
        service.serving.used(job_id)
    headers = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_HEADERS}
    return Response(answer.content, status_code=answer.status_code, headers=headers)


def _streams(body: bytes) -> bool:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return False  # the serving process says what is wrong with it
    return isinstance(parsed, dict) and parsed.get("stream") is True
