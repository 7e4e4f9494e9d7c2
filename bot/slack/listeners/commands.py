"""The slash commands: `/train-rl` and `/train-sft`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond
from slack_sdk import WebClient

from bot.services import Services
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import optional_text, required_text, text_at
from bot.slack.text import as_typed
from isolation.redaction import redact


def register(app: App, services: Services, after_ack: AfterAck) -> None:
    """`/train-rl` and `/train-sft` `[list|runs|compare|help|task]`: answers go privately through
    the response_url."""
    for name in services.commands:
        app.command(name)(_listener(services, after_ack, name))


def _listener(services: Services, after_ack: AfterAck, name: str) -> Callable[..., None]:
    def on_wizard_command(
        ack: Ack, command: dict[str, Any], client: WebClient, context: BoltContext, respond: Respond
    ) -> None:
        ack()
        # Slack escapes `&`, `<`, `>`; a field missing or of another type: Malformed (200).
        text = as_typed(optional_text(command, "text")).strip()
        team = text_at(command, "team_id") or context.team_id or ""
        user = required_text(command, "user_id")
        channel = required_text(command, "channel_id")

        def work() -> None:
            answer = services.commands[name].answer(client, team, channel, user, text)
            if answer is not None:
                respond(text=redact(answer), response_type="ephemeral")

        after_ack.submit(context, "command", work, team=team, channel=channel)

    return on_wizard_command
