"""A recording, Slack-compatible Web API server on loopback, for the bot's tests.

    with FakeSlack() as fake:
        client = WebClient(token=fake.bot_token, base_url=fake.base_url)
        ...
        fake.wait_for(lambda s: len(s.thread(CHANNEL_ID, parent_ts)) == 3)

It answers the methods the bot uses the way Slack does (errors included), keeps what was
posted per channel and thread, serves user files and uploads, and can be told to rate-limit,
fail or slow down a method.

Several workspaces: the one it starts with (`team_id`, `bot_token`), and any that install the
app through OAuth (`oauth_app`, then `authorize` stands for a person approving the install on
slack.com, and the bot trades the code at `oauth.v2.access`) or are added with
`add_workspace`. Each has its own bot token; a token works only on its own team's channels
(`channel_not_found` elsewhere, as Slack answers for a channel the token's team cannot see),
and an uninstalled workspace's token is refused (`token_revoked`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import email.parser
import email.policy
import itertools
import json
import mimetypes
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from tests.fakes import slack_requests
from tests.fakes.workspace import (
    API_APP_ID,
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_DOMAIN,
    TEAM_ID,
    USER_ID,
    next_ts,
    ts_key,
)

JsonObject = dict[str, Any]

# What files.slack.com serves to a browser (or a bot) without a valid session or token.
LOGIN_PAGE = (
    b'<!DOCTYPE html><html lang="en-US"><head><title>Slack</title></head>'
    b"<body><h1>Sign in to " + TEAM_DOMAIN.encode() + b"</h1>"
    b'<form action="/signin" method="post"><input type="email" name="email">'
    b'<button type="submit">Sign in with email</button></form></body></html>'
)

IDLE_CONNECTION_S = 30.0  # a kept-alive connection idle this long is closed
MAX_TEXT = 40_000  # Slack truncates longer message text
MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
TRIGGER_TTL_S = 3.0
"""A trigger_id opens one view within 3 seconds of the interaction (Slack's modals docs)."""
MAX_VIEW_TITLE = 24
MAX_PRIVATE_METADATA = 3000
MAX_PLAIN_TEXT_INPUT = 3000
MAX_VIEW_BYTES = 250_000
MAX_LOADING_MESSAGES = 10  # assistant.threads.setStatus
MAX_SUGGESTED_PROMPTS = 4  # assistant.threads.setSuggestedPrompts
MAX_STREAM_TEXT = 12_000  # chat.startStream / appendStream / stopStream: markdown_text a call
"""views.open answers `view_too_large` over this (the view's JSON)."""

_FILETYPES = {
    ".py": "python",
    ".txt": "text",
    ".md": "markdown",
    ".json": "json",
    ".jsonl": "text",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".csv": "csv",
    ".toml": "text",
    ".sh": "shell",
    ".png": "png",
    ".jpg": "jpg",
    ".pdf": "pdf",
    ".zip": "zip",
}


# --- What tests read -----------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request the server received, as it arrived, with what it answered."""

    method: str
    """The Web API method ("chat.postMessage"), or "upload", "files-pri", "response_url"."""
    params: JsonObject
    """Query string, form and JSON body merged; JSON-string fields such as `blocks` as sent."""
    headers: dict[str, str]
    at: float
    """`time.monotonic()` when the request arrived."""
    status: int = 200
    response: JsonObject | None = None
    """The JSON answer (None for endpoints that answer bytes or HTML)."""

    def json(self, name: str) -> Any:
        """A parameter decoded from JSON when sent as a string (`blocks`, `view`, `files`)."""
        value = self.params.get(name)
        return json.loads(value) if isinstance(value, str) else value

    def header(self, name: str) -> str | None:
        """A request header, looked up case-insensitively."""
        lowered = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == lowered), None)

    @property
    def token(self) -> str | None:
        """The token sent, from `Authorization: Bearer` or a `token` parameter."""
        return _token_of(self.headers, self.params)

    @property
    def ok(self) -> bool:
        """Whether Slack would have called this a success."""
        return self.status == 200 and (self.response is None or bool(self.response.get("ok")))


@dataclass(frozen=True)
class Install:
    """The app in one workspace: the bot token Slack issued and who the bot is there."""

    team_id: str
    bot_token: str
    bot_user_id: str
    bot_id: str
    team_name: str = "Fake Workspace"
    enterprise_id: str | None = None
    enterprise_name: str | None = None
    is_enterprise_install: bool = False
    scopes: tuple[str, ...] = ()
    authed_user: str = USER_ID


@dataclass
class _Grant:
    """An install a person approved on slack.com: the code the redirect carries, until used."""

    install: Install
    redirect_uri: str | None
    used: bool = False


@dataclass(frozen=True)
class Message:
    """A message as the channel shows it now (after any chat.update)."""

    channel: str
    ts: str
    text: str
    user: str
    blocks: list[JsonObject] | None = None
    thread_ts: str | None = None
    bot_id: str | None = None
    files: tuple[JsonObject, ...] = ()
    subtype: str | None = None
    reply_broadcast: bool = False
    edits: int = 0
    """How many times chat.update changed it."""
    ephemeral_to: str | None = None
    """The only user who sees it (chat.postEphemeral), else None."""
    metadata: JsonObject | None = None
    """The app's message metadata (`event_type`, `event_payload`), returned by
    conversations.replies only with `include_all_metadata`."""
    streaming: bool = False
    """A streamed message (chat.startStream) still growing: not yet stopped."""

    @property
    def shown(self) -> str:
        """What a person sees: the blocks' text (`text` without blocks), one line per text
        object, mrkdwn rendered the way Slack displays it (`shown_mrkdwn`)."""
        if not self.blocks:
            return shown_mrkdwn(self.text)
        return "\n".join(_shown_block_texts(self.blocks))

    @property
    def is_reply(self) -> bool:
        """Whether it is a reply inside a thread (not the thread's parent)."""
        return self.thread_ts is not None and self.thread_ts != self.ts

    def to_slack(self) -> JsonObject:
        """The message object as Slack returns it (chat.postMessage's and an action's `message`)."""
        out: JsonObject = {"type": "message", "text": self.text, "user": self.user, "ts": self.ts}
        if self.subtype:
            out["subtype"] = self.subtype
        if self.bot_id:
            out.update(bot_id=self.bot_id, app_id=API_APP_ID)
        out["team"] = TEAM_ID
        if self.blocks is not None:
            out["blocks"] = self.blocks
        if self.files:
            out.update(files=list(self.files), upload=True, display_as_bot=False)
        if self.thread_ts is not None:
            out["thread_ts"] = self.thread_ts
            if self.is_reply:
                out["parent_user_id"] = BOT_USER_ID
        if self.edits:
            out["edited"] = {"user": self.user, "ts": self.ts}
        return out


@dataclass(frozen=True)
class UploadedFile:
    """A file the bot uploaded with files_upload_v2 and shared (files.completeUploadExternal)."""

    id: str
    name: str
    title: str
    content: bytes
    channel: str | None
    thread_ts: str | None
    initial_comment: str | None
    channels: tuple[str, ...] = ()


@dataclass
class _File:
    id: str
    name: str
    user: str
    created: int
    content: bytes | None = None
    title: str = ""
    filetype: str = "binary"
    mimetype: str = "application/octet-stream"
    completed: bool = False
    length: int | None = None
    # Where it was shared: (channel, message ts, thread_ts)
    shares: list[tuple[str, str, str | None]] = field(default_factory=list)
    initial_comment: str | None = None


@dataclass
class _Fault:
    kind: str  # "rate_limit" or "fail"
    remaining: int
    error: str = ""
    status: int = 200
    retry_after: int = 1


class SlackError(Exception):
    """A Web API method's `{"ok": false, "error": ...}` answer, raised inside the fake."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


# --- How Slack displays text ---------------------------------------------------------------

_CONTROL = re.compile(r"<([^<>]+)>")


def _shown_control(match: re.Match[str]) -> str:
    # <@U1> and <@U1|name>, <#C1|name>, <!here>, <!subteam^S1|@team>, <url|label> and <url>.
    target, _, label = match.group(1).partition("|")
    if target[:1] in ("@", "#"):
        return target[0] + (label or target[1:])
    if target.startswith("!"):
        return label or "@" + target[1:].split("^")[0]
    return label or target


def shown_mrkdwn(text: str) -> str:
    """mrkdwn as Slack displays it: `<...>` mentions and links as their names, entities decoded.

    A raw `<...>` is read as markup here as in Slack: text that should have been escaped and
    was not does not come out as typed.
    """
    text = _CONTROL.sub(_shown_control, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _shown_text_object(obj: Any) -> str:
    if not isinstance(obj, dict):
        return ""
    obj = cast(JsonObject, obj)
    text = str(obj.get("text") or "")
    return shown_mrkdwn(text) if obj.get("type") == "mrkdwn" else text


def _shown_rich_text(element: Any) -> str:
    # rich_text (what people's messages carry): raw text, links, mentions, nested sections.
    if not isinstance(element, dict):
        return ""
    element = cast(JsonObject, element)
    kind = element.get("type")
    if kind in ("user", "channel"):
        return ("@" if kind == "user" else "#") + str(element.get(f"{kind}_id", ""))
    if kind == "link":
        return str(element.get("text") or element.get("url") or "")
    if "elements" in element:
        return "".join(_shown_rich_text(e) for e in element["elements"] or [])
    return str(element.get("text") or "")


def _shown_block_texts(blocks: list[JsonObject]) -> list[str]:
    shown: list[str] = []
    for block in blocks:
        if block.get("type") in ("section", "header"):
            shown.append(_shown_text_object(block.get("text")))
        elif block.get("type") == "context":
            shown.extend(_shown_text_object(e) for e in block.get("elements") or [])
        elif block.get("type") == "rich_text":
            shown.append(_shown_rich_text(block))
    return [line for line in shown if line]


# --- The server ----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 drops connections from a burst of client threads, which then
    # wait a second for the SYN retry.
    request_queue_size = 128
    fake: FakeSlack

    def server_activate(self) -> None:
        super().server_activate()
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        self.connections_opened = 0

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
            self.connections_opened += 1
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)

    def drop_connections(self) -> int:
        """Close every open connection (kept-alive idle ones too), as Slack may at any time."""
        with self.connections_lock:
            open_now = list(self.connections)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        return len(open_now)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1: connections stay open between requests, as Slack's do (a client sending
    # `Connection: close`, as urllib does, gets one request a connection); stop() closes them.
    protocol_version = "HTTP/1.1"
    timeout = IDLE_CONNECTION_S
    disable_nagle_algorithm = True  # an answer's headers and body are two writes

    def do_POST(self) -> None:
        cast(_Server, self.server).fake._serve(self)

    def do_GET(self) -> None:
        cast(_Server, self.server).fake._serve(self)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class _Reply:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)
    json: JsonObject | None = None


def _json_reply(
    obj: JsonObject, status: int = 200, headers: dict[str, str] | None = None
) -> _Reply:
    return _Reply(
        status, json.dumps(obj).encode(), "application/json; charset=utf-8", headers or {}, obj
    )


def _token_of(headers: Mapping[str, str], params: Mapping[str, Any]) -> str | None:
    for key, value in headers.items():
        if key.lower() == "authorization" and value.startswith("Bearer "):
            return value.removeprefix("Bearer ").strip() or None
    token = params.get("token")
    return str(token) if token else None


def _basic_auth(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """`Authorization: Basic base64(id:secret)`, as slack_sdk sends the app's credentials."""
    for key, value in headers.items():
        if key.lower() == "authorization" and value.startswith("Basic "):
            try:
                decoded = base64.b64decode(value.removeprefix("Basic ").strip()).decode()
            except (ValueError, UnicodeDecodeError):
                return None
            client_id, _, secret = decoded.partition(":")
            return client_id, secret
    return None


def _is_true(value: Any) -> bool:
    return value is True or str(value).lower() in ("1", "true")


def _decoded(value: Any, error: str = "invalid_arguments") -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as bad:
            raise SlackError(error, detail=str(bad)) from bad
    return value


def _multipart(content_type: str, body: bytes) -> list[tuple[str, str | None, bytes]]:
    """(field name, filename, bytes) of each part of a multipart/form-data body."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    parts: list[tuple[str, str | None, bytes]] = []
    for part in message.iter_parts() if message.is_multipart() else []:
        payload = part.get_payload(decode=True)
        name = part.get_param("name", header="content-disposition")
        parts.append(
            (str(name or ""), part.get_filename(), payload if isinstance(payload, bytes) else b"")
        )
    return parts


class FakeSlack:
    """A Slack Web API on 127.0.0.1 that records every call and keeps each channel's messages."""

    def __init__(
        self,
        *,
        team_id: str = TEAM_ID,
        bot_user_id: str = BOT_USER_ID,
        bot_id: str = BOT_ID,
        bot_token: str = BOT_TOKEN,
    ) -> None:
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_token = bot_token
        first = Install(team_id, bot_token, bot_user_id, bot_id)
        self._installs: dict[str, Install] = {bot_token: first}
        """Every bot token Slack issued and still honours, with its workspace."""
        self._channel_teams: dict[str, str] = {}
        """Channels of workspaces other than the first (any other channel is the first's)."""
        self._caller = first
        """Whose token the call being answered carries (set with the lock held)."""
        self._app_credentials: tuple[str, str] | None = None
        self._grants: dict[str, _Grant] = {}
        self._revoked: set[str] = set()
        self._changed = threading.Condition(threading.RLock())
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._calls: list[Call] = []
        self._version = 0  # bumped on every change, so wait_for misses none
        self._messages: dict[tuple[str, str], Message] = {}
        self._files: dict[str, _File] = {}
        self._home_views: dict[str, JsonObject] = {}
        self._triggers: dict[str, _Trigger] = {}
        self._modals: dict[str, JsonObject] = {}
        self._faults: dict[str, list[_Fault]] = {}
        self._delays: dict[str, float] = {}
        self._watchers: list[Callable[[Call], None]] = []
        self._held: set[str] = set()
        self._holding: dict[str, int] = {}
        self._users: dict[str, JsonObject] = {}
        """Members that users.info knows (add_user), by id."""
        self._statuses: dict[tuple[str, str], list[str]] = {}
        """Each thread's statuses as they were shown, in order ("" where it was cleared)."""
        self._titles: dict[tuple[str, str], str] = {}
        self._prompts: dict[tuple[str, str], JsonObject] = {}
        self._chunks: dict[tuple[str, str], list[str]] = {}
        """Each streamed message's markdown as it arrived, one entry a call that brought some."""
        self._methods: dict[str, Callable[[JsonObject], JsonObject]] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "conversations.replies": self._conversations_replies,
            "views.publish": self._views_publish,
            "views.open": self._views_open,
            "files.getUploadURLExternal": self._files_get_upload_url_external,
            "files.completeUploadExternal": self._files_complete_upload_external,
            "files.info": self._files_info,
            "users.info": self._users_info,
            "assistant.threads.setStatus": self._assistant_threads_set_status,
            "assistant.threads.setTitle": self._assistant_threads_set_title,
            "assistant.threads.setSuggestedPrompts": self._assistant_threads_set_suggested_prompts,
            "chat.startStream": self._chat_start_stream,
            "chat.appendStream": self._chat_append_stream,
            "chat.stopStream": self._chat_stop_stream,
        }

    def _notify(self) -> None:
        # Called with the lock held.
        self._version += 1
        self._changed.notify_all()

    # --- lifecycle ---

    def start(self) -> FakeSlack:
        """Listen on a free loopback port, serving from a daemon thread."""
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.02,), name="fake-slack", daemon=True
        )
        self._thread.start()
        return self

    def drop_connections(self) -> int:
        """Close every open connection now (idle kept-alive ones too), as Slack's servers may
        at any time; how many there were."""
        return self._server.drop_connections() if self._server is not None else 0

    @property
    def connections_opened(self) -> int:
        """Connections clients opened to this fake since it started."""
        return self._server.connections_opened if self._server is not None else 0

    def stop(self) -> None:
        """Stop listening and close every connection; what was recorded stays readable."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server.drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        """`http://127.0.0.1:PORT`, no trailing slash."""
        if self._server is None:
            raise RuntimeError("FakeSlack is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        """The Web API base for `WebClient(base_url=...)`; it ends with "/" as slack_sdk needs."""
        return f"{self.root_url}/api/"

    # --- faults ---

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` calls of `method` answer HTTP 429 with `Retry-After: retry_after`.

        slack_sdk's RateLimitErrorRetryHandler sleeps `int(Retry-After) + random()` seconds, so
        `retry_after=0` keeps a test under a second.
        """
        with self._changed:
            self._faults.setdefault(method, []).append(
                _Fault(
                    "rate_limit", times, error="ratelimited", status=429, retry_after=retry_after
                )
            )

    def fail(
        self, method: str, error: str = "internal_error", times: int = 1, *, status: int = 200
    ) -> None:
        """The next `times` calls of `method` answer `{"ok": false, "error": error}`, `status`."""
        with self._changed:
            self._faults.setdefault(method, []).append(
                _Fault("fail", times, error=error, status=status)
            )

    def delay(self, method: str, seconds: float) -> None:
        """Every call of `method` waits `seconds` before it is handled (0 removes the delay)."""
        with self._changed:
            if seconds > 0:
                self._delays[method] = seconds
            else:
                self._delays.pop(method, None)

    def hold(self, method: str) -> None:
        """Calls of `method` wait, unanswered and not yet carried out, until `release(method)`
        (a caller killed meanwhile leaves Slack to do them all the same)."""
        with self._changed:
            self._held.add(method)

    def release(self, method: str) -> None:
        """Carry out and answer the held calls of `method`, and stop holding new ones."""
        with self._changed:
            self._held.discard(method)
            self._notify()

    def holding(self, method: str) -> int:
        """How many calls of `method` wait in `hold` now."""
        with self._changed:
            return self._holding.get(method, 0)

    def holds_any(self) -> bool:
        """Is some method held (`hold`, not released yet)?"""
        with self._changed:
            return bool(self._held)

    # --- reading what happened ---

    def calls(self, method: str | None = None) -> list[Call]:
        """Every call received so far, oldest first; only `method`'s when given."""
        with self._changed:
            return [c for c in self._calls if method is None or c.method == method]

    def messages(self, channel: str) -> list[Message]:
        """Every visible message in `channel` (thread replies included), in `ts` order."""
        with self._changed:
            found = [
                m
                for m in self._messages.values()
                if m.channel == channel and m.ephemeral_to is None
            ]
        return sorted(found, key=lambda m: ts_key(m.ts))

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The thread's parent (if known) and its replies, shared files included, in `ts` order."""
        return [m for m in self.messages(channel) if thread_ts in (m.ts, m.thread_ts)]

    def message(self, channel: str, ts: str) -> Message | None:
        """One message by its `ts`, as it reads now."""
        with self._changed:
            return self._messages.get((channel, ts))

    def ephemerals(self, channel: str | None = None) -> list[Message]:
        """Messages posted with chat.postEphemeral (seen by one user; never in `thread`)."""
        with self._changed:
            found = [
                m
                for m in self._messages.values()
                if m.ephemeral_to is not None and channel in (None, m.channel)
            ]
        return sorted(found, key=lambda m: ts_key(m.ts))

    def statuses(self, channel: str, thread_ts: str) -> list[str]:
        """The thread's status line as it went: each status set, and "" each time it was cleared
        (set to "", or by the app's reply in the thread, as Slack clears it)."""
        with self._changed:
            return list(self._statuses.get((channel, thread_ts), []))

    def status(self, channel: str, thread_ts: str) -> str:
        """The status the thread shows now ("": none)."""
        shown = self.statuses(channel, thread_ts)
        return shown[-1] if shown else ""

    def title(self, channel: str, thread_ts: str) -> str | None:
        """The thread's title (assistant.threads.setTitle), None when never set."""
        with self._changed:
            return self._titles.get((channel, thread_ts))

    def stream_chunks(self, channel: str, ts: str) -> list[str]:
        """The markdown a streamed message received, in order: one entry a start, append or
        stop call that brought text (the message shows them joined)."""
        with self._changed:
            return list(self._chunks.get((channel, ts), []))

    def suggested_prompts(self, channel: str, thread_ts: str) -> JsonObject | None:
        """The thread's suggested prompts as set ({"title", "prompts"}), None when never set."""
        with self._changed:
            return self._prompts.get((channel, thread_ts))

    def uploaded_files(self) -> list[UploadedFile]:
        """Files the bot uploaded and shared, in the order they were shared."""
        with self._changed:
            files = [f for f in self._files.values() if f.completed and f.content is not None]
            return [
                UploadedFile(
                    id=f.id,
                    name=f.name,
                    title=f.title,
                    content=f.content or b"",
                    channel=f.shares[0][0] if f.shares else None,
                    thread_ts=f.shares[0][2] if f.shares else None,
                    initial_comment=f.initial_comment,
                    channels=tuple(s[0] for s in f.shares),
                )
                for f in files
            ]

    def home_view(self, user_id: str) -> JsonObject | None:
        """The view last published to `user_id`'s Home tab."""
        with self._changed:
            return self._home_views.get(user_id)

    def issue_trigger(self, user_id: str = USER_ID) -> str:
        """A trigger_id for an interaction of `user_id` (a click, a command), as Slack sends it
        with the payload: it opens one view, within TRIGGER_TTL_S."""
        trigger_id = slack_requests.new_trigger_id()
        with self._changed:
            self._triggers[trigger_id] = _Trigger(user_id, time.monotonic())
        return trigger_id

    def expire_trigger(self, trigger_id: str) -> None:
        """Let `trigger_id` run out now (what a slow bot meets after 3 seconds)."""
        with self._changed:
            trigger = self._triggers[trigger_id]
            trigger.issued_at -= TRIGGER_TTL_S + 1

    def modals(self, user_id: str | None = None) -> list[JsonObject]:
        """The modals views.open opened (for `user_id`'s triggers), oldest first."""
        with self._changed:
            return [
                view
                for view in self._modals.values()
                if user_id is None or view["_user"] == user_id
            ]

    def responses(self) -> list[JsonObject]:
        """Payloads POSTed to response URLs from `response_url()`, oldest first."""
        return [dict(c.params) for c in self.calls("response_url")]

    def watch(self, watcher: Callable[[Call], None]) -> None:
        """Call `watcher(call)` on every call as it is recorded (under the fake's lock: keep it
        short). For many waiters at once, where `wait_for`'s re-scans would add up."""
        with self._changed:
            self._watchers.append(watcher)

    def wait_for(self, predicate: Callable[[FakeSlack], bool], timeout: float = 10.0) -> None:
        """Block until `predicate(self)` holds, re-checked on every call; TimeoutError after
        `timeout`.

        The predicate runs without the server's lock held, so it may do anything, even call
        the fake over HTTP.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                version = self._version
            if predicate(self):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                recent = ", ".join(f"{c.method}:{c.status}" for c in self.calls()[-10:])
                raise TimeoutError(f"condition not met in {timeout} s; last calls: [{recent}]")
            with self._changed:
                if self._version == version:
                    # The cap also catches conditions that change without a call.
                    self._changed.wait(min(remaining, 0.05))

    def reset(self) -> None:
        """Forget calls, messages, files, views and faults; keep serving on the same port."""
        with self._changed:
            self._calls.clear()
            self._messages.clear()
            self._files.clear()
            self._home_views.clear()
            self._triggers.clear()
            self._modals.clear()
            self._faults.clear()
            self._delays.clear()
            self._statuses.clear()
            self._titles.clear()
            self._prompts.clear()
            self._notify()

    # --- things that come from people, not the bot ---

    def add_user_file(
        self,
        name: str,
        content: bytes,
        *,
        filetype: str | None = None,
        user: str = USER_ID,
        title: str | None = None,
    ) -> JsonObject:
        """Store a file a person uploaded; returns its Slack file object (as in a file_share event).

        Its `url_private` is served here: the bytes with the bot token as bearer, Slack's HTML
        login page without it.
        """
        with self._changed:
            file = self._new_file(name, user=user, filetype=filetype)
            file.content = content
            file.length = len(content)
            file.title = title or name
            file.completed = True
            return self._file_object(file)

    def post_as_user(
        self,
        channel: str,
        text: str,
        *,
        user: str = USER_ID,
        thread_ts: str | None = None,
        files: Iterable[Mapping[str, Any]] = (),
        channel_type: str = "channel",
        typed: bool = True,
    ) -> JsonObject:
        """Put a person's message into `channel` (or a thread) and return its message event.

        Dispatch the event with `slack_requests.event_callback(...)`; `thread()` then reads as the
        whole conversation, people's messages included. `text` is what they typed: the message
        keeps it as Slack does, escaped and linked (`slack_requests.slack_text`), unless `typed`
        is False.
        """
        shared = [dict(f) for f in files]
        if shared:
            event = slack_requests.file_share_event(
                shared,
                text=text,
                channel=channel,
                user=user,
                thread_ts=thread_ts,
                channel_type=channel_type,
                typed=typed,
            )
        else:
            event = slack_requests.message_event(
                text,
                channel=channel,
                user=user,
                thread_ts=thread_ts,
                channel_type=channel_type,
                typed=typed,
            )
        message = Message(
            channel=channel,
            ts=event["ts"],
            text=event["text"],
            user=user,
            blocks=event.get("blocks"),
            thread_ts=thread_ts,
            files=tuple(shared),
            subtype=event.get("subtype"),
        )
        with self._changed:
            self._messages[(channel, message.ts)] = message
            self._notify()
        return event

    def response_url(self) -> str:
        """A fresh response_url served here, for slash commands and actions; see `responses()`."""
        return f"{self.root_url}/response/{next(self._ids)}"

    # --- HTTP plumbing ---

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        url = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items()}
        content_type = handler.headers.get("Content-Type", "")
        path = unquote(url.path)

        malformed = False
        if path.startswith("/api/"):
            method = path.removeprefix("/api/")
            try:
                params = self._params(url.query, content_type, body)
            except (ValueError, UnicodeDecodeError):
                params, malformed = {}, True
        elif path.startswith("/upload/"):
            method = "upload"
            params = {"file_id": path.removeprefix("/upload/"), "size": len(body)}
        elif path.startswith("/files-pri/"):
            method = "files-pri"
            params = {"path": path}
        elif path.startswith("/response/"):
            method = "response_url"
            try:
                params = self._params(url.query, content_type, body)
            except (ValueError, UnicodeDecodeError):
                params, malformed = {}, True
        else:
            method = path
            params = {}

        with self._changed:
            pause = self._delays.get(method, 0.0)
            if method in self._held:
                self._holding[method] = self._holding.get(method, 0) + 1
                self._notify()
                self._changed.wait_for(lambda: method not in self._held)
                self._holding[method] -= 1
        if pause:
            time.sleep(pause)

        with self._changed:
            reply = self._fault_reply(method)
            if reply is None and malformed:
                reply = _json_reply({"ok": False, "error": "invalid_json"})
            if reply is None:
                try:
                    reply = self._route(path, method, params, headers, content_type, body)
                except Exception as error:  # a bug in the fake must not hang the client
                    reply = _json_reply(
                        {"ok": False, "error": "fatal_error", "detail": repr(error)}, 500
                    )
            call = Call(method, params, headers, arrived, reply.status, reply.json)
            self._calls.append(call)
            self._notify()
            for watcher in self._watchers:
                watcher(call)

        handler.send_response(reply.status)
        handler.send_header("Content-Type", reply.content_type)
        handler.send_header("Content-Length", str(len(reply.body)))
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(reply.body)

    def _route(
        self,
        path: str,
        method: str,
        params: JsonObject,
        headers: Mapping[str, str],
        content_type: str,
        body: bytes,
    ) -> _Reply:
        if path.startswith("/api/"):
            return self._api(method, params, headers)
        if method == "upload":
            return self._upload(str(params["file_id"]), content_type, body)
        if method == "files-pri":
            return self._download(path, headers)
        if method == "response_url":
            return _Reply(200, b"ok", "text/html")
        return _Reply(404, b"Not Found", "text/plain")

    @staticmethod
    def _params(query: str, content_type: str, body: bytes) -> JsonObject:
        params: JsonObject = dict(parse_qsl(query, keep_blank_values=True))
        if not body:
            return params
        if content_type.startswith("application/json"):
            decoded = json.loads(body)
            if isinstance(decoded, dict):
                params.update(cast(JsonObject, decoded))
        elif content_type.startswith("multipart/form-data"):
            for name, filename, data in _multipart(content_type, body):
                params[name] = data if filename is not None else data.decode()
        else:
            params.update(parse_qsl(body.decode(), keep_blank_values=True))
        return params

    def _fault_reply(self, method: str) -> _Reply | None:
        queue = self._faults.get(method)
        if not queue:
            return None
        fault = queue[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.pop(0)
        headers = {"Retry-After": str(fault.retry_after)} if fault.kind == "rate_limit" else {}
        return _json_reply({"ok": False, "error": fault.error}, fault.status, headers)

    def _api(self, method: str, params: JsonObject, headers: Mapping[str, str]) -> _Reply:
        if method == "oauth.v2.access":  # the app's credentials, not a token
            try:
                return _json_reply({"ok": True, **self._oauth_v2_access(params, headers)})
            except SlackError as error:
                return _json_reply({"ok": False, "error": error.error, **error.extra})
        handle = self._methods.get(method)
        if handle is None:
            return _json_reply({"ok": False, "error": "unknown_method", "req_method": method}, 404)
        token = _token_of(headers, params)
        if token is None:
            return _json_reply({"ok": False, "error": "not_authed"})
        caller = self._installs.get(token)
        if caller is None:
            revoked = token in self._revoked
            return _json_reply(
                {"ok": False, "error": "token_revoked" if revoked else "invalid_auth"}
            )
        self._caller = caller
        try:
            for name in ("channel", "channel_id"):
                channel = params.get(name)
                if channel and self.team_of(str(channel)) != caller.team_id:
                    raise SlackError("channel_not_found")
            answer = handle(params)
        except SlackError as error:
            return _json_reply({"ok": False, "error": error.error, **error.extra})
        extra = {
            "X-OAuth-Scopes": ",".join(caller.scopes)
            or "chat:write,commands,files:read,files:write"
        }
        return _json_reply({"ok": True, **answer}, headers=extra)

    # --- workspaces and OAuth ---

    def add_workspace(
        self,
        team_id: str,
        channels: Iterable[str],
        *,
        bot_token: str | None = None,
        enterprise_id: str | None = None,
    ) -> Install | None:
        """Another workspace with these `channels`; with `bot_token`, the app is installed there
        already (else install it through OAuth: `authorize`)."""
        with self._changed:
            for channel in channels:
                self._channel_teams[channel] = team_id
            if bot_token is None:
                return None
            install = Install(
                team_id,
                bot_token,
                f"U{team_id}BOT",
                f"B{team_id}BOT",
                enterprise_id=enterprise_id,
            )
            self._installs[bot_token] = install
            return install

    def add_user(
        self,
        user_id: str,
        *,
        team_id: str | None = None,
        is_admin: bool = False,
        is_owner: bool = False,
        is_primary_owner: bool = False,
        is_restricted: bool = False,
        deleted: bool = False,
    ) -> None:
        """A member of `team_id` (default: the first workspace) as users.info describes them:
        an admin, an owner, a guest (`is_restricted`), deactivated (`deleted`)."""
        with self._changed:
            self._users[user_id] = {
                "id": user_id,
                "team_id": team_id or self.team_id,
                "name": user_id.lower(),
                "deleted": deleted,
                "real_name": f"User {user_id}",
                "tz": "Europe/Paris",
                "profile": {"real_name": f"User {user_id}", "display_name": user_id.lower()},
                "is_admin": is_admin,
                "is_owner": is_owner,
                "is_primary_owner": is_primary_owner,
                "is_restricted": is_restricted,
                "is_ultra_restricted": False,
                "is_bot": False,
                "is_app_user": False,
                "updated": 1_700_000_000,
            }

    def team_of(self, channel: str) -> str:
        """The workspace a channel belongs to."""
        return self._channel_teams.get(channel, self.team_id)

    def oauth_app(self, client_id: str, client_secret: str) -> None:
        """The app's OAuth credentials, which `oauth.v2.access` checks."""
        with self._changed:
            self._app_credentials = (client_id, client_secret)

    def authorize(
        self,
        team_id: str,
        *,
        scopes: Iterable[str],
        user_id: str = USER_ID,
        team_name: str | None = None,
        enterprise_id: str | None = None,
        enterprise_name: str | None = None,
        redirect_uri: str | None = None,
    ) -> str:
        """A person in `team_id` approved the install on slack.com: the code Slack appends to
        the app's redirect URL. The bot token is the workspace's existing one, if it has one."""
        with self._changed:
            existing = next((i for i in self._installs.values() if i.team_id == team_id), None)
            serial = next(self._ids)
            install = Install(
                team_id,
                existing.bot_token if existing else f"xoxb-{team_id}-{serial}-fake",
                existing.bot_user_id if existing else f"U{team_id}BOT",
                existing.bot_id if existing else f"B{team_id}BOT",
                team_name=team_name or f"Workspace {team_id}",
                enterprise_id=enterprise_id,
                enterprise_name=enterprise_name,
                scopes=tuple(scopes),
                authed_user=user_id,
            )
            code = f"{serial}.{time.time_ns()}.fakecode"
            self._grants[code] = _Grant(install, redirect_uri)
            return code

    def uninstall(self, team_id: str) -> None:
        """The app was removed from `team_id`: its bot token stops working (`token_revoked`)."""
        with self._changed:
            for token, install in list(self._installs.items()):
                if install.team_id == team_id:
                    del self._installs[token]
                    self._revoked.add(token)
            self._notify()

    def installs(self) -> list[Install]:
        """The workspaces whose bot tokens are honoured."""
        with self._changed:
            return list(self._installs.values())

    def _oauth_v2_access(self, params: JsonObject, headers: Mapping[str, str]) -> JsonObject:
        """Trade an install's code for its bot token (https://docs.slack.dev/reference/methods/
        oauth.v2.access): the app's credentials by HTTP Basic auth or as parameters, each code
        once, the redirect_uri the same as on the authorize link."""
        client_id, client_secret = _basic_auth(headers) or (
            str(params.get("client_id") or ""),
            str(params.get("client_secret") or ""),
        )
        if self._app_credentials is None or client_id != self._app_credentials[0]:
            raise SlackError("invalid_client_id")
        if client_secret != self._app_credentials[1]:
            raise SlackError("bad_client_secret")
        code = str(params.get("code") or "")
        if params.get("grant_type") not in (None, "", "authorization_code"):
            raise SlackError("invalid_grant_type")
        grant = self._grants.get(code)
        if grant is None:
            raise SlackError("invalid_code")
        if grant.used:
            raise SlackError("code_already_used")
        if grant.redirect_uri is not None and params.get("redirect_uri") != grant.redirect_uri:
            raise SlackError("bad_redirect_uri")
        grant.used = True
        install = grant.install
        self._installs[install.bot_token] = install
        self._revoked.discard(install.bot_token)
        answer: JsonObject = {
            "access_token": install.bot_token,
            "token_type": "bot",
            "scope": ",".join(install.scopes),
            "bot_user_id": install.bot_user_id,
            "app_id": API_APP_ID,
            "team": {"name": install.team_name, "id": install.team_id},
            "enterprise": (
                {"name": install.enterprise_name, "id": install.enterprise_id}
                if install.enterprise_id
                else None
            ),
            "authed_user": {"id": install.authed_user},
            "is_enterprise_install": install.is_enterprise_install,
        }
        return answer

    # --- Web API methods (called with the lock held) ---

    def _auth_test(self, params: JsonObject) -> JsonObject:
        caller = self._caller
        answer: JsonObject = {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": caller.team_name,
            "user": "artbot",
            "team_id": caller.team_id,
            "user_id": caller.bot_user_id,
            "bot_id": caller.bot_id,
            "is_enterprise_install": caller.is_enterprise_install,
        }
        if caller.enterprise_id:
            answer["enterprise_id"] = caller.enterprise_id
        return answer

    def _store(self, message: Message) -> Message:
        self._messages[(message.channel, message.ts)] = message
        return message

    def _text_and_blocks(
        self, params: JsonObject, *, required: bool
    ) -> tuple[str, list[JsonObject] | None]:
        blocks = (
            _decoded(params["blocks"], "invalid_blocks_format")
            if params.get("blocks") not in (None, "")
            else None
        )
        text = str(params.get("text") or "")
        if required and not text and not blocks and not params.get("attachments"):
            raise SlackError("no_text")
        if blocks is not None:
            errors = block_errors(blocks, max_blocks=MAX_MESSAGE_BLOCKS)
            if errors:
                raise SlackError(
                    "invalid_blocks", errors=errors, response_metadata={"messages": errors}
                )
        return text[:MAX_TEXT], blocks

    def _chat_post_message(self, params: JsonObject) -> JsonObject:
        channel = str(params.get("channel") or "")
        if not channel:
            raise SlackError("channel_not_found")
        text, blocks = self._text_and_blocks(params, required=True)
        thread_ts = str(params["thread_ts"]) if params.get("thread_ts") else None
        metadata = self._metadata(params.get("metadata"))
        message = self._store(
            Message(
                channel=channel,
                ts=next_ts(),
                text=text,
                user=self._caller.bot_user_id,
                blocks=blocks,
                thread_ts=thread_ts,
                bot_id=self._caller.bot_id,
                reply_broadcast=_is_true(params.get("reply_broadcast")),
                metadata=metadata,
            )
        )
        if thread_ts is not None:
            self._clear_status(channel, thread_ts)  # the app replied: Slack clears its status
        return {"channel": channel, "ts": message.ts, "message": message.to_slack()}

    # --- agent threads (https://docs.slack.dev/reference/methods/assistant.threads.setStatus) ---

    def _assistant_thread(self, params: JsonObject, *, dm_only: bool) -> tuple[str, str]:
        """The (channel_id, thread_ts) a method names: both required, the thread's root a message
        of that channel (else `invalid_thread_ts`, as Slack answers "Thread not found"). Titles
        and suggested prompts exist only in the app's DMs (the agent view); a status may be set
        in any thread (chat:write since 2026-03)."""
        channel, thread_ts = str(params.get("channel_id") or ""), str(params.get("thread_ts") or "")
        if not channel:
            raise SlackError("channel_not_found")
        root = self._messages.get((channel, thread_ts)) if thread_ts else None
        if root is None or root.ephemeral_to is not None or root.is_reply:
            raise SlackError("invalid_thread_ts")
        if dm_only and not channel.startswith("D"):
            raise SlackError("method_not_supported_for_channel_type")
        return channel, thread_ts

    def _clear_status(self, channel: str, thread_ts: str) -> None:
        shown = self._statuses.get((channel, thread_ts))
        if shown and shown[-1]:
            shown.append("")

    def _assistant_threads_set_status(self, params: JsonObject) -> JsonObject:
        """`status` is required ("" clears it); at most MAX_LOADING_MESSAGES loading messages."""
        key = self._assistant_thread(params, dm_only=False)
        if "status" not in params or not isinstance(params["status"], str):
            raise SlackError("invalid_arguments")
        loading = params.get("loading_messages")
        if loading not in (None, ""):
            messages = _decoded(loading) if isinstance(loading, str) else loading
            if (
                not isinstance(messages, list)
                or len(messages) > MAX_LOADING_MESSAGES
                or not all(isinstance(m, str) for m in messages)
            ):
                raise SlackError("invalid_arguments")
        status = str(params["status"])
        shown = self._statuses.setdefault(key, [])
        if status or (shown and shown[-1]):
            shown.append(status)
        return {}

    def _assistant_threads_set_title(self, params: JsonObject) -> JsonObject:
        key = self._assistant_thread(params, dm_only=True)
        title = params.get("title")
        if not isinstance(title, str) or not title.strip():
            raise SlackError("invalid_arguments")
        self._titles[key] = title
        return {}

    def _assistant_threads_set_suggested_prompts(self, params: JsonObject) -> JsonObject:
        """One to MAX_SUGGESTED_PROMPTS prompts, each a `title` and a `message`; an optional
        `title` over them."""
        key = self._assistant_thread(params, dm_only=True)
        raw = params.get("prompts")
        prompts = _decoded(raw) if isinstance(raw, str) else raw
        if (
            not isinstance(prompts, list)
            or not 1 <= len(prompts) <= MAX_SUGGESTED_PROMPTS
            or not all(
                isinstance(p, dict)
                and isinstance(p.get("title"), str)
                and p["title"]
                and isinstance(p.get("message"), str)
                and p["message"]
                for p in prompts
            )
        ):
            raise SlackError("invalid_arguments")
        title = params.get("title")
        self._prompts[key] = {
            "title": title if isinstance(title, str) else None,
            "prompts": prompts,
        }
        return {}

    # --- streamed messages (https://docs.slack.dev/reference/methods/chat.startStream) ---

    @staticmethod
    def _stream_text(params: JsonObject, *, required: bool) -> str:
        """The markdown a stream call brings: `markdown_text`, or the `markdown_text` chunks of
        `chunks` (slack_sdk's ChatStream sends those); at most MAX_STREAM_TEXT characters
        (`msg_too_long`). Appending needs some (`invalid_arguments` without)."""
        raw_chunks = params.get("chunks")
        if raw_chunks not in (None, ""):
            chunks = (
                _decoded(raw_chunks, "invalid_chunks")
                if isinstance(raw_chunks, str)
                else raw_chunks
            )
            if not isinstance(chunks, list) or not all(
                isinstance(c, dict)
                and c.get("type") == "markdown_text"
                and isinstance(c.get("text"), str)
                for c in chunks
            ):
                raise SlackError("invalid_chunks")
            text = "".join(str(c["text"]) for c in chunks)
        else:
            text = params.get("markdown_text")
            if text is not None and not isinstance(text, str):
                raise SlackError("invalid_arguments")
            text = text or ""
        if required and not text:
            raise SlackError("invalid_arguments")
        if len(text) > MAX_STREAM_TEXT:
            raise SlackError("msg_too_long")
        return text

    def _stream_message(self, params: JsonObject) -> Message:
        """The streamed message a call names by `channel` and `ts`: the app's own, still
        streaming (`message_not_in_streaming_state` once stopped, or for an ordinary message)."""
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if not channel:
            raise SlackError("channel_not_found")
        if not ts:
            raise SlackError("invalid_arguments")
        message = self._messages.get((channel, ts))
        if message is None or message.ephemeral_to is not None:
            raise SlackError("message_not_found")
        if message.user != self._caller.bot_user_id:
            raise SlackError("message_not_owned_by_app")
        if not message.streaming:
            raise SlackError("message_not_in_streaming_state")
        return message

    def _grow(self, message: Message, text: str, **changes: Any) -> Message:
        if text:
            self._chunks.setdefault((message.channel, message.ts), []).append(text)
        return self._store(dataclasses.replace(message, text=message.text + text, **changes))

    def _chat_start_stream(self, params: JsonObject) -> JsonObject:
        """A new message in a thread that grows with each append until it is stopped. Outside
        the app's DMs the recipient is required: `recipient_user_id` and `recipient_team_id`
        (`missing_recipient_user_id` / `missing_recipient_team_id`)."""
        channel = str(params.get("channel") or "")
        if not channel:
            raise SlackError("channel_not_found")
        thread_ts = str(params.get("thread_ts") or "")
        root = self._messages.get((channel, thread_ts)) if thread_ts else None
        if root is None or root.ephemeral_to is not None or root.is_reply:
            raise SlackError("invalid_thread_ts" if thread_ts else "invalid_arguments")
        if not channel.startswith("D"):
            if not params.get("recipient_user_id"):
                raise SlackError("missing_recipient_user_id")
            if not params.get("recipient_team_id"):
                raise SlackError("missing_recipient_team_id")
        text = self._stream_text(params, required=False)
        message = self._store(
            Message(
                channel=channel,
                ts=next_ts(),
                text="",
                user=self._caller.bot_user_id,
                thread_ts=thread_ts,
                bot_id=self._caller.bot_id,
                streaming=True,
            )
        )
        self._grow(message, text)
        self._clear_status(channel, thread_ts)  # the app replied: Slack clears its status
        return {"channel": channel, "ts": message.ts}

    def _chat_append_stream(self, params: JsonObject) -> JsonObject:
        message = self._stream_message(params)
        self._grow(message, self._stream_text(params, required=True))
        return {"channel": message.channel, "ts": message.ts}

    def _chat_stop_stream(self, params: JsonObject) -> JsonObject:
        """The stream ends: the message keeps what it received, with an optional last
        `markdown_text` and `blocks` (shown under it: feedback buttons) and `metadata`."""
        message = self._stream_message(params)
        text = self._stream_text(params, required=False)
        _, blocks = self._text_and_blocks(params, required=False)
        metadata = self._metadata(params.get("metadata"))
        stopped = self._grow(message, text, streaming=False, blocks=blocks, metadata=metadata)
        return {"channel": stopped.channel, "ts": stopped.ts, "message": stopped.to_slack()}

    @staticmethod
    def _metadata(value: Any) -> JsonObject | None:
        """chat.postMessage's `metadata`: an object (or its JSON) with a string `event_type`
        and an object `event_payload`."""
        if value in (None, ""):
            return None
        metadata = _decoded(value, "invalid_metadata_format") if isinstance(value, str) else value
        if not isinstance(metadata, dict):
            raise SlackError("invalid_metadata_format")
        metadata = cast(JsonObject, metadata)
        if not isinstance(metadata.get("event_type"), str) or not isinstance(
            metadata.get("event_payload"), dict
        ):
            raise SlackError("invalid_metadata_schema")
        return {"event_type": metadata["event_type"], "event_payload": metadata["event_payload"]}

    def _conversations_replies(self, params: JsonObject) -> JsonObject:
        """A thread: its parent, then its replies, oldest first, `limit` (at most 1,000) a
        page; message metadata only with `include_all_metadata`."""
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if not channel:
            raise SlackError("channel_not_found")
        if not ts:
            raise SlackError("invalid_arguments")
        if (channel, ts) not in self._messages:
            raise SlackError("thread_not_found")
        thread = sorted(
            (
                m
                for m in self._messages.values()
                if m.channel == channel and m.ephemeral_to is None and ts in (m.ts, m.thread_ts)
            ),
            key=lambda m: ts_key(m.ts),
        )
        limit = min(int(params.get("limit") or 1000), 1000)
        cursor = str(params.get("cursor") or "")
        start = int(cursor.removeprefix("next:")) if cursor.startswith("next:") else 0
        page = thread[start : start + limit]
        with_metadata = _is_true(params.get("include_all_metadata"))
        messages: list[JsonObject] = []
        for message in page:
            shown = message.to_slack()
            if with_metadata and message.metadata is not None:
                shown["metadata"] = message.metadata
            messages.append(shown)
        more = start + limit < len(thread)
        return {
            "messages": messages,
            "has_more": more,
            "response_metadata": {"next_cursor": f"next:{start + limit}" if more else ""},
        }

    def _chat_update(self, params: JsonObject) -> JsonObject:
        channel, ts = str(params.get("channel") or ""), str(params.get("ts") or "")
        if not channel:
            raise SlackError("channel_not_found")
        old = self._messages.get((channel, ts))
        if old is None or old.ephemeral_to is not None:
            raise SlackError("message_not_found")
        if old.user != self._caller.bot_user_id:
            raise SlackError("cant_update_message")
        text, blocks = self._text_and_blocks(params, required=False)
        message = self._store(
            dataclasses.replace(
                old,
                text=text if "text" in params else old.text,
                blocks=blocks if "blocks" in params else old.blocks,
                edits=old.edits + 1,
            )
        )
        return {"channel": channel, "ts": ts, "text": message.text, "message": message.to_slack()}

    def _chat_post_ephemeral(self, params: JsonObject) -> JsonObject:
        channel, user = str(params.get("channel") or ""), str(params.get("user") or "")
        if not channel:
            raise SlackError("channel_not_found")
        if not user:
            raise SlackError("user_not_in_channel")
        text, blocks = self._text_and_blocks(params, required=True)
        thread_ts = str(params["thread_ts"]) if params.get("thread_ts") else None
        message = self._store(
            Message(
                channel=channel,
                ts=next_ts(),
                text=text,
                user=self._caller.bot_user_id,
                blocks=blocks,
                thread_ts=thread_ts,
                bot_id=self._caller.bot_id,
                ephemeral_to=user,
            )
        )
        return {"message_ts": message.ts}

    def _chat_get_permalink(self, params: JsonObject) -> JsonObject:
        channel, ts = str(params.get("channel") or ""), str(params.get("message_ts") or "")
        message = self._messages.get((channel, ts))
        if message is None or message.ephemeral_to is not None:
            raise SlackError("message_not_found")
        link = f"https://{TEAM_DOMAIN}.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        if message.is_reply:
            link += f"?thread_ts={message.thread_ts}&cid={channel}"
        return {"channel": channel, "permalink": link}

    def _users_info(self, params: JsonObject) -> JsonObject:
        """https://docs.slack.dev/reference/methods/users.info: needs `users:read` (an install
        made without scopes is taken as made from the manifest, which has it); a user the
        token's workspace cannot see is `user_not_found`."""
        scopes = self._caller.scopes
        if scopes and "users:read" not in scopes:
            raise SlackError("missing_scope", needed="users:read", provided=",".join(scopes))
        user = self._users.get(str(params.get("user") or ""))
        if user is None or user["team_id"] != self._caller.team_id:
            raise SlackError("user_not_found")
        return {"user": dict(user)}

    def _views_publish(self, params: JsonObject) -> JsonObject:
        user_id = str(params.get("user_id") or "")
        if not user_id:
            raise SlackError("invalid_arguments")
        view = _decoded(params.get("view"))
        if not isinstance(view, dict) or view.get("type") != "home":
            raise SlackError(
                "invalid_arguments", response_metadata={"messages": ["view.type must be home"]}
            )
        view = cast(JsonObject, view)
        errors = block_errors(view.get("blocks", []), max_blocks=MAX_VIEW_BLOCKS)
        if errors:
            raise SlackError("invalid_arguments", response_metadata={"messages": errors})
        published: JsonObject = {
            "id": f"V{next(self._ids):010d}",
            "team_id": self._caller.team_id,
            "type": "home",
            "blocks": view.get("blocks", []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "external_id": view.get("external_id", ""),
            "state": {"values": {}},
            "hash": f"{time.time():.6f}",
            "app_id": API_APP_ID,
            "bot_id": self._caller.bot_id,
        }
        self._home_views[user_id] = published
        return {"view": published}

    def _views_open(self, params: JsonObject) -> JsonObject:
        trigger_id = str(params.get("trigger_id") or "")
        view = _decoded(params.get("view"))
        if not trigger_id or view is None:
            raise SlackError("invalid_arguments")
        trigger = self._triggers.get(trigger_id)
        if trigger is None:
            raise SlackError("invalid_trigger_id")
        if trigger.used:
            raise SlackError("exchanged_trigger_id")
        if time.monotonic() - trigger.issued_at > TRIGGER_TTL_S:
            raise SlackError("expired_trigger_id")
        if len(json.dumps(view)) > MAX_VIEW_BYTES:
            raise SlackError("view_too_large")
        errors = modal_errors(view)
        if errors:
            raise SlackError("invalid_arguments", response_metadata={"messages": errors})
        view = cast(JsonObject, view)
        trigger.used = True
        view_id = f"V{next(self._ids):010d}"
        opened: JsonObject = {
            "id": view_id,
            "team_id": self._caller.team_id,
            "type": "modal",
            "title": view["title"],
            "submit": view.get("submit"),
            "close": view.get("close"),
            "blocks": view.get("blocks", []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "external_id": view.get("external_id", ""),
            "state": {"values": {}},
            "hash": f"{time.time():.6f}",
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "root_view_id": view_id,
            "previous_view_id": None,
            "app_id": API_APP_ID,
            "bot_id": self._caller.bot_id,
        }
        self._modals[view_id] = {**opened, "_user": trigger.user}
        return {"view": opened}

    def _new_file(self, name: str, *, user: str, filetype: str | None = None) -> _File:
        suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
        file = _File(
            id=f"F{next(self._ids):010d}",
            name=name,
            user=user,
            created=int(time.time()),
            filetype=filetype or _FILETYPES.get(suffix, "binary"),
            mimetype=mimetypes.guess_type(name)[0] or "application/octet-stream",
        )
        self._files[file.id] = file
        return file

    def _file_object(self, file: _File) -> JsonObject:
        private = f"{self.root_url}/files-pri/{self.team_id}-{file.id}/{file.name}"
        public: dict[str, list[JsonObject]] = {}
        for channel, ts, thread_ts in file.shares:
            share: JsonObject = {"ts": ts, "channel_name": channel, "team_id": self.team_id}
            if thread_ts is not None:
                share.update(thread_ts=thread_ts, reply_count=0)
            public.setdefault(channel, []).append(share)
        return {
            "id": file.id,
            "created": file.created,
            "timestamp": file.created,
            "name": file.name,
            "title": file.title or file.name,
            "mimetype": file.mimetype,
            "filetype": file.filetype,
            "pretty_type": file.filetype.capitalize(),
            "user": file.user,
            "user_team": self.team_id,
            "editable": False,
            "size": len(file.content or b""),
            "mode": "hosted",
            "is_external": False,
            "external_type": "",
            "is_public": True,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "url_private": private,
            "url_private_download": (
                f"{self.root_url}/files-pri/{self.team_id}-{file.id}/download/{file.name}"
            ),
            "permalink": f"https://{TEAM_DOMAIN}.slack.com/files/{file.user}/{file.id}/{file.name}",
            "channels": list(public),
            "groups": [],
            "ims": [],
            "shares": {"public": public} if public else {},
            "has_rich_preview": False,
            "file_access": "visible",
        }

    def _files_get_upload_url_external(self, params: JsonObject) -> JsonObject:
        name, length = str(params.get("filename") or ""), str(params.get("length") or "")
        if not name or not length.isdigit():
            raise SlackError("invalid_arguments")
        file = self._new_file(name, user=self._caller.bot_user_id)
        file.length = int(length)
        return {"upload_url": f"{self.root_url}/upload/{file.id}", "file_id": file.id}

    def _upload(self, file_id: str, content_type: str, body: bytes) -> _Reply:
        file = self._files.get(file_id)
        if file is None or file.completed:
            return _Reply(404, b"Not Found", "text/plain")
        content = body
        # slack_sdk POSTs the raw bytes (urllib labels them form-urlencoded); browsers and other
        # clients send multipart/form-data with the bytes in the file part.
        if content_type.startswith("multipart/form-data"):
            parts = _multipart(content_type, body)
            content = next((data for _, filename, data in parts if filename is not None), b"")
        file.content = content
        return _Reply(200, f"OK - {len(content)}".encode(), "text/plain; charset=utf-8")

    def _files_complete_upload_external(self, params: JsonObject) -> JsonObject:
        entries = _decoded(params.get("files"))
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        channels = [c for c in str(params.get("channels") or "").split(",") if c]
        if params.get("channel_id"):
            channels.insert(0, str(params["channel_id"]))
        thread_ts = str(params["thread_ts"]) if params.get("thread_ts") else None
        if thread_ts is not None and len(channels) != 1:
            raise SlackError("invalid_arguments")
        files: list[_File] = []
        for entry in cast(list[Any], entries):
            file = self._files.get(str(entry.get("id"))) if isinstance(entry, dict) else None
            if file is None or file.content is None or file.completed:
                raise SlackError("file_not_found")
            files.append(file)
        comment = str(params["initial_comment"]) if params.get("initial_comment") else None
        answer = []
        for file, entry in zip(files, entries, strict=True):
            file.title = str(entry.get("title") or file.name)
            file.completed = True
            file.initial_comment = comment
            # Slack shares asynchronously: the answer lists no shares and no message ts.
            answer.append(self._file_object(file))
        for channel in channels:
            message = self._store(
                Message(
                    channel=channel,
                    ts=next_ts(),
                    text=comment or "",
                    user=self._caller.bot_user_id,
                    thread_ts=thread_ts,
                    subtype="file_share",
                    files=(),
                )
            )
            for file in files:
                file.shares.append((channel, message.ts, thread_ts))
            self._store(
                dataclasses.replace(message, files=tuple(self._file_object(f) for f in files))
            )
        return {"files": answer}

    def _files_info(self, params: JsonObject) -> JsonObject:
        file = self._files.get(str(params.get("file") or ""))
        if file is None or not file.completed:
            raise SlackError("file_not_found")
        return {
            "file": self._file_object(file),
            "comments": [],
            "response_metadata": {"next_cursor": ""},
        }

    def _download(self, path: str, headers: Mapping[str, str]) -> _Reply:
        login = _Reply(200, LOGIN_PAGE, "text/html; charset=utf-8")
        downloader = self._installs.get(_token_of(headers, {}) or "")
        if downloader is None:
            return login
        # /files-pri/<team>-<file id>/<name> or /files-pri/<team>-<file id>/download/<name>
        parts = path.removeprefix("/files-pri/").split("/")
        team, _, file_id = parts[0].partition("-")
        file = self._files.get(file_id)
        if (
            team != downloader.team_id
            or file is None
            or not file.completed
            or parts[-1] != file.name
        ):
            return _Reply(
                404, b"<html><body>File not found</body></html>", "text/html; charset=utf-8"
            )
        return _Reply(200, file.content or b"", file.mimetype)


# --- Block Kit limits ----------------------------------------------------------------------


def _too_long(value: Any, limit: int, pointer: str, errors: list[str]) -> None:
    if isinstance(value, str) and len(value) > limit:
        errors.append(f"must be less than {limit + 1} characters [json-pointer:{pointer}]")


def _element_errors(element: Any, pointer: str, errors: list[str]) -> None:
    if not isinstance(element, dict):
        errors.append(f"must be an object [json-pointer:{pointer}]")
        return
    element = cast(JsonObject, element)
    _too_long(element.get("action_id"), 255, f"{pointer}/action_id", errors)
    if element.get("type") == "button":
        text = element.get("text")
        if not isinstance(text, dict) or cast(JsonObject, text).get("type") != "plain_text":
            errors.append(f"must be a plain_text object [json-pointer:{pointer}/text]")
        else:
            _too_long(cast(JsonObject, text).get("text"), 75, f"{pointer}/text/text", errors)
        _too_long(element.get("value"), 2000, f"{pointer}/value", errors)
        _too_long(element.get("url"), 3000, f"{pointer}/url", errors)
    elif element.get("type") in _OPTION_LIMITS:
        _options_errors(element, pointer, errors)


_OPTION_LIMITS = {"static_select": 100, "overflow": 5, "checkboxes": 10, "radio_buttons": 10}
"""How many options each element takes (docs.slack.dev: block elements)."""


def _options_errors(element: JsonObject, pointer: str, errors: list[str]) -> None:
    """A select's, overflow's, checkboxes' or radio buttons' options: 1 up to the element's
    limit, each a text of at most 75 characters (plain_text in a select) and a value of at most
    150; a select's placeholder is plain_text of at most 150."""
    kind = str(element.get("type"))
    options = element.get("options")
    if not isinstance(options, list) or not options:
        errors.append(f"missing required field: options [json-pointer:{pointer}/options]")
        return
    limit = _OPTION_LIMITS[kind]
    if len(options) > limit:
        errors.append(f"no more than {limit} items allowed [json-pointer:{pointer}/options]")
    for j, option in enumerate(cast(list[Any], options)):
        at = f"{pointer}/options/{j}"
        text = option.get("text") if isinstance(option, dict) else None
        kinds = (
            ("plain_text",) if kind in ("static_select", "overflow") else ("plain_text", "mrkdwn")
        )
        if not isinstance(text, dict) or cast(JsonObject, text).get("type") not in kinds:
            errors.append(f"must be a {' or '.join(kinds)} object [json-pointer:{at}/text]")
        else:
            _too_long(cast(JsonObject, text).get("text"), 75, f"{at}/text/text", errors)
        value = option.get("value") if isinstance(option, dict) else None
        if not isinstance(value, str):
            errors.append(f"missing required field: value [json-pointer:{at}/value]")
        else:
            _too_long(value, 150, f"{at}/value", errors)
    placeholder = element.get("placeholder")
    if isinstance(placeholder, dict):
        _too_long(cast(JsonObject, placeholder).get("text"), 150, f"{pointer}/placeholder", errors)


@dataclass
class _Trigger:
    """An interaction's trigger_id: whose, when, and whether a view was opened with it."""

    user: str
    issued_at: float
    used: bool = False


def modal_errors(view: Any) -> list[str]:
    """Slack's complaints about a modal view for views.open; none when it accepts it."""
    if not isinstance(view, dict) or cast(JsonObject, view).get("type") != "modal":
        return ["view.type must be modal [json-pointer:/view/type]"]
    view = cast(JsonObject, view)
    errors: list[str] = []
    for name, required in (("title", True), ("submit", False), ("close", False)):
        text = view.get(name)
        if text is None:
            if required:
                errors.append(f"missing required field: {name} [json-pointer:/view/{name}]")
            continue
        if not isinstance(text, dict) or cast(JsonObject, text).get("type") != "plain_text":
            errors.append(f"must be a plain_text object [json-pointer:/view/{name}]")
            continue
        _too_long(cast(JsonObject, text).get("text"), MAX_VIEW_TITLE, f"/view/{name}/text", errors)
    _too_long(view.get("private_metadata"), MAX_PRIVATE_METADATA, "/view/private_metadata", errors)
    _too_long(view.get("callback_id"), 255, "/view/callback_id", errors)
    _too_long(view.get("external_id"), 255, "/view/external_id", errors)
    blocks = view.get("blocks", [])
    errors += block_errors(blocks, max_blocks=MAX_VIEW_BLOCKS)
    inputs = [b for b in blocks if isinstance(b, dict) and b.get("type") == "input"]
    if inputs and view.get("submit") is None:
        errors.append("a view with input blocks needs submit [json-pointer:/view/submit]")
    for i, block in enumerate(blocks if isinstance(blocks, list) else []):
        if not isinstance(block, dict) or block.get("type") != "input":
            continue
        block = cast(JsonObject, block)
        label = block.get("label")
        if not isinstance(label, dict) or cast(JsonObject, label).get("type") != "plain_text":
            errors.append(f"must be a plain_text object [json-pointer:/blocks/{i}/label]")
        else:
            _too_long(cast(JsonObject, label).get("text"), 2000, f"/blocks/{i}/label/text", errors)
        element = block.get("element")
        if not isinstance(element, dict):
            errors.append(f"missing required field: element [json-pointer:/blocks/{i}/element]")
            continue
        element = cast(JsonObject, element)
        _too_long(element.get("action_id"), 255, f"/blocks/{i}/element/action_id", errors)
        if element.get("type") in _OPTION_LIMITS:
            _options_errors(element, f"/blocks/{i}/element", errors)
        if element.get("type") == "plain_text_input":
            for bound in ("min_length", "max_length"):
                value = element.get(bound)
                if value is not None and not (
                    isinstance(value, int) and 0 <= value <= MAX_PLAIN_TEXT_INPUT
                ):
                    errors.append(
                        f"must be at most {MAX_PLAIN_TEXT_INPUT} "
                        f"[json-pointer:/blocks/{i}/element/{bound}]"
                    )
    return errors


def _context_actions_errors(block: JsonObject, at: str, errors: list[str]) -> None:
    """A context actions block: 1 to 5 feedback buttons or icon buttons; a feedback buttons
    element has a positive and a negative button, each plain text of at most 75 characters and a
    value of at most 2,000 (docs.slack.dev: context actions block, feedback buttons element)."""
    elements = block.get("elements")
    if not isinstance(elements, list) or not elements:
        errors.append(f"missing required field: elements [json-pointer:{at}/elements]")
        return
    if len(elements) > 5:
        errors.append(f"no more than 5 items allowed [json-pointer:{at}/elements]")
    for j, element in enumerate(cast(list[Any], elements)):
        where = f"{at}/elements/{j}"
        kind = element.get("type") if isinstance(element, dict) else None
        if kind == "icon_button":
            continue
        if kind != "feedback_buttons":
            errors.append(f"must be feedback_buttons or icon_button [json-pointer:{where}/type]")
            continue
        for side in ("positive_button", "negative_button"):
            button = cast(JsonObject, element).get(side)
            if not isinstance(button, dict):
                errors.append(f"missing required field: {side} [json-pointer:{where}/{side}]")
                continue
            button = cast(JsonObject, button)
            text = button.get("text")
            if not isinstance(text, dict) or cast(JsonObject, text).get("type") != "plain_text":
                errors.append(f"must be a plain_text object [json-pointer:{where}/{side}/text]")
            else:
                _too_long(cast(JsonObject, text).get("text"), 75, f"{where}/{side}/text", errors)
            if not isinstance(button.get("value"), str):
                errors.append(f"missing required field: value [json-pointer:{where}/{side}]")
            else:
                _too_long(button.get("value"), 2000, f"{where}/{side}/value", errors)


def block_errors(blocks: Any, *, max_blocks: int = MAX_MESSAGE_BLOCKS) -> list[str]:
    """Slack's complaints about `blocks` (the limits the bot can hit); none when it accepts them."""
    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    errors: list[str] = []
    blocks = cast(list[Any], blocks)
    if len(blocks) > max_blocks:
        errors.append(f"no more than {max_blocks} items allowed [json-pointer:/blocks]")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        at = f"/blocks/{i}"
        if not isinstance(block, dict) or "type" not in block:
            errors.append(f"missing required field: type [json-pointer:{at}]")
            continue
        block = cast(JsonObject, block)
        block_id = block.get("block_id")
        if isinstance(block_id, str):
            _too_long(block_id, 255, f"{at}/block_id", errors)
            if block_id in block_ids:
                errors.append(f"duplicate block_id {block_id!r} [json-pointer:{at}/block_id]")
            block_ids.add(block_id)
        kind = block["type"]
        text = block.get("text")
        if kind == "section":
            if isinstance(text, dict):
                _too_long(cast(JsonObject, text).get("text"), 3000, f"{at}/text/text", errors)
            fields = block.get("fields") or []
            if len(fields) > 10:
                errors.append(f"no more than 10 items allowed [json-pointer:{at}/fields]")
            for j, item in enumerate(fields):
                if isinstance(item, dict):
                    _too_long(
                        cast(JsonObject, item).get("text"), 2000, f"{at}/fields/{j}/text", errors
                    )
            if "accessory" in block:
                _element_errors(block["accessory"], f"{at}/accessory", errors)
        elif kind == "header" and isinstance(text, dict):
            _too_long(cast(JsonObject, text).get("text"), 150, f"{at}/text/text", errors)
        elif kind == "context_actions":
            _context_actions_errors(block, at, errors)
        elif kind in ("actions", "context"):
            elements = block.get("elements") or []
            limit = 25 if kind == "actions" else 10
            if len(elements) > limit:
                errors.append(f"no more than {limit} items allowed [json-pointer:{at}/elements]")
            if kind == "actions":
                for j, element in enumerate(elements):
                    _element_errors(element, f"{at}/elements/{j}", errors)
    return errors
