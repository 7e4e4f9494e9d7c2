"""Which conversation a Slack request belongs to, read from its body before anything verifies it:
the router (bot.process.router) sends it to the worker that owns that channel
(`bot.process.shards.shard_of`). Never raises: anyone can POST anything.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl

from bot.slack.request_body import MAX_SLACK_BODY_BYTES

MAX_ROUTED_BODY = MAX_SLACK_BODY_BYTES
"""Larger bodies are not parsed for a channel; the router reads none (`bot.slack.request_body`:
413 before they reach a worker)."""
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
_VIEW_TYPES = ("view_submission", "view_closed")
# *Try it*'s modal carries "<run's public id> <channel>" (bot.runs.trained_model.tryit; the id's
# shape is bot.runs.store.PUBLIC_ID, not imported: the router loads no SQL).
_RUN_AND_CHANNEL = re.compile(r"[23456789abcdefghjkmnpqrstuvwxyz]{12} (\S+)")
_MAX_FORM_FIELDS = 100


def route_key(content_type: str, body: bytes) -> tuple[str, str] | None:
    """The (team, channel) a Slack request body is about; None when it names none, or is too
    large or malformed to tell (never raises: anyone can POST anything here)."""
    if len(body) > MAX_ROUTED_BODY:
        return None
    media_type = content_type.partition(";")[0].strip().lower()
    try:
        if media_type == FORM:
            return _form_key(body)
        if media_type == JSON:
            return _event_key(json.loads(body))
    except (ValueError, RecursionError):  # bad JSON, bad UTF-8, too many fields, too deep
        return None
    return None


def _form_key(body: bytes) -> tuple[str, str] | None:
    """A slash command's form, or an interaction's `payload=<json>`."""
    fields = parse_qsl(
        body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=_MAX_FORM_FIELDS
    )
    form: dict[str, str] = {}
    for name, value in fields:
        form.setdefault(name, value)
    if "payload" in form:
        return _interaction_key(json.loads(form["payload"]))
    return _pair(form.get("team_id"), form.get("channel_id"))


def _interaction_key(payload: object) -> tuple[str, str] | None:
    """block_actions, view_submission, view_closed, shortcuts: the same team and channel as
    `bot.slack.listeners.actions` keys its sessions by."""
    team = _text(payload, "team", "id") or _text(payload, "user", "team_id")
    channel = _text(payload, "channel", "id") or _text(payload, "container", "channel_id")
    if channel is None and isinstance(payload, dict) and payload.get("type") in _VIEW_TYPES:
        channel = _run_channel(_text(payload, "view", "private_metadata"))
    return _pair(team, channel)


def _event_key(envelope: object) -> tuple[str, str] | None:
    """An Events API `event_callback`. The team is Bolt's `context.team_id`, which the event
    listeners key sessions by: the first authorization's team (they differ from `team_id` only
    in channels shared between workspaces), else `team_id`."""
    if not isinstance(envelope, dict) or envelope.get("type") != "event_callback":
        return None
    team = _authorized_team(envelope.get("authorizations")) or _text(envelope, "team_id")
    event = envelope.get("event")
    channel = _text(event, "channel") or _text(event, "item", "channel")  # item: reactions
    return _pair(team, channel)


def _authorized_team(authorizations: object) -> str | None:
    if isinstance(authorizations, list) and authorizations:
        return _text(authorizations[0], "team_id")
    return None


def _run_channel(metadata: str | None) -> str | None:
    match = _RUN_AND_CHANNEL.fullmatch(metadata or "")
    return match.group(1) if match else None


def _text(value: object, *keys: str) -> str | None:
    """`value[k1][k2]...` when every step is a dict and the end a non-empty str, else None."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value if isinstance(value, str) and value else None


def _pair(team: str | None, channel: str | None) -> tuple[str, str] | None:
    return (team, channel) if team and channel else None
