"""The worker processes of `artbot serve --workers N`: N complete bots, worker i serving its shard
(`bot.process.shards`) on a Unix socket of its own, started, watched and restarted by the front
process, whose router (`bot.process.router`) sends each channel's requests to its worker.

A worker that dies is started again (after a pause that doubles up to 30 s while it keeps
dying); meanwhile the router answers its channels' requests 503, which Slack retries. A worker
that fails before it first serves (bad settings, a database it cannot reach) stops the others:
`artbot serve` then exits as a single process would.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from bot.process.shards import Shard

log = logging.getLogger(__name__)
READY_WITHIN_S = 120.0
"""A worker migrates the database (serialized with the others) and connects to Slack first."""
STOP_WITHIN_S = 15.0
RESTART_PAUSE_S = (1.0, 30.0)
"""The first pause before starting a dead worker again, and the longest."""


class WorkerFailed(RuntimeError):
    """A worker exited before it served; the message names it and its exit status."""


class WorkerProcesses:
    """N `artbot serve --shard i/N --uds <folder>/worker-i.sock` processes."""

    def __init__(self, count: int, folder: Path, env: Mapping[str, str] | None = None) -> None:
        self.count = count
        self.sockets: list[Path] = [folder / f"worker-{i}.sock" for i in range(count)]
        self._env = dict(os.environ if env is None else env)
        self._processes: list[subprocess.Popen[bytes] | None] = [None] * count
        self._stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="artbot-workers", daemon=True)
        self.restarts = 0

    def start(self) -> WorkerProcesses:
        """Start every worker and wait until each accepts connections; WorkerFailed (the others
        stopped) if one exits first or none of it in READY_WITHIN_S."""
        for index in range(self.count):
            self._processes[index] = self._spawn(index)
        try:
            for index in range(self.count):
                self._wait_ready(index)
        except WorkerFailed:
            self.stop()
            raise
        self._watcher.start()
        return self

    def stop(self) -> None:
        """SIGTERM every worker (each finishes its requests), SIGKILL what is left after
        STOP_WITHIN_S."""
        self._stopping.set()
        running = [p for p in self._processes if p is not None and p.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WITHIN_S
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._watcher.is_alive():
            self._watcher.join(timeout=5)

    def pid(self, index: int) -> int | None:
        process = self._processes[index]
        return process.pid if process is not None else None

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        path = self.sockets[index]
        path.unlink(missing_ok=True)
        shard = Shard(index, self.count)
        command = [sys.executable, "-m", "artbot.cli", "serve"]
        command += ["--shard", str(shard), "--uds", str(path)]
        log.info("starting worker %s on %s", shard, path)
        # A session of its own: a Ctrl-C in the terminal reaches the router alone, which stops
        # the workers itself (no restart of workers dying of the same SIGINT meanwhile).
        return subprocess.Popen(command, env=self._env, start_new_session=True)

    def _wait_ready(self, index: int) -> None:
        process = self._processes[index]
        assert process is not None
        deadline = time.monotonic() + READY_WITHIN_S
        while not accepts(self.sockets[index]):
            if process.poll() is not None:
                raise WorkerFailed(
                    f"worker {index} of {self.count} exited ({process.returncode}) before serving"
                )
            if time.monotonic() > deadline or self._stopping.is_set():
                raise WorkerFailed(
                    f"worker {index} of {self.count} did not serve within {READY_WITHIN_S:g} s"
                )
            time.sleep(0.05)

    def _watch(self) -> None:
        """Start again each worker that dies, pausing longer while it keeps dying."""
        pauses = [RESTART_PAUSE_S[0]] * self.count
        while not self._stopping.wait(0.5):
            for index, process in enumerate(self._processes):
                if process is None or process.poll() is None:
                    continue
                log.error(
                    "worker %d of %d exited (%s); starting it again in %g s",
                    index,
                    self.count,
                    process.returncode,
                    pauses[index],
                )
                if self._stopping.wait(pauses[index]):
                    return
                self._processes[index] = self._spawn(index)
                self.restarts += 1
                try:
                    self._wait_ready(index)
                    pauses[index] = RESTART_PAUSE_S[0]
                except WorkerFailed as failure:
                    log.error("%s", failure)
                    pauses[index] = min(pauses[index] * 2, RESTART_PAUSE_S[1])


def accepts(path: Path) -> bool:
    """Whether a server listens on the Unix socket `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
