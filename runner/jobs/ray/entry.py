"""The wrapper a Ray job runs: the job's secrets from a file, then the command, then a sweep.

Shipped in the job's `runtime_env` `working_dir` beside the script (standard library only: it runs
with the Ray node's Python, not the runner's environment), and started by Ray's entrypoint as
`exec python3 artbot_ray_entry.py --job-id ID --grace S -- COMMAND...`.

- **Secrets.** The runner writes the values the job gets into `.artbot-secrets.json` in the
  working directory, not into `runtime_env` `env_vars`, which Ray's job API shows to anyone who
  asks (`get_job_info`, the dashboard). The wrapper reads the file, deletes it before anything
  else runs, and passes the values to the command in its environment only.
- **Marker.** The command and everything it starts carry `ARTBOT_RUNNER_JOB_ID`, so the wrapper
  finds every process of the job through /proc, children that left its process group included.
- **Stopping.** Ray's `stop_job` sends SIGTERM to the wrapper and its descendants, then SIGKILL
  after `RAY_JOB_STOP_WAIT_TIME_S`. On SIGTERM the wrapper also signals every marked process
  (a daemon re-parented away from the tree Ray sees), then SIGKILLs what is left after `--grace`.
  After a normal end, leftovers (a vLLM server the script did not close) get a short grace too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

SECRETS_FILE = ".artbot-secrets.json"
MARKER_ENV = "ARTBOT_RUNNER_JOB_ID"
LEFTOVER_GRACE_S = 5.0
FORCED_LINE = "[artbot] the job ignored SIGTERM: killed"
_POLL_S = 0.05


def read_secrets(path: Path) -> dict[str, str]:
    """The secrets file's values; the file is gone afterwards (also when it is unreadable)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        value = {}
    finally:
        path.unlink(missing_ok=True)
    if not isinstance(value, dict):
        return {}
    return {str(name): str(text) for name, text in value.items()}


def marked_processes(job_id: str) -> list[int]:
    """Every process but this one whose environment carries the job's marker."""
    marker = f"{MARKER_ENV}={job_id}".encode()
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path("/proc", entry, "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry))
    return found


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


def stop_marked(job_id: str, grace_s: float, reap: subprocess.Popen[bytes] | None) -> bool:
    """SIGTERM every marked process, SIGKILL what is left after `grace_s`; True when needed."""
    _signal(marked_processes(job_id), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if reap is not None:
            reap.poll()
        if not marked_processes(job_id):
            return False
        time.sleep(_POLL_S)
    forced = False
    while left := marked_processes(job_id):
        forced = True
        _signal(left, signal.SIGKILL)
        if reap is not None:
            reap.poll()
        time.sleep(_POLL_S)
    return forced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="artbot_ray_entry")
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")

    env = dict(os.environ)
    env.update(read_secrets(Path(SECRETS_FILE)))
    env[MARKER_ENV] = args.job_id
    env["PYTHONUNBUFFERED"] = "1"

    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        process = subprocess.Popen(command, env=env)
    except OSError as error:
        print(f"[artbot] cannot start {command[0]}: {error}", file=sys.stderr, flush=True)
        return 127
    while process.poll() is None and not stopping:
        time.sleep(_POLL_S)
    if stopping:
        forced = stop_marked(args.job_id, args.grace, process)
        if forced:
            print(FORCED_LINE, file=sys.stderr, flush=True)
        process.wait()
        return 128 + stopping[0]
    stop_marked(args.job_id, LEFTOVER_GRACE_S, None)
    code = process.returncode
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())
