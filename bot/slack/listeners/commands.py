"""The slash command: `/train-rl`."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_sdk import WebClient

from bot.services import Services
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import optional_text, required_text, text_at
from bot.slack.text import as_typed
from isolation.redaction import redact


def register(app: App, services: Services, after_ack: AfterAck) -> None:
    """`/train-rl [list|runs|compare|help|task]`: answers go privately through the response_url."""

    @app.command("/train-rl")
    def on_train_rl(
        ack: Ack, command: dict[str, Any], client: WebClient, context: BoltContext, respond: Respond
    ) -> None:
        ack()
        # Slack escapes `&`, `<`, `>`; a field missing or of another type: Malformed (200).
        text = as_typed(optional_text(command, "text")).strip()
        team = text_at(command, "team_id") or context.team_id or ""
        user = required_text(command, "user_id")
        channel = required_text(command, "channel_id")

        def work() -> None:
            answer = services.command.answer(client, team, channel, user, text)
            if answer is not None:
                respond(text=redact(answer), response_type="ephemeral")

        after_ack.submit(context, "command", work, team=team, channel=channel)
