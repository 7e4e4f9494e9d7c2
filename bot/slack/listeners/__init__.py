"""Every Slack listener of the bot, thin: ack, then parse what Slack sent and call one service
method:
the wizard's (bot/wizard), or a run's (bot/runs).

One module per kind of request (the slack-samples Bolt starter's shape), each with
`register(app, service)`.
"""

from __future__ import annotations

from slack_bolt import App

from bot.services import Services
from bot.slack.listeners import (
    actions,
    commands,
    events,
    model_export,
    run_buttons,
    workspaces,
)
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import answered_anyway
from bot.workspaces.clients import SlackClients


def register_listeners(
    app: App, services: Services, after_ack: AfterAck, clients: SlackClients
) -> None:
    """Register the slash command, the events, the button clicks and the app's install
    lifecycle on `app`: each acks at once and hands its work to `after_ack`. A request any of
    them (or Bolt) raises on is logged and answered 200 (`answered_anyway`): Slack retries
    anything else, and a malformed payload would fail the same way again."""
    app.error(answered_anyway)
    commands.register(app, services, after_ack)
    events.register(app, services, after_ack)
    actions.register(app, services, after_ack)
    run_buttons.register(app, services, after_ack)
    model_export.register(app, services, after_ack)
    workspaces.register(app, services, after_ack, clients)
