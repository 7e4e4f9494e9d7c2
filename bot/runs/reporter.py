"""A job's events, told in its run's thread: one status card kept up to date in place (state,
step, train and validation rewards, elapsed time), and only the milestones people act on,
each one message through the outbox: training started, the first warning, a stall (once per
stall, with *Restart from the last checkpoint* and *Keep waiting*), a failure with what to do
(or, for a transient one the bot resumes by itself, that it does: `AutoResume`), the result with
the model (and the reward curve once, at the end).

Validations are not posted: the card shows the latest val/reward, and a post per validation
(with a plot each) made a long run the noisiest part of the thread. The first validation's best
and worst rollouts are (bot.runs.display.rollout_samples: which ones, and why)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from bot.delivery.effects import Edit, Post, ThreadEffect, Upload
from bot.delivery.outbox import Outbox
from bot.runs.display.cards import (
    LOST,
    SIMILARITY_METRIC,
    auto_resume_message,
    failure_message,
    is_fine_tuning,
    lost_message,
    paused_message,
    stalled_message,
    status_card,
    success_message,
)
from bot.runs.display.plots import loss_curve_png, reward_curve_png
from bot.runs.display.rollout_samples import first_validation, rollouts_said, with_samples
from bot.runs.store import Run, RunStore
from bot.slack.blocks import SlackMessage, text_message
from bot.slack.text import clip, escape
from runner.schemas import EventType, Failure, JobEvent, JobState, ValidationRollouts

log = logging.getLogger(__name__)

CARD_MIN_INTERVAL = timedelta(seconds=5)
"""chat.update is Tier 3 (about 50 a minute): one card refreshes at most this often."""
MAX_WARNINGS_POSTED = 1
"""The first warning is news; the next ones of the same run mostly repeat it."""
PROGRESS_TYPES = (EventType.step, EventType.validation, EventType.checkpoint, EventType.rollouts)
"""Events that show a stalled job moved on: the card no longer calls it stalled."""
STALLED = "stalled"
RESTARTING = "restarting"
PAUSING, PAUSED = "pausing", "paused"


@dataclass(frozen=True)
class AutoResume:
    """What the bot does about a job that died of a transient cause (RunService decides): it
    resumes it in a new job (`attempt` of `budget`; `from_checkpoint` None when unknown), or
    `not_retried` says why it does not."""

    attempt: int = 0
    budget: int = 0
    from_checkpoint: bool | None = None
    not_retried: str = ""

    @property
    def resuming(self) -> bool:
        return self.attempt > 0


class RunReporter:
    """Says what happens to a run in its wizard's thread, and keeps the run's row in step."""

    def __init__(self, runs: RunStore, outbox: Outbox) -> None:
        self.runs = runs
        self.outbox = outbox

    def handle(
        self, run: Run, event: JobEvent, auto: AutoResume | None = None
    ) -> tuple[Run, list[ThreadEffect]]:
        """Record what one event says about the run; the updated run, and what its thread must
        be told (messages and files: the reward curve, long rollouts), for the caller to queue
        with the event's cursor (one transaction: a restarted bot tells it once). `auto`: what
        the bot does about a job that failed or was lost, when it died of a transient cause."""
        data = event.data
        note = auto.not_retried if auto is not None else ""
        said: list[ThreadEffect] = []
        if run.state == STALLED and event.type in PROGRESS_TYPES:
            run = self.runs.update(run.id, state=JobState.running.value)
        if event.type is EventType.started:
            run = self.runs.update(run.id, state=JobState.running.value, started_at=event.at)
            started = f":rocket: Training started ({escape(run.script_name)}, job `{run.job_id}`)."
            said.append(Post(text_message(started)))
        elif event.type is EventType.step:
            # A job being restarted (or paused) stays so until it stopped; it may log a last
            # step meanwhile.
            state = run.state if run.state in (RESTARTING, PAUSING) else JobState.running.value
            run = self.runs.update(run.id, state=state, points=_with_step(run.points, data))
        elif event.type is EventType.stalled:
            if run.state in (JobState.running.value, STALLED):
                run = self.runs.update(run.id, state=STALLED)
                said.append(Post(stalled_message(run, data)))
        elif event.type is EventType.validation:
            run = self.runs.update(run.id, points=_with_validation(run.points, data))
        elif event.type is EventType.rollouts:
            run = self._rollouts(run, data, said)
        elif event.type is EventType.warning and run.warnings_posted < MAX_WARNINGS_POSTED:
            run = self.runs.update(run.id, warnings_posted=run.warnings_posted + 1)
            warning = f":warning: {escape(clip(str(data.get('message', '')), 1_500))}"
            said.append(Post(text_message(warning)))
        elif event.type is EventType.failed:
            run = self.runs.update(run.id, state=JobState.failed.value, finished_at=event.at)
            failure = failure_of(data)
            if auto is not None and auto.resuming:  # the curve comes at the end of the last job
                cause = f"died: {escape(clip(failure.summary, 1_000).rstrip('.'))}"
                said.append(Post(_resuming(run, cause, auto)))
            else:
                said.append(Post(failure_message(run, failure, note)))
                said.extend(_reward_curve(run))
        elif event.type is EventType.succeeded:
            run = self.runs.update(
                run.id, state=JobState.succeeded.value, finished_at=event.at, result=dict(data)
            )
            said.append(Post(success_message(run, data)))
            said.extend(_reward_curve(run))
        elif event.type is EventType.cancelled and run.state == RESTARTING:
            run = self.runs.update(run.id, state=event.type.value, finished_at=event.at)
            said.append(
                Post(
                    text_message(
                        f":arrows_counterclockwise: Job `{run.job_id}` stopped; it resumes from "
                        "its last checkpoint in a new job."
                    )
                )
            )
        elif event.type is EventType.cancelled and run.state == PAUSING:
            run = self.runs.update(run.id, state=PAUSED, finished_at=event.at)
            said.append(Post(paused_message(run)))
        elif event.type is EventType.lost:
            run = self.runs.update(run.id, state=event.type.value, finished_at=event.at)
            if auto is not None and auto.resuming:
                said.append(Post(_resuming(run, LOST, auto)))
            else:
                said.append(Post(lost_message(run, note)))
        elif event.type is EventType.cancelled:
            run = self.runs.update(run.id, state=event.type.value, finished_at=event.at)
            ended = f"<@{run.owner}> the training job `{run.job_id}` was cancelled."
            said.append(Post(text_message(ended)))
        return run, said

    def _rollouts(self, run: Run, data: Mapping[str, Any], said: list[ThreadEffect]) -> Run:
        """A validation's best and worst rollouts: their gist kept with the step's point (the status
        card shows the latest validation's), and the first validation's posted in full
        (bot.runs.display.rollout_samples says which are posted); the others are shown on request
        or, the last, at the end."""
        try:
            rollouts = ValidationRollouts.model_validate(data)
        except ValueError:
            log.warning("run %s: a rollouts event that does not parse", run.id)
            return run
        if first_validation(run, rollouts.step):
            said.extend(rollouts_said(run, rollouts, "the first validation"))
        return self.runs.update(run.id, points=with_samples(run.points, rollouts))

    def refresh_card(self, run: Run, *, force: bool = False) -> None:
        """Update the run's status card through the outbox, at most every CARD_MIN_INTERVAL
        unless `force` (a card held back by Slack's rate limits shows the newest state when it
        gets through: the edits of one card are carried in order)."""
        if run.card_ts is None:
            return
        now = self.runs.now()
        if (
            not force
            and run.card_updated_at is not None
            and now - run.card_updated_at < CARD_MIN_INTERVAL
        ):
            return
        self.outbox.enqueue(run.key, [Edit(run.card_ts, status_card(run, now=now))])
        self.runs.update(run.id, card_updated_at=now)

    def say(self, run: Run, text: str) -> None:
        """Post `text` into the run's thread, through the outbox."""
        self.outbox.enqueue(run.key, [Post(text_message(text))])


def _reward_curve(run: Run) -> list[ThreadEffect]:
    """The run's reward curve (a fine-tuning run's loss curve) as a file for its thread; none
    without a point to draw."""
    if not run.points:
        return []
    name = run.script_name.removesuffix(".py")
    if is_fine_tuning(run.points):
        return [Upload(f"{name}-loss.png", "Loss curve", loss_curve_png(run.points, name))]
    png = reward_curve_png(run.points, name)
    return [Upload(f"{name}-rewards.png", "Reward curve", png)]


def _resuming(run: Run, cause: str, auto: AutoResume) -> SlackMessage:
    return auto_resume_message(run, cause, auto.attempt, auto.budget, auto.from_checkpoint)


def failure_of(data: Mapping[str, Any]) -> Failure:
    """The failure a `failed` event carries; one that does not parse keeps its summary."""
    try:
        return Failure.model_validate(data)
    except ValueError:
        summary = str(data.get("summary") or "The job failed.")
        return Failure(kind="unknown", summary=summary)  # type: ignore[arg-type]


def _with_point(
    points: list[dict[str, Any]], data: Mapping[str, Any], field: str, metric: str
) -> list[dict[str, Any]]:
    step = data.get("step")
    value = data.get(metric)
    if not isinstance(step, int) or not isinstance(value, int | float):
        return points
    updated = [dict(p) for p in points]
    for point in updated:
        if point["step"] == step:
            point[field] = float(value)
            return updated
    updated.append({"step": step, "train": None, "val": None, field: float(value)})
    return sorted(updated, key=lambda p: p["step"])


STEP_FIELDS = (
    ("train", "train/reward"),
    ("loss", "loss/train"),
    ("batches_done", "train/batches_done"),
    ("batches_total", "train/batches_total"),
)
"""What a training step's point keeps: the reward (RL), the loss and how many batches of how many
are done (fine-tuning: its progress line says)."""


def _with_step(points: list[dict[str, Any]], data: Mapping[str, Any]) -> list[dict[str, Any]]:
    for field_name, metric in STEP_FIELDS:
        points = _with_point(points, data, field_name, metric)
    return points


def _with_validation(points: list[dict[str, Any]], data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The validation's val/reward on the curve, and every numeric val/ metric it logged kept
    with its point (`val_metrics`), for the before-and-after table. A fine-tuning run's
    validation has no reward: its similarity to the held-out replies is kept instead."""
    updated = _with_point(points, data, "val", "val/reward")
    if updated is points:  # no val/reward: nothing to compare
        return _with_point(points, data, "similarity", SIMILARITY_METRIC)
    metrics = {
        key: float(value)
        for key, value in data.items()
        if key.startswith("val/") and isinstance(value, int | float)
    }
    for point in updated:
        if point["step"] == data["step"]:
            point["val_metrics"] = metrics
    return updated
