"""The thread that follows the runs: `RunService.poll_once` every few seconds (`artbot serve`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from slack_sdk import WebClient

from bot.runs.service import RunService

log = logging.getLogger(__name__)


class RunFollower:
    """Calls RunService.poll_once every `interval_s` seconds in a daemon thread."""

    def __init__(
        self,
        service: RunService,
        slack: WebClient,
        interval_s: float,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._service = service
        self._slack = slack
        self._interval = interval_s
        self._stop = threading.Event()
        self._on_error = on_error
        self._thread = threading.Thread(target=self._loop, name="artbot-runs", daemon=True)

    def start(self) -> RunFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._service.poll_once(self._slack)
            except Exception as error:  # keep following the other runs
                log.exception("run follower round failed")
                if self._on_error:
                    self._on_error(error)
