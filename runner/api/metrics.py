"""The runner's Prometheus metrics, in a registry of its own (one per app), served at /metrics.

Counts are read when scraped (the store, the slot pool, the long-polls waiting), never kept in
memory beside them; the event lag is observed where the events long-poll answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runner.jobs.service import JobService
from runner.schemas import EventsPage, JobState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A follower waiting on the long-poll learns of an event within milliseconds; seconds mean
# it is behind (handling slowly, reconnecting) and minutes that it was away.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class RunnerState(Collector):
    """The gauges read from the service at each scrape: jobs by state, the queue, GPU slots
    and the long-polls waiting."""

    def __init__(self, service: JobService) -> None:
        self._service = service

    def describe(self) -> Iterator[Metric]:
        # Registering asks for the names: answer without querying the database.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        jobs, queue, slots, slots_in_use, long_polls = self._families()
        counts = self._service.store.counts()
        for state in JobState:
            jobs.add_metric([state.value], counts.get(state, 0))
        queue.add_metric([], counts.get(JobState.queued, 0))
        pool = self._service.slots
        slots.add_metric([], len(pool))
        slots_in_use.add_metric([], len(pool) - pool.free)
        long_polls.add_metric([], self._service.wakeups.waiting())
        yield from (jobs, queue, slots, slots_in_use, long_polls)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "artbot_runner_jobs", "Jobs in the runner's database, by state.", labels=["state"]
            ),
            GaugeMetricFamily(
                "artbot_runner_queue_depth", "Jobs queued, waiting for a GPU slot (or to start)."
            ),
            GaugeMetricFamily("artbot_runner_gpu_slots", "GPU slots this runner schedules on."),
            GaugeMetricFamily("artbot_runner_gpu_slots_in_use", "GPU slots held by a job."),
            GaugeMetricFamily(
                "artbot_runner_long_polls", "Events long-polls waiting for a job's next event."
            ),
        )


class RunnerMetrics:
    """Every metric the runner exports; `exposition()` is the /metrics body."""

    def __init__(self, service: JobService) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(RunnerState(service))
        self.event_lag = Histogram(
            "artbot_runner_event_lag_seconds",
            "From an event being recorded to a long-poll (GET /jobs/{id}/events?wait=...) "
            "handing it out: how late followers such as the bot learn of events.",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )

    def delivered(self, page: EventsPage) -> None:
        """A long-poll answers with `page`: observe each event's age."""
        now = datetime.now(UTC)
        for event in page.events:
            self.event_lag.observe(max(0.0, (now - event.at).total_seconds()))

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
