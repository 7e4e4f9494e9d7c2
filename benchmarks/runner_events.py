"""How fast the GPU runner reacts, and what it costs while a job floods its output. Prints numbers.

    uv run python benchmarks/runner_events.py [--jobs 10] [--steps 20] [--step-interval 0.2]
                                              [--poll-interval 0.5] [--bytes 50M]
                                              [--lines-per-second 10000] [--line-bytes 500]
                                              [--bot-runs 2] [--bot-validations 10]

The real runner (`artbot runner serve`'s code, `runner.api.server.serve`) runs as a child process on
127.0.0.1 with a SQLite database in a temporary folder, two fake GPU slots and jobs run as
`{python} {script}`; this script talks to it with `runner.client.RunnerClient`. Measured:

- submit -> running: from calling `submit` until the `started` event is seen through the
  events long-poll (client side), and the runner's own `started.at - created_at`;
- event latency: a job appends ART-style history.jsonl lines stamped with the time they were
  written; the time until each `step` event reaches a waiting long-poll. It includes the
  runner's poll interval (ARTBOT_RUNNER_POLL_INTERVAL_S; 0.5 s by default), which dominates;
- event -> bot thread update: the bot's run follower (`bot.runs.follower`, one events long-poll
  per run, as in `artbot serve`) follows --bot-runs jobs at once, each recording --bot-validations
  validations; from the runner recording each `started` and `validation` event (its `at`) to the
  loopback fake Slack (tests/fakes) receiving the chat.postMessage that tells it. Same host, same
  clock. Target: p95 <= 1 s;
- output flood: a job printing --lines-per-second lines of --line-bytes up to --bytes; the
  runner's and the job supervisor's CPU (user+system, as a share of one core) and memory (RSS
  and peak), sampled from /proc, and the size of the job's log on disk (capped at 50 MB by
  default: ARTBOT_RUNNER_LOG_MAX_BYTES).

With --ray (needs `uv sync --extra ray`): a local Ray head (fake GPUs, loopback) and a second
runner with ARTBOT_RUNNER_EXECUTOR=ray; submit -> running for the same quick job through that
runner (until the client sees `started`) beside `ray job submit --no-wait` itself (from starting
the command until Ray says RUNNING), measured in the same run, one after the other.

Bounded: every wait is capped and the flood stops at --bytes (or --max-seconds). Only 127.0.0.1
is contacted. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from runner.client import RunnerClient, RunnerUnavailable
from runner.schemas import EventType, JobEvent, JobSubmission

TOKEN = "benchmark-token-" + uuid.uuid4().hex
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

QUICK_SCRIPT = "print('hello')\n"

HISTORY_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    steps, interval = int(sys.argv[1]), float(sys.argv[2])
    folder = Path(".art/bench/models/m1")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "history.jsonl").open("a") as history:
        for step in range(1, steps + 1):
            time.sleep(interval)
            line = {"step": step, "train/reward": 0.5, "bench/written_at": time.time()}
            history.write(json.dumps(line) + "\\n")
            history.flush()
    """
)

VALIDATION_SCRIPT = textwrap.dedent(
    """
    import json, time
    from pathlib import Path
    steps, interval = STEPS, INTERVAL
    folder = Path(".art/bench/models/m1")
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "history.jsonl").open("a") as history:
        for step in range(1, steps + 1):
            time.sleep(interval)
            history.write(json.dumps({"step": step, "val/reward": step / steps}) + "\\n")
            history.flush()
    """
)

FLOOD_SCRIPT = textwrap.dedent(
    """
    import sys, time
    total, per_second, width = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    line = b"x" * (width - 1) + b"\\n"
    batch = max(1, per_second // 100)  # 100 writes a second, paced
    out = sys.stdout.buffer
    written, start, sent = 0, time.monotonic(), 0
    while written < total:
        out.write(line * batch)
        out.flush()
        written += width * batch
        sent += batch
        ahead = sent / per_second - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    """
)


def parse_bytes(text: str) -> int:
    """'50M', '1G', '200000' -> bytes."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class ProcSample:
    cpu_s: float
    rss_kb: int
    peak_kb: int


def sample(pid: int) -> ProcSample | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    values = {
        line.split(":")[0]: line.split()[1]
        for line in status.splitlines()
        if line.startswith(("VmRSS", "VmHWM"))
    }
    return ProcSample(cpu, int(values.get("VmRSS", 0)), int(values.get("VmHWM", 0)))


def quantiles(values: list[float]) -> str:
    if not values:
        return "no samples"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"median {statistics.median(ordered) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   "
        f"max {ordered[-1] * 1000:7.1f} ms   (n={len(ordered)})"
    )


def submit(client: RunnerClient, script: str, args: list[str], backend: str = "serverless") -> str:
    job = client.submit(
        JobSubmission(
            script=script, idempotency_key=f"bench-{uuid.uuid4().hex}", args=args, backend=backend
        )  # type: ignore[arg-type]
    )
    return job.id


def wait_for(
    client: RunnerClient, job_id: str, kind: EventType, after: int = 0, limit_s: float = 60
) -> tuple[JobEvent, float]:
    """The first `kind` event after `after`, and when this process saw it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        page = client.events(job_id, after=after, wait=10)
        seen = time.time()
        for event in page.events:
            if event.type is kind:
                return event, seen
        after = page.next_after
        if page.finished:
            break
    raise RuntimeError(f"no {kind.value} event for job {job_id}")


def measure_start(client: RunnerClient, jobs: int) -> None:
    client_side: list[float] = []
    server_side: list[float] = []
    for _ in range(jobs):
        began = time.time()
        job_id = submit(client, QUICK_SCRIPT, [])
        started, seen = wait_for(client, job_id, EventType.started)
        client_side.append(seen - began)
        server_side.append((started.at - client.job(job_id).created_at).total_seconds())
        wait_for(client, job_id, EventType.succeeded)
    print(f"submit -> running (client sees `started`): {quantiles(client_side)}")
    print(f"submit -> running (runner's own clock):   {quantiles(server_side)}")


def measure_events(client: RunnerClient, steps: int, interval: float) -> None:
    job_id = submit(client, HISTORY_SCRIPT, [str(steps), str(interval)])
    latencies: list[float] = []
    after = 0
    deadline = time.monotonic() + steps * interval + 60
    while time.monotonic() < deadline:
        page = client.events(job_id, after=after, wait=10)
        now = time.time()
        for event in page.events:
            if event.type is EventType.step:
                latencies.append(now - float(event.data["bench/written_at"]))
        after = page.next_after
        if page.finished:
            break
    print(f"history.jsonl line -> event through the long-poll: {quantiles(latencies)}")


def measure_flood(
    client: RunnerClient,
    runner_pid: int,
    total: int,
    per_second: int,
    width: int,
    max_s: float,
    workdir: Path,
) -> None:
    job_id = submit(client, FLOOD_SCRIPT, [str(total), str(per_second), str(width)])
    started, _ = wait_for(client, job_id, EventType.started)
    supervisor = int(started.data["pid"])
    runner_before = sample(runner_pid)
    assert runner_before is not None
    began = time.monotonic()
    runner_samples: list[ProcSample] = []
    supervisor_samples: list[ProcSample] = []
    while time.monotonic() - began < max_s:
        job = client.job(job_id)
        for pid, samples in ((runner_pid, runner_samples), (supervisor, supervisor_samples)):
            current = sample(pid)
            if current is not None and current.rss_kb > 0:  # a zombie has no memory left
                samples.append(current)
        if job.state.finished:
            break
        time.sleep(0.5)
    else:
        client.cancel(job_id)
        print(f"(stopped the flood after --max-seconds {max_s:g})")
    elapsed = time.monotonic() - began
    runner_after = runner_samples[-1] if runner_samples else runner_before
    supervisor_last = supervisor_samples[-1] if supervisor_samples else None
    folder = workdir / job_id / ".runner"
    kept = sum(p.stat().st_size for p in folder.glob("output.*") if p.name != "output.dropped")
    status_file = folder / "exit.json"
    status = json.loads(status_file.read_text()) if status_file.exists() else {}
    printed = status.get("output_bytes", 0)
    print(
        f"output flood: {printed / 1e6:.1f} MB in {elapsed:.1f} s "
        f"({per_second} lines/s of {width} bytes); "
        f"log on disk {kept / 1e6:.1f} MB"
    )
    print(
        f"  runner:     CPU "
        f"{100 * (runner_after.cpu_s - runner_before.cpu_s) / elapsed:5.1f}% of a core   "
        f"RSS {runner_before.rss_kb / 1024:.1f} -> {runner_after.rss_kb / 1024:.1f} MB "
        f"(peak {runner_after.peak_kb / 1024:.1f} MB)"
    )
    if supervisor_last is not None:
        peak = status.get("supervisor_max_rss_kb") or supervisor_last.peak_kb
        print(
            f"  supervisor: CPU {100 * supervisor_last.cpu_s / elapsed:5.1f}% of a core   "
            f"RSS {supervisor_last.rss_kb / 1024:.1f} MB (peak {peak / 1024:.1f} MB)"
        )


def measure_bot_follow(base_url: str, runs: int, validations: int, interval: float) -> None:
    """Event recorded by the runner -> the bot's follower -> chat.postMessage at the fake Slack."""
    # The bot and the fake Slack run from a checkout: imported here, only for this measurement.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from slack_sdk import WebClient

    from bot.runs.follower import RunFollower
    from bot.services import build_services, start_outbox
    from bot.settings import load_settings
    from runner.client import AsyncRunnerClient
    from storage.sessions import SessionKey
    from tests.fakes.slack_api import Call, FakeSlack
    from tests.fakes.workspace import BOT_TOKEN, CHANNEL_ID, SIGNING_SECRET, TEAM_ID, USER_ID

    # (thread, what) -> when the fake Slack got it. `started` is a post in the thread; a
    # validation shows on the run's status card, updated in place (keyed by the card's ts).
    told: dict[tuple[str, str], float] = {}
    card_threads: dict[str, str] = {}  # the status card's ts -> its thread

    def received(call: Call) -> None:
        text = str(call.params.get("text") or "")
        if call.method == "chat.postMessage" and text.startswith(":rocket: Training started"):
            told.setdefault((str(call.params.get("thread_ts") or ""), "started"), time.time())
        elif call.method == "chat.update" and "val/reward" in text:
            shown = re.search(r"step (\d+)", text)
            if shown is not None:
                card = str(call.params.get("ts") or "")
                told.setdefault((card, f"validation {shown.group(1)}"), time.time())

    with tempfile.TemporaryDirectory(prefix="bot-follow-bench-") as tmp, FakeSlack() as fake:
        settings = load_settings(
            {
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_URL": fake.base_url,
                "ARTBOT_DATABASE_URL": f"sqlite:///{Path(tmp) / 'artbot.db'}",
                "ARTBOT_SCRIPTS_DIR": str(Path(tmp) / "scripts"),
                "ARTBOT_DRYRUN": "false",
                "ARTBOT_RUNNER_URL": base_url,
                "ARTBOT_RUNNER_TOKEN": TOKEN,
            }
        )
        service = build_services(settings)
        assert service.runs is not None
        slack = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
        fake.watch(received)
        outbox = start_outbox(service, lambda _team: slack)  # milestones go through it
        follower = RunFollower(
            service.runs, lambda _team: slack, AsyncRunnerClient(base_url, TOKEN)
        ).start()
        jobs: dict[str, str] = {}  # thread -> job id
        try:
            for number in range(runs):
                thread = str(slack.chat_postMessage(channel=CHANNEL_ID, text="wizard")["ts"])
                key = SessionKey(TEAM_ID, CHANNEL_ID, thread)
                # Approved scripts run without arguments: the counts are written into it.
                script = VALIDATION_SCRIPT.replace("STEPS, INTERVAL", f"{validations}, {interval}")
                name = f"bench_{number}.py"
                path = service.results.script_file(key, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(script)
                run = service.runs.approve(slack, key, USER_ID, script, name, {"backend": "local"})
                if run.job_id is None:
                    said = [m.text for m in fake.thread(CHANNEL_ID, thread)]
                    raise RuntimeError(f"the job was not submitted: {said[-1:]}")
                jobs[thread] = run.job_id
                if run.card_ts is not None:
                    card_threads[run.card_ts] = thread
            deadline = time.monotonic() + validations * interval + 120
            while service.runs.runs.active() and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            follower.stop()
            outbox.stop()
            service.store.close()
        for (where, what), at in list(told.items()):
            if where in card_threads:
                told.setdefault((card_threads[where], what), at)
        latencies: list[float] = []
        started: list[float] = []
        with RunnerClient(base_url, TOKEN) as client:
            for thread, job_id in jobs.items():
                for event in client.events(job_id).events:
                    what = {EventType.started: "started", EventType.validation: "validation"}.get(
                        event.type
                    )
                    if what == "validation":
                        what = f"validation {event.data['step']}"
                    if what is not None and (thread, what) in told:
                        latencies.append(told[(thread, what)] - event.at.timestamp())
                        if what == "started":
                            started.append(latencies[-1])
        expected = runs * (validations + 1)
        print(
            f"event -> bot thread update ({runs} runs followed at once, one long-poll each; "
            f"{len(latencies)}/{expected} told): {quantiles(latencies)}"
        )
        print(
            f"  of which `started` (the first event, of a run just submitted): {quantiles(started)}"
        )


def start_runner(root: Path, port: int, poll_interval: float, **settings: str) -> subprocess.Popen:
    """`artbot runner serve`'s code in a child process, on 127.0.0.1:`port`, data under `root`."""
    root.mkdir(parents=True, exist_ok=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ARTBOT_RUNNER_")},
        "ARTBOT_RUNNER_TOKEN": TOKEN,
        "ARTBOT_RUNNER_DATABASE_URL": f"sqlite:///{root / 'runner.db'}",
        "ARTBOT_RUNNER_WORKDIR": str(root / "jobs"),
        "ARTBOT_RUNNER_GPU_SLOTS": "0,1",
        "ARTBOT_RUNNER_COMMAND": "{python} {script}",
        "ARTBOT_RUNNER_POLL_INTERVAL_S": str(poll_interval),
        "ARTBOT_RUNNER_NVIDIA_SMI": str(root / "no-nvidia-smi"),
        "ARTBOT_RUNNER_ALLOW_ROOT_JOBS": "true",  # its jobs print lines, as the caller's user
        **{f"ARTBOT_RUNNER_{name.upper()}": value for name, value in settings.items()},
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys; from runner.api.server import serve; sys.exit(serve(port={port}))",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(root / "runner.log", "wb"),  # lives as long as the runner
    )


def wait_until_up(
    client: RunnerClient, server: subprocess.Popen, log: Path, limit_s: float
) -> bool:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            client.health()
            return True
        except RunnerUnavailable:
            if server.poll() is not None or time.monotonic() > deadline:
                print(log.read_text()[-3000:], file=sys.stderr)
                return False
            time.sleep(0.1)


def ray_cli_start(address: str, ray_jobs: object, index: int, working_dir: Path) -> float:
    """`ray job submit --no-wait` of the quick job, shipped in a working_dir as the runner ships
    its jobs: seconds from starting the command until Ray says RUNNING (polled every 20 ms)."""
    submission_id = f"bench-cli-{uuid.uuid4().hex}-{index}"
    ray = str(Path(sys.executable).parent / "ray")
    began = time.monotonic()
    subprocess.run(
        [
            ray,
            "job",
            "submit",
            "--address",
            address,
            "--submission-id",
            submission_id,
            "--working-dir",
            str(working_dir),
            "--no-wait",
            "--",
            sys.executable,
            "quick.py",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while True:
        info = ray_jobs.info(submission_id)  # type: ignore[attr-defined]
        if info is not None and info.status.value != "PENDING":
            return time.monotonic() - began
        if time.monotonic() - began > 120:
            raise RuntimeError(f"ray job {submission_id} never ran")
        time.sleep(0.02)


def measure_ray(jobs: int, poll_interval: float, root: Path) -> None:
    """The Ray executor beside `ray job submit`, on a local Ray head started here."""
    from runner.jobs.ray.job_api import RayJobs

    # The tests' head (loopback, free ports, its own temp folder), from the repository root.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.runner.ray_head import start_ray_head

    print("starting a local Ray head ...", flush=True)
    began = time.monotonic()
    head = start_ray_head()
    print(f"Ray head up in {time.monotonic() - began:.1f} s at {head.address}")
    port = free_port()
    server = start_runner(
        root / "ray-runner",
        port,
        poll_interval,
        executor="ray",
        ray_address=head.address,
        ray_python=sys.executable,
    )
    client = RunnerClient(f"http://127.0.0.1:{port}", TOKEN, timeout=10)
    try:
        if not wait_until_up(client, server, root / "ray-runner" / "runner.log", 60):
            return
        ray_jobs = RayJobs(head.address)
        working_dir = root / "ray-cli-job"
        working_dir.mkdir()
        (working_dir / "quick.py").write_text(QUICK_SCRIPT)
        runner_side: list[float] = []
        cli_side: list[float] = []
        for index in range(jobs):  # alternated, so that both see the same load
            began = time.time()
            job_id = submit(client, QUICK_SCRIPT, [], backend="local")
            _, seen = wait_for(client, job_id, EventType.started, limit_s=120)
            runner_side.append(seen - began)
            wait_for(client, job_id, EventType.succeeded, limit_s=120)
            cli_side.append(ray_cli_start(head.address, ray_jobs, index, working_dir))
        print(f"Ray executor: submit -> running (client sees `started`): {quantiles(runner_side)}")
        print(f"ray job submit --no-wait -> RUNNING:                   {quantiles(cli_side)}")
        ratio = statistics.median(runner_side) / statistics.median(cli_side)
        print(f"Ray executor / ray job submit (medians): {ratio:.2f}x (target: 1.5x or less)")
    finally:
        client.close()
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        head.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=10, help="jobs for the submit -> running latency"
    )
    parser.add_argument("--steps", type=int, default=20, help="history lines for the event latency")
    parser.add_argument("--step-interval", type=float, default=0.2)
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=0.5,
        help="the runner's ARTBOT_RUNNER_POLL_INTERVAL_S",
    )
    parser.add_argument("--bytes", default="50M", help="how much the flooding job prints (e.g. 1G)")
    parser.add_argument("--lines-per-second", type=int, default=10_000)
    parser.add_argument("--line-bytes", type=int, default=500)
    parser.add_argument(
        "--max-seconds", type=float, default=600, help="stop the flood after this long"
    )
    parser.add_argument(
        "--bot-runs", type=int, default=2, help="runs followed at once (one per GPU slot)"
    )
    parser.add_argument("--bot-validations", type=int, default=10, help="validations per run")
    parser.add_argument("--bot-interval", type=float, default=2.0, help="seconds between them")
    parser.add_argument(
        "--ray", action="store_true", help="also the Ray executor beside `ray job submit`"
    )
    parser.add_argument(
        "--ray-only", action="store_true", help="only the Ray executor beside `ray job submit`"
    )
    args = parser.parse_args(argv)
    total = parse_bytes(args.bytes)

    with tempfile.TemporaryDirectory(prefix="runner-bench-") as tmp:
        root = Path(tmp)
        if args.ray_only:
            measure_ray(args.jobs, args.poll_interval, root)
            return 0
        port = free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("ARTBOT_RUNNER_")},
            "ARTBOT_RUNNER_TOKEN": TOKEN,
            "ARTBOT_RUNNER_DATABASE_URL": f"sqlite:///{root / 'runner.db'}",
            "ARTBOT_RUNNER_WORKDIR": str(root / "jobs"),
            "ARTBOT_RUNNER_GPU_SLOTS": "0,1",
            "ARTBOT_RUNNER_COMMAND": "{python} {script}",
            "ARTBOT_RUNNER_POLL_INTERVAL_S": str(args.poll_interval),
            "ARTBOT_RUNNER_NVIDIA_SMI": str(root / "no-nvidia-smi"),
            "ARTBOT_RUNNER_ALLOW_ROOT_JOBS": "true",  # its jobs print lines, as the caller's user
        }
        server = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys; from runner.api.server import serve; sys.exit(serve(port={port}))",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(root / "runner.log", "wb"),  # noqa: SIM115 - lives as long as the runner
        )
        client = RunnerClient(f"http://127.0.0.1:{port}", TOKEN, timeout=10)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.health()
                    break
                except RunnerUnavailable:
                    if server.poll() is not None or time.monotonic() > deadline:
                        print((root / "runner.log").read_text()[-3000:], file=sys.stderr)
                        return 1
                    time.sleep(0.1)
            print(
                f"runner pid {server.pid} on 127.0.0.1:{port}, "
                f"poll interval {args.poll_interval:g} s, {os.cpu_count()} CPUs"
            )
            measure_start(client, args.jobs)
            measure_events(client, args.steps, args.step_interval)
            if args.bot_runs > 0:
                measure_bot_follow(
                    f"http://127.0.0.1:{port}",
                    args.bot_runs,
                    args.bot_validations,
                    args.bot_interval,
                )
            measure_flood(
                client,
                server.pid,
                total,
                args.lines_per_second,
                args.line_bytes,
                args.max_seconds,
                root / "jobs",
            )
            if args.ray:
                measure_ray(args.jobs, args.poll_interval, root)
        finally:
            client.close()
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
