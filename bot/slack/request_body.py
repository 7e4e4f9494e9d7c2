"""Request bodies read under a cap, before anything parses or verifies them.

Anyone can POST to `artbot serve`: a body is unsigned until Bolt has checked it, and Bolt reads it
whole first. So every body is capped before it is read, in every serving mode (`bot.slack.asgi`
for one process and for each worker, `bot.process.router` in front of the workers): a declared
Content-Length over the cap is refused at once, and a chunked body without one is counted as it
arrives and cut off at the cap. Either way the answer is 413 and the connection is closed (so the
rest of the body is never read either).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

MAX_SLACK_BODY_BYTES = 2 * 1024 * 1024
"""The largest request body read (2 MiB). What Slack sends is far smaller: the largest is a
`message_changed` event, which carries the edited and the previous message, each at most 40,000
characters of text (Slack truncates longer ones) and the rich_text blocks repeating it,
JSON-escaped at up to 6 bytes a character: about 1 MB. A click carries the bot's own message or
Home view (at most 50 or 100 blocks of its own short texts), a modal's submission its 3,000
characters. Files never come in a body (the bot downloads them by URL)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTooLarge(Exception):
    """The request's body is (or says it is) over the cap."""


def declared_too_large(
    headers: Iterable[tuple[bytes, bytes]], limit: int = MAX_SLACK_BODY_BYTES
) -> bool:
    """Whether the request's Content-Length is over `limit` (or not a number): refuse it unread."""
    for name, value in headers:
        if name.lower() == b"content-length":
            return not value.strip().isdigit() or int(value) > limit
    return False


async def read_capped(
    headers: Iterable[tuple[bytes, bytes]], receive: Receive, limit: int = MAX_SLACK_BODY_BYTES
) -> bytes | None:
    """The request's whole body, at most `limit` bytes; None when the client left first.
    BodyTooLarge before a byte is read when its Content-Length is over `limit`, or as soon as
    a body without one (chunked) passes it."""
    if declared_too_large(headers, limit):
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` (already read) once, then waits on the client as before."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def refuse_too_large(send: Send, limit: int = MAX_SLACK_BODY_BYTES) -> None:
    """413, and the connection closed: whatever the client still sends is never read."""
    body = f"The request body is over {limit:,} bytes.\n".encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", b"%d" % len(body)),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
