"""A finished job's checkpoints: listed with their rewards, one chosen as the model (kept in the
job store, on SQLite and PostgreSQL), served, and downloaded with the token or a signed link.

The real runner on loopback; the training job is tests/runner/scripts/train_ok.py (what ART
leaves on disk: checkpoints/NNNN with a PEFT folder's files, history.jsonl, model.json)."""

from __future__ import annotations

import io
import sys
import tarfile
import time
from pathlib import Path

import httpx
import pytest
from alembic import command
from sqlalchemy import inspect, text

from runner.checkpoints.download_links import DownloadSigner
from runner.client import RunnerRejected
from runner.records.migrations import RUNNER_DATABASE
from runner.records.store import JobStore
from runner.schemas import CheckpointInfo, EventType, JobState, JobSubmission
from storage import migrations
from storage.database import create_database_engine
from tests.runner.conftest import TOKEN, Runner, RunnerFactory
from tests.runner.test_serving_jobs import (
    GENEROUS_S,
    events_until,
    model_client,
    serving_runner,
)

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
BEST_NOT_LAST = ["--val-rewards", "2:0.5,4:0.2"]
"""Validations at steps 2 and 4 (every second step), the earlier one better."""


def trained(runner: Runner, *args: str) -> str:
    """A succeeded train_ok.py job (4 steps, a checkpoint each, a validation every second)."""
    job_id = runner.submit("train_ok.py", args=["--delay", "0.01", *args])
    runner.wait_state(job_id, JobState.succeeded, timeout=GENEROUS_S)
    return job_id


def checkpoint_dir(runner: Runner, job_id: str, step: int) -> Path:
    return (
        runner.run_dir(job_id) / ".art" / "proj" / "models" / "m1" / "checkpoints" / f"{step:04d}"
    )


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


def tar_files(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = archive.getmembers()
        assert all(member.isfile() for member in members)
        return {m.name: archive.extractfile(m).read() for m in members}  # type: ignore[union-attr]


# ---- listing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "best", "val"),
    [
        (BEST_NOT_LAST, 2, {2: 0.5, 4: 0.2}),
        (["--val-rewards", "2:0.3,4:0.3"], 4, {2: 0.3, 4: 0.3}),  # a tie: the later step
        (["--val-every", "100"], 4, {}),  # no validation: the last step
    ],
)
def test_a_finished_jobs_checkpoints_are_listed_with_their_rewards_and_the_best(
    runner: Runner, args: list[str], best: int, val: dict[int, float]
) -> None:
    job_id = trained(runner, *args)

    listed = runner.client.checkpoints(job_id)

    size = sum(len(b) for b in folder_files(checkpoint_dir(runner, job_id, 1)).values())
    assert size > 4096  # the weights and the config
    assert listed.checkpoints == [
        CheckpointInfo(step=step, val_reward=val.get(step), train_reward=step / 10, size_bytes=size)
        for step in (1, 2, 3, 4)
    ]
    assert (listed.model, listed.base_model) == ("m1", BASE_MODEL)
    assert (listed.best_step, listed.chosen_step, listed.model_step) == (best, None, best)


def test_a_job_without_checkpoints_lists_none(runner: Runner) -> None:
    job_id = runner.submit("import_error.py")
    runner.wait_state(job_id, JobState.failed)
    listed = runner.client.checkpoints(job_id)
    assert listed.checkpoints == [] and listed.model_step is None and listed.model is None


def test_only_plain_checkpoint_folders_count_a_symlinked_one_is_left_out(runner: Runner) -> None:
    job_id = trained(runner)
    checkpoints = checkpoint_dir(runner, job_id, 4).parent
    (checkpoints / "0009").symlink_to(runner.root)  # what a hostile script could leave

    listed = runner.client.checkpoints(job_id)

    assert [c.step for c in listed.checkpoints] == [1, 2, 3, 4]
    with pytest.raises(RunnerRejected) as refused:
        runner.client.download_link(job_id, 9)
    assert refused.value.status == 404


# ---- the choice ---------------------------------------------------------------------------------


def test_a_chosen_checkpoint_is_the_model_and_stays_chosen_after_a_restart(
    make_runner: RunnerFactory, tmp_path: Path, store_settings: dict[str, str]
) -> None:
    runner = make_runner(**store_settings)
    job_id = trained(runner, *BEST_NOT_LAST)

    chosen = runner.client.choose_checkpoint(job_id, 3)

    assert (chosen.best_step, chosen.chosen_step, chosen.model_step) == (2, 3, 3)
    runner.stop()
    again = make_runner(root=tmp_path, **store_settings)
    listed = again.client.checkpoints(job_id)
    assert (listed.best_step, listed.chosen_step, listed.model_step) == (2, 3, 3)


def test_a_choice_is_refused_for_a_step_without_a_checkpoint_a_running_job_and_no_job(
    runner: Runner,
) -> None:
    job_id = trained(runner)
    running = runner.submit("gate.py")  # runs until released
    runner.wait_state(running, JobState.running)

    with pytest.raises(RunnerRejected) as no_step:
        runner.client.choose_checkpoint(job_id, 9)
    with pytest.raises(RunnerRejected) as still_running:
        runner.client.choose_checkpoint(running, 1)
    with pytest.raises(RunnerRejected) as no_job:
        runner.client.choose_checkpoint("no-such-job", 1)
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        negative = http.put(f"/jobs/{job_id}/model", json={"step": -1})
        unauthorized = httpx.put(f"{runner.base_url}/jobs/{job_id}/model", json={"step": 1})

    assert no_step.value.status == 409
    assert "no checkpoint of step 9 (it has: 1, 2, 3, 4)" in no_step.value.message
    assert still_running.value.status == 409 and "is running" in still_running.value.message
    assert no_job.value.status == 404
    assert negative.status_code == 422 and unauthorized.status_code == 401
    assert runner.client.checkpoints(job_id).chosen_step is None
    (runner.run_dir(running) / "release").touch()


def test_serving_serves_the_best_checkpoint_then_the_chosen_one(
    make_runner: RunnerFactory,
) -> None:
    runner = serving_runner(make_runner)
    job_id = trained(runner, *BEST_NOT_LAST)

    best = runner.client.serve(job_id)
    assert (best.model, best.step) == ("m1@2", 2)  # the best val/reward, not the last step
    events_until(runner, job_id, best.after_seq, EventType.serving)
    runner.client.stop_serving(job_id)
    events_until(runner, job_id, best.after_seq, EventType.stopped)

    runner.client.choose_checkpoint(job_id, 3)
    chosen = runner.client.serve(job_id)
    events_until(runner, job_id, chosen.after_seq, EventType.serving)

    assert (chosen.model, chosen.step) == ("m1@3", 3)
    reply = model_client(runner, job_id).chat.completions.create(
        model="m1@3", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "m1@3 heard: hi"


# ---- downloads ----------------------------------------------------------------------------------


def test_an_adapter_downloads_with_the_token_as_a_tar_of_its_folder(runner: Runner) -> None:
    job_id = trained(runner)
    folder = checkpoint_dir(runner, job_id, 4)
    expected = folder_files(folder)
    # What a hostile script could leave to make the runner hand out its own files.
    (folder / "runner.db").symlink_to(runner.root / "runner.db")
    (folder / "secrets").symlink_to(runner.root, target_is_directory=True)
    url = f"{runner.base_url}/jobs/{job_id}/checkpoints/4/adapter.tar.gz"

    response = httpx.get(url, headers=AUTH)
    without_token = httpx.get(url)
    no_step = httpx.get(url.replace("/4/", "/7/"), headers=AUTH)

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/gzip"
    assert 'filename="m1-step4-adapter.tar.gz"' in response.headers["content-disposition"]
    assert tar_files(response.content) == expected
    assert set(expected) == {"adapter_config.json", "adapter_model.safetensors"}
    assert without_token.status_code == 401 and without_token.headers["www-authenticate"]
    assert no_step.status_code == 404 and "no checkpoint of step 7" in no_step.json()["detail"]


def test_a_download_link_opens_its_adapter_without_the_token_and_nothing_else(
    make_runner: RunnerFactory,
) -> None:
    runner = make_runner()
    job_id, other = trained(runner), trained(runner)
    link = runner.client.download_link(job_id, 4)
    signed = link.path.removeprefix("/downloads/")
    _, step, expires, signature = signed.split(".")
    other_link = runner.client.download_link(other, 4).path.removeprefix("/downloads/")
    expired, _ = DownloadSigner(TOKEN, clock=lambda: time.time() - 7200).sign(job_id, 4, 3600)
    foreign, _ = DownloadSigner("another-runners-token-0123456789").sign(job_id, 4, 3600)

    assert link.path.startswith("/downloads/") and link.step == 4 and link.job_id == job_id
    assert 3500 < link.expires_at.timestamp() - time.time() <= 3600  # the default: an hour
    with httpx.Client(base_url=runner.base_url) as anyone:  # no token
        opened = anyone.get(runner.client.download_url(link))
        refused = {
            "not a link": anyone.get("/downloads/not-a-link"),
            "another step": anyone.get(f"/downloads/{job_id}.3.{expires}.{signature}"),
            "a later expiry": anyone.get(f"/downloads/{job_id}.4.{int(expires) + 9}.{signature}"),
            "another job's signature": anyone.get(
                f"/downloads/{job_id}.4.{expires}.{other_link.split('.')[-1]}"
            ),
            "another runner's": anyone.get(f"/downloads/{foreign}"),
            "expired": anyone.get(f"/downloads/{expired}"),
        }

    assert runner.client.download_url(link) == f"{runner.base_url}{link.path}"
    assert opened.status_code == 200, opened.text
    assert tar_files(opened.content) == folder_files(checkpoint_dir(runner, job_id, 4))
    assert {why: answer.status_code for why, answer in refused.items()} == {
        "not a link": 401,
        "another step": 403,
        "a later expiry": 403,
        "another job's signature": 403,
        "another runner's": 403,
        "expired": 410,
    }
    for answer in refused.values():
        assert answer.headers["content-type"] == "application/json"  # a reason, never a file
    assert "does not match" in refused["another step"].json()["detail"]
    assert "expired" in refused["expired"].json()["detail"]
    assert step == "4"


def test_a_download_links_lifetime_is_a_setting(make_runner: RunnerFactory) -> None:
    runner = make_runner(download_link_lifetime_s="120")
    job_id = trained(runner)
    link = runner.client.download_link(job_id, 1)
    assert 100 < link.expires_at.timestamp() - time.time() <= 120


# ---- where checkpoints are not on the runner ----------------------------------------------------


def test_a_serverless_job_and_an_unfinished_one_have_no_checkpoints_to_hand_out(
    runner: Runner,
) -> None:
    serverless = runner.submit("train_ok.py", backend="serverless", args=["--delay", "0.01"])
    runner.wait_state(serverless, JobState.succeeded, timeout=GENEROUS_S)
    running = runner.submit("gate.py")
    runner.wait_state(running, JobState.running)

    with pytest.raises(RunnerRejected) as not_local:
        runner.client.checkpoints(serverless)
    with pytest.raises(RunnerRejected) as unfinished:
        runner.client.download_link(running, 1)

    assert not_local.value.status == 409 and "ServerlessBackend" in not_local.value.message
    assert unfinished.value.status == 409 and "once it has ended" in unfinished.value.message
    (runner.run_dir(running) / "release").touch()


def test_the_ray_executor_refuses_checkpoints_as_it_refuses_serving(
    make_runner: RunnerFactory,
) -> None:
    """No Ray head is needed: the refusal comes before anything asks Ray."""
    runner = make_runner(
        executor="ray", ray_address="http://127.0.0.1:9", ray_python=sys.executable
    )
    job_id = runner.submit("gate.py")
    calls = [
        lambda: runner.client.checkpoints(job_id),
        lambda: runner.client.choose_checkpoint(job_id, 1),
        lambda: runner.client.export(job_id, "alice/agent"),
        lambda: runner.client.download_link(job_id, 1),
    ]
    for call in calls:
        with pytest.raises(RunnerRejected) as refused:
            call()
        assert refused.value.status == 409
        assert "Ray node that ran it" in refused.value.message
    runner.stop(cancel_jobs=False)  # no Ray to ask to stop it


# ---- the job store ------------------------------------------------------------------------------


def test_a_store_of_the_first_revision_is_upgraded_with_its_jobs_kept(
    tmp_path: Path, store_settings: dict[str, str]
) -> None:
    url = store_settings.get("database_url") or f"sqlite:///{tmp_path / 'runner.db'}"
    command.upgrade(migrations.alembic_config(RUNNER_DATABASE, url), "runner_0001")
    before = inspect(create_database_engine(url)).get_columns("runner_jobs")
    assert "chosen_step" not in {column["name"] for column in before}
    engine = create_database_engine(url)
    with engine.begin() as connection:  # a job of a runner from before
        connection.execute(
            text(
                "INSERT INTO runner_jobs (id, idempotency_key, fingerprint, state, script_name, "
                "script_sha256, script, backend, metadata_json, required_env_json, args_json, "
                "run_dir, gpus_json, created_at, last_event_seq) VALUES ('old', 'key-old-0001', "
                "'f', 'succeeded', 'rl_train.py', 's', 'print(1)', 'local', '{}', '[]', '[]', "
                "'/w/old', '[]', '2025-01-01 00:00:00.000000', 0)"
            )
        )
    engine.dispose()

    migrations.upgrade(RUNNER_DATABASE, url)

    assert migrations.current(RUNNER_DATABASE, url) == migrations.head(RUNNER_DATABASE)
    store = JobStore.open(url)
    try:
        old = store.get("old")
        assert old is not None and old.chosen_step is None
        assert store.choose_step("old", 7) is not None
        assert store.get("old").chosen_step == 7  # type: ignore[union-attr]
        queued, _ = store.create(
            "new", JobSubmission(script="print(1)", idempotency_key="key-new-0001"), "/w/new"
        )
        assert store.choose_step(queued.id, 1) is None  # not finished: nothing written
    finally:
        store.close()
