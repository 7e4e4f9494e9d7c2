"""A small prototype: sync Bolt with lazy listeners against the async Bolt app, acking under load.
Prints numbers.

    uv run python benchmarks/ack_styles.py [--users 50] [--requests 20] [--cpu-ms 5]
                                           [--slack-latency-ms 100]

Each style serves one slash command under uvicorn in a process of its own, pointed at the fake
Slack of tests/fakes. Its listener acks, then does what a turn does in miniature: `--cpu-ms` of
pure-Python work holding the GIL (as SQL and rendering do) and one chat.postMessage to the fake
Slack, which answers after `--slack-latency-ms`.
- sync: `App(process_before_response=True)`, the listener in the request's path: it acks and
  submits the work to a pool of PROTOTYPE_WORKERS (8) threads (what `artbot serve` ran when
  this was measured; it now runs 64 threads in 8 work slots, bot/process/work_slots.py);
- lazy: the same with Bolt's lazy listeners (the ack function, then the work as a lazy
  function on Bolt's executor of PROTOTYPE_WORKERS threads);
- async: `AsyncApp` with an `AsyncWebClient`, the work a lazy coroutine: the CPU part through
  `asyncio.to_thread`, the Slack call awaited.
`--users` client threads each send `--requests` commands back to back. Measured: ack p50/p99
(send to HTTP response) and how long until the fake Slack had every post (work per second).
Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.slack_api import FakeSlack  # noqa: E402
from tests.fakes.slack_requests import slash_command  # noqa: E402
from tests.fakes.workspace import BOT_TOKEN, SIGNING_SECRET  # noqa: E402

LOOPBACK = "127.0.0.1"
STYLES = ("sync", "lazy", "async")
PROTOTYPE_WORKERS = 8
"""The sync and lazy styles' threads, as docs/benchmarks.md's table of this prototype measured."""


def burn(seconds: float) -> None:
    """Pure-Python work that holds the GIL for about `seconds` of CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(200))


def sync_web(base_url: str, cpu_s: float, lazy: bool) -> Any:
    from concurrent.futures import ThreadPoolExecutor as Pool

    from slack_bolt import Ack, App
    from slack_bolt.adapter.asgi import SlackRequestHandler
    from slack_sdk import WebClient

    pool = Pool(max_workers=PROTOTYPE_WORKERS)
    app = App(
        client=WebClient(token=BOT_TOKEN, base_url=base_url),
        signing_secret=SIGNING_SECRET,
        process_before_response=True,
        listener_executor=pool,
    )

    def work(command: dict[str, Any], client: WebClient) -> None:
        burn(cpu_s)
        client.chat_postMessage(channel=command["channel_id"], text="done")

    def acknowledge(ack: Ack) -> None:
        ack()

    def ack_and_submit(ack: Ack, command: dict[str, Any], client: WebClient) -> None:
        ack()
        pool.submit(work, command, client)

    if lazy:
        app.command("/train-rl")(ack=acknowledge, lazy=[work])
    else:
        app.command("/train-rl")(ack_and_submit)
    return SlackRequestHandler(app)


def async_web(base_url: str, cpu_s: float) -> Any:
    from slack_bolt.adapter.asgi.async_handler import AsyncSlackRequestHandler
    from slack_bolt.async_app import AsyncAck, AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    app = AsyncApp(
        client=AsyncWebClient(token=BOT_TOKEN, base_url=base_url),
        signing_secret=SIGNING_SECRET,
        process_before_response=True,
    )

    async def acknowledge(ack: AsyncAck) -> None:
        await ack()

    async def work(command: dict[str, Any], client: AsyncWebClient) -> None:
        await asyncio.to_thread(burn, cpu_s)
        await client.chat_postMessage(channel=command["channel_id"], text="done")

    app.command("/train-rl")(ack=acknowledge, lazy=[work])
    return AsyncSlackRequestHandler(app)


def serve(style: str, base_url: str, port: int, cpu_s: float) -> None:
    import uvicorn

    web = (
        async_web(base_url, cpu_s)
        if style == "async"
        else sync_web(base_url, cpu_s, style == "lazy")
    )
    uvicorn.run(web, host=LOOPBACK, port=port, log_level="warning", access_log=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode})")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server did not start")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered) - 1e-9)) - 1]


def measure(style: str, args: argparse.Namespace) -> str:
    with FakeSlack() as fake:
        fake.delay("chat.postMessage", args.slack_latency_ms / 1000)
        port = free_port()
        command = [
            sys.executable,
            __file__,
            "--serve",
            style,
            "--base-url",
            fake.base_url,
            "--port",
            str(port),
            "--cpu-ms",
            str(args.cpu_ms),
        ]
        env = {**os.environ, "NO_PROXY": LOOPBACK, "no_proxy": LOOPBACK}
        process = subprocess.Popen(command, cwd=ROOT, env=env)
        try:
            wait_listening(port, process)
            url = f"http://{LOOPBACK}:{port}/slack/events"
            assert slash_command(channel_id="C0WARM").post(url).status == 200  # warm-up
            fake.wait_for(lambda f: len(f.calls("chat.postMessage")) == 1, timeout=30)
            acks: list[float] = []
            lock = threading.Lock()

            def user(index: int) -> None:
                for _ in range(args.requests):
                    request = slash_command(channel_id=f"C0U{index:03d}")
                    sent = time.monotonic()
                    status = request.post(url, timeout=30).status
                    with lock:
                        acks.append(time.monotonic() - sent if status == 200 else math.inf)

            began = time.monotonic()
            with ThreadPoolExecutor(max_workers=args.users) as pool:
                list(pool.map(user, range(args.users)))
            total = args.users * args.requests + 1
            fake.wait_for(lambda f: len(f.calls("chat.postMessage")) >= total, timeout=120)
            took = time.monotonic() - began
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
    return (
        f"{style:<6} ack p50 {percentile(acks, 0.5) * 1000:7.1f} ms  "
        f"p99 {percentile(acks, 0.99) * 1000:7.1f} ms  max {max(acks) * 1000:7.1f} ms  "
        f"work {len(acks) / took:6.1f}/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--cpu-ms", type=float, default=5.0)
    parser.add_argument("--slack-latency-ms", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=2, help="each style this many times [2]")
    parser.add_argument("--serve", choices=STYLES, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.base_url, args.port, args.cpu_ms / 1000)
        return 0
    if not (1 <= args.users <= 200 and 1 <= args.requests <= 100 and 1 <= args.rounds <= 5):
        parser.error("--users 1 to 200, --requests 1 to 100, --rounds 1 to 5")
    print(
        f"{args.users} users x {args.requests} commands; work: {args.cpu_ms:g} ms CPU + one "
        f"Slack call of {args.slack_latency_ms:g} ms"
    )
    for _ in range(args.rounds):
        for style in STYLES:
            print(measure(style, args), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
