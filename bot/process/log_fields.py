"""Structured log lines: `key=value` pairs carrying the Slack ids of the work being done.

`with slack_ids(team=..., channel=..., thread=..., session=...)` binds the ids in a context
variable for the code inside it (a listener's work, on whichever thread runs it); every log
line written there carries them. `configure_logging()` installs the format for `artbot serve`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType

FIELDS = ("team", "channel", "thread", "session")
_ids: ContextVar[Mapping[str, str]] = ContextVar("artbot_slack_ids", default=MappingProxyType({}))


@contextlib.contextmanager
def slack_ids(**ids: str | None) -> Iterator[None]:
    """Bind `ids` (team, channel, thread, session; None ones left out) for the block inside."""
    token = _ids.set({**_ids.get(), **{k: v for k, v in ids.items() if v}})
    try:
        yield
    finally:
        _ids.reset(token)


def current_ids() -> dict[str, str]:
    """The ids bound here, in FIELDS order."""
    bound = _ids.get()
    return {name: bound[name] for name in FIELDS if name in bound}


def quoted(value: object) -> str:
    """`value` as a logfmt value: bare when it is one word, else in double quotes."""
    text = str(value)
    if text and not any(c in text for c in ' "=\\\n\t'):
        return text
    return json.dumps(text, ensure_ascii=False)  # quotes, backslashes, newlines escaped


class KeyValueFormatter(logging.Formatter):
    """`ts=... level=INFO logger=bot.wizard.replies msg="..." team=T1 channel=C1 thread=1.2
    session=...` (logfmt), with the exception's traceback as an `error=` field."""

    def format(self, record: logging.LogRecord) -> str:
        pairs: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **current_ids(),
        }
        if record.exc_info:
            pairs["error"] = self.formatException(record.exc_info)
        return " ".join(f"{key}={quoted(value)}" for key, value in pairs.items())


def configure_logging(level: int = logging.INFO) -> None:
    """Every log line of the process as key=value on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
