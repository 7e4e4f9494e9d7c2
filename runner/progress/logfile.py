"""Reading a job's capped output log (written by runner.jobs.local.supervisor): tails, excerpts,
following.

The log is a logical stream kept as up to three files: the head (the first bytes), then the
previous and the current tail segments; bytes between the head and the previous segment may have
been dropped (`output.dropped` says how many). Nothing here reads more than it returns.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from runner.jobs.local.supervisor import DROPPED_FILE, HEAD_FILE, OLD_TAIL_FILE, TAIL_FILE

DEFAULT_FOLLOW_BYTES = 1024 * 1024


def dropped_bytes(folder: Path) -> int:
    """How many bytes of output were dropped between the head and the kept tail."""
    try:
        value = json.loads((folder / DROPPED_FILE).read_text(encoding="utf-8"))
        return int(value.get("dropped_bytes", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_range(path: Path, start: int, length: int) -> bytes:
    if length <= 0:
        return b""
    try:
        with path.open("rb") as file:
            file.seek(start)
            return file.read(length)
    except OSError:
        return b""


def _gap_marker(dropped: int) -> bytes:
    return f"\n[... {dropped} bytes of output not kept ...]\n".encode()


@dataclass(frozen=True)
class LogText:
    """Some of a job's output, decoded, and whether anything was left out."""

    text: str
    truncated: bool


def read_tail(folder: Path, tail_bytes: int) -> LogText:
    """The last `tail_bytes` of the output (a marker where kept parts are not contiguous)."""
    dropped = dropped_bytes(folder)
    pieces: list[bytes] = []
    left = tail_bytes
    truncated = False
    # From the end backwards: current tail, previous tail, then the head (past a gap if any).
    for name in (TAIL_FILE, OLD_TAIL_FILE, HEAD_FILE):
        path = folder / name
        size = _size(path)
        if name == HEAD_FILE and dropped and size:
            if left <= 0:
                truncated = True
                break
            pieces.append(_gap_marker(dropped))
            truncated = True
        if size == 0:
            continue
        if left <= 0:
            truncated = True
            break
        take = min(size, left)
        if take < size:
            truncated = True
        pieces.append(_read_range(path, size - take, take))
        left -= take
    return LogText(b"".join(reversed(pieces)).decode("utf-8", errors="replace"), truncated)


def read_excerpt(folder: Path, head_bytes: int, tail_bytes: int) -> str:
    """The first `head_bytes` and the last `tail_bytes` of the output, for failure analysis.

    Both ends matter: uv's install errors and missing-variable messages come first, the
    traceback that ended the run comes last.
    """
    head_size = _size(folder / HEAD_FILE)
    rest = _size(folder / OLD_TAIL_FILE) + _size(folder / TAIL_FILE)
    total_kept = head_size + rest
    if total_kept <= head_bytes + tail_bytes and not dropped_bytes(folder):
        return read_tail(folder, total_kept).text
    head = _read_range(folder / HEAD_FILE, 0, min(head_size, head_bytes))
    tail = read_tail(folder, tail_bytes)
    return head.decode("utf-8", errors="replace") + "\n[...]\n" + tail.text


class OutputFollower:
    """Reads the output as it is written, at most `budget` bytes per poll.

    Holds the segment being read open, so a rotation (a rename) loses nothing of it. A reader
    more than two segments behind skips ahead: following is for warnings, not for the record.
    """

    def __init__(self, folder: Path, budget: int = DEFAULT_FOLLOW_BYTES) -> None:
        self._folder = folder
        self._budget = budget
        self._fd: int | None = None
        self._inode: int | None = None
        self._in_head = True

    def poll(self) -> bytes:
        """The bytes written since the last poll (up to the budget)."""
        chunks: list[bytes] = []
        left = self._budget
        while left > 0:
            if self._fd is None and not self._open_next():
                break
            assert self._fd is not None
            chunk = os.read(self._fd, min(left, 256 * 1024))
            if chunk:
                chunks.append(chunk)
                left -= len(chunk)
                continue
            if not self._advance():
                break
        return b"".join(chunks)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open_next(self) -> bool:
        name = HEAD_FILE if self._in_head else TAIL_FILE
        try:
            fd = os.open(self._folder / name, os.O_RDONLY)
        except OSError:
            return False
        self._fd = fd
        self._inode = os.fstat(fd).st_ino
        return True

    def _advance(self) -> bool:
        """At the end of the open file: move on if the writer has, else wait for more."""
        assert self._fd is not None
        if self._in_head:
            # The writer goes on to the tail only once the head is full: the head is final.
            if not ((self._folder / TAIL_FILE).exists() or (self._folder / OLD_TAIL_FILE).exists()):
                return False
            if os.read(self._fd, 1):
                os.lseek(self._fd, -1, os.SEEK_CUR)
                return True
            self.close()
            self._in_head = False
            return self._open_next()
        try:
            current = os.stat(self._folder / TAIL_FILE).st_ino
        except OSError:
            current = None
        if current == self._inode:
            return False  # still the segment being written: wait for more
        # Rotated: the writer closed our segment before renaming it, so it is complete.
        if os.read(self._fd, 1):
            os.lseek(self._fd, -1, os.SEEK_CUR)
            return True
        self.close()
        return self._open_next()
