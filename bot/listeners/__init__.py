"""Every Slack listener of the bot, thin: ack, then parse what Slack sent and call one service
method.

One module per kind of request (the slack-samples Bolt starter's shape), each with
`register(app, service)`.
"""

from __future__ import annotations

from slack_bolt import App

from bot.listeners import actions, commands, events
from bot.metrics import BotMetrics
from bot.wizard import WizardService


def register_listeners(app: App, service: WizardService, metrics: BotMetrics) -> None:
    """Register the slash command, the events and the button clicks on `app`: each acks at
    once (`guard.acknowledge`) and does its work afterwards, timed into `metrics`."""
    commands.register(app, service, metrics)
    events.register(app, service, metrics)
    actions.register(app, service, metrics)
