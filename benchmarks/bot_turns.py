"""How fast the Slack bot acks and answers when many people run wizards at once. Prints numbers.

    uv run python benchmarks/bot_turns.py [--users 20] [--turns 6] [--rounds 1] [--postgres URL]
                                          [--slack-latency-ms 0] [--max-seconds 60]
                                          [--repeat 1] [--only sqlite|postgres]
                                          [--instructions] [--model-latency-ms MS]
                                          [--workers 1]

The bot runs as in production, in a process of its own: `artbot serve` (uvicorn, Bolt acking
first) on 127.0.0.1, pointed by SLACK_API_URL at the recording fake Slack of tests/fakes, on
SQLite (a temporary file) and, with --postgres or ARTBOT_TEST_POSTGRES_URL, on PostgreSQL too
(a throwaway database, dropped afterwards). This process holds the fake Slack and the simulated
users: each, in a channel of their own and all at once, sends a signed `/train-rl` and then
walks the wizard's first questions with thread replies and button clicks, each sent only once
the bot has asked the question (a closed loop, like a person). With --rounds R each user walks R
wizards one after another (a new /train-rl each), so that a run at 20 users lasts long enough for
its p99 to be more than its two slowest turns. Before the users, one wizard walks the same steps
unmeasured (imports, templates, statement caches, connections: a bot that has been up a while).

Measured per request kind:
- ack: from sending the HTTP request to the bot's HTTP response (Slack wants it under 3 s);
- turn: from sending it until the fake Slack received the bot's next question in that thread
  (the `Call.at` the fake recorded, not when this script noticed);
and completed turns per second over the whole run, acks that took 3 s or more, lost turns
(acked, but no next question within WAIT_CAP_S) and doubled turns (a question posted twice in
one thread). The bot's own /metrics is read at the end as a cross-check (acks it counted).

--instructions runs the bot under valgrind's callgrind and prints the instructions it executed
per completed turn (counted from the users' start to their end): a figure that stays put from
one run to the next on a shared VM whose CPU speed does not, so a change can be judged in one
pair of runs. The bot is about fifty times slower there: use few users (it prints no latency).

--model-latency-ms gives the bot an assistant (ARTBOT_LLM_*) whose model is the fake OpenAI of
tests/fakes (strict: it refuses what OpenAI refuses) in this process, answering every call after
that long with no advice: each wizard asks it once, when its scenarios are given (turn 5).

Bounded: at most MAX_USERS users and len(WIZARD) turns each, every wait capped, and the run
for one database stops at --max-seconds whatever is left. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

# The script runs from a checkout: tests/fakes and storage are imported from its root.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from storage.database import create_database_engine  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Scripted  # noqa: E402
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
MAX_REPEAT = 10
MAX_ROUNDS = 20
MAX_WORKERS = 8
WAIT_CAP_S = 15.0
HTTP_TIMEOUT_S = 10.0
BOT_START_S = 60.0
VALGRIND_SLOWDOWN = 50.0
"""How much longer every wait and cap is with --instructions (the bot under callgrind)."""
LOOPBACK = "127.0.0.1"
EVENTS_PATH = "/slack/events"
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
NO_ADVICE = Scripted.json({"recommendations": []})
"""The model's every reply with --model-latency-ms: the advice asked for at turn 5, none."""


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
    bot_cpu_s: float = 0.0
    router_cpu_s: float = 0.0
    """With --workers: the front process's share of bot_cpu_s (the workers are the rest)."""
    bot_instructions: int | None = None
    slowdown: float = 1.0
    """Waits and caps are this many times longer (the bot under valgrind)."""
    harness_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0
    doubled: int = 0
    model_calls: int | None = None
    """Calls the assistant made to the fake model (None: no assistant)."""
    bot_acks: float | None = None
    bot_ack_bounds: dict[float, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample)

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)


class Deadline(Exception):
    """The run's time is up."""


class Mailbox:
    """The bot's chat.postMessage calls in one channel, as the fake Slack records them."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.posts: list[Call] = []

    def add(self, call: Call) -> None:
        with self._changed:
            self.posts.append(call)
            self._changed.notify_all()

    def first(self, wanted: Callable[[Call], bool], timeout: float) -> Call | None:
        """The first post that is `wanted`, waiting up to `timeout` for it; None if none came."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                for call in self.posts[seen:]:
                    if wanted(call):
                        return call
                seen = len(self.posts)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)


class Mailboxes:
    """One Mailbox per channel, fed by the fake Slack's `watch` (no re-scans of every call)."""

    def __init__(self, fake: FakeSlack) -> None:
        self._boxes: dict[str, Mailbox] = {}
        fake.watch(self._on_call)

    def of(self, channel: str) -> Mailbox:
        return self._boxes.setdefault(channel, Mailbox())

    def _on_call(self, call: Call) -> None:
        if call.method == "chat.postMessage" and call.ok:
            box = self._boxes.get(str(call.params.get("channel")))
            if box is not None:
                box.add(call)


def is_question(call: Call, thread: str) -> bool:
    """A question of the wizard in `thread`: its blocks end with a context line."""
    blocks = call.json("blocks") or []
    return call.params.get("thread_ts") == thread and any(
        block.get("type") == "context" for block in blocks
    )


class SimulatedUser:
    """One person: their own channel, one wizard, the first questions answered in order."""

    def __init__(self, index: int, boxes: Mailboxes, url: str, run: Run, deadline: float) -> None:
        self.user = f"U0BENCH{index:03d}"
        self.channel = f"C0BENCH{index:03d}"
        self.box = boxes.of(self.channel)
        self.url = url
        self.run = run
        self.deadline = deadline
        self.thread = ""
        self.threads: list[str] = []
        self.question: Call | None = None

    def walk(self, turns: int, start: threading.Barrier | None = None, rounds: int = 1) -> None:
        """`rounds` wizards one after another, each the command then `turns` answers; stops at
        the first turn that gets no question."""
        try:
            if start is not None:
                start.wait(timeout=WAIT_CAP_S * self.run.slowdown)
            for _ in range(rounds):
                if not self.wizard(turns):
                    return
        except Deadline:
            self.run.error(f"{self.user}: stopped by --max-seconds")
        except Exception as error:  # a benchmark reports what broke and carries on
            self.run.error(f"{self.user}: {type(error).__name__}: {error}")

    def wizard(self, turns: int) -> bool:
        """A new wizard: the command, then `turns` answers; False at a turn with no question."""
        if not self.command():
            return False
        for kind, answer in WIZARD[:turns]:
            if not (self.click(answer) if kind == "click" else self.reply(answer)):
                return False
        return True

    def command(self) -> bool:
        sent = time.monotonic()
        status, ack = self.post(slash_command(text="", user_id=self.user, channel_id=self.channel))
        parent = self.wait_for_post(lambda c: c.at >= sent and "thread_ts" not in c.params)
        if parent is None or not parent.response:
            return self.record("command", sent, status, ack, None)
        self.thread = str(parent.response["ts"])
        self.threads.append(self.thread)
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
        reply = request.post(self.url, timeout=HTTP_TIMEOUT_S * self.run.slowdown)
        return reply.status, time.monotonic() - started

    def next_question(self, sent: float) -> Call | None:
        """The bot's first question posted in this thread after `sent`."""
        self.question = self.wait_for_post(lambda c: c.at >= sent and is_question(c, self.thread))
        return self.question

    def wait_for_post(self, wanted: Callable[[Call], bool]) -> Call | None:
        remaining = min(WAIT_CAP_S * self.run.slowdown, self.deadline - time.monotonic())
        if remaining <= 0:
            raise Deadline
        return self.box.first(wanted, remaining)

    def record(
        self, kind: str, sent: float, status: int, ack: float, question: Call | None
    ) -> bool:
        """Keep the sample; False (stop walking) when the bot did not ask the next question."""
        turn = question.at - sent if question is not None else None
        self.run.add(Sample(kind, ack, turn, status))
        if status != 200:
            self.run.error(f"{self.user}: {kind} answered HTTP {status}")
        if question is None:
            cap = WAIT_CAP_S * self.run.slowdown
            self.run.error(f"{self.user}: no question after the {kind} within {cap:g} s")
        return question is not None and status == 200

    def doubled(self) -> int:
        """Questions posted more than once in one of this user's threads (the same text twice)."""
        doubled = 0
        for thread in self.threads:
            texts = [str(c.params.get("text")) for c in self.box.posts if is_question(c, thread)]
            doubled += len(texts) - len(set(texts))
        return doubled


# ---- one database, one bot process -----------------------------------------------------------


@dataclass(frozen=True)
class Database:
    label: str
    url: str


@contextmanager
def sqlite_database() -> Iterator[Database]:
    with tempfile.TemporaryDirectory(prefix="artbot-bench-") as folder:
        yield Database("SQLite", f"sqlite:///{Path(folder) / 'artbot.db'}")


@contextmanager
def postgres_database(url: str) -> Iterator[Database]:
    """A database of its own on the server at `url` (the bot migrates it), dropped afterwards."""
    name = f"artbot_bench_{uuid.uuid4().hex[:12]}"
    admin = create_database_engine(url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        own = make_url(url).set(database=name).render_as_string(hide_password=False)
        yield Database("PostgreSQL", own)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@contextmanager
def bot_process(
    database: Database,
    fake: FakeSlack,
    scripts: str,
    log: Path,
    callgrind: Path | None = None,
    model: FakeOpenAI | None = None,
    workers: int = 1,
) -> Iterator[tuple[str, int]]:
    """`artbot serve` in a process of its own on a free loopback port; its base URL and pid.
    Its log lines go to `log`; it is stopped with SIGTERM (then killed) afterwards. Given
    `callgrind`, it runs under valgrind's callgrind, its dumps written as `callgrind`.<n>;
    given `model`, its assistant asks that model; `workers` bot processes behind its router."""
    port = free_port()
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("SLACK_", "ARTBOT_"))
    }
    env |= {
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": fake.base_url,
        "ARTBOT_DATABASE_URL": database.url,
        "ARTBOT_SCRIPTS_DIR": scripts,
        "ARTBOT_DRYRUN": "false",
        "NO_PROXY": f"{LOOPBACK},localhost",
        "no_proxy": f"{LOOPBACK},localhost",
    }
    if model is not None:
        env |= {
            "ARTBOT_LLM_MODEL": "gpt-bench",
            "ARTBOT_LLM_BASE_URL": model.base_url,
            "ARTBOT_LLM_API_KEY": model.key,
            "ARTBOT_LLM_TIMEOUT_S": str(max(20.0, model.latency_s * 4)),
        }
    command = [sys.executable, "-m", "artbot.cli", "serve", "--host", LOOPBACK, "--port", str(port)]
    command += ["--workers", str(workers)]
    if callgrind is not None:
        # Not instrumented (so about five times faster, not fifty) until `callgrind_start`.
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={callgrind}",
            *command,
        ]
    base = f"http://{LOOPBACK}:{port}"
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)
        try:
            deadline = time.monotonic() + (
                BOT_START_S * (1 if callgrind is None else VALGRIND_SLOWDOWN)
            )
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the bot exited ({process.returncode}): see {log}")
                try:
                    if http_get(f"{base}/healthz")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the bot did not answer /healthz in {BOT_START_S:g} s")
                time.sleep(0.1)
            yield base, process.pid
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def callgrind_start(pid: int) -> None:
    """Start counting the bot's instructions (callgrind_control talks to the running tool)."""
    subprocess.run(["callgrind_control", "--instr=on", str(pid)], check=True, capture_output=True)


def callgrind_instructions(pid: int, dump: Path) -> int:
    """Instructions the bot executed since `callgrind_start`: dump its counts now and read the
    dump's total (the newest file named `dump`.<n>)."""
    subprocess.run(["callgrind_control", "--dump", str(pid)], check=True, capture_output=True)
    dumps = sorted(dump.parent.glob(f"{dump.name}.*"), key=lambda path: path.stat().st_mtime)
    for line in dumps[-1].read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no total in {dumps[-1]}")


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) a process and its children (`--workers`) have used so far,
    from /proc/<pid>/stat."""
    return own_cpu_s(pid) + sum(process_cpu_s(child) for child in children(pid))


def own_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) the process `pid` itself has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (/proc/<pid>/task/*/children)."""
    found: list[int] = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            found += [int(child) for child in listing.read_text().split()]
    return found


def machine_cpu_s() -> float:
    """CPU seconds every process on the machine has used (all cores, the database server's
    included), from the first line of /proc/stat: what is not idle or waiting on I/O."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def acks_counted(metrics: str) -> float:
    """The total of `artbot_slack_acks_total` in a /metrics body."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("artbot_slack_acks_total{")
    )


def bot_side_ack_bounds(metrics: str) -> dict[float, float]:
    """From the bot's `artbot_slack_ack_seconds` histogram (every kind): for p50 and p99, the
    bucket bound that the quantile falls under (inf when above the largest)."""
    cumulative: dict[float, float] = {}
    for line in metrics.splitlines():
        if line.startswith("artbot_slack_ack_seconds_bucket{"):
            bound = float(line.split('le="', 1)[1].split('"', 1)[0])
            cumulative[bound] = cumulative.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
    total = cumulative.get(math.inf, 0.0)
    bounds: dict[float, float] = {}
    for fraction in (0.5, 0.99):
        bounds[fraction] = next(
            (b for b in sorted(cumulative) if cumulative[b] >= fraction * total), math.inf
        )
    return bounds


def run_one(database: Database, args: argparse.Namespace) -> Run:
    """Start the fake Slack and the bot on `database`, let the users loose, stop everything."""
    slowdown = VALGRIND_SLOWDOWN if args.instructions else 1.0
    run = Run(database.label, args.users, (args.turns + 1) * args.rounds, slowdown=slowdown)
    with (
        FakeSlack() as fake,
        tempfile.TemporaryDirectory(prefix="artbot-bench-scripts-") as scripts,
        tempfile.TemporaryDirectory(prefix="artbot-bench-callgrind-") as counts,
        (
            FakeOpenAI(latency_s=args.model_latency_ms / 1000, otherwise=NO_ADVICE)
            if args.model_latency_ms is not None
            else nullcontext()
        ) as model,
    ):
        callgrind = Path(counts) / "callgrind.out" if args.instructions else None
        assert urlsplit(fake.root_url).hostname == LOOPBACK
        boxes = Mailboxes(fake)
        for method in SLACK_METHODS:
            fake.delay(method, args.slack_latency_ms / 1000)
        log = Path(tempfile.gettempdir()) / f"artbot-bench-bot-{database.label.lower()}.log"
        with bot_process(database, fake, scripts, log, callgrind, model, args.workers) as (
            base,
            pid,
        ):
            url = f"{base}{EVENTS_PATH}"
            # One wizard first, unmeasured, through every step the users will take: imports,
            # templates, statement caches, connections (a bot that has been up a while).
            warmup = Run("warm-up", 1, args.turns + 1, slowdown=slowdown)
            until = time.monotonic() + 30 * slowdown
            SimulatedUser(MAX_USERS, boxes, url, warmup, until).walk(args.turns)
            if warmup.errors:
                run.errors += [f"warm-up: {e}" for e in warmup.errors]
            deadline = time.monotonic() + args.max_seconds * slowdown
            users = [SimulatedUser(i, boxes, url, run, deadline) for i in range(args.users)]
            start = threading.Barrier(len(users) + 1)
            if callgrind is not None:
                callgrind_start(pid)
            with ThreadPoolExecutor(max_workers=len(users)) as pool:
                for user in users:
                    pool.submit(user.walk, args.turns, start, args.rounds)
                start.wait(timeout=WAIT_CAP_S * slowdown)
                began = time.monotonic()
                bot_cpu, harness_cpu = process_cpu_s(pid), time.process_time()
                router_cpu = own_cpu_s(pid)
                all_cpu = machine_cpu_s()
            run.wall_s = time.monotonic() - began
            run.bot_cpu_s = process_cpu_s(pid) - bot_cpu
            run.router_cpu_s = own_cpu_s(pid) - router_cpu if args.workers > 1 else 0.0
            run.harness_cpu_s = time.process_time() - harness_cpu
            run.machine_cpu_s = machine_cpu_s() - all_cpu
            if callgrind is not None:
                run.bot_instructions = callgrind_instructions(pid, callgrind)
            time.sleep(1.0)  # a late double would land now
            run.doubled = sum(user.doubled() for user in users)
            if model is not None:
                run.model_calls = len(model.requests)
                run.errors += [f"the model refused: {why}" for why in model.refused]
            status, metrics = http_get(f"{base}/metrics")
            if status == 200:
                run.bot_acks = acks_counted(metrics)
                run.bot_ack_bounds = bot_side_ack_bounds(metrics)
    return run


# ---- the report ----------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered) - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def milliseconds(values: list[float], fraction: float) -> str:
    return f"{percentile(values, fraction) * 1000:8.1f}" if values else f"{'-':>8}"


def report(run: Run, args: argparse.Namespace) -> str:
    planned = run.users * run.turns_per_user
    done = [s for s in run.samples if s.turn_s is not None and s.status == 200]
    lost = [s for s in run.samples if s.status == 200 and s.turn_s is None]
    rate = len(done) / run.wall_s if run.wall_s > 0 else 0.0
    slow_acks = sum(1 for s in run.samples if s.ack_s >= 3.0)
    refused = sum(1 for s in run.samples if s.status != 200)
    lines = [
        f"{run.label}: {run.users} users x {run.turns_per_user} turns"
        f"{f', {args.workers} bot workers' if args.workers > 1 else ''}"
        f"{f' ({args.rounds} wizards each)' if args.rounds > 1 else ''}, bot in its own process, "
        f"fake Slack latency {args.slack_latency_ms:g} ms",
        f"{len(done)}/{planned} turns in {run.wall_s:.2f} s: {rate:.1f} turns/s",
        f"acks >= 3 s: {slow_acks}   lost turns: {len(lost)}   doubled turns: {run.doubled}   "
        f"non-200 acks: {refused}",
        *(
            [
                f"the assistant asked its model {run.model_calls} times, each answered after "
                f"{args.model_latency_ms:g} ms"
            ]
            if run.model_calls is not None
            else []
        ),
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
    if run.bot_instructions is not None:
        per_turn = run.bot_instructions / len(done) if done else math.nan
        lines.append(
            f"the bot under callgrind: {per_turn / 1e6:.2f} million instructions per turn "
            "(times above are valgrind's, not the bot's)"
        )
    elif done and run.bot_cpu_s > 0:
        bot_ms, harness_ms = (1000 * cpu / len(done) for cpu in (run.bot_cpu_s, run.harness_cpu_s))
        router_ms = 1000 * run.router_cpu_s / len(done)
        lines.append(
            f"CPU per turn: the bot {bot_ms:.1f} ms"
            f"{f' (its router {router_ms:.1f})' if run.router_cpu_s else ''}, this harness and "
            f"the fake Slack {harness_ms:.1f} ms"
            + (
                f" (the bot on one core of its own: {1000 / bot_ms:.0f} turns/s)"
                if not run.router_cpu_s
                else ""
            )
        )
    if done and run.machine_cpu_s > 0:
        machine_ms, cores = 1000 * run.machine_cpu_s / len(done), os.cpu_count() or 1
        lines.append(
            f"the whole machine (bot, harness, database server, the rest): {machine_ms:.1f} ms "
            f"of CPU per turn; its {cores} cores, every one busy, would do at most "
            f"{1000 * cores / machine_ms:.0f} turns/s"
        )
    if run.bot_acks is not None:
        p50, p99 = (run.bot_ack_bounds.get(f, math.inf) * 1000 for f in (0.5, 0.99))
        lines.append(
            f"the bot's /metrics: {run.bot_acks:.0f} acks (warm-up included); inside Bolt "
            f"(request parsed to ack) p50 <= {p50:g} ms, p99 <= {p99:g} ms"
        )
    # "U0BENCH003: ConnectionResetError: ..." -> one line per kind of error, with a count.
    kinds = Counter(error.partition(": ")[2] for error in run.errors)
    for message, count in kinds.most_common(5):
        lines.append(f"error x{count}: {message}")
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
        "--rounds",
        type=int,
        default=1,
        help="wizards per user, one after another (a new /train-rl each), for a run long "
        f"enough that its p99 is not a handful of turns, at most {MAX_ROUNDS} [1]",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help=f"bot processes (`artbot serve --workers`), at most {MAX_WORKERS} [1]",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("ARTBOT_TEST_POSTGRES_URL"),
        metavar="URL",
        help="also run on this PostgreSQL (on 127.0.0.1) [$ARTBOT_TEST_POSTGRES_URL]",
    )
    parser.add_argument(
        "--only",
        choices=("sqlite", "postgres"),
        help="run on this database alone (postgres: needs --postgres) [both]",
    )
    parser.add_argument(
        "--slack-latency-ms",
        type=float,
        default=0.0,
        help="delay the fake Slack adds to each chat.* and views.* call (real Slack: ~100) [0]",
    )
    parser.add_argument(
        "--model-latency-ms",
        type=float,
        default=None,
        help="give the bot an assistant whose model (a fake on loopback) answers after this "
        "long (a real one: seconds); it is asked once a wizard, at turn 5 [no assistant]",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=60.0, help="cap on each database's run [60]"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per database, each on a fresh one, then their range (a shared VM varies "
        f"by about 20%% from one run to the next), at most {MAX_REPEAT} [1]",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="run the bot under valgrind's callgrind and print its instructions per turn "
        "(steady on a shared VM; about 50 times slower: use few users)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.repeat <= MAX_REPEAT:
        parser.error(f"--repeat must be 1 to {MAX_REPEAT}")
    if not 1 <= args.users <= MAX_USERS:
        parser.error(f"--users must be 1 to {MAX_USERS}")
    if not 1 <= args.workers <= MAX_WORKERS:
        parser.error(f"--workers must be 1 to {MAX_WORKERS}")
    if args.instructions and args.workers != 1:
        parser.error("--instructions counts one process: use --workers 1")
    if not 1 <= args.rounds <= MAX_ROUNDS:
        parser.error(f"--rounds must be 1 to {MAX_ROUNDS}")
    if not 0 <= args.turns <= len(WIZARD):
        parser.error(f"--turns must be 0 to {len(WIZARD)}")
    if not 0 < args.max_seconds <= 600 or not 0 <= args.slack_latency_ms <= 5000:
        parser.error("--max-seconds must be in (0, 600], --slack-latency-ms in [0, 5000]")
    if args.model_latency_ms is not None and not 0 <= args.model_latency_ms <= 60_000:
        parser.error("--model-latency-ms must be in [0, 60000]")
    if args.instructions and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        parser.error("--instructions needs valgrind (with callgrind_control) on the PATH")
    if args.only == "postgres" and not args.postgres:
        parser.error("--only postgres needs --postgres URL (or $ARTBOT_TEST_POSTGRES_URL)")
    if args.postgres and make_url(args.postgres).host not in (LOOPBACK, "localhost"):
        parser.error("--postgres must be on 127.0.0.1: this benchmark talks to loopback only")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # urllib and slack_sdk honour proxy variables: keep every request on loopback.
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = f"{LOOPBACK},localhost"
    fresh: list[Callable[[], AbstractContextManager[Database]]] = []
    if args.only != "postgres":
        fresh.append(sqlite_database)
    if args.postgres and args.only != "sqlite":
        url = args.postgres
        fresh.append(lambda: postgres_database(url))
    for opened in fresh:
        runs: list[Run] = []
        for _ in range(args.repeat):
            with opened() as database:
                runs.append(run_one(database, args))
            print(report(runs[-1], args), flush=True)
            print()
        if len(runs) > 1:
            print(ranges(runs), flush=True)
            print()
    return 0


def ranges(runs: list[Run]) -> str:
    """One database's repeated runs in a line: turns/s and the bot's CPU per turn, lowest,
    median and highest; what was lost, doubled or acked late, in all."""

    def spread(values: list[float], unit: str) -> str:
        low, middle, high = min(values), percentile(values, 0.5), max(values)
        return f"{low:.1f} / {middle:.1f} / {high:.1f} {unit}"

    rates = [completed(run) / run.wall_s for run in runs if run.wall_s > 0]
    cpu = [1000 * run.bot_cpu_s / completed(run) for run in runs if completed(run)]
    late = sum(1 for run in runs for sample in run.samples if sample.ack_s >= 3.0)
    lost = sum(1 for run in runs for s in run.samples if s.status == 200 and s.turn_s is None)
    doubled = sum(run.doubled for run in runs)
    return (
        f"{runs[0].label}, {len(runs)} runs (lowest / median / highest): "
        f"{spread(rates, 'turns/s')}; the bot's CPU per turn {spread(cpu, 'ms')}; "
        f"acks >= 3 s: {late}, lost: {lost}, doubled: {doubled} in all"
    )


def completed(run: Run) -> int:
    return sum(1 for s in run.samples if s.turn_s is not None and s.status == 200)


if __name__ == "__main__":
    raise SystemExit(main())
