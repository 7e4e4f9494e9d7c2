"""RunnerClient: typed calls, and errors split into 'retry later' and 'refused'."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest

from runner.client import AsyncRunnerClient, RunnerClient, RunnerRejected, RunnerUnavailable
from runner.schemas import EventsPage, Health, Job, JobState, LogTail
from tests.runner.conftest import TOKEN, Runner, submission


def test_every_call_returns_its_schema(runner: Runner) -> None:
    client = runner.client
    job = client.submit(submission("gate.py"))
    assert isinstance(job, Job) and job.state is JobState.queued
    assert (
        client.submit(submission("gate.py", idempotency_key="same-key-0001")).id
        == client.submit(submission("gate.py", idempotency_key="same-key-0001")).id
    )
    assert isinstance(client.job(job.id), Job)
    assert isinstance(client.events(job.id, after=0, wait=0), EventsPage)
    assert isinstance(client.log(job.id, tail_bytes=100), LogTail)
    assert isinstance(client.health(), Health)
    assert client.cancel(job.id).id == job.id


def test_a_long_poll_outlasts_the_client_timeout(runner: Runner) -> None:
    job_id = runner.submit("gate.py")
    runner.wait_state(job_id, JobState.running)
    after = runner.client.events(job_id).next_after
    with RunnerClient(runner.base_url, TOKEN, timeout=0.5) as client:
        began = time.monotonic()
        page = client.events(job_id, after=after, wait=1.0)  # longer than the timeout: no error
        assert page.events == [] and time.monotonic() - began >= 0.9


def test_refusals_are_rejected_with_the_runners_message(runner: Runner) -> None:
    with pytest.raises(RunnerRejected) as unknown:
        runner.client.job("nosuchjob")
    assert unknown.value.status == 404
    assert unknown.value.message == "no job 'nosuchjob'"

    first = submission("gate.py")
    runner.client.submit(first)
    changed = first.model_copy(update={"script": first.script + "\n"})
    with pytest.raises(RunnerRejected) as conflict:
        runner.client.submit(changed)
    assert conflict.value.status == 409 and "different script" in conflict.value.message

    bad = first.model_copy(
        update={"required_env": ["lower-case"], "idempotency_key": "other-key-0001"}
    )
    with pytest.raises(RunnerRejected) as invalid:
        runner.client.submit(bad)
    assert invalid.value.status == 422 and "required_env" in invalid.value.message

    with RunnerClient(runner.base_url, "wrong-token-0123456789") as client:
        with pytest.raises(RunnerRejected) as denied:
            client.job("x")
        assert denied.value.status == 401
        assert client.health().status == "ok"  # /health needs no token


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_runner_is_unavailable() -> None:
    with (
        RunnerClient(f"http://127.0.0.1:{_closed_port()}", TOKEN, timeout=2) as client,
        pytest.raises(RunnerUnavailable),
    ):
        client.health()


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (lambda request: httpx.Response(500, json={"detail": "boom"}), RunnerUnavailable),
        (lambda request: httpx.Response(503, text="<html>bad gateway</html>"), RunnerUnavailable),
        (
            lambda request: httpx.Response(200, text="<html>a captive portal</html>"),
            RunnerUnavailable,
        ),
        (lambda request: httpx.Response(200, json={"unexpected": True}), RunnerUnavailable),
        (
            lambda request: httpx.Response(400, json={"detail": [{"msg": "field required"}]}),
            RunnerRejected,
        ),
        (lambda request: httpx.Response(413, json={"detail": "too big"}), RunnerRejected),
    ],
)
def test_answers_map_to_errors(handler, expected: type[Exception]) -> None:
    with (
        RunnerClient(
            "http://runner.invalid", TOKEN, transport=httpx.MockTransport(handler)
        ) as client,
        pytest.raises(expected) as error,
    ):
        client.job("abc")
    if expected is RunnerRejected:
        assert error.value.message in ("field required", "too big")  # type: ignore[attr-defined]


def test_timeouts_are_unavailable() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with (
        RunnerClient("http://runner.invalid", TOKEN, transport=httpx.MockTransport(slow)) as client,
        pytest.raises(RunnerUnavailable),
    ):
        client.events("abc", wait=1)


def test_the_token_is_sent_as_a_bearer_header() -> None:
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(404, json={"detail": "no job 'abc'"})

    with (
        RunnerClient(
            "http://runner.invalid/", TOKEN, transport=httpx.MockTransport(record)
        ) as client,
        pytest.raises(RunnerRejected),
    ):
        client.cancel("abc")
    assert seen == [f"Bearer {TOKEN}"]


def test_the_async_long_poll_maps_errors_alike_and_is_cancelled_at_once(runner: Runner) -> None:
    job_id = runner.submit("gate.py")
    runner.wait_state(job_id, JobState.running)
    after = runner.client.events(job_id).next_after

    async def scenario() -> None:
        async with AsyncRunnerClient(runner.base_url, TOKEN) as client:
            assert (await client.events(job_id)).next_after == after
            with pytest.raises(RunnerRejected) as unknown:
                await client.events("no-such-job")
            assert unknown.value.status == 404
            poll = asyncio.create_task(client.events(job_id, after=after, wait=30))
            while runner.server.service.wakeups.waiting() == 0:  # pending at the runner
                await asyncio.sleep(0.02)
            poll.cancel()
            with pytest.raises(asyncio.CancelledError):
                await poll
        async with AsyncRunnerClient(f"http://127.0.0.1:{_closed_port()}", TOKEN) as closed:
            with pytest.raises(RunnerUnavailable):
                await closed.events(job_id)

    asyncio.run(asyncio.wait_for(scenario(), timeout=20))  # the cancelled poll does not hold 30 s
