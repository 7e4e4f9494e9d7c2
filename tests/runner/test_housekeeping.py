"""Listing jobs (GET /jobs) and retention: finished jobs' folders and rows go after the
configured age or beyond the configured size; active jobs and folders still in use stay.
The store's part runs on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from runner.api.server import build_service
from runner.records.instance_lock import DatabaseInUse, RunnerLock
from runner.records.migrations import RUNNER_DATABASE
from runner.records.retention import RetentionPolicy, sweep
from runner.records.store import JobStore
from runner.schemas import JobState, JobSubmission
from runner.settings import SettingsError, load_settings
from storage import migrations
from tests.databases import BACKENDS, POSTGRES_URL, throwaway_schema
from tests.runner.conftest import TOKEN, Runner, runner_env
from tests.runner.test_store import store as store  # the fixture, on both databases

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _job(store: JobStore, workdir: Path, job_id: str, *, resume_of: str | None = None) -> None:
    run_dir = workdir / (resume_of or job_id)
    store.create(
        job_id,
        JobSubmission(script="print(1)\n", idempotency_key=f"key-{job_id}-0001"),
        str(run_dir),
    )
    (workdir / job_id / ".runner").mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "model.bin").write_bytes(b"x" * 1000)


def _finish(store: JobStore, job_id: str, at: datetime) -> None:
    assert store.transition(job_id, [JobState.queued], JobState.starting) is not None
    done = store.transition(job_id, [JobState.starting], JobState.failed, finished_at=at)
    assert done is not None


def test_old_finished_jobs_go_with_their_folders_and_active_ones_stay(
    store: JobStore, tmp_path: Path
) -> None:
    workdir = tmp_path / "jobs"
    for job_id in ("old", "recent", "running", "source", "resume"):
        _job(store, workdir, job_id, resume_of="source" if job_id == "resume" else None)
    _finish(store, "old", T0)
    _finish(store, "recent", T0 + timedelta(days=29))
    _finish(store, "source", T0)  # old, but its folder is where a newer resume works
    store.transition("running", [JobState.queued], JobState.starting)

    policy = RetentionPolicy(max_age=timedelta(days=30), max_bytes=None)
    swept = sweep(store, workdir, policy, T0 + timedelta(days=31))

    assert swept.job_ids == ["old"]
    assert swept.freed_bytes == 1000
    assert store.get("old") is None and store.events("old") == []
    assert not (workdir / "old").exists()
    for kept in ("recent", "running", "source", "resume"):
        assert store.get(kept) is not None and (workdir / kept).exists()

    # Once the resume is finished and old too, the shared folder goes with both.
    _finish(store, "resume", T0 + timedelta(days=1))
    swept = sweep(store, workdir, policy, T0 + timedelta(days=60))
    assert sorted(swept.job_ids) == ["recent", "resume", "source"]
    assert sorted(p.name for p in workdir.iterdir()) == ["running"]


def test_over_the_size_limit_the_oldest_finished_jobs_go_first(
    store: JobStore, tmp_path: Path
) -> None:
    workdir = tmp_path / "jobs"
    for day, job_id in enumerate(("first", "second", "third")):
        _job(store, workdir, job_id)
        _finish(store, job_id, T0 + timedelta(days=day))
    _job(store, workdir, "queued")  # 4 folders of 1000 bytes

    swept = sweep(store, workdir, RetentionPolicy(max_age=None, max_bytes=2500), T0)
    assert swept.job_ids == ["first", "second"]
    assert sorted(p.name for p in workdir.iterdir()) == ["queued", "third"]


def test_a_stored_folder_outside_the_workdir_is_never_removed(
    store: JobStore, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    store.create(
        "odd", JobSubmission(script="print(1)\n", idempotency_key="key-odd-0001"), str(outside)
    )
    _finish(store, "odd", T0)
    sweep(store, tmp_path / "jobs", RetentionPolicy(timedelta(days=1), None), T0 + timedelta(2))
    assert store.get("odd") is None and outside.exists()


def test_jobs_are_listed_newest_first_by_state_and_page(runner: Runner) -> None:
    ids = [runner.submit("gate.py", backend="serverless") for _ in range(3)]
    runner.wait_state(ids[0], JobState.running)
    cancelled = ids[1]
    runner.client.cancel(cancelled)
    runner.wait_state(cancelled, JobState.cancelled)

    everything = runner.client.jobs()
    assert [job.id for job in everything.jobs] == ids[::-1]
    assert everything.next_before is None

    first = runner.client.jobs(limit=2)
    assert [job.id for job in first.jobs] == [ids[2], ids[1]] and first.next_before == ids[1]
    rest = runner.client.jobs(limit=2, before=first.next_before)
    assert [job.id for job in rest.jobs] == [ids[0]] and rest.next_before is None

    only = runner.client.jobs([JobState.cancelled])
    assert [job.id for job in only.jobs] == [cancelled]

    with httpx.Client(base_url=runner.base_url) as http:
        assert http.get("/jobs").status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for query in ("state=sleeping", "limit=0", "limit=201", "before=a%00b", "before=nosuch"):
            response = http.get(f"/jobs?{query}", headers=auth)
            assert response.status_code == 422, (query, response.text)
        assert "no job" in http.get("/jobs?before=nosuch", headers=auth).json()["detail"]


@pytest.mark.parametrize(
    ("value", "expected"), [("none", None), ("512M", 512 * 1024**2), ("1.5T", int(1.5 * 1024**4))]
)
def test_sizes_are_read_with_their_units(value: str, expected: int | None) -> None:
    settings = load_settings(
        {"ARTBOT_RUNNER_TOKEN": TOKEN, "ARTBOT_RUNNER_RETENTION_MAX_BYTES": value}
    )
    assert settings.retention_max_bytes == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_runner_per_database_the_second_is_refused_until_the_first_ends(
    backend: str, tmp_path: Path
) -> None:
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url, schema = f"sqlite:///{tmp_path / 'runner.db'}", None
            migrations.upgrade(RUNNER_DATABASE, url)
        else:
            assert POSTGRES_URL is not None
            url, schema = POSTGRES_URL, stack.enter_context(throwaway_schema("artbot_lock"))
        first = RunnerLock.acquire(url, schema)
        with pytest.raises(DatabaseInUse, match="one runner per database"):
            RunnerLock.acquire(url, schema)
        first.release()
        RunnerLock.acquire(url, schema).release()


def test_a_second_runner_on_the_same_database_does_not_start(
    runner: Runner, tmp_path: Path
) -> None:
    with pytest.raises(SettingsError, match="another runner is using this database"):
        build_service(load_settings(runner_env(tmp_path)))
    # Free once the first stops. (A killed runner's lock goes with its process: the runner
    # killed mid-launch in test_restart is followed by one on the same database.)
    runner.stop(cancel_jobs=False)
    build_service(load_settings(runner_env(tmp_path))).stop()
