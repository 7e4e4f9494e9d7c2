"""Requests exactly as Slack sends them to an app: bodies, headers and `v0=` signatures.

Builders of whole requests (`slash_command`, `event_callback`, `block_actions`,
`app_home_opened`, `url_verification`) return a `SignedRequest`; the `*_event` helpers return
the inner event dicts that `event_callback` wraps:

    app.dispatch(event_callback(message_event("hi", thread_ts=parent_ts)).as_bolt_request())

Every builder takes `timestamp=` (forge a stale request) and `signing_secret=` (forge a bad
signature).

Text is what the person typed, and arrives formatted the way Slack delivers it (`slack_text`):
`&`, `<`, `>` escaped as `&amp;`, `&lt;`, `&gt;`, and in messages bare URLs linked as
`<https://...>`. Pass `typed=False` to send a text already in Slack's format unchanged: for the
forms only Slack's client makes, such as a `<@U...>` mention or a labelled link.
"""

from __future__ import annotations

import itertools
import json
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from slack_bolt.request import BoltRequest
from slack_sdk.signature import SignatureVerifier

from tests.fakes.workspace import (
    API_APP_ID,
    BOT_ID,
    BOT_USER_ID,
    CHANNEL_ID,
    CHANNEL_NAME,
    SIGNING_SECRET,
    TEAM_DOMAIN,
    TEAM_ID,
    USER_ID,
    USER_NAME,
    VERIFICATION_TOKEN,
    next_ts,
)

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"

# Where response_url points unless a test passes one (FakeSlack.response_url()): a loopback
# port nobody listens on, so a forgotten response_url fails at once instead of leaving the machine.
UNROUTED_RESPONSE_URL = "http://127.0.0.1:9/hooks"

_serial = itertools.count(1)

# What Slack's servers take for a URL in a message (an approximation: scheme, then up to a space,
# a quote or an escaped angle bracket; trailing punctuation is left out of the link).
_URL = re.compile(r"https?://(?:(?!&lt;|&gt;)[^\s\"'`])+")
_URL_TRAILING = ".,;:!?)]}"


def slack_text(typed: str, *, link_urls: bool = True) -> str:
    """`typed` as Slack delivers it to an app: `&`, `<`, `>` escaped (the only characters Slack
    escapes), then, with `link_urls`, every bare URL wrapped as `<url>` (code blocks included).

    Slash commands (`should_escape: false` in the manifest) get the escaping but no links.
    """
    text = typed.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if not link_urls:
        return text

    def link(match: re.Match[str]) -> str:
        url = match.group(0).rstrip(_URL_TRAILING)
        return f"<{url}>{match.group(0)[len(url) :]}"

    return _URL.sub(link, text)


@dataclass(frozen=True)
class HttpReply:
    """What a server answered to `SignedRequest.post`."""

    status: int
    headers: dict[str, str]
    body: str


@dataclass(frozen=True)
class SignedRequest:
    """A request body and the headers Slack sends with it, signature included."""

    body: str
    headers: dict[str, str]

    def as_bolt_request(self) -> BoltRequest:
        """The request as Bolt's HTTP adapters build it, for `app.dispatch(...)`."""
        headers: dict[str, str | Sequence[str]] = dict(self.headers)
        return BoltRequest(body=self.body, headers=headers)

    def payload(self) -> dict[str, Any]:
        """The decoded body: the JSON envelope, the `payload=` JSON of an action, or the form."""
        if self.headers["Content-Type"].startswith(JSON):
            return json.loads(self.body)
        form = dict(parse_qsl(self.body, keep_blank_values=True))
        if "payload" in form:
            return json.loads(form["payload"])
        return dict(form)

    def post(self, url: str, *, timeout: float = 10.0) -> HttpReply:
        """POST this request to a running app (Bolt behind an HTTP server); return its answer."""
        request = urllib.request.Request(
            url, data=self.body.encode(), headers=self.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return HttpReply(response.status, dict(response.headers), response.read().decode())
        except urllib.error.HTTPError as error:
            return HttpReply(error.code, dict(error.headers), error.read().decode())


def sign(
    body: str,
    *,
    content_type: str,
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
    extra_headers: Mapping[str, str] | None = None,
) -> SignedRequest:
    """Sign `body` like Slack: `v0=` HMAC-SHA256 of `v0:{timestamp}:{body}`."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": signature,
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }
    headers.update(extra_headers or {})
    return SignedRequest(body=body, headers=headers)


def new_trigger_id() -> str:
    """A trigger_id shaped like Slack's ("1234.5678.abcdef...")."""
    return f"{next(_serial)}.{int(time.time())}.{uuid.uuid4().hex}"


def new_event_id() -> str:
    """A unique Events API event id ("Ev" and ten characters)."""
    return f"Ev{next(_serial):010d}"


# --- Slash commands ------------------------------------------------------------------------


def slash_command(
    command: str = "/train-rl",
    text: str = "",
    *,
    user_id: str = USER_ID,
    user_name: str = USER_NAME,
    channel_id: str = CHANNEL_ID,
    channel_name: str = CHANNEL_NAME,
    team_id: str = TEAM_ID,
    trigger_id: str | None = None,
    response_url: str | None = None,
    typed: bool = True,
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
) -> SignedRequest:
    """A slash command invocation: a form body, as Slack POSTs it (`text` escaped, not linked)."""
    form = {
        "token": VERIFICATION_TOKEN,
        "team_id": team_id,
        "team_domain": TEAM_DOMAIN,
        "channel_id": channel_id,
        "channel_name": channel_name,
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": slack_text(text, link_urls=False) if typed else text,
        "api_app_id": API_APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url or f"{UNROUTED_RESPONSE_URL}/commands/{next(_serial)}",
        "trigger_id": trigger_id or new_trigger_id(),
    }
    return sign(
        urlencode(form), content_type=FORM, timestamp=timestamp, signing_secret=signing_secret
    )


# --- Events API ----------------------------------------------------------------------------


def event_callback(
    event: Mapping[str, Any],
    *,
    event_id: str | None = None,
    team_id: str = TEAM_ID,
    enterprise_id: str | None = None,
    bot_user_id: str = BOT_USER_ID,
    api_app_id: str = API_APP_ID,
    retry_num: int | None = None,
    retry_reason: str = "http_timeout",
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
) -> SignedRequest:
    """The Events API envelope around `event`; `retry_num` adds Slack's retry headers.
    `enterprise_id` for a workspace of an Enterprise Grid organization; `bot_user_id` the bot's
    user in that workspace.

        A retry is the same body (same `event_id`) sent again: pass the first delivery's `event_id`.
    """
    event_ts = str(event.get("event_ts") or event.get("ts") or time.time())
    envelope = {
        "token": VERIFICATION_TOKEN,
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": enterprise_id,
        "api_app_id": api_app_id,
        "event": dict(event),
        "type": "event_callback",
        "event_id": event_id or new_event_id(),
        "event_time": int(float(event_ts)),
        "authorizations": [
            {
                "enterprise_id": enterprise_id,
                "team_id": team_id,
                "user_id": bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{uuid.uuid4().hex}",
    }
    if enterprise_id is not None:
        envelope["enterprise_id"] = enterprise_id
    extra: dict[str, str] = {}
    if retry_num is not None:
        extra = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
    return sign(
        json.dumps(envelope),
        content_type=JSON,
        timestamp=timestamp,
        signing_secret=signing_secret,
        extra_headers=extra,
    )


def url_verification(
    challenge: str = "challenge-token",
    *,
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
) -> SignedRequest:
    """The handshake Slack sends when an Events API request URL is saved."""
    body = {"token": VERIFICATION_TOKEN, "challenge": challenge, "type": "url_verification"}
    return sign(
        json.dumps(body), content_type=JSON, timestamp=timestamp, signing_secret=signing_secret
    )


def _rich_text(text: str) -> list[dict[str, Any]]:
    # Messages typed in the Slack client carry their text as rich_text blocks too.
    return [
        {
            "type": "rich_text",
            "block_id": uuid.uuid4().hex[:5],
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
            ],
        }
    ]


def message_event(
    text: str,
    *,
    channel: str = CHANNEL_ID,
    user: str = USER_ID,
    ts: str | None = None,
    thread_ts: str | None = None,
    client_msg_id: str | None = None,
    channel_type: str = "channel",
    team: str = TEAM_ID,
    typed: bool = True,
) -> dict[str, Any]:
    """A person's message event; with `thread_ts` it is a reply in that thread.

    `text` is what they typed: the event's `text` is `slack_text(text)`, its rich_text blocks
    hold it unescaped (as Slack's do). `typed=False` sends `text` as it is.
    """
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "type": "message",
        "client_msg_id": client_msg_id or str(uuid.uuid4()),
        "text": slack_text(text) if typed else text,
        "user": user,
        "ts": ts,
        "blocks": _rich_text(text),
        "team": team,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
        event["parent_user_id"] = BOT_USER_ID
    return event


def thread_broadcast_event(
    text: str,
    *,
    thread_ts: str,
    channel: str = CHANNEL_ID,
    user: str = USER_ID,
    ts: str | None = None,
    client_msg_id: str | None = None,
    channel_type: str = "channel",
    root: Mapping[str, Any] | None = None,
    typed: bool = True,
) -> dict[str, Any]:
    """A thread reply also sent to the channel ("Also send to #channel")."""
    event = message_event(
        text,
        channel=channel,
        user=user,
        ts=ts,
        thread_ts=thread_ts,
        client_msg_id=client_msg_id,
        channel_type=channel_type,
        typed=typed,
    )
    event["subtype"] = "thread_broadcast"
    event["root"] = (
        dict(root)
        if root is not None
        else {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "ts": thread_ts,
            "thread_ts": thread_ts,
            "text": "",
        }
    )
    return event


def message_changed_event(
    original: Mapping[str, Any], new_text: str, *, ts: str | None = None, typed: bool = True
) -> dict[str, Any]:
    """The edit of `original` (a message event) to `new_text` (as typed, see `message_event`), as
    Slack reports it.

    The edited message sits under `message`; the event itself has no `thread_ts` or `user`.
    """
    event_ts = ts or next_ts()
    fields = ("type", "client_msg_id", "user", "ts", "thread_ts", "team", "parent_user_id")
    message: dict[str, Any] = {k: original[k] for k in fields if k in original}
    message.update(
        text=slack_text(new_text) if typed else new_text,
        blocks=_rich_text(new_text),
        edited={"user": original.get("user", USER_ID), "ts": event_ts},
    )
    previous = {
        k: v for k, v in original.items() if k not in ("channel", "event_ts", "channel_type")
    }
    return {
        "type": "message",
        "subtype": "message_changed",
        "message": message,
        "previous_message": previous,
        "channel": original.get("channel", CHANNEL_ID),
        "hidden": True,
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": original.get("channel_type", "channel"),
    }


def message_deleted_event(original: Mapping[str, Any], *, ts: str | None = None) -> dict[str, Any]:
    """The deletion of `original` (a message event); it has no `user` or `thread_ts` of its own."""
    event_ts = ts or next_ts()
    previous = {
        k: v for k, v in original.items() if k not in ("channel", "event_ts", "channel_type")
    }
    return {
        "type": "message",
        "subtype": "message_deleted",
        "previous_message": previous,
        "channel": original.get("channel", CHANNEL_ID),
        "hidden": True,
        "deleted_ts": original["ts"],
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": original.get("channel_type", "channel"),
    }


def bot_message_event(
    text: str,
    *,
    bot_id: str = "B0OTHER",
    bot_user_id: str | None = None,
    username: str = "other-bot",
    channel: str = CHANNEL_ID,
    ts: str | None = None,
    thread_ts: str | None = None,
    channel_type: str = "channel",
) -> dict[str, Any]:
    """A message from a bot; `text` is its mrkdwn as the bot posted it, sent unchanged.

    Without `bot_user_id` it is the legacy `bot_message` subtype (incoming webhooks,
    integrations). With it, it is what an app's bot posts through chat.postMessage: no
    subtype, `user` and `bot_id` set. `bot_message_event(t, bot_id=BOT_ID, bot_user_id=BOT_USER_ID)`
    is the echo of our own post that Bolt's IgnoringSelfEvents drops.
    """
    ts = ts or next_ts()
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "bot_id": bot_id,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if bot_user_id is None:
        event.update(subtype="bot_message", username=username)
    else:
        event.update(user=bot_user_id, app_id=API_APP_ID, team=TEAM_ID, blocks=_rich_text(text))
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


def file_share_event(
    files: Sequence[Mapping[str, Any]],
    *,
    text: str = "",
    channel: str = CHANNEL_ID,
    user: str = USER_ID,
    ts: str | None = None,
    thread_ts: str | None = None,
    client_msg_id: str | None = None,
    channel_type: str = "channel",
    typed: bool = True,
) -> dict[str, Any]:
    """A person dropping files (e.g. from `FakeSlack.add_user_file`) into a channel or thread.

    The comment `text` is formatted like a message's; the files' bytes are served as they are.
    """
    event = message_event(
        text,
        channel=channel,
        user=user,
        ts=ts,
        thread_ts=thread_ts,
        client_msg_id=client_msg_id,
        channel_type=channel_type,
        typed=typed,
    )
    event.update(
        subtype="file_share", files=[dict(f) for f in files], upload=False, display_as_bot=False
    )
    if not text:
        del event["blocks"]
    return event


def app_mention_event(
    text: str,
    *,
    channel: str = CHANNEL_ID,
    user: str = USER_ID,
    ts: str | None = None,
    thread_ts: str | None = None,
) -> dict[str, Any]:
    """An `app_mention` event: the bot's mention `<@U0BOT>`, then `text` as typed."""
    event = message_event(text, channel=channel, user=user, ts=ts, thread_ts=thread_ts)
    event["text"] = f"<@{BOT_USER_ID}> {event['text']}"
    event["type"] = "app_mention"
    del event["channel_type"]
    return event


def app_home_opened_event(
    user_id: str = USER_ID, *, tab: str = "home", view: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An `app_home_opened` event; `view` is the last published view, if any."""
    event: dict[str, Any] = {
        "type": "app_home_opened",
        "user": user_id,
        "channel": f"D{user_id[1:]}",
        "tab": tab,
        "event_ts": next_ts(),
    }
    if view is not None:
        event["view"] = dict(view)
    return event


def app_home_opened(
    user_id: str = USER_ID,
    *,
    tab: str = "home",
    view: Mapping[str, Any] | None = None,
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
) -> SignedRequest:
    """The signed Events API request for a user opening the app's Home tab."""
    return event_callback(
        app_home_opened_event(user_id, tab=tab, view=view),
        timestamp=timestamp,
        signing_secret=signing_secret,
    )


# --- Interactivity -------------------------------------------------------------------------

_OPTION_ACTIONS = ("static_select", "radio_buttons", "overflow")


def _find_element(message: Mapping[str, Any], action_id: str) -> tuple[str, dict[str, Any]] | None:
    for block in message.get("blocks") or []:
        elements = list(block.get("elements") or [])
        if isinstance(block.get("accessory"), dict):
            elements.append(block["accessory"])
        for element in elements:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return str(block.get("block_id", "")), element
    return None


def _option_text(element: Mapping[str, Any], value: str) -> str:
    for option in element.get("options") or []:
        if option.get("value") == value:
            return str(option.get("text", {}).get("text", value))
    return value


def block_actions(
    action_id: str,
    value: str,
    *,
    message_ts: str,
    block_id: str | None = None,
    user_id: str = USER_ID,
    user_name: str = USER_NAME,
    channel_id: str = CHANNEL_ID,
    channel_name: str = CHANNEL_NAME,
    thread_ts: str | None = None,
    team_id: str = TEAM_ID,
    response_url: str | None = None,
    trigger_id: str | None = None,
    message: Mapping[str, Any] | None = None,
    action_type: str = "button",
    ephemeral: bool = False,
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
) -> SignedRequest:
    """A click on an interactive element of a message: form body `payload=<json>`.

    Pass the clicked message (e.g. `FakeSlack.message(...).to_slack()`) as `message` to fill
    `block_id`, the button text and `thread_ts` from it. `action_type` "static_select",
    "radio_buttons" or "overflow" sends `selected_option` instead of `value`. An ephemeral
    message's click carries no `message` (Slack does not send one).
    """
    found = _find_element(message, action_id) if message is not None else None
    element: dict[str, Any] = found[1] if found else {}
    if block_id is None:
        block_id = found[0] if found else f"block-{action_id}"
    if (
        thread_ts is None
        and message is not None
        and message.get("thread_ts") not in (None, message_ts)
    ):
        thread_ts = str(message["thread_ts"])
    action: dict[str, Any] = {"action_id": action_id, "block_id": block_id, "type": action_type}
    if action_type in _OPTION_ACTIONS:
        label = _option_text(element, value)
        action["selected_option"] = {
            "text": {"type": "plain_text", "text": label, "emoji": True},
            "value": value,
        }
    else:
        label = str(element.get("text", {}).get("text", value))
        action["text"] = {"type": "plain_text", "text": label, "emoji": True}
        action["value"] = value
    action["action_ts"] = f"{time.time():.6f}"

    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel_id,
        "is_ephemeral": ephemeral,
    }
    if thread_ts is not None:
        container["thread_ts"] = thread_ts
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": team_id},
        "api_app_id": API_APP_ID,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": {"id": team_id, "domain": TEAM_DOMAIN},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": channel_name},
        "state": {"values": {}},
        "response_url": response_url or f"{UNROUTED_RESPONSE_URL}/actions/{next(_serial)}",
        "actions": [action],
    }
    if not ephemeral:
        shown: dict[str, Any] = (
            dict(message)
            if message is not None
            else {
                "type": "message",
                "user": BOT_USER_ID,
                "bot_id": BOT_ID,
                "app_id": API_APP_ID,
                "team": team_id,
                "ts": message_ts,
                "text": "",
                "blocks": [],
            }
        )
        if thread_ts is not None:
            shown.setdefault("thread_ts", thread_ts)
        payload["message"] = shown
    return sign(
        urlencode({"payload": json.dumps(payload)}),
        content_type=FORM,
        timestamp=timestamp,
        signing_secret=signing_secret,
    )


# --- Modals ----------------------------------------------------------------------------------


def view_submission(
    view: Mapping[str, Any],
    values: Mapping[str, Mapping[str, str | list[str]]],
    *,
    user_id: str = USER_ID,
    user_name: str = USER_NAME,
    team_id: str = TEAM_ID,
    timestamp: int | None = None,
    signing_secret: str = SIGNING_SECRET,
) -> SignedRequest:
    """The submit of an opened modal (`view` as views.open returned it) with what was typed:
    `values[block_id][action_id]` is a plain_text_input's text (missing inputs are null), or the
    values of the options ticked in a checkboxes element (Slack sends `selected_options`, empty
    when none is ticked)."""
    state: dict[str, Any] = {}
    for block in view.get("blocks", []):
        if block.get("type") != "input":
            continue
        element = block["element"]
        typed = values.get(block["block_id"], {}).get(element["action_id"])
        entry: dict[str, Any] = {"type": element["type"]}
        if element["type"] == "checkboxes":
            ticked = [typed] if isinstance(typed, str) else list(typed or [])
            entry["selected_options"] = [
                option for option in element.get("options", []) if option["value"] in ticked
            ]
        else:
            entry["value"] = typed
        state[block["block_id"]] = {element["action_id"]: entry}
    submitted = {key: value for key, value in view.items() if not key.startswith("_")}
    submitted["state"] = {"values": state}
    payload: dict[str, Any] = {
        "type": "view_submission",
        "team": {"id": team_id, "domain": TEAM_DOMAIN},
        "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": team_id},
        "api_app_id": API_APP_ID,
        "token": VERIFICATION_TOKEN,
        "trigger_id": new_trigger_id(),
        "view": submitted,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }
    return sign(
        urlencode({"payload": json.dumps(payload)}),
        content_type=FORM,
        timestamp=timestamp,
        signing_secret=signing_secret,
    )
