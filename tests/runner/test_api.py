"""The HTTP API over real loopback HTTP: auth, idempotent submit, validation, errors."""

from __future__ import annotations

import json

import httpx
import pytest

from runner.schemas import MAX_SCRIPT_BYTES, JobState
from tests.runner.conftest import TOKEN, Runner, processes_with_env, script_text, submission

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_every_endpoint_but_health_needs_the_token(runner: Runner) -> None:
    job_id = runner.submit("gate.py")
    endpoints = [
        ("POST", "/jobs", {"json": submission("gate.py").model_dump(mode="json")}),
        ("GET", f"/jobs/{job_id}", {}),
        ("GET", f"/jobs/{job_id}/events", {}),
        ("POST", f"/jobs/{job_id}/cancel", {}),
        ("GET", f"/jobs/{job_id}/log", {}),
        ("GET", "/openapi.json", {}),
        ("GET", f"/jobs/{job_id}/checkpoints", {}),
        ("PUT", f"/jobs/{job_id}/model", {"json": {"step": 1}}),
        ("POST", f"/jobs/{job_id}/exports", {"json": {"repo_id": "alice/agent"}}),
        ("GET", f"/jobs/{job_id}/exports", {}),
        ("GET", f"/jobs/{job_id}/checkpoints/1/adapter.tar.gz", {}),
        ("POST", f"/jobs/{job_id}/checkpoints/1/download-link", {}),
    ]
    wrong_headers: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer wrong-token-0123456789abcdef"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": "Bearer"},
    ]
    with httpx.Client(base_url=runner.base_url) as http:
        for method, path, kwargs in endpoints:
            for headers in wrong_headers:
                response = http.request(method, path, headers=headers, **kwargs)
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"] == "Bearer"
                assert TOKEN not in response.text
        health = http.get("/health")
        assert health.status_code == 200
        assert health.json()["gpu_slots"] == 2
        assert http.get(f"/jobs/{job_id}", headers=AUTH).status_code == 200
    assert runner.client.job(job_id).state is not JobState.cancelled  # no 401 request acted


def test_openapi_is_served_behind_the_token(runner: Runner) -> None:
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        spec = http.get("/openapi.json").json()
    assert {
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/events",
        "/jobs/{job_id}/cancel",
        "/jobs/{job_id}/log",
        "/health",
        "/jobs/{job_id}/checkpoints",
        "/jobs/{job_id}/model",
        "/jobs/{job_id}/exports",
        "/jobs/{job_id}/checkpoints/{step}/adapter.tar.gz",
        "/jobs/{job_id}/checkpoints/{step}/download-link",
        "/downloads/{signed}",
    } <= set(spec["paths"])
    assert "JobSubmission" in spec["components"]["schemas"]


def test_the_same_idempotency_key_gives_the_same_job(runner: Runner) -> None:
    body = submission("gate.py").model_dump(mode="json")
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        first = http.post("/jobs", json=body)
        again = http.post("/jobs", json=body)
        assert first.status_code == 202
        assert again.status_code == 200
        assert again.json()["id"] == first.json()["id"]

        changed = http.post("/jobs", json={**body, "script": body["script"] + "\n# edited\n"})
        assert changed.status_code == 409
        assert "different script" in changed.json()["detail"]
        other_args = http.post("/jobs", json={**body, "args": ["--x"]})
        assert other_args.status_code == 409
        assert "args" in other_args.json()["detail"]
    events = runner.client.events(first.json()["id"]).events
    assert [e.type.value for e in events].count("queued") == 1


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"required_env": ["OPENAI_API_KEY", "bad-name"]}, 422, "required_env"),
        ({"required_env": ["1ABC"]}, 422, "required_env"),
        ({"script": ""}, 422, "script"),
        ({"script_name": "../evil.py"}, 422, "script_name"),
        ({"script_name": "run.sh"}, 422, "script_name"),
        ({"backend": "cloud"}, 422, "backend"),
        ({"idempotency_key": "short"}, 422, "idempotency_key"),
        ({"unexpected": 1}, 422, "unexpected"),
        ({"args": ["ok", "bad\x00arg"]}, 422, "args"),
        ({"metadata": {"k": "v" * 5000}}, 422, "metadata"),
        ({"resume_from_job": "nosuchjob"}, 422, "no job"),
        ({"resume_from_job": "job\x00id"}, 422, "resume_from_job"),
        ({"idempotency_key": "key-with-\x00-nul"}, 422, "idempotency_key"),
        ({"idempotency_key": "key-with\nnewline"}, 422, "idempotency_key"),
        ({"required_env": ["LD_PRELOAD"]}, 422, "LD_PRELOAD changes how programs are loaded"),
        ({"required_env": ["ARTBOT_RUNNER_TOKEN"]}, 422, "setting of the runner itself"),
        ({"required_env": ["AWS_SECRET_ACCESS_KEY"]}, 422, "does not pass AWS_SECRET_ACCESS_KEY"),
        ({"script": "x" * (MAX_SCRIPT_BYTES + 1)}, 413, "script"),
        ({"script": "é" * (MAX_SCRIPT_BYTES // 2 + 1)}, 413, "bytes"),
    ],
)
def test_bad_submissions_get_clear_4xx(
    runner: Runner, change: dict[str, object], status: int, words: str
) -> None:
    body = {**submission("gate.py").model_dump(mode="json"), **change}
    with httpx.Client(base_url=runner.base_url, headers=AUTH, timeout=30) as http:
        response = http.post("/jobs", json=body)
    assert response.status_code == status, response.text
    assert words in response.json()["detail"]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("after=9223372036854775808", "after"),
        ("after=2147483648", "after"),
        ("after=-1", "after"),
        ("wait=nan", "wait"),
        ("wait=inf", "wait"),
        ("wait=30.5", "wait"),  # beyond the long-poll's bound
        ("limit=0", "limit"),
    ],
)
def test_event_queries_out_of_range_get_4xx(runner: Runner, query: str, words: str) -> None:
    job_id = runner.submit("gate.py")
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        response = http.get(f"/jobs/{job_id}/events?{query}")
    assert response.status_code == 422, response.text
    assert words in response.json()["detail"]


def test_oversized_and_unframed_bodies_are_refused_unread(runner: Runner) -> None:
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        huge = http.post(
            "/jobs",
            content=b"{" + b" " * (11 * 1024 * 1024) + b"}",
            headers={"content-type": "application/json"},
        )
        assert huge.status_code == 413

        def chunks():  # no Content-Length: chunked transfer encoding
            yield json.dumps(submission("gate.py").model_dump(mode="json")).encode()

        chunked = http.post("/jobs", content=chunks(), headers={"content-type": "application/json"})
        assert chunked.status_code == 411


def test_unknown_jobs_are_404(runner: Runner) -> None:
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        for method, path in [
            ("GET", "/jobs/nope"),
            ("GET", "/jobs/nope/events"),
            ("POST", "/jobs/nope/cancel"),
            ("GET", "/jobs/nope/log"),
        ]:
            response = http.request(method, path)
            assert response.status_code == 404, path
            assert response.json()["detail"] == "no job 'nope'"
        assert http.get("/jobs/bad%20id").status_code == 422
        assert http.get("/jobs/x/events", params={"after": -1}).status_code == 422


def test_health_reports_slots_and_queue(runner: Runner) -> None:
    first = runner.submit("gate.py")
    second = runner.submit("gate.py")
    third = runner.submit("gate.py")
    runner.wait_state(first, JobState.running)
    runner.wait_state(second, JobState.running)
    health = runner.client.health()
    assert (health.gpu_slots, health.free_slots, health.running, health.queued) == (2, 0, 2, 1)
    assert health.gpus == []  # no nvidia-smi here
    assert health.version
    assert runner.client.job(third).queue_position == 1


def test_script_is_stored_with_its_hash(runner: Runner) -> None:
    import hashlib

    job = runner.client.job(runner.submit("gate.py", metadata={"channel": "C1", "thread": "1.2"}))
    assert job.script_sha256 == hashlib.sha256(script_text("gate.py").encode()).hexdigest()
    assert job.metadata == {"channel": "C1", "thread": "1.2"}


def test_stopping_the_runner_with_cancel_starts_nothing_new(runner: Runner) -> None:
    jobs = [runner.submit("gate.py") for _ in range(4)]
    runner.wait_state(jobs[0], JobState.running)
    runner.wait_state(jobs[1], JobState.running)
    runner.stop(cancel_jobs=True)
    for job_id in jobs:
        assert processes_with_env(f"ARTBOT_RUNNER_JOB_ID={job_id}") == []
