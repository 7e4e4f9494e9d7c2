"""The thread that follows the runs: `RunService.poll_once` every few seconds (`artbot serve`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from bot.installations import ClientFor
from bot.runs.service import RunService

log = logging.getLogger(__name__)


class RunFollower:
    """Calls RunService.poll_once every `interval_s` seconds in a daemon thread; each run's
    thread is told through its team's client (`client_for`)."""

    def __init__(
        self,
        service: RunService,
        client_for: ClientFor,
        interval_s: float,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        self._service = service
        self._client_for = client_for
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
                self._service.poll_once(self._client_for)
            except Exception as error:  # keep following the other runs
                log.exception("run follower round failed")
                if self._on_error:
                    self._on_error(error)
