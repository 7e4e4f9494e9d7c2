"""What keeps the runner's own secrets from its jobs and its logs: a process other programs of
its user cannot inspect, and log records without secrets or query strings.

Standard library only (the isolation test loads it under a plain interpreter).

`/proc/<pid>/environ` shows the environment a process started with; removing a variable from
`os.environ` later changes the C library's copy, not that memory, so it hides nothing. What does
hide it from a job running as the runner's own user is the process's dumpable flag: with
`prctl(PR_SET_DUMPABLE, 0)` the kernel refuses `/proc/<pid>/environ`, `/proc/<pid>/mem` and
ptrace to everyone without CAP_SYS_PTRACE (root still can). The flag is reset by execve, so the
runner's children (the supervisors, the jobs) stay inspectable by the runner.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable
from urllib.parse import urlsplit

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def forbid_inspection() -> bool:
    """Make this process non-dumpable; False where the platform has no prctl (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def inspectable() -> bool:
    """Whether other processes of this user may read this one's environment and memory."""
    if not sys.platform.startswith("linux"):
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0


class AccessLogWithoutQuery(logging.Filter):
    """uvicorn's access log lines with the path only: a query string may carry anything."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) >= 3:
            path = str(args[2])
            record.args = (*args[:2], urlsplit(path).path or path, *args[3:])
        return True


class RedactingLogFilter(logging.Filter):
    """Log records with the message (its arguments merged in) and traceback redacted."""

    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__()
        self._redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redact(record.exc_text)
        return True


def filter_log_handlers(redact: Callable[[str], str]) -> None:
    """Every handler of the root logger drops query strings and redacts secrets."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(AccessLogWithoutQuery())
        handler.addFilter(RedactingLogFilter(redact))
