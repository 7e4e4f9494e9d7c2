"""The tail of the script's output, as a terminal would have left it: what the report shows."""

from __future__ import annotations

import os
import re
import threading
from collections import deque
from typing import IO

OUTPUT_CAP_BYTES = 256 * 1024
TAIL_LINES = 40
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PROGRESS_BAR = re.compile(r"^(?P<label>[^:|]{0,60}):\s+\d+%\|")


class OutputTail:
    """The last `OUTPUT_CAP_BYTES` of a stream, read in a thread."""

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._thread: threading.Thread | None = None

    def follow(self, stream: IO[bytes]) -> None:
        """Start reading `stream` (a pipe) until it closes."""
        self._thread = threading.Thread(target=self._read, args=(stream.fileno(),), daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> None:
        # os.read returns whatever is there: the tail stays current while the child runs.
        while chunk := os.read(fd, 65536):
            self._chunks.append(chunk)
            self._size += len(chunk)
            while self._size - len(self._chunks[0]) >= OUTPUT_CAP_BYTES:
                self._size -= len(self._chunks.popleft())

    def wait(self, timeout: float) -> None:
        """Wait for the reader to reach the end of the stream."""
        if self._thread is not None:
            self._thread.join(timeout)

    def lines(self, count: int = TAIL_LINES) -> str:
        """The last `count` lines as a terminal would leave them: progress bars collapsed."""
        return "\n".join(readable_lines(b"".join(self._chunks).decode(errors="replace"))[-count:])


def readable_lines(text: str) -> list[str]:
    """`text` without ANSI escapes or blank lines, each tqdm bar reduced to its last state."""
    shown: list[str] = []
    for raw in ANSI_ESCAPE.sub("", text).splitlines():
        # tqdm redraws with "\r" (and cursor moves): keep what the terminal would show.
        line = next((part for part in reversed(raw.split("\r")) if part.strip()), "")
        if not line.strip():
            continue
        bar = PROGRESS_BAR.match(line)
        previous = PROGRESS_BAR.match(shown[-1]) if shown else None
        if bar and previous and previous["label"] == bar["label"]:
            shown[-1] = line
            continue
        shown.append(line)
    return shown
