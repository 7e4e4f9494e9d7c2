"""The buttons under a finished run: *Run again with changes* and *Compare with the previous run
of this project*."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.blocks import RUN_COMPARE_ACTION, RUN_RERUN_ACTION
from bot.listeners.actions import action_key, click_id, clicked_run
from bot.listeners.guard import AfterAck
from bot.wizard import WizardService


def register(app: App, service: WizardService, after_ack: AfterAck) -> None:
    """Each button acks at once; the work (a new thread, a plot) runs on `after_ack`'s pool."""

    @app.action(RUN_RERUN_ACTION)
    def on_rerun(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        run_id = clicked_run(action)
        if run_id is not None:
            user, delivery = body["user"]["id"], click_id(body, action)
            after_ack.submit(
                context,
                "action",
                lambda: service.rerun(client, run_id, user, delivery),
                key=action_key(body),
                team=context.team_id,
            )

    @app.action(RUN_COMPARE_ACTION)
    def on_compare_previous(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        run_id = clicked_run(action)
        if run_id is not None:
            user, delivery = body["user"]["id"], click_id(body, action)
            after_ack.submit(
                context,
                "action",
                lambda: service.compare_previous(client, run_id, user, delivery),
                key=action_key(body),
                team=context.team_id,
            )
