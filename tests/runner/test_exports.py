"""Exports of a finished job's model to the Hugging Face Hub: the real runner on loopback pushing
with the real huggingface_hub to the loopback Hub (tests/fakes/hf_hub.py), HF_TOKEN and
HF_ENDPOINT in the runner's environment. The outcome is an `exported` or `export_failed` event in
the job's events; the token is never in one, nor in an answer or the runner's log."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runner.client import RunnerRejected
from runner.jobs.local.supervisor import write_whole_json
from runner.schemas import EventType, ExportState, JobEvent, JobState
from tests.fakes.hf_hub import READ_TOKEN, FakeHub, HubRepo, xet_disabled
from tests.runner.conftest import TOKEN, Runner, RunnerFactory, job_environ
from tests.runner.test_checkpoints import (
    BASE_MODEL,
    BEST_NOT_LAST,
    checkpoint_dir,
    folder_files,
    trained,
)
from tests.runner.test_serving_jobs import GENEROUS_S

AUTH = {"Authorization": f"Bearer {TOKEN}"}
CANARY = "canary-hub-token-never-shown-0123456789"
"""A token the Hub does not know, shaped like no well-known credential: only its value can
redact it."""


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as fake, xet_disabled():
        yield fake


def exporting_runner(
    make_runner: RunnerFactory, hub: FakeHub, store: dict[str, str] | None = None, **environ: str
) -> Runner:
    """A runner whose environment has the Hub's token and address (what `environ` overrides),
    on the job store `store` says (SQLite by default)."""
    values = {"HF_TOKEN": hub.token, "HF_ENDPOINT": hub.url, **environ}
    return make_runner(
        environ=job_environ(**{k: v for k, v in values.items() if v}), **(store or {})
    )


def outcome(runner: Runner, job_id: str, after: int) -> JobEvent:
    """The export's `exported` or `export_failed` event, through the long-poll."""
    deadline = time.monotonic() + GENEROUS_S
    while time.monotonic() < deadline:
        page = runner.client.events(job_id, after=after, wait=5)
        for event in page.events:
            if event.type in (EventType.exported, EventType.export_failed):
                return event
        after = page.next_after
        assert not page.finished, "the events ended without the export's outcome"
    raise AssertionError("no outcome of the export")


def test_an_export_pushes_the_models_adapter_to_a_private_repository(
    make_runner: RunnerFactory, hub: FakeHub, store_settings: dict[str, str]
) -> None:
    runner = exporting_runner(make_runner, hub, store_settings)
    job_id = trained(runner, *BEST_NOT_LAST)

    started = runner.client.export(job_id, "alice/agent")

    assert started.state in (ExportState.queued, ExportState.uploading)
    assert (started.step, started.repo_id, started.private) == (2, "alice/agent", True)
    event = outcome(runner, job_id, started.after_seq)
    assert event.type is EventType.exported, event.data
    repo = hub.repos["alice/agent"]
    assert repo.private
    assert event.data == {
        "step": 2,
        "repo_id": "alice/agent",
        "url": f"{hub.url}/alice/agent",
        "commit": repo.head,
        "private": True,
    }
    pushed = folder_files(checkpoint_dir(runner, job_id, 2))  # the best step: the model
    assert {path: repo.files[path] for path in pushed} == pushed  # byte for byte
    assert set(repo.files) == {*pushed, "README.md"}
    assert hub.lfs  # the weights went through LFS, as the Hub wants a *.safetensors
    card = repo.files["README.md"].decode()
    assert card.startswith("---\n") and f'base_model: "{BASE_MODEL}"' in card
    assert "library_name: peft" in card and 'PeftModel.from_pretrained(base, "alice/agent")' in card
    assert "--lora-modules m1=alice/agent" in card
    assert [c.summary for c in repo.commits] == [f"artbot: m1 step 2 from job {job_id}"]
    status = runner.client.export_status(job_id)
    assert (status.state, status.url, status.commit) == (
        ExportState.done,
        event.data["url"],
        repo.head,
    )
    page = runner.client.events(job_id, after=event.seq)
    assert page.finished and page.events == []
    assert hub.refused == []


def test_a_chosen_step_goes_public_when_asked_and_the_same_export_is_not_started_twice(
    make_runner: RunnerFactory, hub: FakeHub
) -> None:
    runner = exporting_runner(make_runner, hub)
    job_id = trained(runner)
    hub.hold = threading.Event()  # the commit waits: the export stays under way
    body = {"repo_id": "acme/agent", "private": False, "step": 3}

    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        first = http.post(f"/jobs/{job_id}/exports", json=body)
        again = http.post(f"/jobs/{job_id}/exports", json=body)
        other = http.post(f"/jobs/{job_id}/exports", json={**body, "repo_id": "acme/other"})
    waiting = runner.client.events(job_id, after=first.json()["after_seq"], wait=0.2)
    hub.hold.set()
    event = outcome(runner, job_id, first.json()["after_seq"])

    assert (first.status_code, again.status_code, other.status_code) == (202, 200, 409)
    assert again.json()["after_seq"] == first.json()["after_seq"]
    assert "already exporting step 3 to acme/agent" in other.json()["detail"]
    assert not waiting.finished  # its event is still to come: a follower keeps waiting
    assert event.type is EventType.exported and event.data["step"] == 3
    assert not hub.repos["acme/agent"].private
    pushed = folder_files(checkpoint_dir(runner, job_id, 3))
    assert {p: hub.repos["acme/agent"].files[p] for p in pushed} == pushed
    assert "acme/other" not in hub.repos


@pytest.mark.parametrize(
    ("token", "repo_id", "said"),
    [
        (CANARY, "alice/agent", ["401", "invalid, expired, or has no write access"]),
        (READ_TOKEN, "alice/agent", ["403", "may not write to alice"]),
        (None, "bob/agent", ["403", "may not write to bob", "your own namespace"]),
    ],
    ids=["unknown token", "read token", "namespace of another"],
)
def test_an_export_the_hub_refuses_fails_saying_what_to_do_and_never_shows_the_token(
    make_runner: RunnerFactory,
    hub: FakeHub,
    caplog: pytest.LogCaptureFixture,
    token: str | None,
    repo_id: str,
    said: list[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    runner = exporting_runner(make_runner, hub, HF_TOKEN=token or hub.token)
    job_id = trained(runner)

    started = runner.client.export(job_id, repo_id)
    event = outcome(runner, job_id, started.after_seq)

    assert event.type is EventType.export_failed
    reason = event.data["reason"]
    assert all(words in reason for words in said), reason
    assert event.data["step"] == 4 and event.data["repo_id"] == repo_id
    status = runner.client.export_status(job_id)
    assert status.state is ExportState.failed and status.error == reason
    assert repo_id not in hub.repos
    assert f"export to {repo_id} failed" in caplog.text  # the runner's log was looked at too
    shown = json.dumps([e.model_dump(mode="json") for e in runner.client.events(job_id).events])
    shown += status.model_dump_json() + runner.client.log(job_id).text + caplog.text
    for secret in (CANARY, READ_TOKEN, hub.token):
        assert secret not in shown


def test_a_runner_without_a_hub_token_refuses_exports_and_says_so(
    make_runner: RunnerFactory, hub: FakeHub
) -> None:
    runner = exporting_runner(make_runner, hub, HF_TOKEN="")
    job_id = trained(runner)

    with pytest.raises(RunnerRejected) as refused:
        runner.client.export(job_id, "alice/agent")
    with pytest.raises(RunnerRejected) as never:
        runner.client.export_status(job_id)

    assert refused.value.status == 409
    assert "no Hugging Face token: set HF_TOKEN" in refused.value.message
    assert never.value.status == 404
    assert hub.requests == []


def test_an_unreachable_hub_is_said_so(make_runner: RunnerFactory, hub: FakeHub) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    runner = exporting_runner(make_runner, hub, HF_ENDPOINT=closed)
    job_id = trained(runner)

    started = runner.client.export(job_id, "alice/agent")
    event = outcome(runner, job_id, started.after_seq)

    assert event.type is EventType.export_failed
    assert f"could not reach {closed}" in event.data["reason"]
    assert "check the GPU host's network" in event.data["reason"]


def test_a_hub_that_never_answers_fails_the_export_after_its_timeout_and_frees_the_slot(
    make_runner: RunnerFactory, hub: FakeHub
) -> None:
    """huggingface_hub's own client waits for ever: the runner's does not."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # takes connections, answers none
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        runner = make_runner(
            export_timeout_s="1",
            export_max_uploads="1",
            environ=job_environ(HF_TOKEN=hub.token, HF_ENDPOINT=endpoint),
        )
        job_id = trained(runner)

        started = runner.client.export(job_id, "alice/agent")
        event = outcome(runner, job_id, started.after_seq)

        assert event.type is EventType.export_failed
        assert f"{endpoint} stopped answering (ReadTimeout)" in event.data["reason"]
        # The one upload slot is free again: the next export starts and fails the same way.
        again = runner.client.export(job_id, "alice/agent")
        assert outcome(runner, job_id, again.after_seq).type is EventType.export_failed


def test_a_private_export_to_an_existing_public_repository_uploads_nothing(
    make_runner: RunnerFactory, hub: FakeHub
) -> None:
    hub.repos["alice/agent"] = HubRepo("alice/agent", private=False, owner="alice")
    runner = exporting_runner(make_runner, hub)
    job_id = trained(runner)

    started = runner.client.export(job_id, "alice/agent")
    event = outcome(runner, job_id, started.after_seq)

    assert event.type is EventType.export_failed
    assert "already exists on the Hub and is public" in event.data["reason"]
    assert hub.repos["alice/agent"].files == {} and hub.lfs == {}


def test_exports_are_refused_for_a_running_job_and_a_step_without_a_checkpoint(
    make_runner: RunnerFactory, hub: FakeHub
) -> None:
    runner = exporting_runner(make_runner, hub)
    job_id = trained(runner)
    running = runner.submit("gate.py")
    runner.wait_state(running, JobState.running)

    with pytest.raises(RunnerRejected) as no_step:
        runner.client.export(job_id, "alice/agent", step=8)
    with pytest.raises(RunnerRejected) as unfinished:
        runner.client.export(running, "alice/agent")
    with httpx.Client(base_url=runner.base_url, headers=AUTH) as http:
        bad_repo = http.post(f"/jobs/{job_id}/exports", json={"repo_id": "alice/bad--name"})

    assert no_step.value.status == 409 and "no checkpoint of step 8" in no_step.value.message
    assert unfinished.value.status == 409
    assert bad_repo.status_code == 422 and "not a Hub repository id" in bad_repo.json()["detail"]
    assert hub.requests == []
    (runner.run_dir(running) / "release").touch()


def test_an_export_a_stopped_runner_left_mid_way_is_told_failed_at_the_next_start(
    make_runner: RunnerFactory, hub: FakeHub, tmp_path: Path, store_settings: dict[str, str]
) -> None:
    runner = exporting_runner(make_runner, hub, store_settings)
    job_id = trained(runner)
    runner.stop(cancel_jobs=False)
    folder = runner.settings.resolved_workdir / job_id / ".runner"
    write_whole_json(folder / "export.json", {"step": 4, "repo_id": "alice/agent", "private": True})
    (folder / "export-0123").mkdir()  # its copy of the adapter

    again = make_runner(root=tmp_path, environ=job_environ(HF_TOKEN=hub.token), **store_settings)

    last = again.client.events(job_id).events[-1]
    assert last.type is EventType.export_failed
    assert last.data == {
        "step": 4,
        "repo_id": "alice/agent",
        "private": True,
        "reason": "the runner stopped during the upload: export again",
    }
    status = again.client.export_status(job_id)
    assert (status.state, status.step, status.after_seq) == (ExportState.failed, 4, last.seq - 1)
    assert not (folder / "export.json").exists() and not (folder / "export-0123").exists()


def test_exports_wait_for_a_free_upload_slot(make_runner: RunnerFactory, hub: FakeHub) -> None:
    runner = make_runner(
        export_max_uploads="1", environ=job_environ(HF_TOKEN=hub.token, HF_ENDPOINT=hub.url)
    )
    first, second = trained(runner), trained(runner)
    hub.hold = threading.Event()

    one = runner.client.export(first, "alice/one")
    two = runner.client.export(second, "alice/two")
    deadline = time.monotonic() + GENEROUS_S
    while ExportState.uploading not in (states := states_of(runner, first, second)):
        assert time.monotonic() < deadline, states
        time.sleep(0.02)
    time.sleep(0.3)  # the other had every chance to start uploading too

    assert sorted(states_of(runner, first, second)) == [ExportState.queued, ExportState.uploading]
    hub.hold.set()
    assert outcome(runner, first, one.after_seq).type is EventType.exported
    assert outcome(runner, second, two.after_seq).type is EventType.exported
    assert set(hub.repos) == {"alice/one", "alice/two"}


def states_of(runner: Runner, *job_ids: str) -> list[ExportState]:
    return [runner.client.export_status(job_id).state for job_id in job_ids]
