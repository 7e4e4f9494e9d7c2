"""The slash command: `/train-rl`."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, BoltContext, Respond
from slack_sdk import WebClient

from bot.listeners.guard import acknowledge, guarded, turn
from bot.metrics import BotMetrics
from bot.slack_text import as_typed
from bot.wizard import WizardService


def register(app: App, service: WizardService, metrics: BotMetrics) -> None:
    """`/train-rl [list|runs|help|task]`: answers go privately through the response_url."""

    def on_train_rl(
        command: dict[str, Any], client: WebClient, context: BoltContext, respond: Respond
    ) -> None:
        text = as_typed(command.get("text") or "").strip()  # Slack escapes `&`, `<`, `>`
        team = command.get("team_id") or context.team_id or ""
        user = command["user_id"]
        channel = command["channel_id"]

        def work() -> None:
            answer = service.command(client, team, channel, user, text)
            if answer is not None:
                respond(text=answer, response_type="ephemeral")

        with turn(metrics, context, "command", team=team, channel=channel):
            guarded(work)

    app.command("/train-rl")(ack=acknowledge, lazy=[on_train_rl])
