"""/metrics: what Prometheus scrapes from the runner, read from a real runner on loopback."""

from __future__ import annotations

import threading
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from runner.schemas import EventsPage, JobState
from tests.runner.conftest import Runner


def scrape(runner: Runner) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics (asked without a token), by name and labels."""
    response = httpx.get(f"{runner.base_url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_count_the_queue_jobs_by_state_and_gpu_slots_in_use(runner: Runner) -> None:
    first, second, third = (runner.submit("gate.py") for _ in range(3))
    runner.wait_state(first, JobState.running)
    runner.wait_state(second, JobState.running)
    metrics = scrape(runner)
    assert metrics[("artbot_runner_gpu_slots", ())] == 2
    assert metrics[("artbot_runner_gpu_slots_in_use", ())] == 2
    assert metrics[("artbot_runner_queue_depth", ())] == 1  # the third waits for a slot
    assert metrics[("artbot_runner_jobs", (("state", "running"),))] == 2
    assert metrics[("artbot_runner_jobs", (("state", "queued"),))] == 1
    assert metrics[("artbot_runner_jobs", (("state", "succeeded"),))] == 0
    assert str(runner.base_url) not in str(metrics) and first not in str(metrics)  # no job ids
    for job_id in (first, second, third):
        runner.client.cancel(job_id)


def test_the_event_lag_is_observed_when_a_long_poll_hands_out_events(runner: Runner) -> None:
    job_id = runner.submit("gate.py")
    runner.wait_file(runner.run_dir(job_id) / "env.json")
    after = runner.client.events(job_id).next_after  # without wait: no lag observed
    assert scrape(runner)[("artbot_runner_event_lag_seconds_count", ())] == 0

    answered: list[EventsPage] = []
    poll = threading.Thread(
        target=lambda: answered.append(runner.client.events(job_id, after=after, wait=25))
    )
    poll.start()
    deadline = time.monotonic() + 20
    while scrape(runner)[("artbot_runner_long_polls", ())] != 1:  # the poll waits at the runner
        assert time.monotonic() < deadline, "the long-poll never waited"
        time.sleep(0.02)
    (runner.run_dir(job_id) / "release").touch()
    poll.join(30)

    [page] = answered
    assert page.events
    metrics = scrape(runner)
    assert metrics[("artbot_runner_event_lag_seconds_count", ())] == len(page.events)
    assert metrics[("artbot_runner_long_polls", ())] == 0
