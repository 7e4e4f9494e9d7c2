"""Reading a job's files as the runner, safely: the job wrote them, and may have planted symlinks,
FIFOs or devices to make the runner read (and hand out) what only the runner may read.

A folder is opened component by component from the job's folder without following a symlink
(`O_NOFOLLOW` on each, relative to the one before: nothing can be swapped in between), and a file
is read only when it is a regular file opened the same way. Folders below a checkpoint are walked
the same way; anything else (symlinks, FIFOs, sockets, devices) is left out. Sizes are as the
opened file says, and no more than that is read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO the job left must not wait for a writer (it is then refused).
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_DEPTH = 4
"""How deep below a checkpoint folder files are taken (PEFT writes a flat folder)."""
MAX_FILES = 10_000
CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class JobPath:
    """A folder under a job's folder: `run_dir` and the names that lead to it."""

    run_dir: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.run_dir.joinpath(*self.parts)

    def child(self, *names: str) -> JobPath:
        return JobPath(self.run_dir, (*self.parts, *names))


@dataclass(frozen=True)
class OpenedFile:
    """A regular file of a folder, open: its path below the folder, descriptor and size."""

    name: str
    fd: int
    size: int
    mtime: float

    def renamed(self, name: str) -> OpenedFile:
        return OpenedFile(name, self.fd, self.size, self.mtime)

    def chunks(self) -> Iterator[bytes]:
        """Its content, at most `size` bytes (a file that grows meanwhile is cut there)."""
        left = self.size
        while left > 0:
            chunk = os.read(self.fd, min(CHUNK_BYTES, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk


@contextlib.contextmanager
def opened_folder(folder: JobPath) -> Iterator[int]:
    """The folder's descriptor, each name opened without following a symlink; OSError when a
    name is missing, a symlink or not a folder."""
    fd = os.open(folder.run_dir, FOLDER_FLAGS)
    try:
        for name in folder.parts:
            inner = os.open(name, FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def regular_files(folder: int, prefix: str = "", depth: int = MAX_DEPTH) -> Iterator[OpenedFile]:
    """Every regular file below the open `folder`, by name, each open while it is handed out."""
    for count, opened in enumerate(_walk(folder, prefix, depth), start=1):
        if count > MAX_FILES:
            return
        yield opened


def _walk(folder: int, prefix: str, depth: int) -> Iterator[OpenedFile]:
    with os.scandir(folder) as listed:
        entries = sorted(listed, key=lambda entry: entry.name)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if depth <= 1:
                continue
            try:
                inner = os.open(entry.name, FOLDER_FLAGS, dir_fd=folder)
            except OSError:
                continue
            try:
                yield from _walk(inner, f"{prefix}{entry.name}/", depth - 1)
            finally:
                os.close(inner)
        elif entry.is_file(follow_symlinks=False):
            opened = _open_regular(folder, entry.name)
            if opened is None:
                continue
            try:
                yield opened.renamed(prefix + entry.name)
            finally:
                os.close(opened.fd)


def _open_regular(folder: int, name: str) -> OpenedFile | None:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=folder)
    except OSError:
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        return None
    return OpenedFile(name, fd, info.st_size, info.st_mtime)


def is_plain_folder(folder: JobPath) -> bool:
    """Whether `folder` opens as a folder with no symlink on the way."""
    try:
        with opened_folder(folder):
            return True
    except OSError:
        return False


def folder_size(folder: JobPath) -> int:
    """The bytes of the regular files below `folder` (0 when it cannot be opened safely)."""
    try:
        with opened_folder(folder) as fd:
            return sum(opened.size for opened in regular_files(fd))
    except OSError:
        return 0


def read_file(folder: JobPath, name: str, limit: int) -> bytes | None:
    """The first `limit` bytes of a regular file of `folder`; None when it is not one."""
    try:
        with opened_folder(folder) as fd:
            opened = _open_regular(fd, name)
            if opened is None:
                return None
            try:
                kept = OpenedFile(name, opened.fd, min(opened.size, limit), opened.mtime)
                return b"".join(kept.chunks())
            finally:
                os.close(opened.fd)
    except OSError:
        return None


def copy_folder(folder: JobPath, destination: Path) -> list[str]:
    """Copy the regular files below `folder` into the (new, empty) `destination`, as the runner's
    own files; the names copied. OSError when `folder` cannot be opened safely."""
    copied: list[str] = []
    with opened_folder(folder) as fd:
        for opened in regular_files(fd):
            target = destination.joinpath(*_safe_parts(opened.name))
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("xb") as output:
                for chunk in opened.chunks():
                    output.write(chunk)
            copied.append(opened.name)
    return copied


def _safe_parts(name: str) -> Sequence[str]:
    # Names come from the folder's own listing: no empty part, no `..`, no separator inside.
    parts = name.split("/")
    assert all(part not in ("", ".", "..") for part in parts), name
    return parts
