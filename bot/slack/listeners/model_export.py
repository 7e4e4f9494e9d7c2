"""A finished run's *Checkpoints and export* (bot.runs.trained_model.model_export): the list, the
choice of the step that is the model, *Export to Hugging Face* with the modal it opens, and
*Download the adapter*. Without a runner they are acked and do nothing."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.runs.trained_model.export_messages import (
    PUBLIC_BLOCK,
    PUBLIC_INPUT,
    PUBLIC_OPTION,
    REPO_BLOCK,
    REPO_INPUT,
    chosen_checkpoint,
    repo_id_problem,
)
from bot.runs.trained_model.model_export import ModelExport
from bot.services import Services
from bot.slack.blocks import (
    RUN_CHECKPOINTS_ACTION,
    RUN_CHOOSE_CHECKPOINT_ACTION,
    RUN_DOWNLOAD_ACTION,
    RUN_EXPORT_ACTION,
    RUN_EXPORT_MODAL,
)
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import optional_text, text_at, value_at
from bot.slack.listeners.run_buttons import RunClick, on_run_button, submitted_run_modal


def register(app: App, services: Services, after_ack: AfterAck) -> None:
    exports = services.model_export
    on_run_button(
        app,
        after_ack,
        RUN_CHECKPOINTS_ACTION,
        exports,
        lambda exports, click: exports.show_checkpoints(click.client, click.run, click.user),
        once=False,  # a second click lists them again, as they are now
    )
    on_run_button(
        app,
        after_ack,
        RUN_CHOOSE_CHECKPOINT_ACTION,
        exports,
        lambda exports, click: _choose(exports, click),
        once=False,  # choosing step 3, then 5, then 3 again is three choices
    )
    on_run_button(
        app,
        after_ack,
        RUN_EXPORT_ACTION,
        exports,
        lambda exports, click: exports.open_export_modal(
            click.client, click.run, click.user, click.trigger_id
        ),
    )
    on_run_button(
        app,
        after_ack,
        RUN_DOWNLOAD_ACTION,
        exports,
        lambda exports, click: exports.download(click.client, click.run, click.user),
        once=False,  # each click a fresh link
    )

    @app.view(RUN_EXPORT_MODAL)
    def on_export_submitted(
        ack: Ack,
        body: dict[str, Any],
        view: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        user, values, run = submitted_run_modal(body, view)
        repo_id = optional_text(values, REPO_BLOCK, REPO_INPUT, "value").strip()
        problem = repo_id_problem(repo_id)
        if problem is not None:
            ack(response_action="errors", errors={REPO_BLOCK: problem})
            return
        chosen = value_at(values, PUBLIC_BLOCK, PUBLIC_INPUT, "selected_options")
        public = isinstance(chosen, list) and any(
            isinstance(option, dict) and option.get("value") == PUBLIC_OPTION for option in chosen
        )
        ack()  # the modal closes; what follows goes into the run's thread
        if run is None or exports is None:
            return
        service, ref = exports, run
        after_ack.submit(
            context,
            "view",
            lambda: service.export_submitted(client, ref, user, repo_id, public=public),
            team=context.team_id,
            once=f"view:{text_at(view, 'id')}",
        )


def _choose(exports: ModelExport, click: RunClick) -> None:
    chosen = chosen_checkpoint(click.value)
    if chosen is not None:
        exports.choose(click.client, click.run, click.user, chosen[1])
