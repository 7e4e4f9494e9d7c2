"""The buttons under a finished run: *Run again with changes*, *Compare with the previous run of
this project* and *Try it* (with the modal it opens)."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.runs.store import RunRef
from bot.runs.tryit import MAX_PROMPT_CHARS, PROMPT_BLOCK, PROMPT_INPUT
from bot.slack.blocks import RUN_COMPARE_ACTION, RUN_RERUN_ACTION, RUN_TRY_ACTION, TRY_MODAL
from bot.slack.listeners.actions import on_run_button
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import Malformed, optional_text, required_text, text_at, value_at
from bot.wizard.service import WizardService


def register(app: App, service: WizardService, after_ack: AfterAck) -> None:
    """Each button acks at once; the work (a new thread, a plot, a modal) runs on `after_ack`'s
    pool (views.open there too: well within the trigger's 3 seconds)."""
    on_run_button(
        app,
        after_ack,
        RUN_RERUN_ACTION,
        lambda click: service.rerun(click.client, click.run, click.user, click.delivery),
    )
    on_run_button(
        app,
        after_ack,
        RUN_COMPARE_ACTION,
        lambda click: service.compare_previous(click.client, click.run, click.user, click.delivery),
    )
    on_run_button(
        app,
        after_ack,
        RUN_TRY_ACTION,
        lambda click: service.open_try(
            click.client, click.run, click.user, click.trigger_id, click.delivery
        ),
    )

    @app.view(TRY_MODAL)
    def on_try_submitted(
        ack: Ack,
        body: dict[str, Any],
        view: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        user = required_text(body, "user", "id")
        values = value_at(view, "state", "values")
        if not isinstance(values, dict):
            raise Malformed("a view without its state")
        prompt = optional_text(values, PROMPT_BLOCK, PROMPT_INPUT, "value").strip()
        # "<run's public id> <channel>" (the channel routes it), from the submitter's workspace.
        team = text_at(body, "team", "id") or text_at(body, "user", "team_id") or ""
        run = RunRef.parse(team, optional_text(view, "private_metadata").partition(" ")[0])
        if not prompt:
            ack(response_action="errors", errors={PROMPT_BLOCK: "Type a prompt for the model."})
            return
        if len(prompt) > MAX_PROMPT_CHARS:  # the input's max_length holds it; never trust it
            ack(
                response_action="errors",
                errors={PROMPT_BLOCK: f"At most {MAX_PROMPT_CHARS:,} characters."},
            )
            return
        ack()  # the modal closes; the reply goes into the run's thread
        if run is None:
            return
        delivery = f"view:{text_at(view, 'id')}"
        after_ack.submit(
            context,
            "view",
            lambda: service.try_submitted(client, run, user, prompt, delivery),
            team=context.team_id,
        )
