"""A small repo dropped as a `.zip`, read in memory as hostile input: its Python files (and
`pyproject.toml` / `requirements*.txt` as text), never extracted to disk, never run. Hard limits
on the archive's size, its number of entries, each member's and all members' uncompressed size
and each member's compression ratio; nested archives, unsafe paths, symbolic links, encrypted
members and non-UTF-8 text are skipped, each with the reason; what looks like a key or token
is replaced by [redacted] as the files are read.

    repo = read_repo_zip("agent.zip", content)   # ZipRefused: the archive as a whole
    repo.summary()   # "Read 4 Python files from agent.zip; skipped 2: ..."
"""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from flows import redact_secrets

ZIP_SUFFIX = ".zip"
MAX_ZIP_BYTES = 1_000_000
"""The archive as downloaded (compressed)."""
MAX_ENTRIES = 300
"""Entries in the archive, folders included: a small repo, not a virtual environment."""
MAX_MEMBER_BYTES = 200_000
"""One member, uncompressed."""
MAX_TOTAL_BYTES = 1_000_000
"""All the members read, uncompressed."""
MAX_RATIO = 100
"""Uncompressed to compressed; source code compresses about 4 to 1, a zip bomb thousands."""
RATIO_FLOOR = 10_000
"""Smaller members are not judged by their ratio (a file of blank lines compresses well)."""
ARCHIVES = (".zip", ".whl", ".egg", ".jar", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
NOT_THE_CODE = frozenset(
    {"__MACOSX", ".git", "__pycache__", ".venv", "venv", "site-packages", "node_modules", ".tox"}
)
"""Folders that are not the user's code: not read, not reported one by one."""
SHOWN_NAMES = 8
MAX_SHOWN_NAME = 80


class ZipRefused(ValueError):
    """The archive as a whole cannot be read; the message says why, for the user."""


@dataclass(frozen=True)
class ZipLimits:
    """The hard limits one archive is read under (tests make them small)."""

    zip_bytes: int = MAX_ZIP_BYTES
    entries: int = MAX_ENTRIES
    member_bytes: int = MAX_MEMBER_BYTES
    total_bytes: int = MAX_TOTAL_BYTES
    ratio: int = MAX_RATIO


@dataclass(frozen=True)
class RepoFile:
    """One member read as text."""

    path: str
    text: str


@dataclass(frozen=True)
class Skipped:
    """A member that was not read, and why (for the user)."""

    path: str
    why: str


@dataclass(frozen=True)
class RepoZip:
    """What was read from one archive."""

    name: str
    python: tuple[RepoFile, ...] = ()
    requirements: tuple[RepoFile, ...] = ()
    """`pyproject.toml` and `requirements*.txt`, as text."""
    skipped: tuple[Skipped, ...] = ()
    others: int = 0
    """Members neither read nor suspicious (docs, data, `.git`): not listed."""
    redacted: tuple[str, ...] = ()
    """Files read with what looks like a key or token replaced by [redacted]."""
    files: tuple[RepoFile, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", (*self.python, *self.requirements))

    def summary(self) -> str:
        """What was read and what was skipped, and why, in one paragraph for the user."""
        name = _shown(self.name)
        count = len(self.python)
        read = f"Read {count} Python file{'s' if count != 1 else ''} from {name}"
        if self.requirements:
            read += " and " + ", ".join(_shown(f.path) for f in self.requirements)
        if self.python:
            read += f" ({_listed([f.path for f in self.python])})"
        parts = [read]
        if self.skipped:
            reasons = [f"{_shown(s.path)} ({s.why})" for s in self.skipped[:SHOWN_NAMES]]
            more = len(self.skipped) - SHOWN_NAMES
            if more > 0:
                reasons.append(f"{more} more")
            parts.append(f"skipped {len(self.skipped)}: " + "; ".join(reasons))
        said = "; ".join(parts) + "."
        if self.redacted:
            said += (
                " What looks like a key or token was removed (never sent) from "
                f"{_listed(list(self.redacted))}."
            )
        if self.others:
            files = f"{self.others} other file{'s' if self.others != 1 else ''}"
            said += f" {files} (not your Python code) left out."
        return said


def is_zip(name: str) -> bool:
    return name.lower().endswith(ZIP_SUFFIX)


def read_repo_zip(name: str, content: bytes, limits: ZipLimits | None = None) -> RepoZip:
    """The Python files and requirements of the archive `content` (named `name`), read in memory
    under `limits`. Raises ZipRefused when the archive as a whole is too big, too many entries,
    or not a zip that can be read."""
    limits = limits or ZipLimits()
    shown = _shown(name)
    if len(content) > limits.zip_bytes:
        raise ZipRefused(
            f"{shown} is {len(content):,} bytes; a .zip may be {limits.zip_bytes:,} at most. "
            "Zip only your agent's code."
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise ZipRefused(f"{shown} is not a zip file I can read (damaged, or not a zip).") from None
    with archive:
        if len(members) > limits.entries:
            raise ZipRefused(
                f"{shown} has {len(members):,} entries; the limit is {limits.entries:,}. "
                "Zip only your agent's code (without .venv, .git or data)."
            )
        return _read_members(name, archive, members, limits)


def _read_members(
    name: str, archive: zipfile.ZipFile, members: list[zipfile.ZipInfo], limits: ZipLimits
) -> RepoZip:
    python: list[RepoFile] = []
    requirements: list[RepoFile] = []
    skipped: list[Skipped] = []
    cleaned: list[str] = []
    others = 0
    seen: set[str] = set()
    total = 0
    for info in members:
        path = info.filename.replace("\\", "/")
        if info.is_dir() and not _is_link(info):
            continue
        if not _safe_path(path):
            skipped.append(Skipped(path, "a path outside the archive: ignored"))
            continue
        parts = PurePosixPath(path).parts
        if NOT_THE_CODE & set(parts[:-1]) or parts[-1].startswith("._"):
            others += 1
            continue
        if _is_link(info):
            skipped.append(Skipped(path, "a symbolic link: ignored"))
            continue
        lowered = parts[-1].lower()
        if lowered.endswith(ARCHIVES):
            skipped.append(Skipped(path, "an archive inside the archive: not opened"))
            continue
        kind = _kind(lowered)
        if kind is None:
            others += 1
            continue
        if path in seen:
            skipped.append(Skipped(path, "a second entry with the same name"))
            continue
        seen.add(path)
        why = _refusal(info, limits, total)
        if why is None:
            read = _read_text(archive, info, limits.member_bytes)
            if isinstance(read, str):
                total += len(read.encode())
                redacted = redact_secrets(read)
                if redacted != read:
                    cleaned.append(path)
                (python if kind == "python" else requirements).append(RepoFile(path, redacted))
                continue
            why = read.why
        skipped.append(Skipped(path, why))
    python.sort(key=lambda f: (f.path.count("/"), f.path))
    return RepoZip(name, tuple(python), tuple(requirements), tuple(skipped), others, tuple(cleaned))


def _kind(filename: str) -> str | None:
    if filename.endswith(".py"):
        return "python"
    if filename == "pyproject.toml" or (
        filename.startswith("requirements") and filename.endswith(".txt")
    ):
        return "requirements"
    return None


def _refusal(info: zipfile.ZipInfo, limits: ZipLimits, total: int) -> str | None:
    """Why a member is not even opened (from its header), or None."""
    if info.flag_bits & 0x1:
        return "encrypted: refused"
    if info.file_size > RATIO_FLOOR and info.file_size > limits.ratio * max(info.compress_size, 1):
        ratio = info.file_size // max(info.compress_size, 1)
        return f"compressed {ratio:,} to 1, over {limits.ratio} to 1: a zip bomb?"
    if info.file_size > limits.member_bytes:
        return f"{info.file_size:,} bytes; the limit is {limits.member_bytes:,} per file"
    if total + info.file_size > limits.total_bytes:
        return f"over the limit of {limits.total_bytes:,} bytes read from one zip"
    return None


@dataclass(frozen=True)
class _Unread:
    why: str


def _read_text(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> str | _Unread:
    """The member's text, read at most `limit` bytes far whatever its header says."""
    try:
        with archive.open(info) as stream:
            # Past the header's size: reading to the end is what checks the CRC.
            data = stream.read(limit + 1)
            if len(data) > limit:
                return _Unread(f"more than {limit:,} bytes once uncompressed")
    except NotImplementedError:
        return _Unread("compressed with a method I cannot read")
    except RuntimeError:  # a password is needed
        return _Unread("encrypted: refused")
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError):
        return _Unread("damaged (its data does not match its header)")
    if len(data) != info.file_size:
        return _Unread("damaged (its data does not match its header)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return _Unread("not UTF-8 text")
    if "\x00" in text:
        return _Unread("not text (NUL bytes)")
    return text


def _safe_path(path: str) -> bool:
    """A relative path that stays inside the archive: no `..`, no root, no drive."""
    if not path or path.startswith("/") or ":" in path or any(ord(c) < 32 for c in path):
        return False
    return ".." not in PurePosixPath(path).parts


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _shown(name: str) -> str:
    name = " ".join(name.split())
    return name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 1] + "…"


def _listed(paths: list[str]) -> str:
    shown = [_shown(p) for p in paths[:SHOWN_NAMES]]
    if len(paths) > SHOWN_NAMES:
        shown.append(f"{len(paths) - SHOWN_NAMES} more")
    return ", ".join(shown)
