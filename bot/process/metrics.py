"""The bot's Prometheus metrics, in a registry of its own (one per app), served at /metrics.

Acks and their latency are counted where Bolt answers a request (`ArtbotApp.dispatch`), turns
where a listener's work ends, sessions by state and the answers' feedback when scraped (from
the database). The outbox's depth and retries come from whoever delivers it:
`watch_outbox(depth)` and `outbox_retries.inc()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Acks must stay far below Slack's 3 s; turns are a few SQL statements and Slack calls.
ACK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 3.0, 10.0)
TURN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class CountedFromStore(Collector):
    """A gauge family counted from the database when scraped (not kept in memory): one sample
    per label value that `count()` returns."""

    def __init__(
        self, name: str, documentation: str, label: str, count: Callable[[], Mapping[str, int]]
    ) -> None:
        self.name = name
        self._documentation = documentation
        self._label = label
        self._count = count

    def describe(self) -> Iterator[Metric]:
        # Registering asks for the names: answer without querying the database.
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for value, count in sorted(self._count().items()):
            family.add_metric([value], count)
        yield family

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(self.name, self._documentation, labels=[self._label])


class BotMetrics:
    """Every metric the bot exports; `exposition()` is the /metrics body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.acks = Counter(
            "artbot_slack_acks",
            "Slack requests answered, by kind (command, action, event, ...) and HTTP status.",
            ["kind", "status"],
            registry=self.registry,
        )
        self.ack_seconds = Histogram(
            "artbot_slack_ack_seconds",
            "From Bolt receiving a Slack request to its ack, by kind.",
            ["kind"],
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.turn_seconds = Histogram(
            "artbot_turn_seconds",
            "From Bolt receiving a Slack request to the end of the work it started, by kind.",
            ["kind"],
            buckets=TURN_BUCKETS,
            registry=self.registry,
        )
        self.works_in_flight = Gauge(
            "artbot_listener_works_in_flight",
            "Work handed on by listeners after their acks and not finished yet (waiting for a "
            "compute slot, computing, or waiting on Slack or a model): the backlog behind acks.",
            registry=self.registry,
        )
        self.outbox_depth = Gauge(
            "artbot_outbox_depth",
            "Slack posts and updates stored but not yet delivered.",
            registry=self.registry,
        )
        self.outbox_retries = Counter(
            "artbot_outbox_retries",
            "Outbox deliveries tried again after a failure (429, 5xx, a dropped connection).",
            registry=self.registry,
        )
        self._from_store: dict[str, CountedFromStore] = {}

    def watch_outbox(self, depth: Callable[[], float]) -> None:
        """Read the outbox's depth from `depth()` at every scrape."""
        self.outbox_depth.set_function(depth)

    def watch_sessions(self, count: Callable[[], Mapping[str, int]]) -> None:
        """`artbot_sessions{state}`: sessions by state, from `count()` at every scrape."""
        self._watch(
            CountedFromStore(
                "artbot_sessions",
                "Wizard sessions by state (active, complete, cancelled).",
                "state",
                count,
            )
        )

    def watch_answer_feedback(self, count: Callable[[], Mapping[str, int]]) -> None:
        """`artbot_answer_feedback{verdict}`: what people said of the assistant's streamed
        answers (helpful, unhelpful: each person's last word on each answer), at every scrape."""
        self._watch(
            CountedFromStore(
                "artbot_answer_feedback",
                "The assistant's answers marked helpful or unhelpful (each person's last word).",
                "verdict",
                count,
            )
        )

    def _watch(self, collector: CountedFromStore) -> None:
        """Register `collector`, in place of an earlier one of its name (once per registry)."""
        earlier = self._from_store.pop(collector.name, None)
        if earlier is not None:
            self.registry.unregister(earlier)
        self._from_store[collector.name] = collector
        self.registry.register(collector)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
