"""Button clicks: a question's answers, the buttons under a script, and a run's Cancel and fixes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from slack_bolt import App, BoltContext
from slack_sdk import WebClient

from bot.blocks import (
    ANSWER_ACTION,
    RESULT_ACTIONS,
    RUN_CANCEL_ACTION,
    RUN_FIX_ACTION,
    parse_answer_value,
)
from bot.listeners.guard import acknowledge, guarded, turn
from bot.metrics import BotMetrics
from bot.script_results import parse_session_ref
from bot.wizard import Incoming, WizardService
from flows import Reply
from runner.schemas import FixAction
from storage.sessions import SessionKey


def register(app: App, service: WizardService, metrics: BotMetrics) -> None:
    """Every button the bot posts."""

    def on_answer_click(
        body: dict[str, Any], action: dict[str, Any], client: WebClient, context: BoltContext
    ) -> None:
        parsed = parse_answer_value(action.get("value") or "")
        key = action_key(body)
        if parsed is None or key is None:
            return
        step_id, value = parsed
        user = body["user"]["id"]
        incoming = Incoming(key, user, Reply.button(step_id, value), click_id(body, action))
        with turn(metrics, context, "action", key):
            guarded(lambda: service.handle(client, incoming), client, key, service)

    def on_result_click(
        body: dict[str, Any], action: dict[str, Any], client: WebClient, context: BoltContext
    ) -> None:
        key = parse_session_ref(action.get("value") or "")
        if key is None:
            return
        user = body["user"]["id"]
        delivery = click_id(body, action)
        with turn(metrics, context, "action", key):
            guarded(
                lambda: service.result_action(client, key, user, action["action_id"], delivery),
                client,
                key,
                service,
            )

    def on_run_cancel(
        body: dict[str, Any], action: dict[str, Any], client: WebClient, context: BoltContext
    ) -> None:
        run_id = clicked_run(action)
        if run_id is not None:
            user = body["user"]["id"]
            with turn(metrics, context, "action", action_key(body), team=context.team_id):
                guarded(lambda: service.cancel_run(client, run_id, user))

    def on_run_fix(
        body: dict[str, Any], action: dict[str, Any], client: WebClient, context: BoltContext
    ) -> None:
        run_id = clicked_run(action)
        if run_id is not None:
            fix = FixAction(action["action_id"].split(":", 1)[1])
            user, delivery = body["user"]["id"], click_id(body, action)
            with turn(metrics, context, "action", action_key(body), team=context.team_id):
                guarded(lambda: service.fix_run(client, run_id, fix, user, delivery))

    app.action(re.compile(rf"^{ANSWER_ACTION}:\d+$"))(ack=acknowledge, lazy=[on_answer_click])
    app.action(re.compile(rf"^({'|'.join(RESULT_ACTIONS)})$"))(
        ack=acknowledge, lazy=[on_result_click]
    )
    app.action(RUN_CANCEL_ACTION)(ack=acknowledge, lazy=[on_run_cancel])
    app.action(re.compile(rf"^{RUN_FIX_ACTION}:(retry_lower_gpu_memory|resume)$"))(
        ack=acknowledge, lazy=[on_run_fix]
    )


def action_key(body: Mapping[str, Any]) -> SessionKey | None:
    """The wizard a clicked button belongs to: the thread of the message it sits on."""
    message = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get(
        "channel_id"
    )
    thread = message.get("thread_ts") or (body.get("container") or {}).get("thread_ts")
    team = (body.get("team") or {}).get("id") or body.get("user", {}).get("team_id")
    if not (channel and thread and team):
        return None
    return SessionKey(team, channel, str(thread))


def click_id(body: Mapping[str, Any], action: Mapping[str, Any]) -> str:
    """A click's delivery id: Slack's retries of one click share it, two clicks do not."""
    user = body["user"]["id"]
    return f"action:{user}:{action.get('action_ts') or body.get('trigger_id')}"


def clicked_run(action: Mapping[str, Any]) -> int | None:
    """The run a status card's or a failure's button names; None when the value is not one."""
    value = action.get("value") or ""
    return int(value) if value.isdigit() else None
