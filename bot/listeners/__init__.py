"""Every Slack listener of the bot, thin: parse what Slack sent, ack, call one service method.

One module per kind of request (the slack-samples Bolt starter's shape), each with
`register(app, service)`.
"""

from __future__ import annotations

from slack_bolt import App

from bot.listeners import actions, commands, events
from bot.wizard import WizardService


def register_listeners(app: App, service: WizardService) -> None:
    """Register the slash command, the events and the button clicks on `app`."""
    commands.register(app, service)
    events.register(app, service)
    actions.register(app, service)
