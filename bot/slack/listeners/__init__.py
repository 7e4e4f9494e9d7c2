"""Every Slack listener of the bot, thin: ack, then parse what Slack sent and call one service
method.

One module per kind of request (the slack-samples Bolt starter's shape), each with
`register(app, service)`.
"""

from __future__ import annotations

from slack_bolt import App

from bot.slack.listeners import actions, commands, events, run_followups, workspaces
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import answered_anyway
from bot.wizard.service import WizardService
from bot.workspaces.installations import SlackClients


def register_listeners(
    app: App, service: WizardService, after_ack: AfterAck, clients: SlackClients
) -> None:
    """Register the slash command, the events, the button clicks and the app's install
    lifecycle on `app`: each acks at once and hands its work to `after_ack`. A request any of
    them (or Bolt) raises on is logged and answered 200 (`answered_anyway`): Slack retries
    anything else, and a malformed payload would fail the same way again."""
    app.error(answered_anyway)
    commands.register(app, service, after_ack)
    events.register(app, service, after_ack)
    actions.register(app, service, after_ack)
    run_followups.register(app, service, after_ack)
    workspaces.register(app, service, after_ack, clients)
