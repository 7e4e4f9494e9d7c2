"""Slack's Web API over kept-alive connections.

slack_sdk's `WebClient` opens a connection for every call (urllib sends `Connection: close`):
against Slack that is a TCP and TLS handshake, a round trip or two, before each of a turn's
calls (the answered question updated, the next one posted). `KeepAliveWebClient` sends the
same requests over connections that stay open between calls, taken from a pool the process
shares (`CONNECTIONS`), and hands slack_sdk the same results urllib would: the answer's status,
headers and body, an `HTTPError` for a status of 400 or more (so its retry handlers and our
outbox see a 429 as before), a `URLError` for a connection that cannot be made or sent on.

A kept-alive connection can be closed by the server while idle. A request whose connection
fails before a single byte of the answer came back, on a connection used before, is sent again
once on a new one: the server closed it without reading the request (what browsers do too). A
failure after that, or on a new connection, is the caller's, as with urllib. Through a proxy
(slack_sdk's `proxy`, or HTTPS_PROXY in the environment) calls go through urllib as before.

It is also the one door to Slack: every call's arguments and every uploaded file pass the
process's redaction (isolation.redaction) on their way out, whichever feature sent them.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import ssl
import threading
import time
from collections import defaultdict
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import Request

from slack_sdk import WebClient
from slack_sdk.web.file_upload_v2_result import FileUploadV2Result
from slack_sdk.web.slack_response import SlackResponse

from isolation.redaction import redact, redact_data

IDLE_KEPT_S = 20.0
"""An idle connection older than this is closed rather than used (servers drop idle ones)."""
IDLE_PER_HOST = 16
"""At most this many idle connections are kept per host; more are closed when given back."""
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
"""What a reused connection that the server had closed fails with before any answer."""

_Origin = tuple[str, str, int]
CREDENTIAL_METHODS = ("oauth.", "openid.", "auth.", "apps.")
"""Web API methods whose arguments are credentials on purpose: sent unredacted."""


class KeptAliveConnections:
    """Idle HTTP/1.1 connections per origin (scheme, host, port), shared by threads: a call takes
    one (or opens one), and gives it back once it has read the whole answer."""

    def __init__(self, idle_kept_s: float = IDLE_KEPT_S, per_host: int = IDLE_PER_HOST) -> None:
        self._idle: defaultdict[_Origin, list[tuple[float, http.client.HTTPConnection]]] = (
            defaultdict(list)
        )
        self._lock = threading.Lock()
        self._idle_kept_s = idle_kept_s
        self._per_host = per_host

    def take(self, origin: _Origin) -> http.client.HTTPConnection | None:
        """The origin's most recently used idle connection, or None (open one); those idle for
        too long are closed."""
        now = time.monotonic()
        with self._lock:
            idle = self._idle[origin]
            fresh = [(since, c) for since, c in idle if now - since <= self._idle_kept_s]
            stale = [c for since, c in idle if now - since > self._idle_kept_s]
            taken = fresh.pop()[1] if fresh else None
            idle[:] = fresh
        for connection in stale:
            connection.close()
        return taken

    def give_back(self, origin: _Origin, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle[origin]
            if len(idle) < self._per_host:
                idle.append((time.monotonic(), connection))
                return
        connection.close()

    def idle(self, origin: _Origin) -> int:
        """Idle connections kept for `origin` now."""
        with self._lock:
            return len(self._idle[origin])


CONNECTIONS = KeptAliveConnections()
"""The process's pool: every client's calls to one origin share its connections."""


class KeepAliveWebClient(WebClient):
    """A WebClient whose calls reuse connections (see the module)."""

    def __init__(self, *, connections: KeptAliveConnections = CONNECTIONS, **options: Any) -> None:
        super().__init__(**options)
        self.connections = connections

    def api_call(
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        json: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        auth: dict[str, Any] | None = None,
    ) -> SlackResponse:
        """Every call's arguments redacted (isolation.redaction) before they leave, except the
        calls that carry credentials on purpose (OAuth, auth, apps)."""
        if not api_method.startswith(CREDENTIAL_METHODS):
            data, params, json = redact_data(data), redact_data(params), redact_data(json)
        return super().api_call(
            api_method,
            http_verb=http_verb,
            files=files,
            data=data,
            params=params,
            json=json,
            headers=headers,
            auth=auth,
        )

    def _upload_file(self, *, url: str, data: bytes, **options: Any) -> FileUploadV2Result:
        """A file's content redacted too (files_upload_v2 sends it to its own URL)."""
        with contextlib.suppress(UnicodeDecodeError):  # not text: sent as it is
            data = redact(data.decode("utf-8")).encode("utf-8")
        return super()._upload_file(url=url, data=data, **options)

    def _perform_urllib_http_request_internal(self, url: str, req: Request) -> dict[str, Any]:
        parts = urlsplit(url)
        if self.proxy or parts.scheme not in ("http", "https") or not parts.hostname:
            return super()._perform_urllib_http_request_internal(url, req)
        default_port = 443 if parts.scheme == "https" else 80
        origin = (parts.scheme, parts.hostname, parts.port or default_port)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {name: str(value) for name, value in req.header_items()}
        kept = self.connections.take(origin)
        if kept is not None:
            try:
                return self._exchange(origin, kept, req, target, headers, reused=True)
            except _STALE:
                pass  # dropped while idle, the request unread: once more on a new connection
        return self._exchange(origin, self._open(origin), req, target, headers, reused=False)

    def _open(self, origin: _Origin) -> http.client.HTTPConnection:
        scheme, host, port = origin
        if scheme == "https":
            context = self.ssl or ssl.create_default_context()
            return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=context)
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    def _exchange(
        self,
        origin: _Origin,
        connection: http.client.HTTPConnection,
        req: Request,
        target: str,
        headers: dict[str, str],
        *,
        reused: bool,
    ) -> dict[str, Any]:
        """One request and its whole answer; the connection is given back if it stays open.
        On a `reused` connection, a failure before any answer is raised as it came (the caller
        tries once more); else as urllib raises it."""
        try:
            try:
                connection.request(req.get_method(), target, body=req.data, headers=headers)
            except OSError as error:  # as urllib: a connection not made, or a send that failed
                if reused and isinstance(error, _STALE):
                    raise
                raise URLError(error) from error
            answer = connection.getresponse()
            body = answer.read()
        except BaseException:
            connection.close()
            raise
        if answer.will_close:
            connection.close()
        else:
            self.connections.give_back(origin, connection)
        if answer.status >= 400:  # as urllib's HTTPErrorProcessor: slack_sdk reads it from there
            raise HTTPError(
                req.full_url, answer.status, answer.reason, answer.msg, io.BytesIO(body)
            )
        if answer.msg.get_content_type() == "application/gzip":
            return {"status": answer.status, "headers": answer.msg, "body": body}
        charset = answer.msg.get_content_charset() or "utf-8"
        return {"status": answer.status, "headers": answer.msg, "body": body.decode(charset)}
