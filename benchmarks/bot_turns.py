"""How fast the Slack bot acks and answers when many people run wizards at once. Prints numbers.

    uv run python benchmarks/bot_turns.py [--users 20] [--turns 6] [--postgres URL]
                                          [--slack-latency-ms 0] [--max-seconds 60]

The real bot (`bot.app.build_service` + `create_app`, served by `bot.serve.make_http_server`
on 127.0.0.1) talks to the recording fake Slack of tests/fakes, on SQLite (a temporary file)
and, with --postgres or ARTBOT_TEST_POSTGRES_URL, on PostgreSQL too (in a throwaway schema,
dropped afterwards). Each simulated user, in a channel of their own and all at once, sends a
signed `/train-rl` and then walks the wizard's first questions with thread replies and button
clicks, each sent only once the bot has asked the question (a closed loop, like a person).

Measured per request kind:
- ack: from sending the HTTP request to the bot's HTTP response (Slack wants it under 3 s);
- turn: from sending it until the fake Slack received the bot's next question in that thread
  (the `Call.at` the fake recorded, not when this script noticed);
and completed turns per second over the whole run. Everything (bot, fake Slack, users) shares
one Python process, so the numbers include their contention for the GIL.

Bounded: at most MAX_USERS users and len(WIZARD) turns each, every wait capped, and the run
for one database stops at --max-seconds whatever is left. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# The script runs from a checkout: bot/, artbot/ and tests/fakes are imported from its root.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from bot.app import build_service, create_app, start_outbox  # noqa: E402
from bot.serve import EVENTS_PATH, make_http_server  # noqa: E402
from bot.settings import load_settings  # noqa: E402
from storage.sessions import create_database_engine  # noqa: E402
from tests.fakes.slack_api import Call, FakeSlack  # noqa: E402
from tests.fakes.slack_requests import (  # noqa: E402
    SignedRequest,
    block_actions,
    event_callback,
    message_event,
    slash_command,
)
from tests.fakes.workspace import BOT_TOKEN, SIGNING_SECRET  # noqa: E402

MAX_USERS = 200
WAIT_CAP_S = 15.0
HTTP_TIMEOUT_S = 10.0
LOOPBACK = "127.0.0.1"
ROWS = "\n".join(
    json.dumps({"prompt": f"What is {a} + {b}? Reply with the number only.", "answer": str(a + b)})
    for a, b in [(2, 2), (3, 4), (1, 1), (5, 3), (6, 1), (2, 7), (4, 4), (9, 0)]
)
# The wizard's first questions, answered as a person would: ("click", button label) or
# ("reply", thread reply). Each one's answer makes the bot ask the next question.
WIZARD: tuple[tuple[str, str], ...] = (
    ("click", "Only logged or static scenarios"),
    ("click", "Single-turn"),
    ("reply", "Answer arithmetic questions with only the final number."),
    ("click", "Paste them here"),
    ("reply", f"```\n{ROWS}\n```"),
    ("reply", "skip"),
    ("click", "RULER"),
    ("click", "openai/gpt-5.4"),
    ("click", "All scenarios"),
)
SLACK_METHODS = ("chat.postMessage", "chat.update", "chat.postEphemeral", "views.publish")


@dataclass(frozen=True)
class Sample:
    kind: str  # "command", "click" or "reply"
    ack_s: float
    turn_s: float | None  # None when no next question came within the caps
    status: int


@dataclass
class Run:
    """What one database's run produced."""

    label: str
    users: int
    turns_per_user: int
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample)

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)


class Deadline(Exception):
    """The run's time is up."""


class SimulatedUser:
    """One person: their own channel, one wizard, the first questions answered in order."""

    def __init__(self, index: int, fake: FakeSlack, url: str, run: Run, deadline: float) -> None:
        self.user = f"U0BENCH{index:03d}"
        self.channel = f"C0BENCH{index:03d}"
        self.fake = fake
        self.url = url
        self.run = run
        self.deadline = deadline
        self.thread = ""
        self.question: Call | None = None

    def walk(self, turns: int, start: threading.Barrier | None = None) -> None:
        """The command, then `turns` answers; stops at the first turn that gets no question."""
        try:
            if start is not None:
                start.wait(timeout=WAIT_CAP_S)
            if not self.command():
                return
            for kind, answer in WIZARD[:turns]:
                if not (self.click(answer) if kind == "click" else self.reply(answer)):
                    return
        except Deadline:
            self.run.error(f"{self.user}: stopped by --max-seconds")
        except Exception as error:  # a benchmark reports what broke and carries on
            self.run.error(f"{self.user}: {type(error).__name__}: {error}")

    def command(self) -> bool:
        sent = time.monotonic()
        status, ack = self.post(slash_command(text="", user_id=self.user, channel_id=self.channel))
        parent = self.wait_for_post(sent, lambda c: "thread_ts" not in c.params)
        if parent is None or not parent.response:
            return self.record("command", sent, status, ack, None)
        self.thread = str(parent.response["ts"])
        return self.record("command", sent, status, ack, self.next_question(sent))

    def reply(self, answer: str) -> bool:
        event = message_event(answer, channel=self.channel, user=self.user, thread_ts=self.thread)
        sent = time.monotonic()
        status, ack = self.post(event_callback(event))
        return self.record("reply", sent, status, ack, self.next_question(sent))

    def click(self, label: str) -> bool:
        question = self.question
        assert question is not None and question.response is not None
        message = question.response["message"]
        for block in question.json("blocks") or []:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if label in element["text"]["text"]:
                    request = block_actions(
                        element["action_id"],
                        element["value"],
                        message_ts=str(question.response["ts"]),
                        user_id=self.user,
                        channel_id=self.channel,
                        message={**message, "thread_ts": self.thread},
                    )
                    sent = time.monotonic()
                    status, ack = self.post(request)
                    return self.record("click", sent, status, ack, self.next_question(sent))
        self.run.error(f"{self.user}: no button {label!r} on the question")
        return False

    def post(self, request: SignedRequest) -> tuple[int, float]:
        if time.monotonic() > self.deadline:
            raise Deadline
        started = time.monotonic()
        reply = request.post(self.url, timeout=HTTP_TIMEOUT_S)
        return reply.status, time.monotonic() - started

    def next_question(self, sent: float) -> Call | None:
        """The bot's first question posted in this thread after `sent`: it has a context line."""

        def asks(call: Call) -> bool:
            blocks = call.json("blocks") or []
            return call.params.get("thread_ts") == self.thread and any(
                block.get("type") == "context" for block in blocks
            )

        self.question = self.wait_for_post(sent, asks)
        return self.question

    def wait_for_post(self, sent: float, wanted: Callable[[Call], bool]) -> Call | None:
        """The first chat.postMessage in this user's channel after `sent` that is `wanted`."""
        found: list[Call] = []

        def arrived(fake: FakeSlack) -> bool:
            for call in fake.calls("chat.postMessage"):
                if call.at >= sent and call.params.get("channel") == self.channel and wanted(call):
                    found.append(call)
                    return True
            return False

        remaining = min(WAIT_CAP_S, self.deadline - time.monotonic())
        if remaining <= 0:
            raise Deadline
        try:
            self.fake.wait_for(arrived, timeout=remaining)
        except TimeoutError:
            return None
        return found[0]

    def record(
        self, kind: str, sent: float, status: int, ack: float, question: Call | None
    ) -> bool:
        """Keep the sample; False (stop walking) when the bot did not ask the next question."""
        turn = question.at - sent if question is not None else None
        self.run.add(Sample(kind, ack, turn, status))
        if status != 200:
            self.run.error(f"{self.user}: {kind} answered HTTP {status}")
        if question is None:
            self.run.error(f"{self.user}: no question after the {kind} within {WAIT_CAP_S:g} s")
        return question is not None and status == 200


# ---- one database --------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    label: str
    url: str
    schema: str | None = None


@contextmanager
def sqlite_database() -> Iterator[Database]:
    with tempfile.TemporaryDirectory(prefix="artbot-bench-") as folder:
        yield Database("SQLite", f"sqlite:///{Path(folder) / 'artbot.db'}")


@contextmanager
def postgres_database(url: str) -> Iterator[Database]:
    """A schema of its own in the database at `url`, dropped afterwards."""
    schema = f"artbot_bench_{uuid.uuid4().hex[:12]}"
    admin = create_database_engine(url)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield Database("PostgreSQL", url, schema)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def run_one(database: Database, args: argparse.Namespace) -> Run:
    """Start the fake Slack and the bot on `database`, let the users loose, stop everything."""
    run = Run(database.label, args.users, args.turns + 1)
    with (
        FakeSlack() as fake,
        tempfile.TemporaryDirectory(prefix="artbot-bench-scripts-") as scripts,
    ):
        assert urlsplit(fake.root_url).hostname == LOOPBACK
        for method in SLACK_METHODS:
            fake.delay(method, args.slack_latency_ms / 1000)
        settings = load_settings(
            {
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_URL": fake.base_url,
                "ARTBOT_DATABASE_URL": database.url,
                "ARTBOT_SCRIPTS_DIR": scripts,
                "ARTBOT_DRYRUN": "false",
            }
        )
        service = build_service(settings, dryrun=None, schema=database.schema)
        app = create_app(settings, service)
        outbox = start_outbox(service, app.client)  # delivers what each turn says
        server = make_http_server(app, LOOPBACK, 0)
        serving = threading.Thread(target=server.serve_forever, name="bot-http", daemon=True)
        serving.start()
        url = f"http://{LOOPBACK}:{server.server_port}{EVENTS_PATH}"
        try:
            # One wizard first, unmeasured: imports, table creation, statement caches.
            warmup = Run("warm-up", 1, 2)
            SimulatedUser(MAX_USERS, fake, url, warmup, time.monotonic() + 30).walk(1)
            if warmup.errors:
                run.errors += [f"warm-up: {e}" for e in warmup.errors]
            deadline = time.monotonic() + args.max_seconds
            users = [SimulatedUser(i, fake, url, run, deadline) for i in range(args.users)]
            start = threading.Barrier(len(users) + 1)
            with ThreadPoolExecutor(max_workers=len(users)) as pool:
                for user in users:
                    pool.submit(user.walk, args.turns, start)
                start.wait(timeout=WAIT_CAP_S)
                began = time.monotonic()
            run.wall_s = time.monotonic() - began
        finally:
            server.shutdown()
            server.server_close()
            outbox.stop()
            service.store.close()
    return run


# ---- the report ----------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered) - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def milliseconds(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:8.1f}" if values else f"{'-':>8}"


def report(run: Run, database: Database, args: argparse.Namespace) -> str:
    where = f"schema {database.schema}" if database.schema else "a temporary file"
    planned = run.users * run.turns_per_user
    done = [s for s in run.samples if s.turn_s is not None and s.status == 200]
    rate = len(done) / run.wall_s if run.wall_s > 0 else 0.0
    lines = [
        f"{run.label} ({where}), {run.users} users x {run.turns_per_user} turns, "
        f"fake Slack latency {args.slack_latency_ms:g} ms",
        f"{len(done)}/{planned} turns in {run.wall_s:.2f} s: {rate:.1f} turns/s",
        f"{'kind':<8} {'n':>5} {'ack p50':>8} {'ack p99':>8} {'turn p50':>9} {'turn p99':>9}  (ms)",
    ]
    for kind in ("command", "click", "reply", "all"):
        samples = [s for s in run.samples if kind in ("all", s.kind)]
        acks = [s.ack_s for s in samples]
        turns = [s.turn_s for s in samples if s.turn_s is not None]
        lines.append(
            f"{kind:<8} {len(samples):>5} {milliseconds(acks, 0.5)} {milliseconds(acks, 0.99)} "
            f"{milliseconds(turns, 0.5)} {milliseconds(turns, 0.99)} "
        )
    slow_acks = sum(1 for s in run.samples if s.ack_s >= 3.0)
    if slow_acks:
        lines.append(f"{slow_acks} acks took 3 s or more: Slack would have retried them")
    # "U0BENCH003: ConnectionResetError: ..." -> one line per kind of error, with a count.
    kinds = Counter(error.partition(": ")[2] for error in run.errors)
    for message, count in kinds.most_common(5):
        lines.append(f"error x{count}: {message}")
    if any("ConnectionResetError" in m or "ConnectionRefusedError" in m for m in kinds):
        # Seen at 20 users: socketserver's listen backlog (request_queue_size) is 5.
        lines.append("(the bot's HTTP server dropped connections: its listen backlog overflowed)")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20, help="concurrent users [20]")
    parser.add_argument(
        "--turns",
        type=int,
        default=6,
        help=f"answers per user after /train-rl, at most {len(WIZARD)} [6]",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("ARTBOT_TEST_POSTGRES_URL"),
        metavar="URL",
        help="also run on this PostgreSQL (on 127.0.0.1) [$ARTBOT_TEST_POSTGRES_URL]",
    )
    parser.add_argument(
        "--slack-latency-ms",
        type=float,
        default=0.0,
        help="delay the fake Slack adds to each chat.* and views.* call (real Slack: ~100) [0]",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=60.0, help="cap on each database's run [60]"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.users <= MAX_USERS:
        parser.error(f"--users must be 1 to {MAX_USERS}")
    if not 0 <= args.turns <= len(WIZARD):
        parser.error(f"--turns must be 0 to {len(WIZARD)}")
    if not 0 < args.max_seconds <= 600 or not 0 <= args.slack_latency_ms <= 5000:
        parser.error("--max-seconds must be in (0, 600], --slack-latency-ms in [0, 5000]")
    if args.postgres and make_url(args.postgres).host not in (LOOPBACK, "localhost"):
        parser.error("--postgres must be on 127.0.0.1: this benchmark talks to loopback only")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    # urllib and slack_sdk honour proxy variables: keep every request on loopback.
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = f"{LOOPBACK},localhost"
    databases = [sqlite_database()]
    if args.postgres:
        databases.append(postgres_database(args.postgres))
    for opened in databases:
        with opened as database:
            run = run_one(database, args)
            print(report(run, database, args), flush=True)
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
