"""`artbot serve` as a real process on loopback, talking to a fake Slack: start it, send it signed
requests over HTTP, kill it (SIGKILL: no clean-up runs) and start it again on the same database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from tests.fakes.slack_api import FakeSlack
from tests.fakes.workspace import BOT_TOKEN, SIGNING_SECRET

ROOT = Path(__file__).resolve().parents[2]
STARTED_WITHIN_S = 120.0
SERVE = "import sys; from artbot.cli import main; sys.exit(main(sys.argv[1:]))"


def process_database_url(url: str, schema: str | None) -> str:
    """`url` for a process that takes no schema setting: on PostgreSQL, the schema comes first
    in the connection's search_path, so unqualified tables (and Alembic's) live there."""
    if schema is None:
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-csearch_path={schema}')}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class BotProcess:
    """One `artbot serve` process over HTTP; `events_url` takes Slack's signed requests."""

    def __init__(
        self, fake: FakeSlack, database_url: str, folder: Path, *, workers: int = 1
    ) -> None:
        """`workers` > 1: that many bot processes behind the router (`--workers`)."""
        self.port = free_port()
        self.log = folder / f"serve-{self.port}.log"
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": fake.base_url,
            "ARTBOT_DATABASE_URL": database_url,
            "ARTBOT_SCRIPTS_DIR": str(folder / "scripts"),
            "ARTBOT_DRYRUN": "false",
        }
        for name in (
            "SLACK_APP_TOKEN",
            "ARTBOT_RUNNER_URL",
            "ARTBOT_RUNNER_TOKEN",
            "ARTBOT_WORKERS",
        ):
            env.pop(name, None)
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    SERVE,
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    str(workers),
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_healthy()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def events_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/slack/events"

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + STARTED_WITHIN_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"artbot serve exited: {self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise TimeoutError(f"artbot serve did not start: {self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to finish what it was doing."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> BotProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
