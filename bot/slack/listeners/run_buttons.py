"""A run's buttons, each straight to its run service: the status card's Cancel and Pause, a paused
run's Resume, a failed run's fixes and a stalled run's Restart and Keep waiting (bot.runs.controls),
and under a finished run *Run again with changes* and *Continue with RL from this model*
(bot.runs.rerun), *Compare with the previous run of this project* (bot.runs.compare) and *Try it*
with the modal it opens (bot.runs.trained_model.tryit). Without a runner they are acked and do
nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient

from bot.runs.store import RunRef
from bot.runs.trained_model.tryit import MAX_PROMPT_CHARS, PROMPT_BLOCK, PROMPT_INPUT
from bot.services import Services
from bot.slack.blocks import (
    RUN_CANCEL_ACTION,
    RUN_COMPARE_ACTION,
    RUN_CONTINUE_RL_ACTION,
    RUN_FIX_ACTION,
    RUN_PAUSE_ACTION,
    RUN_RERUN_ACTION,
    RUN_RESUME_ACTION,
    RUN_STALL_RESTART_ACTION,
    RUN_STALL_WAIT_ACTION,
    RUN_TRY_ACTION,
    TRY_MODAL,
)
from bot.slack.listeners.actions import action_key, click_id, clicked_team, clicker
from bot.slack.listeners.guard import AfterAck
from bot.slack.listeners.payloads import (
    Malformed,
    optional_text,
    required_text,
    text_at,
    value_at,
)
from runner.schemas import FixAction

Service = TypeVar("Service")


def register(app: App, services: Services, after_ack: AfterAck) -> None:
    """Each button acks at once; the work (a job cancelled, a new thread, a plot, a modal) runs
    on `after_ack`'s pool (views.open there too: well within the trigger's 3 seconds)."""
    on_run_button(
        app,
        after_ack,
        RUN_CANCEL_ACTION,
        services.controls,
        lambda controls, click: controls.cancel(click.client, click.run, click.user),
        once=False,  # a repeated Cancel asks the runner again: the job stops once
    )
    on_run_button(
        app,
        after_ack,
        re.compile(rf"^{RUN_FIX_ACTION}:(retry_lower_gpu_memory|resume)$"),
        services.controls,
        lambda controls, click: controls.retry(
            click.client, click.run, FixAction(click.action_id.split(":", 1)[1]), click.user
        ),
    )
    on_run_button(
        app,
        after_ack,
        RUN_STALL_RESTART_ACTION,
        services.controls,
        lambda controls, click: controls.restart_stalled(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_STALL_WAIT_ACTION,
        services.controls,
        lambda controls, click: controls.keep_waiting(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_PAUSE_ACTION,
        services.controls,
        lambda controls, click: controls.pause(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_RESUME_ACTION,
        services.controls,
        lambda controls, click: controls.resume(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_RERUN_ACTION,
        services.reruns,
        lambda reruns, click: reruns.rerun(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_CONTINUE_RL_ACTION,
        services.reruns,
        lambda reruns, click: reruns.continue_with_rl(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_COMPARE_ACTION,
        services.comparer,
        lambda comparer, click: comparer.compare_previous(click.client, click.run, click.user),
    )
    on_run_button(
        app,
        after_ack,
        RUN_TRY_ACTION,
        services.trier,
        lambda trier, click: trier.open_modal(
            click.client, click.run, click.user, click.trigger_id
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
        user, values, run = submitted_run_modal(body, view)
        prompt = optional_text(values, PROMPT_BLOCK, PROMPT_INPUT, "value").strip()
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
        trier = services.trier

        def answer() -> None:
            if trier is not None:
                trier.submitted(client, run, user, prompt)

        after_ack.submit(
            context, "view", answer, team=context.team_id, once=f"view:{text_at(view, 'id')}"
        )


@dataclass(frozen=True)
class RunClick:
    """A click on a button that names a run: its value is the run's public id, and the run is
    looked for in the clicker's workspace only."""

    client: WebClient
    run: RunRef
    user: str
    action_id: str
    trigger_id: str
    """What opens a modal, once, within 3 seconds of the click."""
    value: str = ""
    """The button's value, or the chosen option's (a select's: `<run id>:<choice>`)."""


def on_run_button(
    app: App,
    after_ack: AfterAck,
    action_id: str | re.Pattern[str],
    service: Service | None,
    work: Callable[[Service, RunClick], object],
    *,
    once: bool = True,
) -> None:
    """A run's button: ack at once, then `work(service, click)` on `after_ack`'s pool, once
    however often Slack delivers the click (unless not `once`); nothing without the service (no
    runner), nor for a value that is not a run's public id."""

    @app.action(action_id)
    def clicked(
        ack: Ack,
        body: dict[str, Any],
        action: dict[str, Any],
        client: WebClient,
        context: BoltContext,
    ) -> None:
        ack()
        user, delivery = clicker(body), click_id(body, action)
        action_id = required_text(action, "action_id")
        run = clicked_run(body, action)
        if run is None:
            return
        click = RunClick(
            client, run, user, action_id, text_at(body, "trigger_id") or "", clicked_value(action)
        )

        def act() -> None:
            if service is not None:
                work(service, click)

        after_ack.submit(
            context,
            "action",
            act,
            key=action_key(body),
            team=context.team_id,
            once=delivery if once else None,
        )


def submitted_run_modal(
    body: Mapping[str, Any], view: Mapping[str, Any]
) -> tuple[str, Mapping[str, Any], RunRef | None]:
    """A run's modal as submitted: who, what they entered (`state.values`), and the run its
    private_metadata names (`<run's public id> <channel>`: the channel routes it) in the
    submitter's workspace (None when it names none)."""
    user = required_text(body, "user", "id")
    values = value_at(view, "state", "values")
    if not isinstance(values, dict):
        raise Malformed("a view without its state")
    team = text_at(body, "team", "id") or text_at(body, "user", "team_id") or ""
    run = RunRef.parse(team, optional_text(view, "private_metadata").partition(" ")[0])
    return user, values, run


def clicked_run(body: Mapping[str, Any], action: Mapping[str, Any]) -> RunRef | None:
    """The run a status card's or a finished run's button names (or a select's chosen option,
    `<run id>:<choice>`), in the clicker's workspace; None when it names no public id."""
    return RunRef.parse(clicked_team(body) or "", clicked_value(action).partition(":")[0])


def clicked_value(action: Mapping[str, Any]) -> str:
    """A button's value, or a select's chosen option's."""
    return optional_text(action, "value") or optional_text(action, "selected_option", "value")
