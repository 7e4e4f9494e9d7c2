"""uvicorn's server for a process that cleans up after it stops: `artbot runner serve` and
`artbot serve` both run one. Imports nothing of ours (the bot may import it)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

import uvicorn


class GracefulServer(uvicorn.Server):
    """uvicorn's server, minus re-raising SIGTERM/SIGINT once it has shut down: that would kill
    the process before it stops its threads and closes its database."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {
            sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
