"""Button clicks: a question's answers, the assistant's proposals, the buttons under a script,
and a run's Cancel and fixes."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.blocks import (
    ANSWER_ACTION,
    PROPOSAL_ACCEPT,
    PROPOSAL_REANSWER,
    RESULT_ACTIONS,
    RUN_CANCEL_ACTION,
    RUN_FIX_ACTION,
    parse_answer_value,
    picked_value,
)
from bot.drafts import DRAFT_AGAIN, DRAFT_EDIT
from bot.listeners.guard import AfterAck
from bot.script_results import parse_session_ref
from bot.wizard import Incoming, WizardService
from flows import Reply
from runner.schemas import FixAction
from storage.sessions import SessionKey


def register(app: App, service: WizardService, after_ack: AfterAck) -> None:
    """Every button the bot posts: ack, then the work on `after_ack`'s pool."""

    @app.action(re.compile(rf"^{ANSWER_ACTION}:\d+$"))
    def on_answer_click(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        parsed = parse_answer_value(picked_value(action))
        key = action_key(body)
        if parsed is None or key is None:
            return
        step_id, value = parsed
        user = body["user"]["id"]
        incoming = Incoming(key, user, Reply.button(step_id, value), click_id(body, action))
        after_ack.submit(
            context,
            "action",
            lambda: service.handle(client, incoming),
            key=key,
            client=client,
            service=service,
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
        key = parse_session_ref(action.get("value") or "")
        if key is None:
            return
        user, action_id = body["user"]["id"], action["action_id"]
        delivery = click_id(body, action)
        after_ack.submit(
            context,
            "action",
            lambda: service.result_action(client, key, user, action_id, delivery),
            key=key,
            client=client,
            service=service,
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
        key = action_key(body)
        if key is None:
            return
        user, action_id = body["user"]["id"], action["action_id"]
        value = str(action.get("value") or "")
        message_ts = (body.get("message") or {}).get("ts")
        delivery = click_id(body, action)
        after_ack.submit(
            context,
            "action",
            lambda: service.proposal_action(
                client, key, user, action_id, value, message_ts, delivery
            ),
            key=key,
            client=client,
            service=service,
        )

    on_run_button(
        app,
        after_ack,
        RUN_CANCEL_ACTION,
        lambda click: service.cancel_run(click.client, click.run_id, click.user),
    )
    on_run_button(
        app,
        after_ack,
        re.compile(rf"^{RUN_FIX_ACTION}:(retry_lower_gpu_memory|resume)$"),
        lambda click: service.fix_run(
            click.client,
            click.run_id,
            FixAction(click.action_id.split(":", 1)[1]),
            click.user,
            click.delivery,
        ),
    )


@dataclass(frozen=True)
class RunClick:
    """A click on a button that names a run (its value is the run's id)."""

    client: WebClient
    run_id: int
    user: str
    delivery: str
    """The click's delivery id (`click_id`)."""
    action_id: str
    trigger_id: str
    """What opens a modal, once, within 3 seconds of the click."""


def on_run_button(
    app: App,
    after_ack: AfterAck,
    action_id: str | re.Pattern[str],
    work: Callable[[RunClick], object],
) -> None:
    """A run's button: ack at once, then `work(click)` on `after_ack`'s pool; a value that is
    not a run's id is ignored."""

    @app.action(action_id)
    def clicked(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        run_id = clicked_run(action)
        if run_id is None:
            return
        click = RunClick(
            client,
            run_id,
            body["user"]["id"],
            click_id(body, action),
            action["action_id"],
            str(body.get("trigger_id") or ""),
        )
        after_ack.submit(
            context, "action", lambda: work(click), key=action_key(body), team=context.team_id
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
