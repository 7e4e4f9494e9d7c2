"""Log records without secrets or query strings, for the bot's and the runner's logs alike.

Standard library only, and nothing of ours.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlsplit


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
