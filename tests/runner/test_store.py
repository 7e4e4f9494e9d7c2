"""The job store on SQLite (always) and PostgreSQL (when ARTBOT_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from runner.errors import IdempotencyConflict
from runner.records.migrations import RUNNER_DATABASE
from runner.records.store import JobStore
from runner.schemas import EventType, Failure, FailureKind, JobState, JobSubmission
from storage import migrations
from storage.database import create_database_engine
from tests.databases import BACKENDS, POSTGRES_URL, throwaway_schema


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JobStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runner.db'}"
        migrations.upgrade(RUNNER_DATABASE, url)  # as `artbot runner serve` does first
        store = JobStore.open(url)
        yield store
        store.close()
        return
    assert POSTGRES_URL is not None
    with throwaway_schema("artbot_runner") as schema:
        migrations.upgrade(RUNNER_DATABASE, POSTGRES_URL, schema=schema)
        store = JobStore(create_database_engine(POSTGRES_URL), schema=schema)
        yield store
        store.close()


def _submission(key: str = "key-0000001", **fields: object) -> JobSubmission:
    return JobSubmission.model_validate(
        {"script": "print('hi')\n", "idempotency_key": key, **fields}
    )


def test_create_is_idempotent_by_key(store: JobStore) -> None:
    job, created = store.create("job1", _submission(metadata={"team": "T1"}), "/w/job1")
    assert created and job.state is JobState.queued and job.last_event_seq == 1
    again, created_again = store.create("job2", _submission(metadata={"team": "T1"}), "/w/job2")
    assert not created_again and again.id == "job1"
    with pytest.raises(IdempotencyConflict, match="different script"):
        store.create("job3", _submission(script="print('other')\n"), "/w/job3")
    with pytest.raises(IdempotencyConflict, match="metadata"):
        store.create("job3", _submission(metadata={"team": "T2"}), "/w/job3")
    assert store.get("job2") is None and store.get("job3") is None
    assert [e.type for e in store.events("job1")] == [EventType.queued]


def test_transitions_are_compare_and_set(store: JobStore) -> None:
    store.create("job1", _submission(), "/w/job1")
    started = store.transition("job1", [JobState.queued], JobState.starting, gpus=[1])
    assert started is not None and started.gpus == [1]
    assert (
        store.transition("job1", [JobState.queued], JobState.starting) is None
    )  # not queued any more
    failure = Failure(kind=FailureKind.cuda_oom, summary="out of memory")
    done = store.transition(
        "job1",
        [JobState.starting, JobState.running],
        JobState.failed,
        event=(EventType.failed, failure.model_dump(mode="json")),
        exit_code=1,
        failure=failure,
        finished_at=store.now(),
    )
    assert done is not None and done.failure == failure and done.exit_code == 1
    assert done.last_event_seq == 2
    assert (
        store.transition("job1", [JobState.starting, JobState.running], JobState.succeeded) is None
    )
    assert store.events("job1")[-1].data["kind"] == "cuda_oom"


def test_events_are_numbered_without_gaps_under_concurrent_appends(store: JobStore) -> None:
    store.create("job1", _submission(), "/w/job1")

    def append(worker: int) -> None:
        for i in range(25):
            store.append_event("job1", EventType.step, {"step": i, "worker": worker})

    threads = [threading.Thread(target=append, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = store.events("job1", limit=1000)
    assert [e.seq for e in events] == list(range(1, 102))
    assert store.events("job1", after=50, limit=10)[0].seq == 51
    record = store.get("job1")
    assert record is not None and record.last_event_seq == 101


def test_queue_order_is_submission_order(store: JobStore) -> None:
    for index in range(5):
        store.create(f"job{index}", _submission(f"key-{index:08d}"), f"/w/job{index}")
    assert [job.id for job in store.in_states([JobState.queued])] == [f"job{i}" for i in range(5)]
    assert store.counts() == {JobState.queued: 5}


def test_cancel_request_keeps_the_first_time(store: JobStore) -> None:
    store.create("job1", _submission(), "/w/job1")
    first = store.request_cancel("job1")
    second = store.request_cancel("job1")
    assert first is not None and second is not None
    assert first.cancel_requested_at == second.cancel_requested_at is not None
    assert store.request_cancel("nope") is None


def test_active_jobs_by_folder(store: JobStore) -> None:
    store.create("job1", _submission(), "/w/job1")
    assert store.active_in_run_dir("/w/job1") is not None
    store.transition("job1", [JobState.queued], JobState.cancelled)
    assert store.active_in_run_dir("/w/job1") is None


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES_URL, reason="ARTBOT_TEST_POSTGRES_URL is not set")
def test_the_runner_on_postgresql(make_runner) -> None:
    from sqlalchemy.engine import make_url

    from runner.schemas import EventType as Kind

    assert POSTGRES_URL is not None
    name = f"artbot_runner_{uuid.uuid4().hex[:12]}"
    admin = create_database_engine(POSTGRES_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    try:
        runner = make_runner(database_url=url)
        job_id = runner.submit("train_ok.py", args=["--steps", "3", "--delay", "0.01"])
        events = runner.follow(job_id)
        assert events[-1].type is Kind.succeeded
        assert [e.data["step"] for e in events if e.type is Kind.step] == [1, 2, 3]
        runner.stop()
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
