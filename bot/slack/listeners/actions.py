"""Button clicks in a wizard's thread: a question's answers, the assistant's proposals, the
buttons under a script and the feedback on a streamed answer; and how a click's payload is read
(who, where, which delivery)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.services import Services
from bot.slack.answer_feedback import VERDICTS, Verdict
from bot.slack.blocks import (
    ANSWER_ACTION,
    ANSWER_FEEDBACK_ACTION,
    PROPOSAL_ACCEPT,
    PROPOSAL_REANSWER,
    RESULT_ACTIONS,
    parse_answer_value,
)
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import (
    mapping_at,
    optional_mapping,
    optional_text,
    required_text,
    text_at,
)
from bot.wizard.drafts import DRAFT_AGAIN, DRAFT_EDIT
from bot.wizard.replies import Incoming
from bot.wizard.script_results import parse_session_ref
from flows import Reply
from storage.sessions import SessionKey

log = logging.getLogger(__name__)


def register(app: App, services: Services, after_ack: AfterAck) -> None:
    """Every button of a wizard's thread: ack, then the work on `after_ack`'s pool."""

    @app.action(re.compile(rf"^{ANSWER_ACTION}:\d+$"))
    def on_answer_click(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        user, delivery = clicker(body), click_id(body, action)
        parsed = parse_answer_value(picked_value(action))
        key = action_key(body)
        if parsed is None or key is None:
            return
        step_id, value = parsed
        incoming = Incoming(key, user, Reply.button(step_id, value), delivery)
        after_ack.submit(
            context,
            "action",
            lambda: services.replies.handle(client, incoming),
            key=key,
            errors_in_thread=True,
        )

    @app.action(re.compile(rf"^({'|'.join(RESULT_ACTIONS)})$"))
    def on_result_click(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        user, delivery = clicker(body), click_id(body, action)
        action_id = required_text(action, "action_id")
        key = parse_session_ref(optional_text(action, "value"))
        if key is None:
            return
        if key.team != clicked_team(body):  # the button names another workspace's wizard
            log.warning("ignored a result click naming another team's thread")
            return
        after_ack.submit(
            context,
            "action",
            lambda: services.result_buttons.clicked(client, key, user, action_id),
            key=key,
            once=delivery,
            errors_in_thread=True,
        )

    proposal_actions = (PROPOSAL_ACCEPT, PROPOSAL_REANSWER, DRAFT_EDIT, DRAFT_AGAIN)

    @app.action(re.compile(rf"^({'|'.join(proposal_actions)})$"))
    def on_proposal_click(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        user, delivery = clicker(body), click_id(body, action)
        action_id = required_text(action, "action_id")
        value = optional_text(action, "value")
        message_ts = text_at(body, "message", "ts")
        key = action_key(body)
        if key is None:
            return
        after_ack.submit(
            context,
            "action",
            lambda: services.proposals.clicked(client, key, user, action_id, value, message_ts),
            key=key,
            once=delivery,
            errors_in_thread=True,
        )

    @app.action(ANSWER_FEEDBACK_ACTION)
    def on_answer_feedback(
        ack: Ack, body: dict[str, Any], action: dict[str, Any], context: BoltContext
    ) -> None:
        """Helpful / not helpful under a streamed answer: the clicker's last word on it."""
        ack()
        user, verdict = clicker(body), optional_text(action, "value")
        channel = text_at(body, "channel", "id") or text_at(body, "container", "channel_id")
        message_ts = text_at(body, "container", "message_ts") or text_at(body, "message", "ts")
        team = clicked_team(body) or context.team_id
        if verdict not in VERDICTS or not (channel and message_ts and team):
            return  # not one of our buttons' values: nothing to record
        record = services.answer_feedback.record
        clicked_at = slack_time(text_at(action, "action_ts"))
        after_ack.submit(
            context,
            "action",
            lambda: record(team, channel, message_ts, user, cast(Verdict, verdict), clicked_at),
            team=team,
            channel=channel,
        )


def slack_time(ts: str | None) -> datetime | None:
    """A Slack timestamp ("1700000000.123456") as a UTC datetime; None when it is not one."""
    try:
        return datetime.fromtimestamp(float(ts or ""), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def action_key(body: Mapping[str, Any]) -> SessionKey | None:
    """The wizard a clicked button belongs to: the thread of the message it sits on."""
    channel = text_at(body, "channel", "id") or text_at(body, "container", "channel_id")
    thread = text_at(body, "message", "thread_ts") or text_at(body, "container", "thread_ts")
    team = clicked_team(body)
    if not (channel and thread and team):
        return None
    return SessionKey(team, channel, thread)


def clicked_team(body: Mapping[str, Any]) -> str | None:
    """The workspace the click came from (Slack's, never the button's value)."""
    return text_at(body, "team", "id") or text_at(body, "user", "team_id")


def clicker(body: Mapping[str, Any]) -> str:
    """Who clicked; Malformed when the payload names nobody, or a part of it that the click's
    listeners read is not an object."""
    for part in ("message", "channel", "container", "team"):
        optional_mapping(body, part)
    return required_text(body, "user", "id")


def click_id(body: Mapping[str, Any], action: Mapping[str, Any]) -> str:
    """A click's delivery id: Slack's retries of one click share it, two clicks do not."""
    when = text_at(action, "action_ts") or text_at(body, "trigger_id")
    return f"action:{clicker(body)}:{when}"


def picked_value(action: Mapping[str, Any]) -> str:
    """What a click on one of our answers carries: a button's value, or a select's option;
    Malformed when either is something else than text."""
    return optional_text(action, "value") or optional_text(
        mapping_at(action, "selected_option"), "value"
    )
