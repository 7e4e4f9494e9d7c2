"""The small clients of the runner's API, for the bot: RunnerClient (synchronous, the whole
API) and AsyncRunnerClient (the events long-poll, cancellable: the run follower's).

Two kinds of error, so that a caller retries only what may work later:
- RunnerUnavailable: the runner could not be reached or failed (connection errors, timeouts,
  5xx, an answer that is not the API's): retry with backoff;
- RunnerRejected: the runner understood and refused (4xx: bad token, unknown job, invalid or
  conflicting submission): retrying the same request will not help. `.status` and `.message`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from runner.schemas import (
    Checkpoints,
    ChooseCheckpoint,
    DownloadLink,
    EventsPage,
    Export,
    ExportRequest,
    Health,
    Job,
    JobsPage,
    JobState,
    JobSubmission,
    LogTail,
    RolloutsPage,
    Serving,
)

ModelT = TypeVar("ModelT", bound=BaseModel)

MAX_WAIT_S = 30.0


class RunnerClientError(Exception):
    """Any failure talking to the runner."""


class RunnerUnavailable(RunnerClientError):
    """The runner is unreachable or failed (connection error, timeout, 5xx): worth retrying."""


class RunnerRejected(RunnerClientError):
    """The runner refused the request (4xx); the message is the runner's."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class RunnerClient:
    """`RunnerClient(base_url, token, timeout)`; use as a context manager or call close()."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = 10.0,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    def submit(self, submission: JobSubmission) -> Job:
        """Queue a script; the same idempotency key gives back the same job (a safe retry)."""
        return self._call("POST", "/jobs", Job, json=submission.model_dump(mode="json"))

    def jobs(
        self, states: Sequence[JobState] = (), before: str | None = None, limit: int = 50
    ) -> JobsPage:
        """Jobs newest first, in `states` (all when empty); page on with `before=next_before`."""
        params: dict[str, Any] = {"limit": limit, "state": [state.value for state in states]}
        if before is not None:
            params["before"] = before
        return self._call("GET", "/jobs", JobsPage, params=params)

    def job(self, job_id: str) -> Job:
        return self._call("GET", f"/jobs/{job_id}", Job)

    def events(self, job_id: str, after: int = 0, wait: float = 0.0) -> EventsPage:
        """Events after seq `after`; with `wait` (seconds, at most 30) waits for the next one."""
        wait = max(0.0, min(wait, MAX_WAIT_S))
        return self._call(
            "GET",
            f"/jobs/{job_id}/events",
            EventsPage,
            params={"after": after, "wait": wait},
            timeout=self._timeout + wait,  # the runner may hold the request for `wait`
        )

    def rollouts(self, job_id: str, step: int | None = None) -> RolloutsPage:
        """The best and worst validation rollouts of `step` (the latest when None)."""
        params: dict[str, Any] = {} if step is None else {"step": step}
        return self._call("GET", f"/jobs/{job_id}/rollouts", RolloutsPage, params=params)

    def cancel(self, job_id: str) -> Job:
        return self._call("POST", f"/jobs/{job_id}/cancel", Job)

    def serve(self, job_id: str) -> Serving:
        """Serve a succeeded LocalBackend job's model (or get the serving job already there)."""
        return self._call("POST", f"/jobs/{job_id}/serve", Serving)

    def serving(self, job_id: str) -> Serving:
        return self._call("GET", f"/jobs/{job_id}/serve", Serving)

    def stop_serving(self, job_id: str) -> Serving:
        return self._call("DELETE", f"/jobs/{job_id}/serve", Serving)

    def serving_api_url(self, job_id: str) -> str:
        """The base URL of the job's served model's OpenAI-compatible API (the runner's token
        is its api_key)."""
        return f"{str(self._http.base_url).rstrip('/')}/jobs/{job_id}/serve/v1"

    def checkpoints(self, job_id: str) -> Checkpoints:
        """A LocalBackend job's checkpoints with their rewards, the best, the chosen and the
        model's step."""
        return self._call("GET", f"/jobs/{job_id}/checkpoints", Checkpoints)

    def choose_checkpoint(self, job_id: str, step: int) -> Checkpoints:
        """Make checkpoint `step` the finished job's model (serve, export and download use it)."""
        body = ChooseCheckpoint(step=step).model_dump(mode="json")
        return self._call("PUT", f"/jobs/{job_id}/model", Checkpoints, json=body)

    def export(
        self, job_id: str, repo_id: str, *, private: bool = True, step: int | None = None
    ) -> Export:
        """Push a checkpoint's adapter (the model's by default) to the Hugging Face Hub
        repository `repo_id` (created when missing); the same export again gives back the one
        under way. Follow the job's events, or `export_status`, for its end."""
        body = ExportRequest(repo_id=repo_id, private=private, step=step).model_dump(mode="json")
        return self._call("POST", f"/jobs/{job_id}/exports", Export, json=body)

    def export_status(self, job_id: str) -> Export:
        """The job's latest export."""
        return self._call("GET", f"/jobs/{job_id}/exports", Export)

    def download_link(self, job_id: str, step: int) -> DownloadLink:
        """A signed, expiring link to checkpoint `step`'s adapter (.tar.gz) that needs no token."""
        return self._call("POST", f"/jobs/{job_id}/checkpoints/{step}/download-link", DownloadLink)

    def download_url(self, link: DownloadLink) -> str:
        """The link's absolute URL on this client's runner."""
        return f"{str(self._http.base_url).rstrip('/')}{link.path}"

    def log(self, job_id: str, tail_bytes: int = 64 * 1024) -> LogTail:
        return self._call("GET", f"/jobs/{job_id}/log", LogTail, params={"tail_bytes": tail_bytes})

    def health(self) -> Health:
        return self._call("GET", "/health", Health)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RunnerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        model: type[ModelT],
        *,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> ModelT:
        try:
            response = self._http.request(method, path, timeout=timeout or self._timeout, **kwargs)
        except httpx.TransportError as error:  # connect, read, write, timeouts, protocol
            raise _unreachable(error) from error
        return _answer(response, model)


class AsyncRunnerClient:
    """The events long-poll for asyncio callers (the bot's run follower): cancelling the task
    that awaits `events` drops the request at once, however long the runner would hold it.
    Same errors as RunnerClient. `async with`, or `await aclose()`."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = 10.0,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
            transport=transport,
        )

    async def events(self, job_id: str, after: int = 0, wait: float = 0.0) -> EventsPage:
        """Events after seq `after`; with `wait` (seconds, at most 30) waits for the next one."""
        wait = max(0.0, min(wait, MAX_WAIT_S))
        try:
            response = await self._http.get(
                f"/jobs/{job_id}/events",
                params={"after": after, "wait": wait},
                timeout=self._timeout + wait,  # the runner may hold the request for `wait`
            )
        except httpx.TransportError as error:
            raise _unreachable(error) from error
        return _answer(response, EventsPage)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRunnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _unreachable(error: httpx.TransportError) -> RunnerUnavailable:
    """A connect, read or write error, a timeout, a protocol error."""
    return RunnerUnavailable(f"cannot reach the runner: {type(error).__name__}: {error}")


def _answer(response: httpx.Response, model: type[ModelT]) -> ModelT:
    """The runner's answer as `model`, or the error it means."""
    if response.status_code >= 500:
        raise RunnerUnavailable(f"the runner failed: {response.status_code} {_detail(response)}")
    if response.status_code >= 400:
        raise RunnerRejected(response.status_code, _detail(response))
    try:
        return model.model_validate_json(response.content)
    except ValidationError as error:
        # Not the API's answer (a proxy's page, another service on the port).
        raise RunnerUnavailable(
            f"unexpected answer from the runner ({response.status_code}): {error}"
        ) from error


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list):  # FastAPI's validation errors
            return "; ".join(
                str(item.get("msg", item)) if isinstance(item, dict) else str(item)
                for item in detail
            )
    return str(body)[:500]
