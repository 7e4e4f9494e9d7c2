"""The job supervisor: the first process of every job, between the runner and the training script.

    python -I supervise.py --dir JOB_RUNNER_DIR --max-bytes N --cwd RUN_DIR [--user UID
        --group GID] -- COMMAND...

It starts nothing until the runner says so: it reads its stdin (a pipe from the runner) and runs
the command only after the line `go`, which the runner writes once it has recorded the
supervisor's pid. If the runner dies before that, the pipe ends (EOF) and the supervisor exits
without running anything: a job is never running unrecorded, so a restarted runner can queue it
again without starting a second copy. On `go` it writes the `released` file, then starts the
command; a restarted runner that finds a recorded supervisor without that file knows that
nothing of the job ran.

It runs the command in its own process group (the runner starts this supervisor with
`start_new_session=True`; the command inherits the group), copies the command's output into a
size-capped log in chunks, and writes the exit status to `exit.json` when the command ends.

Why a separate process rather than a thread of the runner: the job's output pipe and its exit
status must outlive the runner. When the runner restarts, a job whose stdout is a pipe into the
dead runner dies on its next print; with the supervisor in between, the job keeps running, its
log keeps growing (capped), and the new runner reads the exit status from `exit.json`.

Standard library only, and run with `python -I` by path: it must not depend on the job's
environment, the runner's packages or the working directory.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

# The log layout, shared with runner.progress.logfile (which reads it).
HEAD_FILE = "output.head"
TAIL_FILE = "output.tail"  # the segment being written
OLD_TAIL_FILE = "output.tail.1"  # the previous segment; older ones are dropped
DROPPED_FILE = "output.dropped"  # bytes dropped so far, rewritten at each rotation
EXIT_FILE = "exit.json"
RELEASED_FILE = "released"  # written on `go`, before the command starts
GO_LINE = b"go\n"
RUN_FILES = (HEAD_FILE, TAIL_FILE, OLD_TAIL_FILE, DROPPED_FILE, EXIT_FILE, RELEASED_FILE)
"""What one run of the supervisor writes: cleared before a job is launched again."""
SUPERVISOR_LOG = "supervisor.log"

CHUNK_BYTES = 64 * 1024
# After the command exits, grandchildren may still hold the pipe open; stop waiting for them.
DRAIN_AFTER_EXIT_S = 1.0


def log_budget(max_bytes: int) -> tuple[int, int]:
    """(head bytes, tail segment bytes): head + 2 segments never exceed `max_bytes`."""
    head = max_bytes // 4
    segment = (max_bytes - head) // 2
    return head, segment


class CappedLog:
    """Keeps the first `head` bytes of a stream and about the last 2 x `segment` bytes.

    Memory stays at one chunk whatever the stream's size; disk stays under `max_bytes`.
    """

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self._folder = folder
        self._head_left, self._segment = log_budget(max_bytes)
        self._head: io.BufferedWriter | None = open(folder / HEAD_FILE, "ab")  # noqa: SIM115
        self._tail: io.BufferedWriter | None = None
        self._tail_size = 0
        self._dropped = 0
        self._lock = threading.Lock()
        self.written = 0

    def write(self, chunk: bytes) -> None:
        """Append `chunk`: to the head while it has room, then to the rotating tail."""
        with self._lock:
            if self._head is None:
                return  # closed: output after the end is not kept
            self.written += len(chunk)
            if self._head_left > 0:
                part = chunk[: self._head_left]
                self._head.write(part)
                self._head.flush()
                self._head_left -= len(part)
                chunk = chunk[len(part) :]
            while chunk:
                if self._tail is None:
                    self._tail = open(self._folder / TAIL_FILE, "ab")  # noqa: SIM115
                    self._tail_size = 0
                part = chunk[: self._segment - self._tail_size]
                self._tail.write(part)
                self._tail.flush()
                self._tail_size += len(part)
                chunk = chunk[len(part) :]
                if self._tail_size >= self._segment:
                    self._rotate(self._tail)

    def _rotate(self, tail: io.BufferedWriter) -> None:
        old = self._folder / OLD_TAIL_FILE
        if old.exists():
            self._dropped += old.stat().st_size
        tail.close()
        # A reader holding the old segment open keeps reading it after the rename.
        os.replace(self._folder / TAIL_FILE, old)
        self._tail = None
        write_whole_json(self._folder / DROPPED_FILE, {"dropped_bytes": self._dropped})

    def close(self) -> None:
        with self._lock:
            for file in (self._head, self._tail):
                if file is not None:
                    file.close()
            self._head = self._tail = None


def write_whole_json(path: Path, value: dict[str, object]) -> None:
    """Write `value` to `path` whole: to a partial file first, then renamed over it, so that a
    reader never sees half a file and a process killed mid-write leaves the old file or the new
    one (a half serving marker would be skipped at the runner's next start, leaving its process
    running)."""
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(json.dumps(value), encoding="utf-8")
    os.replace(partial, path)


def _copy_output(source: int, log: CappedLog) -> None:
    while True:
        try:
            chunk = os.read(source, CHUNK_BYTES)
        except OSError:
            return
        if not chunk:
            return
        log.write(chunk)


def _peak_rss_kb() -> int | None:
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over exec, so it would report
    # the peak of the runner that forked this process.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _ignore(signum: int, frame: FrameType | None) -> None:
    # A handler, not SIG_IGN: an ignored signal stays ignored across exec, and the command
    # must still receive SIGTERM when the runner signals the group.
    del signum, frame


def wait_for_release() -> bool:
    """Block until the runner writes `go` on stdin (True, and stdin is closed) or goes away
    first (EOF: False)."""
    received = b""
    while not received.endswith(b"\n") and len(received) < len(GO_LINE):
        try:
            chunk = os.read(0, len(GO_LINE) - len(received))
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
        except OSError:
            return False
        if not chunk:
            return False
        received += chunk
    if received != GO_LINE:
        return False
    os.close(0)
    return True


def main(argv: list[str] | None = None, release: Callable[[], bool] = wait_for_release) -> int:
    """Run the command, copy its output to the capped log, record its exit status; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, required=True, help="the job's runner folder")
    parser.add_argument("--cwd", type=Path, required=True, help="the command's working directory")
    parser.add_argument("--max-bytes", type=int, required=True)
    parser.add_argument(
        "--user", type=int, default=None, help="run the command as this uid (and its gid)"
    )
    parser.add_argument("--group", type=int, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    # The runner signals the whole group; the supervisor outlives the command so that it can
    # copy its last output and record how it ended.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ignore)

    folder: Path = args.dir
    if not release():
        return 0  # the runner died (or gave up) before recording this launch: run nothing
    (folder / RELEASED_FILE).touch()
    log = CappedLog(folder, args.max_bytes)
    started = time.time()
    user: int | None = args.user
    group: int | None = args.group
    try:
        process = subprocess.Popen(
            command,
            cwd=args.cwd,
            stdin=subprocess.DEVNULL,
            # As the job user, with its own group only: nothing of the supervisor's groups.
            user=user,
            group=group,
            extra_groups=None if user is None else [],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            close_fds=True,
        )
    except OSError as error:
        log.write(f"runner: cannot start {command[0]!r}: {error}\n".encode())
        log.close()
        write_whole_json(
            folder / EXIT_FILE, {"exit_code": 127, "started": False, "error": str(error)}
        )
        return 0
    assert process.stdout is not None
    copier = threading.Thread(
        target=_copy_output, args=(process.stdout.fileno(), log), name="output", daemon=True
    )
    copier.start()
    exit_code = process.wait()
    copier.join(DRAIN_AFTER_EXIT_S)
    log.close()
    write_whole_json(
        folder / EXIT_FILE,
        {
            "exit_code": exit_code,
            "started": True,
            "seconds": round(time.time() - started, 3),
            "output_bytes": log.written,
            # shows that a job printing gigabytes kept this process small
            "supervisor_max_rss_kb": _peak_rss_kb(),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
