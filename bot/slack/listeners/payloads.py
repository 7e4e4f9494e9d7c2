"""Reading Slack's payloads without trusting their shape.

A signed request is Slack's, but its payload may still not be what the listener expects (a
click without a user, a dict where text goes, a surface Slack added later). The listeners read
every field through these functions: a field is there with the right type, or the request is
`Malformed`, which the app's error handler logs and answers 200 (`bot.app`): Slack retries any
other status, and a retry would fail the same way. Nothing is done for a malformed request:
listeners read everything they need before they hand any work on.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from slack_bolt import BoltRequest, BoltResponse
from slack_sdk.signature import SignatureVerifier

log = logging.getLogger(__name__)
Path = str | int


class Malformed(Exception):
    """A signed request whose payload is not shaped as Slack documents it; says what is off
    (a field's path, never its value)."""


def value_at(value: object, *path: Path) -> object:
    """`value[k1][k2]...` through dicts (str keys) and lists (int keys); None where a step is
    missing or of another type."""
    for key in path:
        if isinstance(key, int):
            if not isinstance(value, list) or not -len(value) <= key < len(value):
                return None
            value = value[key]
        elif isinstance(value, dict):
            value = value.get(key)
        else:
            return None
    return value


def text_at(value: object, *path: Path) -> str | None:
    """The non-empty string at `path`, else None."""
    found = value_at(value, *path)
    return found if isinstance(found, str) and found else None


def mapping_at(value: object, *path: Path) -> Mapping[str, Any]:
    """The dict at `path`; an empty one when there is none (or something else is there)."""
    found = value_at(value, *path)
    return found if isinstance(found, dict) else {}


def required_text(value: object, *path: Path) -> str:
    """The non-empty string at `path`; Malformed when there is none."""
    found = text_at(value, *path)
    if found is None:
        raise Malformed(f"no text at {_shown(path)}")
    return found


def optional_text(value: object, *path: Path) -> str:
    """The string at `path`, '' when absent or null; Malformed when something else is there."""
    found = value_at(value, *path)
    if found is None:
        return ""
    if not isinstance(found, str):
        raise Malformed(f"{_shown(path)} is a {type(found).__name__}, not text")
    return found


def optional_mapping(value: object, *path: Path) -> Mapping[str, Any]:
    """The dict at `path`, {} when absent or null; Malformed when something else is there."""
    found = value_at(value, *path)
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise Malformed(f"{_shown(path)} is a {type(found).__name__}, not an object")
    return found


def optional_list(value: object, *path: Path) -> list[Any]:
    """The list at `path`, [] when absent or null; Malformed when something else is there."""
    found = value_at(value, *path)
    if found is None:
        return []
    if not isinstance(found, list):
        raise Malformed(f"{_shown(path)} is a {type(found).__name__}, not a list")
    return found


def answered_anyway(error: Exception, body: object) -> BoltResponse:
    """The app's error handler (`app.error`): a request a listener or Bolt's middleware raised
    on is logged and answered 200, not 500. Malformed says what is off; anything else is
    logged by its type and where it was raised, never its message (it may quote the payload:
    logs carry no message text)."""
    kind = request_kind(body)
    if isinstance(error, Malformed):
        log.warning("ignored a malformed %s: %s", kind, error)
    else:
        frames = traceback.extract_tb(error.__traceback__)
        where = f"{PurePath(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        log.error(
            "ignored a malformed or unexpected %s: %s raised at %s",
            kind,
            type(error).__name__,
            where,
        )
    return BoltResponse(status=200, body="")


def answered_unless_forged(
    request: BoltRequest, error: Exception, signing_secret: str
) -> BoltResponse:
    """Bolt raised out of its dispatch: its error handlers read every part of the payload
    first (`action`, `view`...) and raise on some shapes (no actions, a view without a type).
    A request from Slack (signed, or over Socket Mode) is logged and answered 200 like any
    other malformed one; a forged one 401, as Bolt would."""
    if request.mode != "socket_mode":
        timestamp = _header(request, "x-slack-request-timestamp")
        signature = _header(request, "x-slack-signature")
        verifier = SignatureVerifier(signing_secret)
        if not verifier.is_valid(request.raw_body, timestamp, signature):
            return BoltResponse(status=401, body="")
    return answered_anyway(error, request.body)


def _header(request: BoltRequest, name: str) -> str:
    values = request.headers.get(name) or [""]
    return values[0]


def request_kind(body: object) -> str:
    """What a request is, for a log line: the command, the event's type, the payload's type."""
    command = text_at(body, "command")
    if command is not None:
        return f"command {command[:40]}"
    kind = text_at(body, "type") or "request"
    event = text_at(body, "event", "type")
    return f"{kind[:40]} {event[:40]}" if event else kind[:40]


def _shown(path: tuple[Path, ...]) -> str:
    return ".".join(str(key) for key in path) or "the top"
