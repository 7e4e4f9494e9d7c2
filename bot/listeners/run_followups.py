"""The buttons under a finished run: *Run again with changes* and *Compare with the previous run
of this project*."""

from __future__ import annotations

from slack_bolt import App

from bot.blocks import RUN_COMPARE_ACTION, RUN_RERUN_ACTION
from bot.listeners.actions import on_run_button
from bot.listeners.guard import AfterAck
from bot.wizard import WizardService


def register(app: App, service: WizardService, after_ack: AfterAck) -> None:
    """Each button acks at once; the work (a new thread, a plot) runs on `after_ack`'s pool."""
    on_run_button(
        app,
        after_ack,
        RUN_RERUN_ACTION,
        lambda click: service.rerun(click.client, click.run_id, click.user, click.delivery),
    )
    on_run_button(
        app,
        after_ack,
        RUN_COMPARE_ACTION,
        lambda click: service.compare_previous(
            click.client, click.run_id, click.user, click.delivery
        ),
    )
